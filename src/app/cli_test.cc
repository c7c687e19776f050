#include <gtest/gtest.h>

#include <sstream>

#include "app/command.h"
#include "app/version.h"

namespace dsh::app {
namespace {

struct CliRun {
  int code;
  std::string out;
  std::string err;
};

CliRun RunArgs(std::vector<const char*> args) {
  args.insert(args.begin(), "dsh");
  std::ostringstream out, err;
  FakeClock clock;
  CommandContext ctx{out, err, clock};
  int code = RunCli(static_cast<int>(args.size()), args.data(), ctx);
  return {code, out.str(), err.str()};
}

TEST(Cli, PrintsVersion) {
  CliRun r = RunArgs({"--version"});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, std::string("dsh ") + kVersion + "\n");
}

TEST(Cli, UnknownCommandIsAUsageError) {
  CliRun r = RunArgs({"frobnicate"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.rfind("error: usage: ", 0), 0u) << r.err;
}

}  // namespace
}  // namespace dsh::app
