#pragma once

#include <string>
#include <vector>

#include "app/command.h"

namespace dsh::app {

// `dsh sessions status|read|create|send ARGS... [--home DIR] [--session ID]`:
// runs `/sessions ARGS...` on the running host of the profile through
// `POST /api/commands` (with `--session` as the calling session) and prints
// the command's text. ARGS are passed on exactly as given (flags included;
// see docs/SESSIONS.md); `--home` and `--session` are this CLI's own and are
// taken out wherever they appear before a `--`.
void AddSessionsCommand(CLI::App& root, CommandContext& ctx);

// "/sessions" followed by each of `args` quoted so that the host's command
// line splitter (host::SplitCommandLine) gives back exactly `args`.
std::string SessionsCommandText(const std::vector<std::string>& args);

}  // namespace dsh::app
