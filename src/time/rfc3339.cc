#include "time/rfc3339.h"

#include <cstdio>

#include "time/civil.h"
#include "time/errors.h"
#include "time/instant.h"
#include "time/zone_rules.h"

namespace dsh {
namespace {

using namespace time_internal;

Status Bad(std::string_view text, std::string_view why) {
  std::string shown(text.substr(0, 64));
  if (text.size() > 64) shown += "...";
  return Status(codes::kInvalidTimestamp,
                "\"" + shown + "\" is not an RFC 3339 timestamp (YYYY-MM-DDTHH:MM:SS[.fff]Z or ±HH:MM): " +
                    std::string(why));
}

// Seconds and the sub-second part as WallTime::duration, for a valid instant.
std::string FormatLocal(int64_t local_seconds, int64_t millis, bool always_millis) {
  const int64_t days = FloorDiv(local_seconds, kSecondsPerDay);
  const int64_t sod = local_seconds - days * kSecondsPerDay;
  const CivilDate d = CivilFromDays(days);
  char buf[96];
  int n = std::snprintf(buf, sizeof buf, "%04lld-%02u-%02uT%02lld:%02lld:%02lld", static_cast<long long>(d.year),
                        d.month, d.day, static_cast<long long>(sod / 3600), static_cast<long long>(sod / 60 % 60),
                        static_cast<long long>(sod % 60));
  if (always_millis || millis != 0) {
    std::snprintf(buf + n, sizeof buf - static_cast<size_t>(n), ".%03lld", static_cast<long long>(millis));
  }
  return buf;
}

}  // namespace

Result<WallTime> ParseRfc3339(std::string_view s) {
  int year, month, day, hour, minute, second;
  if (!Digits(s, 0, 4, year) || s.size() < 5 || s[4] != '-' || !Digits(s, 5, 2, month) || s.size() < 8 ||
      s[7] != '-' || !Digits(s, 8, 2, day)) {
    return Bad(s, "the date must be YYYY-MM-DD");
  }
  if (s.size() < 11 || (s[10] != 'T' && s[10] != 't')) return Bad(s, "expected 'T' between the date and the time");
  if (!Digits(s, 11, 2, hour) || s.size() < 14 || s[13] != ':' || !Digits(s, 14, 2, minute) || s.size() < 17 ||
      s[16] != ':' || !Digits(s, 17, 2, second)) {
    return Bad(s, "the time must be HH:MM:SS");
  }
  if (year < 1) return Bad(s, "year 0000 is out of range (0001-9999)");
  if (month < 1 || month > 12) return Bad(s, "month " + std::to_string(month) + " is out of range (01-12)");
  if (day < 1 || static_cast<unsigned>(day) > DaysInMonth(year, static_cast<unsigned>(month))) {
    return Bad(s, "day " + std::to_string(day) + " does not exist in " + std::string(s.substr(0, 7)));
  }
  if (hour > 23) return Bad(s, "hour " + std::to_string(hour) + " is out of range (00-23)");
  if (minute > 59) return Bad(s, "minute " + std::to_string(minute) + " is out of range (00-59)");
  if (second > 59) return Bad(s, "second " + std::to_string(second) + " is out of range (00-59; leap seconds are not accepted)");

  size_t pos = 19;
  int64_t frac_ns = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    size_t digits = 0;
    int64_t scale = 100'000'000;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      frac_ns += (s[pos] - '0') * scale;
      scale /= 10;
      ++pos;
      ++digits;
    }
    if (digits == 0) return Bad(s, "a '.' must be followed by fraction digits");
  }
  if (pos >= s.size()) return Bad(s, "missing UTC offset: add Z or ±HH:MM");
  int32_t offset = 0;
  if (s[pos] == 'Z' || s[pos] == 'z') {
    ++pos;
  } else if (s[pos] == '+' || s[pos] == '-') {
    int oh, om;
    if (!Digits(s, pos + 1, 2, oh) || pos + 3 >= s.size() || s[pos + 3] != ':' || !Digits(s, pos + 4, 2, om)) {
      return Bad(s, "the UTC offset must be Z or ±HH:MM");
    }
    if (oh > 23 || om > 59) return Bad(s, "the UTC offset is out of range (±23:59)");
    offset = (oh * 3600 + om * 60) * (s[pos] == '-' ? -1 : 1);
    pos += 6;
  } else {
    return Bad(s, "expected Z or ±HH:MM after the time");
  }
  if (pos != s.size()) return Bad(s, "unexpected text after the UTC offset");

  const int64_t seconds = DaysFromCivil(year, static_cast<unsigned>(month), static_cast<unsigned>(day)) *
                              kSecondsPerDay +
                          hour * 3600 + minute * 60 + second - offset;
  auto whole = WallTimeFromSeconds(seconds);
  if (!whole) return Bad(s, "the instant is outside the supported range (0001-01-01 to 9999-12-31 UTC)");
  return *whole + std::chrono::duration_cast<WallTime::duration>(std::chrono::nanoseconds(frac_ns));
}

std::string FormatRfc3339Utc(WallTime t) {
  const int64_t ms = std::chrono::floor<std::chrono::milliseconds>(t.time_since_epoch()).count();
  return FormatLocal(FloorDiv(ms, 1000), FloorMod(ms, 1000), true) + "Z";
}

std::string FormatRfc3339InZone(WallTime t, const TimeZone& zone) {
  const int64_t ms = std::chrono::floor<std::chrono::milliseconds>(t.time_since_epoch()).count();
  const int64_t secs = FloorDiv(ms, 1000);
  int64_t offset = zone.rules().OffsetAt(secs);
  offset = FloorDiv(offset + 30, 60) * 60;  // RFC 3339 offsets have no seconds
  std::string out = FormatLocal(secs + offset, FloorMod(ms, 1000), false);
  const int64_t abs = offset < 0 ? -offset : offset;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%c%02lld:%02lld", offset < 0 ? '-' : '+', static_cast<long long>(abs / 3600),
                static_cast<long long>(abs / 60 % 60));
  return out + buf;
}

}  // namespace dsh
