#include "plugins/loop/schedule.h"

#include <algorithm>
#include <utility>

#include "base/clock.h"
#include "base/schema.h"

namespace dsh::plugins::loop {
namespace {

constexpr int64_t kMsPerSecond = 1000;

// The last instant dsh can write (9999-12-31T23:59:59.999Z); later means never.
constexpr int64_t kLastInstant = 253'402'300'799'999;

// a + b, or kNever when it would pass the last instant.
int64_t SaturatingAdd(int64_t a, int64_t b) { return a > kLastInstant - b ? kNever : a + b; }

IntRule Seconds() { return IntRule{.positive = true, .min = std::nullopt, .max = kMaxSafeInteger}; }

struct EveryFields {
  std::string kind;
  int64_t every_seconds = 0;
};
struct AfterFields {
  std::string kind;
  int64_t after_seconds = 0;
};
struct CronFields {
  std::string kind;
  std::string expr;
  std::optional<std::string> tz;
};

const ObjectSchema<EveryFields>& EverySchema() {
  static const auto* schema = new ObjectSchema<EveryFields>(
      ObjectSchema<EveryFields>("Recurring: every N seconds, the first one N seconds after creation.")
          .Field("kind", &EveryFields::kind, "\"every\"", StringRule{.one_of = {"every"}})
          .Field("every_seconds", &EveryFields::every_seconds, "The interval in seconds.", Seconds()));
  return *schema;
}
const ObjectSchema<AfterFields>& AfterSchema() {
  static const auto* schema = new ObjectSchema<AfterFields>(
      ObjectSchema<AfterFields>("Once, N seconds after creation.")
          .Field("kind", &AfterFields::kind, "\"after\"", StringRule{.one_of = {"after"}})
          .Field("after_seconds", &AfterFields::after_seconds, "The delay in seconds.", Seconds()));
  return *schema;
}
const ObjectSchema<CronFields>& CronSchema() {
  static const auto* schema = new ObjectSchema<CronFields>(
      ObjectSchema<CronFields>("Recurring on a five-field cron rule in a time zone.")
          .Field("kind", &CronFields::kind, "\"cron\"", StringRule{.one_of = {"cron"}})
          .Field("expr", &CronFields::expr, "Five-field cron rule, e.g. \"0 9 * * 1-5\".")
          .Optional("tz", &CronFields::tz, "IANA time zone such as Asia/Shanghai (default: the host's)."));
  return *schema;
}

}  // namespace

Json ScheduleToJson(const Schedule& s) {
  switch (s.kind) {
    case ScheduleKind::kEvery:
      return Json{{"kind", "every"}, {"every_seconds", s.seconds}};
    case ScheduleKind::kAfter:
      return Json{{"kind", "after"}, {"after_seconds", s.seconds}};
    case ScheduleKind::kCron: {
      Json j = {{"kind", "cron"}, {"expr", s.expr}};
      if (s.tz) j["tz"] = *s.tz;
      return j;
    }
  }
  return Json();
}

Status DecodeSchedule(const Json& v, const std::string& path, Schedule& out) {
  if (!v.is_object()) return schema_detail::NotAnObject(v, path);
  auto kind = v.find("kind");
  if (kind == v.end()) return schema_detail::MissingField(schema_detail::JoinPath(path, "kind"));
  if (!kind->is_string()) {
    return InvalidArguments("`" + schema_detail::JoinPath(path, "kind") + "` must be \"every\", \"after\" or \"cron\"");
  }
  const std::string& k = kind->get_ref<const std::string&>();
  if (k == "every") {
    DSH_ASSIGN_OR_RETURN(EveryFields f, EverySchema().Decode(v, path));
    out = Schedule{ScheduleKind::kEvery, f.every_seconds, "", std::nullopt};
    return Status::Ok();
  }
  if (k == "after") {
    DSH_ASSIGN_OR_RETURN(AfterFields f, AfterSchema().Decode(v, path));
    out = Schedule{ScheduleKind::kAfter, f.after_seconds, "", std::nullopt};
    return Status::Ok();
  }
  if (k == "cron") {
    DSH_ASSIGN_OR_RETURN(CronFields f, CronSchema().Decode(v, path));
    if (auto rule = CronExpr::Parse(f.expr); !rule.ok()) {
      return Status(rule.status().code(),
                    "`" + schema_detail::JoinPath(path, "expr") + "`: " + rule.status().message());
    }
    Schedule s{ScheduleKind::kCron, 0, f.expr, std::nullopt};
    if (f.tz) {
      auto zone = ResolveTimeZone(*f.tz);
      if (!zone.ok()) {
        return Status(zone.status().code(),
                      "`" + schema_detail::JoinPath(path, "tz") + "`: " + zone.status().message());
      }
      s.tz = zone->name();
    }
    out = std::move(s);
    return Status::Ok();
  }
  return InvalidArguments("`" + schema_detail::JoinPath(path, "kind") + "` must be \"every\", \"after\" or \"cron\", got \"" +
                          k + "\"");
}

Json ScheduleJsonSchema() {
  return Json{{"description", "When the loop runs. Durations are in seconds."},
              {"oneOf", Json::array({EverySchema().ToJsonSchema(), AfterSchema().ToJsonSchema(),
                                     CronSchema().ToJsonSchema()})}};
}

Result<Timetable> Timetable::Make(const Schedule& s, const TimeZone& host_zone) {
  Timetable t;
  t.kind_ = s.kind;
  if (s.kind == ScheduleKind::kCron) {
    DSH_ASSIGN_OR_RETURN(CronExpr rule, CronExpr::Parse(s.expr));
    t.cron_ = rule;
    if (s.tz) {
      DSH_ASSIGN_OR_RETURN(t.zone_, ResolveTimeZone(*s.tz));
    } else {
      t.zone_ = host_zone;
    }
    return t;
  }
  if (s.seconds <= 0) return InvalidArguments("a loop interval must be a positive number of seconds");
  t.period_ms_ = s.seconds > kLastInstant / kMsPerSecond ? kLastInstant : s.seconds * kMsPerSecond;
  return t;
}

std::optional<int64_t> Timetable::After(int64_t t) const {
  switch (kind_) {
    case ScheduleKind::kAfter:
      return std::nullopt;
    case ScheduleKind::kEvery:
      return SaturatingAdd(t, period_ms_);
    case ScheduleKind::kCron: {
      if (t == kNever) return std::nullopt;
      auto next = cron_->Next(FromUnixMillis(t), zone_);
      if (!next) return std::nullopt;
      return ToUnixMillis(*next);
    }
  }
  return std::nullopt;
}

Result<int64_t> Timetable::First(int64_t created_at) const {
  if (kind_ != ScheduleKind::kCron) return SaturatingAdd(created_at, period_ms_);
  auto next = After(created_at);
  if (!next) return Status("cron_never_fires", "the cron rule has no occurrence left");
  return *next;
}

Timetable::Catchup Timetable::Catch(int64_t next_at, int64_t now) const {
  Catchup c;
  c.nominal = next_at;
  if (now <= next_at) {  // not overdue: this very occurrence
    c.following = After(next_at);
    return c;
  }
  switch (kind_) {
    case ScheduleKind::kAfter:
      return c;
    case ScheduleKind::kEvery: {
      int64_t periods = (now - next_at) / period_ms_;
      c.nominal = next_at + periods * period_ms_;  // <= now: no overflow
      c.skipped = periods;
      c.following = SaturatingAdd(c.nominal, period_ms_);
      return c;
    }
    case ScheduleKind::kCron: {
      auto latest = cron_->LatestAtOrBefore(FromUnixMillis(now), zone_);
      if (latest && ToUnixMillis(*latest) > next_at) c.nominal = ToUnixMillis(*latest);
      for (std::optional<int64_t> t = next_at; t && *t < c.nominal; t = After(*t)) {
        if (c.skipped == kMaxCountedSkips) {
          c.skipped_capped = true;
          break;
        }
        ++c.skipped;
      }
      c.following = After(now);
      return c;
    }
  }
  return c;
}

}  // namespace dsh::plugins::loop
