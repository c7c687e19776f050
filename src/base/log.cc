#include "base/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace dsh {

Status InitLogging(const std::string& level) {
  auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off") {
    return InvalidArguments("unknown log level '" + level +
                            "' (expected trace, debug, info, warn, error or off)");
  }
  spdlog::drop("dsh");
  auto logger = spdlog::stderr_color_mt("dsh");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %^%l%$ %v");
  logger->set_level(lvl);
  spdlog::set_default_logger(logger);
  return Status::Ok();
}

}  // namespace dsh
