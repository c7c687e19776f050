#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/status.h"
#include "time/time_zone.h"

namespace dsh {

// A five-field Vixie cron rule: minute hour day-of-month month day-of-week.
//
// Syntax (docs/TIME.md): `*`, numbers, names (jan-dec, sun-sat, any case),
// ranges `a-b`, lists `a,b`, steps `*/n` and `a-b/n`; the macros @yearly
// @annually @monthly @weekly @daily @midnight @hourly; day-of-week 0 and 7 are
// Sunday. When both day fields are restricted (neither starts with `*`) a day
// matches if either matches; otherwise both must.
//
// DST policy (Vixie, DESIGN.md "Time"). A rule is *fixed-time* unless its
// minute or hour field starts with `*`:
// - fixed-time: a local time in a spring-forward gap fires once, at the first
//   instant after the gap; a local time in a fall-back overlap fires once, at
//   its first instant;
// - otherwise the rule follows elapsed time: it fires whenever the local wall
//   clock shows a matching minute, so in both passes of an overlap and not
//   at all for wall times a gap skips.
//
// A value type of 24 bytes (bitsets and flags), trivially copyable: millions
// of loops can each hold one. Immutable; safe to share between threads.
class CronExpr {
 public:
  // Parses and validates `text`. Errors:
  // - `invalid_cron`: bad syntax, six fields, `L` `W` `#` `?`, names out of
  //   place, out-of-range values, reversed ranges, step 0 or larger than the
  //   field; the message names the field ("day-of-month field: ...");
  // - `cron_never_fires`: a well-formed rule with no occurrence ever, such as
  //   "0 0 30 2 *" or "0 0 31 4,6,9,11 *" ("0 0 29 2 *" is fine: leap years).
  static Result<CronExpr> Parse(std::string_view text);

  // The first occurrence strictly after `after`, evaluated in `zone` with the
  // DST policy above. nullopt only when there is none before the year 10000. Jumps field by field (never scans minutes); no allocation.
  std::optional<WallTime> Next(WallTime after, const TimeZone& zone) const;

  // The last occurrence at or before `now` (anti-burst recovery: deliver this
  // one, skip the rest). Cost does not depend on how far back the previous
  // delivery was. nullopt when there is none since WallTime's minimum.
  std::optional<WallTime> LatestAtOrBefore(WallTime now, const TimeZone& zone) const;

  // English description for the UI and CLI, e.g. "At 09:00, Monday through
  // Friday" for "0 9 * * 1-5".
  std::string Describe() const;

  // True when the minute or the hour field starts with `*` (the rule follows
  // elapsed time across DST changes).
  bool follows_elapsed_time() const { return (flags_ & (kMinuteStar | kHourStar)) != 0; }

  // Field sets, as bitsets (bit n = value n). Day-of-week: bit 0 = Sunday.
  uint64_t minutes() const { return minutes_; }
  uint32_t hours() const { return hours_; }
  uint32_t days_of_month() const { return days_; }
  uint16_t months() const { return months_; }
  uint8_t days_of_week() const { return weekdays_; }
  bool day_of_month_starts_with_star() const { return flags_ & kDomStar; }
  bool day_of_week_starts_with_star() const { return flags_ & kDowStar; }

  friend bool operator==(const CronExpr&, const CronExpr&) = default;

 private:
  friend class CronParser;
  static constexpr uint8_t kMinuteStar = 1, kHourStar = 2, kDomStar = 4, kDowStar = 8;

  CronExpr() = default;

  // Matching local days of `month` in `year` (bit d = day d).
  uint32_t DayMask(int64_t year, unsigned month) const;
  // First matching local minute at or after `local` (seconds, minute-aligned).
  std::optional<int64_t> NextLocal(int64_t local) const;
  // Last matching local minute at or before `local` (minute-aligned).
  std::optional<int64_t> PrevLocal(int64_t local) const;

  uint64_t minutes_ = 0;   // bits 0..59
  uint32_t hours_ = 0;     // bits 0..23
  uint32_t days_ = 0;      // bits 1..31
  uint16_t months_ = 0;    // bits 1..12
  uint8_t weekdays_ = 0;   // bits 0..6
  uint8_t flags_ = 0;
};

}  // namespace dsh
