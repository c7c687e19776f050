#include "time/local_time.h"

#include <cstdio>
#include <string>

#include "time/civil.h"
#include "time/errors.h"
#include "time/instant.h"
#include "time/rfc3339.h"
#include "time/zone_rules.h"

namespace dsh {
namespace {

using namespace time_internal;

Status BadLocal(std::string message) { return Status(codes::kInvalidLocalTime, std::move(message)); }

std::string Describe(const LocalDateTime& l) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02u %02u:%02u:%02u", l.year, l.month, l.day, l.hour, l.minute, l.second);
  return buf;
}

std::string LocalClock(int64_t local_seconds) {
  const int64_t sod = FloorMod(local_seconds, kSecondsPerDay);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%02lld:%02lld", static_cast<long long>(sod / 3600),
                static_cast<long long>(sod / 60 % 60));
  return buf;
}

Status Validate(const LocalDateTime& l) {
  if (l.year < 1 || l.year > 9999) return BadLocal("year " + std::to_string(l.year) + " is out of range (0001-9999)");
  if (l.month < 1 || l.month > 12) return BadLocal("month " + std::to_string(l.month) + " is out of range (01-12)");
  if (l.day < 1 || l.day > DaysInMonth(l.year, l.month)) {
    return BadLocal("date " + Describe(l).substr(0, 10) + " does not exist");
  }
  if (l.hour > 23) return BadLocal("hour " + std::to_string(l.hour) + " is out of range (00-23)");
  if (l.minute > 59) return BadLocal("minute " + std::to_string(l.minute) + " is out of range (00-59)");
  if (l.second > 59) return BadLocal("second " + std::to_string(l.second) + " is out of range (00-59)");
  return Status::Ok();
}

}  // namespace

Result<LocalDateTime> ParseLocalDateTime(std::string_view date, std::string_view time) {
  LocalDateTime l;
  int y, mo, d, h, mi, s = 0;
  if (date.size() != 10 || !Digits(date, 0, 4, y) || date[4] != '-' || !Digits(date, 5, 2, mo) || date[7] != '-' ||
      !Digits(date, 8, 2, d)) {
    return BadLocal("date \"" + std::string(date.substr(0, 32)) + "\" must be YYYY-MM-DD");
  }
  const bool with_seconds = time.size() == 8;
  if ((time.size() != 5 && !with_seconds) || !Digits(time, 0, 2, h) || time[2] != ':' || !Digits(time, 3, 2, mi) ||
      (with_seconds && (time[5] != ':' || !Digits(time, 6, 2, s)))) {
    return BadLocal("time \"" + std::string(time.substr(0, 32)) + "\" must be HH:MM or HH:MM:SS");
  }
  l.year = y;
  l.month = static_cast<unsigned>(mo);
  l.day = static_cast<unsigned>(d);
  l.hour = static_cast<unsigned>(h);
  l.minute = static_cast<unsigned>(mi);
  l.second = static_cast<unsigned>(s);
  DSH_RETURN_IF_ERROR(Validate(l));
  return l;
}

Result<WallTime> LocalToInstant(const LocalDateTime& local, const TimeZone& zone) {
  DSH_RETURN_IF_ERROR(Validate(local));
  const int64_t wall = DaysFromCivil(local.year, local.month, local.day) * kSecondsPerDay + local.hour * 3600 +
                       local.minute * 60 + local.second;
  // Every instant at which the wall clock reads `wall` lies within a day of
  // it (UTC offsets stay within ±26 h); walk the periods there, earliest first.
  const ZoneRules& rules = zone.rules();
  constexpr int64_t kReach = 27 * kSecondsPerHour;
  int64_t t = wall - kReach;
  while (true) {
    const OffsetPeriod p = rules.PeriodAt(t);
    const int64_t candidate = wall - p.offset;
    if (candidate >= p.begin && candidate < p.end) {
      auto instant = WallTimeFromSeconds(candidate);
      if (!instant) return BadLocal(Describe(local) + " is outside the supported range (0001-01-01 to 9999-12-31 UTC)");
      return *instant;  // the first instant: earlier periods were checked first
    }
    if (p.begin != kBeginningOfTime && p.prev_offset < p.offset && wall >= p.begin + p.prev_offset &&
        wall < p.begin + p.offset) {
      std::string gap = "the clocks in " + zone.name() + " jump from " + LocalClock(p.begin + p.prev_offset) +
                        " to " + LocalClock(p.begin + p.offset);
      auto at = WallTimeFromSeconds(p.begin);
      if (at) gap += " at " + FormatRfc3339Utc(*at);
      return BadLocal(Describe(local) + " does not exist in " + zone.name() + ": " + gap +
                      "; choose a time outside the gap");
    }
    if (p.end == kEndOfTime || p.end > wall + kReach) break;
    t = p.end;
  }
  return BadLocal(Describe(local) + " does not exist in " + zone.name());
}

}  // namespace dsh
