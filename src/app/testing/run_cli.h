#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "app/command.h"
#include "base/clock.h"

namespace dsh::testing {

// Runs the CLI in-process with a fake clock at `now` and captured output.
struct CliRun {
  int code;
  std::string out;
  std::string err;
};

inline CliRun RunCliWith(std::vector<const char*> args, WallTime now = FromUnixMillis(1'767'225'600'000)) {
  args.insert(args.begin(), "dsh");
  std::ostringstream out, err;
  FakeClock clock(now);
  app::CommandContext ctx{out, err, clock};
  int code = app::RunCli(static_cast<int>(args.size()), args.data(), ctx);
  return {code, out.str(), err.str()};
}

}  // namespace dsh::testing
