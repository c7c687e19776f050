#include <gtest/gtest.h>

#include <sstream>

#include "app/command.h"
#include "app/testing/run_cli.h"
#include "app/version.h"

namespace dsh::app {
namespace {

using dsh::testing::CliRun;

CliRun RunArgs(std::vector<const char*> args) { return dsh::testing::RunCliWith(std::move(args)); }

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
