#pragma once

// Conversions between dsh::WallTime and whole seconds since the Unix epoch,
// the unit the time layer computes in. Internal to src/time.

#include <chrono>
#include <cstdint>
#include <optional>

#include "base/clock.h"

namespace dsh::time_internal {

// dsh instants span the years RFC 3339 can write: 0001-01-01T00:00:00Z to
// 9999-12-31T23:59:59Z. Instants outside are rejected or, for cron, mean
// "no occurrence".
inline constexpr int64_t kMinWallSeconds = -62'135'596'800;  // 0001-01-01T00:00:00Z
inline constexpr int64_t kMaxWallSeconds = 253'402'300'799;  // 9999-12-31T23:59:59Z

inline int64_t FloorSeconds(WallTime t) {
  return std::chrono::floor<std::chrono::seconds>(t.time_since_epoch()).count();
}

inline std::optional<WallTime> WallTimeFromSeconds(int64_t s) {
  if (s < kMinWallSeconds || s > kMaxWallSeconds) return std::nullopt;
  return WallTime(std::chrono::duration_cast<WallTime::duration>(std::chrono::seconds(s)));
}

}  // namespace dsh::time_internal
