#pragma once

#include <string_view>

#include "base/clock.h"
#include "base/status.h"
#include "time/time_zone.h"

namespace dsh {

// A wall-clock date and time with no zone: what a person means by
// "2026-03-08 at 02:30". Plain value.
struct LocalDateTime {
  int year = 1970;      // 1..9999
  unsigned month = 1;   // 1..12
  unsigned day = 1;     // 1..days in month
  unsigned hour = 0;    // 0..23
  unsigned minute = 0;  // 0..59
  unsigned second = 0;  // 0..59

  friend bool operator==(const LocalDateTime&, const LocalDateTime&) = default;
};

// Parses the `at` form of one-shot reminders: `date` "YYYY-MM-DD" and `time`
// "HH:MM" or "HH:MM:SS". A malformed or non-existent value ("2026-02-30",
// "24:00", "9:30") is `invalid_local_time` naming the field.
Result<LocalDateTime> ParseLocalDateTime(std::string_view date, std::string_view time);

// The instant at which `local` happens in `zone`, with the one-shot policy:
// - a time that occurs once maps to that instant;
// - a time in a fall-back overlap (it occurs twice) maps to the first, e.g.
//   2026-11-01 01:30 in America/New_York -> 2026-11-01T05:30:00.000Z;
// - a time in a spring-forward gap does not exist: `invalid_local_time`,
//   naming the gap, e.g. 2026-03-08 02:30 in America/New_York;
// - an invalid field, or an instant WallTime cannot hold, is also
//   `invalid_local_time`.
// Thread-safe; never throws.
Result<WallTime> LocalToInstant(const LocalDateTime& local, const TimeZone& zone);

}  // namespace dsh
