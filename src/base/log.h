#pragma once

#include <spdlog/spdlog.h>

#include <string>

#include "base/status.h"

namespace dsh {

// Configures the process-wide spdlog logger: lines go to stderr with an ISO
// timestamp and level. `level` is one of trace, debug, info, warn, error, off.
Status InitLogging(const std::string& level);

}  // namespace dsh
