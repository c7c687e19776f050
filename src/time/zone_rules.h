#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "time/posix_tz.h"

namespace date {
class time_zone;
}

namespace dsh::time_internal {

inline constexpr int64_t kBeginningOfTime = std::numeric_limits<int64_t>::min();
inline constexpr int64_t kEndOfTime = std::numeric_limits<int64_t>::max();

// A stretch of time with one UTC offset: [begin, end) in seconds since the
// Unix epoch. `prev_offset` is the offset just before `begin` (equal to
// `offset` when begin is kBeginningOfTime); together they say whether the
// period starts with a gap (prev_offset < offset) or an overlap (>).
struct OffsetPeriod {
  int64_t begin;
  int64_t end;
  int32_t offset;  // seconds east of UTC
  int32_t prev_offset;
};

// The UTC offsets of one zone over all time, compiled once from date/tz and
// kept for the life of the process: the explicit transitions date/tz reads
// from the TZif file, continued by the file's POSIX footer rule after the
// last one (date/tz 3.0.1 would repeat the last offset forever, freezing DST
// in 2037). Only offset changes are kept: a change of abbreviation alone is
// not a transition for local-time arithmetic.
//
// Immutable after construction; safe to use from any thread. PeriodAt never
// allocates or throws.
class ZoneRules {
 public:
  struct Transition {
    int64_t at;      // first second of the new offset
    int32_t offset;  // offset from `at` on
  };

  // A zone with one offset forever (UTC).
  static ZoneRules Fixed(int32_t offset);

  // `transitions` sorted by `at`; entries that do not change the offset are
  // dropped. `tail` (if it has DST) applies after the last transition.
  ZoneRules(int32_t initial_offset, const std::vector<Transition>& transitions, std::optional<PosixTz> tail);

  // Reads every transition of `zone` through date/tz and the POSIX footer of
  // its TZif file under `tzdir`. Errors (date/tz exceptions, unreadable data)
  // are `internal` Status values naming the zone.
  static Result<ZoneRules> Compile(const date::time_zone& zone, std::string_view tzdir);

  // The period containing instant `t` (seconds since epoch).
  OffsetPeriod PeriodAt(int64_t t) const;
  int32_t OffsetAt(int64_t t) const { return PeriodAt(t).offset; }

  const std::vector<int64_t>& explicit_transitions() const { return at_; }
  const std::optional<PosixTz>& tail() const { return tail_; }

 private:
  OffsetPeriod TailPeriodAt(int64_t t) const;

  int32_t initial_offset_;
  std::vector<int64_t> at_;       // sorted transition instants
  std::vector<int32_t> offset_;   // offset_[i] applies from at_[i]
  std::optional<PosixTz> tail_;   // set only when it has DST
};

// The footer line of a TZif v2+ file's bytes, or "" for v1 files / no footer.
std::string_view TzifFooter(std::string_view tzif);

}  // namespace dsh::time_internal
