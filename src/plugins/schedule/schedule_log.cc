#include "plugins/schedule/schedule_log.h"

#include <algorithm>
#include <initializer_list>
#include <map>
#include <utility>

#include "base/clock.h"
#include "base/schema.h"
#include "time/rfc3339.h"

namespace dsh::plugins::schedule {
namespace {

constexpr std::string_view kIdPrefix = "schedule-";
constexpr const char* kWhitespace = " \t\r\n\f\v";

Status Corrupt(std::string message) { return Status(codes::kCorruptScheduleLog, std::move(message)); }


std::string Field(const std::string& path) { return "`" + path + "`"; }

// `v` must be an object whose keys are exactly `required` plus any of `optional`.
Status ExpectKeys(const Json& v, const std::string& path, std::initializer_list<std::string_view> required,
                  std::initializer_list<std::string_view> optional = {}) {
  if (!v.is_object()) return Corrupt(Field(path) + " must be an object (got " + DescribeJson(v, 60) + ")");
  for (const auto& [key, value] : v.items()) {
    const bool known = std::find(required.begin(), required.end(), key) != required.end() ||
                       std::find(optional.begin(), optional.end(), key) != optional.end();
    if (!known) return Corrupt("unexpected field " + Field(schema_detail::JoinPath(path, key)));
  }
  for (std::string_view key : required) {
    if (!v.contains(key)) return Corrupt("missing field " + Field(schema_detail::JoinPath(path, std::string(key))));
  }
  return Status::Ok();
}

// An integer in 1..2^53-1 written as a JSON integer.
Result<int64_t> PositiveSafeInteger(const Json& v, const std::string& path) {
  int64_t i = 0;
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() <= static_cast<uint64_t>(kMaxSafeInteger)) i = static_cast<int64_t>(v.get<uint64_t>());
  } else if (v.is_number_integer()) {
    i = v.get<int64_t>();
  }
  if (i < 1 || i > kMaxSafeInteger) {
    return Corrupt(Field(path) + " must be an integer from 1 to 2^53-1 (got " + DescribeJson(v, 60) + ")");
  }
  return i;
}

Result<std::string> Id(const Json& v, const std::string& path) {
  if (!v.is_string() || !ParseScheduleId(v.get_ref<const std::string&>())) {
    return Corrupt(Field(path) + " must be \"schedule-N\" with N a positive integer (got " + DescribeJson(v, 60) + ")");
  }
  return v.get<std::string>();
}

Result<Record> DecodeRecord(const Json& v) {
  if (!v.is_object()) return Corrupt("`schedule` must be an object (got " + DescribeJson(v, 60) + ")");
  auto kind = v.find("kind");
  if (kind == v.end()) return Corrupt("missing field `schedule.kind`");
  Record r;
  if (*kind == "after") {
    r.kind = Kind::kAfter;
    DSH_RETURN_IF_ERROR(ExpectKeys(v, "schedule", {"id", "kind", "prompt", "after_seconds", "scheduled_at"}));
    DSH_ASSIGN_OR_RETURN(r.after_seconds, PositiveSafeInteger(v["after_seconds"], "schedule.after_seconds"));
  } else if (*kind == "at") {
    r.kind = Kind::kAt;
    DSH_RETURN_IF_ERROR(ExpectKeys(v, "schedule", {"id", "kind", "prompt", "scheduled_at"}));
  } else {
    return Corrupt("`schedule.kind` must be \"after\" or \"at\" (got " + DescribeJson(*kind, 60) + ")");
  }
  DSH_ASSIGN_OR_RETURN(r.id, Id(v["id"], "schedule.id"));

  const Json& prompt = v["prompt"];
  if (!prompt.is_string()) return Corrupt("`schedule.prompt` must be a string (got " + DescribeJson(prompt, 60) + ")");
  r.prompt = prompt.get<std::string>();
  if (r.prompt.empty() || r.prompt.find_first_not_of(kWhitespace) != 0 ||
      r.prompt.find_last_not_of(kWhitespace) != r.prompt.size() - 1) {
    return Corrupt("`schedule.prompt` must be non-empty and trimmed (got " + DescribeJson(prompt, 60) + ")");
  }

  const Json& at = v["scheduled_at"];
  auto bad_at = [&] {
    return Corrupt("`schedule.scheduled_at` must be a canonical UTC RFC 3339 time such as "
                   "\"2026-01-01T00:00:30.000Z\" (got " + DescribeJson(at, 60) + ")");
  };
  if (!at.is_string()) return bad_at();
  auto t = ParseRfc3339(at.get_ref<const std::string&>());
  if (!t.ok() || FormatRfc3339Utc(*t) != at.get_ref<const std::string&>()) return bad_at();
  r.scheduled_at = ToUnixMillis(*t);
  return r;
}

Json RecordJson(const Record& r) {
  Json j = {{"id", r.id},
            {"kind", r.kind == Kind::kAfter ? "after" : "at"},
            {"prompt", r.prompt},
            {"scheduled_at", FormatRfc3339Utc(FromUnixMillis(r.scheduled_at))}};
  if (r.after_seconds) j["after_seconds"] = *r.after_seconds;
  return j;
}

session::EventDraft Draft(Json data) { return session::EventDraft{std::string(kScheduleChange), std::move(data)}; }

const char* OpName(Op op) {
  switch (op) {
    case Op::kCreate: return "create";
    case Op::kDelete: return "delete";
    case Op::kDispatch: return "dispatch";
  }
  return "?";
}

}  // namespace

