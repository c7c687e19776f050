#pragma once

// The durable record of session-local reminders: the `schedule/change` event
// stream (version 1) of a session, its strict decoder and the pure fold that
// turns it into the active reminders. The stream is the only authority; the
// live owner and the tools derive everything from Fold(). Plain functions on
// values: thread-safe, never throw.
//
// Event type "schedule/change"; `data` is exactly one of (no other field):
//   {"version": 1, "op": "create", "schedule": RECORD}
//   {"version": 1, "op": "delete", "id": "schedule-N"}
//   {"version": 1, "op": "dispatch", "id": "schedule-N"}
// RECORD is exactly one of
//   {"id", "kind": "after", "prompt", "after_seconds", "scheduled_at"}
//   {"id", "kind": "at", "prompt", "scheduled_at"}
// - id: "schedule-" + a decimal integer in 1..2^53-1 without leading zeros;
// - prompt: a non-empty string without leading or trailing ASCII whitespace;
// - after_seconds: an integer in 1..2^53-1 (a JSON integer, never 30.0);
// - scheduled_at: the canonical UTC form FormatRfc3339Utc writes,
//   "2026-01-01T00:00:30.000Z". An `at` record keeps only this target, not
//   the local time or zone it was given as.
// `delete` ends a reminder the model removed; `dispatch` records that its
// follow-up was queued (not that the model answered or anyone read it).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/json.h"
#include "base/status.h"
#include "session/event.h"

namespace dsh::plugins::schedule {

// The plugin's error codes (docs/API.md "Errors").
namespace codes {
// A local `at` without `time_zone` when the person's zone is not known to be
// the session's; the model asks which zone is meant and retries (400).
inline constexpr const char* kTimezoneConfirmationRequired = "timezone_confirmation_required";
// A local `at` inside a spring-forward gap (400).
inline constexpr const char* kNonexistentLocalTime = "nonexistent_local_time";
// A target that is not strictly after now (400).
inline constexpr const char* kNotFuture = "not_future";
// The session's schedule/change stream breaks the format or its transitions (500).
inline constexpr const char* kCorruptScheduleLog = "corrupt_schedule_log";
}  // namespace codes

inline constexpr std::string_view kScheduleChange = "schedule/change";
inline constexpr int64_t kScheduleLogVersion = 1;

enum class Kind { kAfter, kAt };

// One reminder as the create event stores it. Instants are Unix milliseconds.
struct Record {
  std::string id;                       // "schedule-N"
  Kind kind = Kind::kAfter;
  std::string prompt;                   // trimmed, non-empty
  std::optional<int64_t> after_seconds;  // present exactly when kind == kAfter
  int64_t scheduled_at = 0;             // the UTC target

  friend bool operator==(const Record&, const Record&) = default;
};

enum class Op { kCreate, kDelete, kDispatch };

// One decoded event.
struct Change {
  Op op = Op::kCreate;
  std::string id;  // the record's id for kCreate too
  Record record;   // kCreate only

  friend bool operator==(const Change&, const Change&) = default;
};

// "schedule-N" for N >= 1.
std::string FormatScheduleId(int64_t n);
// N of a well-formed id ("schedule-" + 1..2^53-1, no leading zeros, no sign);
// nullopt otherwise.
std::optional<int64_t> ParseScheduleId(std::string_view id);

// Event builders. They write what they are given; a record that DecodeChange
// would reject (the caller's bug) becomes an event the fold later reports as
// corrupt, so build records with ResolveScheduleCreate (schedule_request.h)
// and FormatScheduleId.
session::EventDraft CreateEvent(const Record& record);
session::EventDraft DeleteEvent(const std::string& id);
session::EventDraft DispatchEvent(const std::string& id);

// Strictly decodes the `data` of one schedule/change event. Any deviation
// from the format above is `corrupt_schedule_log` saying what is wrong
// (without session or seq; Fold adds them).
Result<Change> DecodeChange(const Json& data);

// What a session's stream says now.
struct ScheduleState {
  std::vector<Record> active;  // created, neither deleted nor dispatched; creation order
  int64_t next_id = 1;         // 1 + the largest N created in the folded range

  // The active record with this id; nullptr when none.
  const Record* Find(std::string_view id) const;
  // The active record due first (ties: the earlier created); nullptr when none.
  const Record* Earliest() const;
};

// Folds the schedule/change events of `session_id` with seq > seed_length
// (a fork's events 1..seed_length are its parent's prefix: a fork never
// inherits its parent's reminders and may reuse their ids). Other event types
// are ignored. `events` are in seq order, as the session store returns them.
// Transitions: create of an id already created in the range, and delete or
// dispatch of an id not active, are corrupt. Every corruption is
// `corrupt_schedule_log`: "session SES: event SEQ: <what is wrong>"; nothing
// is skipped.
Result<ScheduleState> Fold(const std::string& session_id, int64_t seed_length,
                           const std::vector<session::Event>& events);

// What the tools show for a record at `now_ms`:
//   {"id", "kind": "after"|"at", "prompt", "after_seconds" (after only),
//    "scheduled_at": canonical UTC, "state": "scheduled"|"overdue",
//    "delivery_mode": "session-local"}
// `state` is "overdue" when now_ms >= scheduled_at.
Json RecordView(const Record& record, int64_t now_ms);

// The follow-up text a due reminder queues, one line:
//   [SCHEDULE REMINDER] schedule_id: "schedule-1" occurrence_at: 2026-01-01T00:00:30.000Z prompt: "the prompt"
// schedule_id and prompt are JSON string literals (quotes, backslashes,
// newlines and control characters escaped; non-ASCII kept as UTF-8, invalid
// UTF-8 replaced by U+FFFD), so a prompt cannot forge the frame's fields;
// occurrence_at is the record's scheduled_at in canonical UTC.
std::string ReminderFrame(const Record& record);

// The inbox idempotency key of a reminder: "schedule:" + session + ":" + id.
std::string ReminderKey(const std::string& session_id, const std::string& schedule_id);

}  // namespace dsh::plugins::schedule
