#include "plugins/time_context/time_context.h"

#include <array>
#include <chrono>
#include <cstdlib>

#include <fmt/format.h>

#include "host/host.h"
#include "time/civil.h"
#include "time/rfc3339.h"
#include "time/time_zone.h"

namespace dsh::plugins::time_context {
namespace {

// "local time there 2026-01-01 08:00:00 (Thursday), UTC+08:00"
std::string LocalLine(WallTime now, const TimeZone& zone) {
  static constexpr std::array<const char*, 7> kDays = {"Sunday",   "Monday", "Tuesday", "Wednesday",
                                                       "Thursday", "Friday", "Saturday"};
  int64_t offset = zone.OffsetAt(now).count();
  int64_t local_s = time_internal::FloorDiv(ToUnixMillis(now), 1000) + offset;
  int64_t days = time_internal::FloorDiv(local_s, 86'400);
  int64_t secs = local_s - days * 86'400;
  auto date = time_internal::CivilFromDays(days);
  int64_t off_min = std::llabs(offset) / 60;
  return fmt::format("local time there {:04}-{:02}-{:02} {:02}:{:02}:{:02} ({}), UTC{}{:02}:{:02}", date.year, date.month,
                     date.day, secs / 3600, secs / 60 % 60, secs % 60, kDays[time_internal::WeekdayFromDays(days)],
                     offset < 0 ? '-' : '+', off_min / 60, off_min % 60);
}

}  // namespace

std::string TimeContextText(const session::SessionHeader& header, const std::optional<std::string>& client_time_zone,
                            WallTime now) {
  if (header.delegation_depth > 0) return "";
  std::string out = "Time context:\n- Now: " + FormatRfc3339Utc(now) + " (UTC)\n";
  auto session_zone = header.time_zone.empty() ? Result<TimeZone>(Status("invalid_time_zone", "none"))
                                               : ResolveTimeZone(header.time_zone);
  if (session_zone.ok()) {
    out += "- Session time zone: " + session_zone->name() + "; " + LocalLine(now, *session_zone) + "\n";
  } else {
    out += "- Session time zone: unavailable (this session has none)\n";
  }
  std::optional<TimeZone> client;
  if (client_time_zone) {
    auto z = ResolveTimeZone(*client_time_zone);
    if (z.ok()) client = *z;
  }
  if (client) {
    out += "- Request time zone: " + client->name() + "; " + LocalLine(now, *client) + "\n";
  } else {
    out += "- Request time zone: not given (the person's zone is unknown for this message)\n";
  }
  if (session_zone.ok() && client && *client == *session_zone) {
    out += "- Zones: same zone";
  } else if (!client) {
    out += "- Zones: unknown: ask the person which zone they mean before assuming one for a local time";
  } else {
    out += "- Zones: differ: ask the person which zone they mean before assuming one for a local time";
  }
  return out;
}

Status RegisterTimeContextPlugin(host::Host& host) {
  const Clock* clock = &host.clock();
  host.agents().AddContext([clock](const session::SessionHeader& header, const std::optional<std::string>& zone) {
    return TimeContextText(header, zone, clock->Now());
  });
  return Status::Ok();
}

}  // namespace dsh::plugins::time_context
