#pragma once

#include "app/command.h"

namespace dsh::app {

// `dsh tool NAME ['JSON'] [--session ID] [--home DIR]`: calls a tool on the
// running host of the profile and prints its result as JSON.
void AddToolCommand(CLI::App& root, CommandContext& ctx);

}  // namespace dsh::app
