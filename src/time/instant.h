#pragma once

// Conversions between dsh::WallTime and whole seconds since the Unix epoch,
// the unit the time layer computes in. Internal to src/time.

#include <chrono>
#include <cstdint>
#include <optional>

#include "base/clock.h"

namespace dsh::time_internal {

// WallTime is system_clock::time_point: with libstdc++, int64 nanoseconds,
// so it spans about 1677-09-22 .. 2262-04-11. Instants outside cannot exist.
inline constexpr int64_t kMinWallSeconds =
    std::chrono::ceil<std::chrono::seconds>(WallTime::min().time_since_epoch()).count() + 1;
inline constexpr int64_t kMaxWallSeconds =
    std::chrono::floor<std::chrono::seconds>(WallTime::max().time_since_epoch()).count() - 1;

inline int64_t FloorSeconds(WallTime t) {
  return std::chrono::floor<std::chrono::seconds>(t.time_since_epoch()).count();
}

inline std::optional<WallTime> WallTimeFromSeconds(int64_t s) {
  if (s < kMinWallSeconds || s > kMaxWallSeconds) return std::nullopt;
  return WallTime(std::chrono::duration_cast<WallTime::duration>(std::chrono::seconds(s)));
}

}  // namespace dsh::time_internal
