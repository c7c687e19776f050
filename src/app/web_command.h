#pragma once

#include "app/command.h"

namespace dsh::app {

// `dsh web [--home DIR] [--host H] [--port N] [--patch FILE]... [--token T]`:
// runs a host until SIGINT/SIGTERM, then stops accepting, finishes requests
// in flight and queued commits, and exits 0.
void AddWebCommand(CLI::App& root, CommandContext& ctx);

}  // namespace dsh::app
