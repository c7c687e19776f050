#pragma once

namespace dsh::app {
inline constexpr const char* kVersion = "0.1.0";
}
