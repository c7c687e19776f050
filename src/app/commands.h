#pragma once

#include "app/command.h"

namespace dsh::app {

// The one list of CLI commands (commands.cc).
void AddAllCommands(CLI::App& root, CommandContext& ctx);

}  // namespace dsh::app
