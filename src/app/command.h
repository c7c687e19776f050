#pragma once

#include <CLI/CLI.hpp>

#include <iosfwd>

#include "base/clock.h"

namespace dsh::app {

// What every CLI command gets: where to print, the clock, and where to leave
// its exit status. Commands register themselves on the root CLI11 app with an
// `AddXCommand(CLI::App& root, CommandContext& ctx)` function and set
// `ctx.exit_code` from their callback. Exit status conventions:
// 0 success, 1 runtime failure (host unreachable, tool error), 2 bad input
// (usage, invalid arguments); errors print `error: CODE: message` on stderr.
struct CommandContext {
  std::ostream& out;
  std::ostream& err;
  const Clock& clock;
  int exit_code = 0;
};

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// Parses argv and runs the selected command; returns the process exit status.
int RunCli(int argc, const char* const* argv, CommandContext& ctx);

}  // namespace dsh::app
