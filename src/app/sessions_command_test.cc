#include "app/sessions_command.h"

#include <gtest/gtest.h>

#include "app/testing/run_cli.h"
#include "base/testing/temp_dir.h"
#include "host/command_registry.h"

namespace dsh::app {
namespace {

using dsh::testing::RunCliWith;

// What /sessions receives from the host's registry for the text built from
// `args`.
std::vector<std::string> RoundTrip(const std::vector<std::string>& args) {
  host::CommandRegistry registry;
  std::vector<std::string> got;
  EXPECT_TRUE(registry
                  .Register("sessions", "",
                            [&](const host::CommandInput& input, const host::CommandCall&,
                                host::CommandRegistry::Done done) {
                              for (const auto& a : input.args) got.push_back(a.value);
                              done(host::CommandResult{});
                            })
                  .ok());
  Status status;
  registry.Run(SessionsCommandText(args), {}, [&](Result<host::CommandResult> r) { status = r.status(); });
  EXPECT_TRUE(status.ok()) << status.ToString();
  return got;
}

TEST(SessionsCommandText, TheHostGetsBackExactlyTheArgv) {
  std::vector<std::vector<std::string>> cases = {
      {"status"},
      {"status", "--recent", "5"},
      {"read", "ses_01kd", "--offset=3", "--limit", "20"},
      {"create", "fix the  parser, it's \"broken\"", "--preset", "coder", "--cwd", "/srv/my app"},
      {"create", R"({"prompt": "it's", "model": {"provider": "p", "model": "m"}})"},
      {"send", "ses_1", "line one\nline two\ttab \\ backslash $HOME `x` ;|&", "--mode", "followup"},
      {"send", "ses_1", "", "--", "--not-a-flag"},
      {"send", "ses_1", "ünïcode ✓ '' \"\""},
  };
  for (const auto& args : cases) {
    EXPECT_EQ(RoundTrip(args), args) << SessionsCommandText(args);
  }
  EXPECT_EQ(SessionsCommandText({"status", "--recent", "5"}), "/sessions status --recent 5");
  EXPECT_EQ(SessionsCommandText({"send", "ses_1", "hi there"}), "/sessions send ses_1 'hi there'");
}

TEST(SessionsCli, NoSubcommandIsAUsageError) {
  dsh::testing::TempDir dir;
  std::string home = dir.File("home");
  auto r = RunCliWith({"sessions", "--home", home.c_str()});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("error: invalid_arguments: missing subcommand"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("usage: dsh sessions status [SESSION_ID] [--recent N]"), std::string::npos) << r.err;
}

TEST(SessionsCli, HelpPrintsTheForms) {
  auto r = RunCliWith({"sessions", "status", "--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("dsh sessions send SESSION_ID MESSAGE [--mode steer|followup]"), std::string::npos)
      << r.out;
}

TEST(SessionsCli, WithoutARunningHostItSaysSoAndExits1) {
  dsh::testing::TempDir dir;
  std::string home = dir.File("home");
  auto r = RunCliWith({"sessions", "status", "--recent", "5", "--home", home.c_str()});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err.rfind("error: unavailable: no dsh host is running", 0), 0u) << r.err;
  auto missing_value = RunCliWith({"sessions", "status", "--home"});
  EXPECT_EQ(missing_value.code, 2);
  EXPECT_EQ(missing_value.err.rfind("error: invalid_arguments: --home needs a value", 0), 0u)
      << missing_value.err;
}

}  // namespace
}  // namespace dsh::app
