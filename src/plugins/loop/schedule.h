#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/json.h"
#include "base/status.h"
#include "time/cron_expr.h"
#include "time/time_zone.h"

namespace dsh::plugins::loop {

enum class ScheduleKind { kEvery, kAfter, kCron };

// A loop's schedule as the tools take and show it (spec 000 section 3):
//   {kind: "every", every_seconds}   recurring, first one `every_seconds` after creation
//   {kind: "after", after_seconds}   once, `after_seconds` after creation
//   {kind: "cron", expr, tz?}        five-field cron in `tz` (else the host's zone)
struct Schedule {
  ScheduleKind kind = ScheduleKind::kEvery;
  int64_t seconds = 0;            // every_seconds / after_seconds: a positive safe integer
  std::string expr;               // cron only
  std::optional<std::string> tz;  // cron only; the canonical IANA name when given

  friend bool operator==(const Schedule&, const Schedule&) = default;
};

Json ScheduleToJson(const Schedule& schedule);

// Strict decoder for a `schedule` argument (a base/schema.h raw field):
// `kind` first decides which fields exist, and each kind accepts only its own
// (`every_seconds` on an `after` schedule is an unknown property). Durations
// must be positive safe integers; `expr` must parse (`invalid_cron`,
// `cron_never_fires`) and `tz` must be an IANA zone (`invalid_time_zone`,
// stored canonical). Other errors are `invalid_arguments` naming the field
// under `path` ("schedule.every_seconds").
Status DecodeSchedule(const Json& value, const std::string& path, Schedule& out);

// The JSON Schema models see for `schedule` (a oneOf of the three kinds).
Json ScheduleJsonSchema();

// A schedule ready to compute occurrences: the parsed rule and the resolved
// zone. Instants are Unix milliseconds. Immutable; cheap to copy.
class Timetable {
 public:
  // `host_zone` is the zone of a cron rule without `tz`. Errors as
  // DecodeSchedule's for a schedule that did not come from it.
  static Result<Timetable> Make(const Schedule& schedule, const TimeZone& host_zone);

  // The first occurrence of a loop created at `created_at`: every/after
  // `seconds` later; cron the first rule time strictly after it. Errors:
  // `cron_never_fires` when a cron rule has no occurrence left.
  Result<int64_t> First(int64_t created_at) const;

  // What to deliver when the occurrence `next_at` is due (`next_at <= now`):
  // at most one occurrence, the latest one at or before `now` (anti-burst),
  // however long the host was down.
  struct Catchup {
    int64_t nominal = 0;  // the occurrence to deliver: next_at <= nominal <= now
    int64_t skipped = 0;  // occurrences in [next_at, nominal) left undelivered
    bool skipped_capped = false;  // a cron rule had more than kMaxCountedSkips; `skipped` is the cap
    // The first occurrence after `now`; nullopt for `after` (it completes)
    // and for a cron rule with no occurrence left.
    std::optional<int64_t> following;
  };
  Catchup Catch(int64_t next_at, int64_t now) const;

  // Counting skipped cron occurrences walks them; beyond this many it stops.
  static constexpr int64_t kMaxCountedSkips = 100'000;

  // The occurrence after `t` (for a recurring schedule; nullopt for `after`
  // and when none is left): every `t + seconds`, cron the next rule time.
  std::optional<int64_t> After(int64_t t) const;

  ScheduleKind kind() const { return kind_; }

 private:
  Timetable() = default;

  ScheduleKind kind_ = ScheduleKind::kEvery;
  int64_t period_ms_ = 0;  // every/after; saturates at "never"
  std::optional<CronExpr> cron_;
  TimeZone zone_;
};

// "Never": an instant past every real occurrence (an interval that ends
// after the year 9999, a rule with nothing left). Sorts after every deadline.
inline constexpr int64_t kNever = INT64_MAX;

}  // namespace dsh::plugins::loop
