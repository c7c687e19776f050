#pragma once

// Stable error codes of the time layer. They reach users and API clients
// unchanged (see docs/TIME.md), so a code never changes once shipped.
namespace dsh::codes {
inline constexpr const char* kInvalidTimeZone = "invalid_time_zone";
inline constexpr const char* kInvalidTimestamp = "invalid_timestamp";
inline constexpr const char* kInvalidLocalTime = "invalid_local_time";
inline constexpr const char* kInvalidCron = "invalid_cron";
inline constexpr const char* kCronNeverFires = "cron_never_fires";
}  // namespace dsh::codes
