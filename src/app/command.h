#pragma once

#include <CLI/CLI.hpp>

#include <iosfwd>

#include "base/clock.h"
#include "base/status.h"

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

// The exit status for an error from the host: kExitUsage when the caller's
// input was wrong (a 400 code: invalid_arguments, invalid_cron,
// cron_never_fires, ...), else kExitFailure.
int ExitCodeFor(const Status& error);

// Parses argv and runs the selected command; returns the process exit status.
int RunCli(int argc, const char* const* argv, CommandContext& ctx);

}  // namespace dsh::app
