#pragma once

namespace dsh {
// The release of dsh: `dsh --version`, /healthz, MCP's clientInfo/serverInfo.
inline constexpr const char* kVersion = "0.1.0";
}  // namespace dsh
