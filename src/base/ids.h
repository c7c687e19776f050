#pragma once

#include <string>
#include <string_view>

#include "base/clock.h"

namespace dsh {

// A new globally unique id: `prefix` followed by 26 lowercase Crockford
// base32 characters (48-bit millisecond timestamp from `clock`, then 80
// random bits), so ids of one prefix sort roughly by creation time.
// Thread-safe.
std::string NewId(std::string_view prefix, const Clock& clock = RealClock());

// `n` random bytes from the OS, hex-encoded (2n characters). For secrets.
std::string RandomHex(size_t n);

}  // namespace dsh
