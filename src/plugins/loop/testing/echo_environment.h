#pragma once

#include <optional>
#include <string>

#include "plugins/loop/loop_scheduler.h"

namespace dsh::plugins::loop::testing {

// The loop environment of a test host: no global interface session, fresh
// sessions on the echo model, every preset known, cron rules in UTC.
inline LoopEnvironment EchoEnvironment() {
  LoopEnvironment env;
  env.global_session_id = []() -> std::optional<std::string> { return std::nullopt; };
  env.defaults = [] {
    session::NewSession s;
    s.route = {"echo", "echo", std::nullopt};
    return s;
  };
  env.preset_exists = [](const std::string&) { return true; };
  env.host_zone = TimeZone::Utc();
  return env;
}

}  // namespace dsh::plugins::loop::testing
