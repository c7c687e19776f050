#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/status.h"

namespace date {
class time_zone;
}

namespace dsh {

namespace time_internal {
class ZoneRules;
struct ZoneData;
}  // namespace time_internal

// An IANA time zone, by canonical name: "UTC" or an Area/Location name such as
// "America/New_York". A link such as "US/Eastern" resolves to its target, so
// two spellings of one zone compare equal and store the same name.
//
// A TimeZone is one pointer into a process-wide registry of compiled zones
// that is never freed: cheap to copy, safe to share between threads, and
// valid for the life of the process. The default value is UTC.
class TimeZone {
 public:
  TimeZone();
  static TimeZone Utc();

  // The canonical name, e.g. "America/New_York" or "UTC".
  const std::string& name() const;
  // The date/tz zone; nullptr only for UTC on a host without tzdata.
  const date::time_zone* date_zone() const;
  // The zone's UTC offset at `t` (seconds east of UTC).
  std::chrono::seconds OffsetAt(WallTime t) const;

  // Offsets over all time (explicit transitions + POSIX footer rule).
  const time_internal::ZoneRules& rules() const;

  friend bool operator==(const TimeZone& a, const TimeZone& b) { return a.zone_ == b.zone_; }

 private:
  friend Result<TimeZone> ResolveTimeZone(std::string_view name);
  explicit TimeZone(const time_internal::ZoneData* zone) : zone_(zone) {}
  const time_internal::ZoneData* zone_;
};

// Resolves a user-supplied zone name. Accepts "UTC" and IANA Area/Location
// names known to the OS tz database (links included, canonicalized;
// "Etc/UTC" and its aliases are "UTC"). Rejects with `invalid_time_zone`,
// naming the input: empty names, abbreviations ("CST", "PST"), fixed offsets
// ("+08:00", "UTC+8", "Etc/GMT+8"), legacy names without an area ("EST5EDT",
// "Japan") and unknown names. The first use of a zone reads its TZif data;
// later calls are a map lookup. Thread-safe; never throws.
Result<TimeZone> ResolveTimeZone(std::string_view name);

// Where the host's zone comes from; HostTimeZone() uses the real ones.
struct HostZoneSources {
  std::optional<std::string> tz_env;          // $TZ, e.g. "Europe/Paris" or ":Europe/Paris"
  std::string localtime_path = "/etc/localtime";  // a symlink into .../zoneinfo/
  std::string timezone_path = "/etc/timezone";    // Debian: the name on one line
};

// The host's zone: $TZ when set to a name ResolveTimeZone accepts, else the
// target of /etc/localtime, else /etc/timezone, else UTC. Never fails.
TimeZone HostTimeZone();
TimeZone HostTimeZoneFrom(const HostZoneSources& sources);

}  // namespace dsh