std::string FormatScheduleId(int64_t n) { return std::string(kIdPrefix) + std::to_string(n); }

std::optional<int64_t> ParseScheduleId(std::string_view id) {
  if (!id.starts_with(kIdPrefix)) return std::nullopt;
  std::string_view digits = id.substr(kIdPrefix.size());
  // 2^53-1 has 16 digits; a longer number is out of range, and checking the
  // length first keeps the accumulation below from overflowing.
  if (digits.empty() || digits.size() > 16 || digits[0] == '0') return std::nullopt;
  int64_t n = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + (c - '0');
  }
  if (n > kMaxSafeInteger) return std::nullopt;
  return n;
}

session::EventDraft CreateEvent(const Record& record) {
  return Draft({{"version", kScheduleLogVersion}, {"op", "create"}, {"schedule", RecordJson(record)}});
}

session::EventDraft DeleteEvent(const std::string& id) {
  return Draft({{"version", kScheduleLogVersion}, {"op", "delete"}, {"id", id}});
}

session::EventDraft DispatchEvent(const std::string& id) {
  return Draft({{"version", kScheduleLogVersion}, {"op", "dispatch"}, {"id", id}});
}

Result<Change> DecodeChange(const Json& data) {
  if (!data.is_object()) return Corrupt("the event data must be an object (got " + DescribeJson(data, 60) + ")");
  auto version = data.find("version");
  if (version == data.end()) return Corrupt("missing field `version`");
  if (!version->is_number_integer() || *version != kScheduleLogVersion) {
    return Corrupt("unsupported `version` " + DescribeJson(*version, 60) + " (this host reads version 1)");
  }
  auto op = data.find("op");
  if (op == data.end()) return Corrupt("missing field `op`");
  Change c;
  if (*op == "create") {
    DSH_RETURN_IF_ERROR(ExpectKeys(data, "", {"version", "op", "schedule"}));
    c.op = Op::kCreate;
    DSH_ASSIGN_OR_RETURN(c.record, DecodeRecord(data["schedule"]));
    c.id = c.record.id;
    return c;
  }
  if (*op == "delete" || *op == "dispatch") {
    DSH_RETURN_IF_ERROR(ExpectKeys(data, "", {"version", "op", "id"}));
    c.op = *op == "delete" ? Op::kDelete : Op::kDispatch;
    DSH_ASSIGN_OR_RETURN(c.id, Id(data["id"], "id"));
    return c;
  }
  return Corrupt("`op` must be \"create\", \"delete\" or \"dispatch\" (got " + DescribeJson(*op, 60) + ")");
}

const Record* ScheduleState::Find(std::string_view id) const {
  for (const Record& r : active) {
    if (r.id == id) return &r;
  }
  return nullptr;
}

const Record* ScheduleState::Earliest() const {
  const Record* first = nullptr;
  for (const Record& r : active) {
    if (!first || r.scheduled_at < first->scheduled_at) first = &r;
  }
  return first;
}

Result<ScheduleState> Fold(const std::string& session_id, int64_t seed_length,
                           const std::vector<session::Event>& events) {
  // What happened to each id created in the range, for the messages.
  struct History {
    int64_t created_seq = 0;
    std::optional<Op> ended_by;
    int64_t ended_seq = 0;
  };
  std::map<int64_t, History> created;
  ScheduleState state;
  for (const session::Event& e : events) {
    if (e.seq <= seed_length || e.type != kScheduleChange) continue;
    auto fail = [&](const std::string& what) {
      return Corrupt("session " + session_id + ": event " + std::to_string(e.seq) + ": " + what);
    };
    auto change = DecodeChange(e.data);
    if (!change.ok()) return fail(change.status().message());
    const int64_t n = *ParseScheduleId(change->id);  // DecodeChange checked the form
    auto it = created.find(n);
    if (change->op == Op::kCreate) {
      if (it != created.end()) {
        return fail("create of " + change->id + ", which event " + std::to_string(it->second.created_seq) +
                    " already created (ids are never reused)");
      }
      created.emplace(n, History{e.seq, std::nullopt, 0});
      state.next_id = std::max(state.next_id, n + 1);
      state.active.push_back(std::move(change->record));
      continue;
    }
    const std::string what = std::string(OpName(change->op)) + " of " + change->id;
    if (it == created.end()) {
      return fail(what + ", which was never created" + (seed_length > 0 ? " in this fork" : ""));
    }
    if (it->second.ended_by) {
      return fail(what + ", which is not active (event " + std::to_string(it->second.ended_seq) + " " +
                  (*it->second.ended_by == Op::kDelete ? "deleted" : "dispatched") + " it)");
    }
    it->second.ended_by = change->op;
    it->second.ended_seq = e.seq;
    std::erase_if(state.active, [&](const Record& r) { return r.id == change->id; });
  }
  return state;
}

Json RecordView(const Record& record, int64_t now_ms) {
  Json view = RecordJson(record);
  view["state"] = now_ms >= record.scheduled_at ? "overdue" : "scheduled";
  view["delivery_mode"] = "session-local";
  return view;
}

std::string ReminderFrame(const Record& record) {
  return "[SCHEDULE REMINDER] schedule_id: " + DumpJson(Json(record.id)) +
         " occurrence_at: " + FormatRfc3339Utc(FromUnixMillis(record.scheduled_at)) +
         " prompt: " + DumpJson(Json(record.prompt));
}

std::string ReminderKey(const std::string& session_id, const std::string& schedule_id) {
  return "schedule:" + session_id + ":" + schedule_id;
}

}  // namespace dsh::plugins::schedule
