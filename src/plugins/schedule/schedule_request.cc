#include "plugins/schedule/schedule_request.h"

#include <utility>

#include "base/clock.h"
#include "base/schema.h"
#include "time/local_time.h"
#include "time/rfc3339.h"
#include "time/time_zone.h"

namespace dsh::plugins::schedule {
namespace {

constexpr int64_t kMsPerSecond = 1000;
// The instants dsh can write: 0001-01-01T00:00:00.000Z .. 9999-12-31T23:59:59.999Z.
constexpr int64_t kFirstInstantMs = -62'135'596'800'000;
constexpr int64_t kLastInstantMs = 253'402'300'799'999;
// UTC offsets stay within ±26 h, so a local time further than this from both
// ends of the range always has an instant in range.
constexpr int64_t kOffsetReachMs = 27LL * 3600 * kMsPerSecond;

constexpr const char* kCreate = "schedule_create";


Status Bad(const std::string& message) { return InvalidArguments(std::string(kCreate) + ": " + message); }

// A status of a lower layer, with its code, about field `field`.
Status About(const std::string& field, const Status& status) {
  return Status(status.code(), std::string(kCreate) + ": `" + field + "`: " + status.message());
}

std::string Utc(int64_t ms) { return FormatRfc3339Utc(FromUnixMillis(ms)); }

Status CheckTopLevelKeys(const Json& args) {
  for (const auto& [key, value] : args.items()) {
    if (key == "prompt" || key == "after_seconds" || key == "at") continue;
    if (key == "every_seconds" || key == "cron") {
      return Bad("`" + key +
                 "` is not supported: session-local reminders do not take recurring rules, they happen once "
                 "(give `after_seconds` or `at`); for a recurring schedule use loop_create");
    }
    if (key == "time_zone") {
      return Bad("unknown property `time_zone`: a time zone belongs inside `at`, as "
                 "{\"date\", \"time\", \"time_zone\"}");
    }
    if (key == "schedule") return Bad("unknown property `schedule`: give `after_seconds` or `at` directly");
    return Bad("unknown property `" + key + "`");
  }
  return Status::Ok();
}

// A valid after_seconds whose target now_ms + after_seconds s is one dsh can store.
Result<int64_t> AfterSeconds(const Json& v, int64_t now_ms) {
  int64_t seconds = 0;
  Status decoded = schema_detail::DecodeInt(v, "after_seconds", IntRule{.positive = true, .max = kMaxSafeInteger},
                                            seconds);
  if (!decoded.ok()) {
    return Bad("`after_seconds` must be a positive whole number of seconds no greater than 2^53-1 (got " +
               DescribeJson(v) + ")");
  }
  // seconds * 1000 < 2^63: no overflow.
  if (seconds * kMsPerSecond > kLastInstantMs - now_ms) {
    return Bad("`after_seconds` " + std::to_string(seconds) + " puts the reminder after " + Utc(kLastInstantMs) +
               ", the last instant dsh can store");
  }
  return seconds;
}

Status ConfirmZone(const std::string& situation) {
  return Status(codes::kTimezoneConfirmationRequired,
                std::string(kCreate) + ": `at` has no `time_zone`, and " + situation +
                    ". Ask the person which time zone they mean, then retry with `at.time_zone` set to that IANA "
                    "zone (e.g. \"Asia/Shanghai\").");
}

// The zone of a local `at` without time_zone: the session's, when the
// effective client zone is the same zone.
Result<TimeZone> ImpliedZone(const CreateContext& c) {
  const bool from_request = c.client_zone.has_value();
  const std::string& client_name = from_request ? *c.client_zone : c.host_zone;
  auto client = ResolveTimeZone(client_name);
  const std::string client_text =
      (from_request ? "this request came from " : "this request carried no zone and the host's zone is ") +
      (client.ok() ? client->name() : "an unrecognized zone " + DumpJson(Json(client_name)));
  if (c.session_zone.empty()) return ConfirmZone("this session has no recorded time zone (" + client_text + ")");
  auto session = ResolveTimeZone(c.session_zone);
  if (!session.ok()) {
    return ConfirmZone("the session's zone " + DumpJson(Json(c.session_zone)) + " is not a known IANA zone (" +
                       client_text + ")");
  }
  if (client.ok() && client->name() == session->name()) return *session;
  return ConfirmZone("the session's zone is " + session->name() + " and " + client_text);
}

struct LocalTarget {
  int64_t instant_ms = 0;
  std::string described;  // "2026-03-08 09:00 in America/New_York"
};

Result<LocalTarget> LocalAtTarget(const Json& at, const CreateContext& context) {
  for (const auto& [key, value] : at.items()) {
    if (key != "date" && key != "time" && key != "time_zone") return Bad("unknown property `at." + key + "`");
  }
  for (const char* field : {"date", "time"}) {
    if (!at.contains(field)) return Bad(std::string("`at.") + field + "` is required");
  }
  const Json& date = at["date"];
  const Json& time = at["time"];
  if (!date.is_string()) return Bad("`at.date` must be a string \"YYYY-MM-DD\" (got " + DescribeJson(date) + ")");
  if (!time.is_string()) return Bad("`at.time` must be a string \"HH:MM\" or \"HH:MM:SS\" (got " + DescribeJson(time) + ")");
  const Json* zone_name = at.contains("time_zone") ? &at["time_zone"] : nullptr;
  if (zone_name && !zone_name->is_string()) {
    return Bad("`at.time_zone` must be an IANA time zone name string (got " + DescribeJson(*zone_name) + ")");
  }

  auto local = ParseLocalDateTime(date.get_ref<const std::string&>(), time.get_ref<const std::string&>());
  if (!local.ok()) return About("at", local.status());

  TimeZone zone;
  if (zone_name) {
    auto resolved = ResolveTimeZone(zone_name->get_ref<const std::string&>());
    if (!resolved.ok()) return About("at.time_zone", resolved.status());
    zone = *resolved;
  } else {
    DSH_ASSIGN_OR_RETURN(zone, ImpliedZone(context));
  }

  auto instant = LocalToInstant(*local, zone);
  if (!instant.ok()) {
    // The fields are valid (ParseLocalDateTime checked them), so LocalToInstant
    // fails only for a time the zone skips, or for one whose instant leaves
    // the years 0001-9999; only the latter can lie near the ends of the range.
    auto naive = LocalToInstant(*local, TimeZone::Utc());
    const bool near_edge = !naive.ok() || ToUnixMillis(*naive) < kFirstInstantMs + kOffsetReachMs ||
                           ToUnixMillis(*naive) > kLastInstantMs - kOffsetReachMs;
    if (near_edge) return About("at", instant.status());
    return About("at", Status(codes::kNonexistentLocalTime, instant.status().message()));
  }
  return LocalTarget{ToUnixMillis(*instant), date.get<std::string>() + " " + time.get<std::string>() + " in " +
                                                 zone.name()};
}

Result<int64_t> AtTarget(const Json& at, const CreateContext& context) {
  if (at.is_string()) {
    auto t = ParseRfc3339(at.get_ref<const std::string&>());
    if (!t.ok()) return About("at", t.status());
    const int64_t ms = ToUnixMillis(*t);
    if (ms <= context.now_ms) {
      return Status(codes::kNotFuture, std::string(kCreate) + ": `at` " + DumpJson(at) + " is " + Utc(ms) +
                                           ", which is not after now (" + Utc(context.now_ms) +
                                           "); give a time in the future");
    }
    return ms;
  }
  if (at.is_object()) {
    DSH_ASSIGN_OR_RETURN(LocalTarget target, LocalAtTarget(at, context));
    if (target.instant_ms <= context.now_ms) {
      return Status(codes::kNotFuture, std::string(kCreate) + ": `at` (" + target.described + ") is " +
                                           Utc(target.instant_ms) + ", which is not after now (" +
                                           Utc(context.now_ms) + "); give a time in the future");
    }
    return target.instant_ms;
  }
  return Bad("`at` must be an RFC 3339 string with an offset or an object {\"date\", \"time\", \"time_zone\"?} (got " +
             DescribeJson(at) + ")");
}

struct DeleteArgs {
  std::string id;
};
struct ListArgs {};

const ObjectSchema<DeleteArgs>& DeleteSchema() {
  static const auto* schema = new ObjectSchema<DeleteArgs>(
      ObjectSchema<DeleteArgs>(
          "Deletes one of this session's pending reminders by id (from schedule_create or schedule_list). "
          "Answers whether it was found; a reminder that already ran or was deleted is not found.")
          .Field("id", &DeleteArgs::id, "The reminder's id, e.g. \"schedule-1\"."));
  return *schema;
}

const ObjectSchema<ListArgs>& ListSchema() {
  static const auto* schema = new ObjectSchema<ListArgs>(
      "Lists this session's pending reminders in creation order: id, prompt, UTC target, and whether each is "
      "scheduled or overdue. Takes no arguments.");
  return *schema;
}

}  // namespace

Result<Record> ResolveScheduleCreate(const Json& args, const CreateContext& context) {
  if (!args.is_object()) return Bad("arguments must be a JSON object (got " + DescribeJson(args) + ")");
  DSH_RETURN_IF_ERROR(CheckTopLevelKeys(args));

  Record record;
  auto prompt = args.find("prompt");
  if (prompt == args.end()) return Bad("`prompt` is required");
  Status decoded = schema_detail::DecodeString(*prompt, "prompt", StringRule{.trim = true}, record.prompt);
  if (!decoded.ok()) return decoded.WithContext(kCreate);

  auto after = args.find("after_seconds");
  auto at = args.find("at");
  if (after != args.end() && at != args.end()) {
    return Bad("give exactly one of `after_seconds` or `at`, not both");
  }
  if (after != args.end()) {
    record.kind = Kind::kAfter;
    DSH_ASSIGN_OR_RETURN(int64_t seconds, AfterSeconds(*after, context.now_ms));
    record.after_seconds = seconds;
    record.scheduled_at = context.now_ms + seconds * kMsPerSecond;
    return record;
  }
  if (at != args.end()) {
    record.kind = Kind::kAt;
    DSH_ASSIGN_OR_RETURN(record.scheduled_at, AtTarget(*at, context));
    return record;
  }
  return Bad("one of `after_seconds` (seconds from now) or `at` (an absolute time) is required");
}

Result<std::string> DecodeScheduleDelete(const Json& args) {
  auto decoded = DeleteSchema().Decode(args);
  if (!decoded.ok()) return decoded.status().WithContext("schedule_delete");
  return std::move(decoded->id);
}

Status DecodeScheduleList(const Json& args) {
  auto decoded = ListSchema().Decode(args);
  if (!decoded.ok()) return decoded.status().WithContext("schedule_list");
  return Status::Ok();
}

const std::string& ScheduleCreateDescription() {
  static const auto* text = new std::string(
      "Creates a one-shot reminder in this session: when it is due, `prompt` comes back to you in this "
      "conversation as a follow-up message. Delivery is session-local: it happens only while this session is "
      "open (an overdue reminder is delivered when the session is opened again); there is no browser, phone, "
      "email or other external notification. Give exactly one of `after_seconds` (a delay from now) or `at` (an "
      "absolute target time). Times are absolute targets, not rules: there are no recurring reminders here (use "
      "loop_create for those). A local `at` without `time_zone` is read in the session's time zone and is only "
      "accepted when the person's zone is the session's; otherwise ask the person which zone they mean and pass "
      "`at.time_zone`.");
  return *text;
}

const std::string& ScheduleDeleteDescription() { return DeleteSchema().description(); }
const std::string& ScheduleListDescription() { return ListSchema().description(); }

Json ScheduleCreateParameters() {
  const Json local_at = {
      {"type", "object"},
      {"description",
       "A wall-clock date and time. Without `time_zone` it is read in the session's zone, which is only allowed "
       "when the person's zone is the session's; otherwise ask the person and give `time_zone`. A time skipped by "
       "a daylight-saving change is rejected; a repeated one means its first occurrence."},
      {"properties",
       {{"date", {{"type", "string"}, {"description", "YYYY-MM-DD"}, {"pattern", "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"}}},
        {"time",
         {{"type", "string"},
          {"description", "HH:MM or HH:MM:SS, 24-hour clock"},
          {"pattern", "^[0-9]{2}:[0-9]{2}(:[0-9]{2})?$"}}},
        {"time_zone",
         {{"type", "string"}, {"minLength", 1}, {"description", "IANA time zone, e.g. \"America/New_York\""}}}}},
      {"required", Json::array({"date", "time"})},
      {"additionalProperties", false}};
  const Json instant_at = {
      {"type", "string"},
      {"format", "date-time"},
      {"description",
       "An RFC 3339 date-time with Z or a numeric offset, e.g. \"2026-03-08T09:00:00-05:00\"; no offset is an "
       "error."}};
  return Json{
      {"type", "object"},
      {"description", ScheduleCreateDescription()},
      {"properties",
       {{"prompt",
         {{"type", "string"},
          {"minLength", 1},
          {"description", "What to remind you of: the text that comes back when the reminder is due."}}},
        {"after_seconds",
         {{"type", "integer"},
          {"minimum", 1},
          {"maximum", kMaxSafeInteger},
          {"description", "Deliver once, this many seconds from now."}}},
        {"at",
         {{"description", "Deliver once at this absolute time, which must be in the future."},
          {"oneOf", Json::array({instant_at, local_at})}}}}},
      {"required", Json::array({"prompt"})},
      {"oneOf", Json::array({Json{{"required", Json::array({"after_seconds"})}},
                             Json{{"required", Json::array({"at"})}}})},
      {"additionalProperties", false}};
}

Json ScheduleDeleteParameters() { return DeleteSchema().ToJsonSchema(); }
Json ScheduleListParameters() { return ListSchema().ToJsonSchema(); }

}  // namespace dsh::plugins::schedule
