#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace dsh::time_internal {

// The POSIX TZ rule in the footer of a TZif v2+ file (RFC 8536 §3.3), e.g.
// "EST5EDT,M3.2.0,M11.1.0" or "<+1030>-10:30<+11>-11,M10.1.0,M4.1.0".
// zic writes explicit transitions only up to 2037; the footer says what
// happens after the last one. date/tz 3.0.1 over the OS tzdb ignores it (it
// repeats the last offset forever), so ZoneRules extends zones with it.
// Plain value, thread-compatible.
struct PosixTzDate {
  enum class Kind { kJulianNoLeap, kZeroBasedDay, kMonthWeekDay };  // Jn, n, Mm.w.d
  Kind kind = Kind::kMonthWeekDay;
  int day = 0;            // Jn: 1..365, n: 0..365
  int month = 0;          // Mm.w.d
  int week = 0;           // 1..5 (5 = last)
  int weekday = 0;        // 0 = Sunday
  int32_t time = 7200;    // seconds after local midnight, -167h..167h (RFC 8536 extension)

  // Days since 1970-01-01 of this rule's date in `year`.
  int64_t DayIn(int64_t year) const;
};

struct PosixTz {
  int32_t std_offset = 0;  // seconds east of UTC (the POSIX sign is inverted)
  bool has_dst = false;
  int32_t dst_offset = 0;  // seconds east of UTC
  PosixTzDate start;       // DST starts, at a local standard time
  PosixTzDate end;         // DST ends, at a local daylight time

  struct YearTransitions {
    int64_t dst_start;  // seconds since epoch (UTC)
    int64_t dst_end;
  };
  // Only meaningful when has_dst.
  YearTransitions TransitionsIn(int64_t year) const;
};

// Parses a POSIX TZ string as zic writes it; nullopt when malformed.
std::optional<PosixTz> ParsePosixTz(std::string_view text);

}  // namespace dsh::time_internal
