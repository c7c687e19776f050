#pragma once

// The arguments of schedule_create / schedule_delete / schedule_list: strict
// decoding, resolution of the target instant, and the JSON Schemas models see.
// Pure functions of their inputs (the caller passes the clock reading and the
// zones): thread-safe, never throw.

#include <cstdint>
#include <optional>
#include <string>

#include "base/json.h"
#include "base/status.h"
#include "plugins/schedule/schedule_log.h"

namespace dsh::plugins::schedule {

// What ResolveScheduleCreate needs besides the arguments.
struct CreateContext {
  int64_t now_ms = 0;        // the decision instant (Unix ms), sampled once by the caller
  std::string session_zone;  // the zone captured when the session was created; "" when it has none
  // The zone of the person making this request (the browser's), when the
  // request carried one. When given, it is the effective client zone even if
  // it does not resolve (then it matches nothing).
  std::optional<std::string> client_zone;
  std::string host_zone;     // the effective client zone when client_zone is absent
};

// Decodes and resolves schedule_create arguments:
//   {prompt, after_seconds}  once, after_seconds * 1000 ms after now_ms
//   {prompt, at}             once at `at`:
//     - a strict RFC 3339 string with Z or a numeric offset, or
//     - {date: "YYYY-MM-DD", time: "HH:MM" | "HH:MM:SS", time_zone?: IANA}.
//       Without time_zone the session's zone is used, and only when the
//       effective client zone (client_zone, else host_zone) is the session's
//       by canonical name. A local time in a spring-forward gap does not
//       exist; one in a fall-back overlap is its first instant.
// Returns the record without its id (the caller assigns FormatScheduleId).
// Every message starts "schedule_create: " and names the field. Errors:
// - invalid_arguments: not an object; unknown property (every_seconds and
//   cron: recurring rules are not supported, use loop_create); prompt
//   missing, not a string or blank; neither or both of after_seconds / at;
//   after_seconds not an integer in 1..2^53-1, or its target past
//   9999-12-31T23:59:59.999Z; `at` of another type or with unknown keys;
// - invalid_timestamp: `at` is a string that is not strict RFC 3339 with an offset;
// - invalid_local_time: `at.date` / `at.time` malformed or non-existent
//   (2026-02-30, 24:00), or outside the years 0001-9999 in UTC;
// - invalid_time_zone: `at.time_zone` is not an IANA zone;
// - timezone_confirmation_required: a local `at` without time_zone whose
//   zone cannot be taken as the person's (the message names both zones and
//   asks the model to confirm the zone and retry with at.time_zone);
// - nonexistent_local_time: the local time falls in a gap (the message names it);
// - not_future: the target is not strictly after now_ms.
Result<Record> ResolveScheduleCreate(const Json& args, const CreateContext& context);

// schedule_delete arguments: exactly {id: non-empty string}. Returns the id
// as given (its form is not checked: an unknown id is an answer, not an
// error). Errors: invalid_arguments, "schedule_delete: ..." naming the field.
Result<std::string> DecodeScheduleDelete(const Json& args);

// schedule_list arguments: exactly {}. Errors: invalid_arguments,
// "schedule_list: ..." naming the property.
Status DecodeScheduleList(const Json& args);

// The tools' descriptions, and the JSON Schemas of their arguments as sent to
// models (each also carries its description).
const std::string& ScheduleCreateDescription();
const std::string& ScheduleDeleteDescription();
const std::string& ScheduleListDescription();
Json ScheduleCreateParameters();
Json ScheduleDeleteParameters();
Json ScheduleListParameters();

}  // namespace dsh::plugins::schedule
