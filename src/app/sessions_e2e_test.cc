// End-to-end tests of `dsh sessions …` against a real `dsh web` child:
// the CLI → POST /api/commands → /sessions → the sessions tools.
#include <gtest/gtest.h>

#include "app/testing/web_host_test.h"

namespace dsh::app {
namespace {

class SessionsE2E : public dsh::testing::WebHostTest {
 protected:
  dsh::testing::DshRun Sessions(std::vector<std::string> args) { return Cli("sessions", std::move(args)); }
  std::string GlobalSessionId() {
    Json host = ApiGet("/api/host");
    return host.is_object() ? host.value("global_session_id", "") : "";
  }
};

TEST_F(SessionsE2E, SessionsStatusListsTheGlobalSessionOfTheRunningHost) {
  std::string global = GlobalSessionId();
  ASSERT_FALSE(global.empty());
  auto all = Sessions({"status"});
  EXPECT_EQ(all.code, 0) << all.err;
  EXPECT_NE(all.out.find(global), std::string::npos) << all.out;
  auto exact = Sessions({"status", global});
  EXPECT_EQ(exact.code, 0) << exact.err;
  EXPECT_EQ(exact.out.rfind(global, 0), 0u) << exact.out;  // no title yet: the id is the label
  EXPECT_EQ(std::count(exact.out.begin(), exact.out.end(), '\n'), 1) << exact.out;
  auto read = Sessions({"read", global, "--limit", "5"});
  EXPECT_EQ(read.code, 0) << read.err;
  EXPECT_NE(read.out.find("(Showing messages "), std::string::npos) << read.out;
}

TEST_F(SessionsE2E, ErrorsPrintTheirCodeAndExitStatus) {
  auto bad = Sessions({"status", "--recent", "0"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_EQ(
      bad.err,
      "error: invalid_arguments: /sessions status: `--recent` must be a positive integer (got \"0\")\n");
  auto unknown = Sessions({"list"});
  EXPECT_EQ(unknown.code, 2);
  EXPECT_EQ(unknown.err.rfind("error: invalid_arguments: /sessions: unknown subcommand `list`", 0), 0u)
      << unknown.err;
  auto missing = Sessions({"read", "ses_missing"});
  EXPECT_EQ(missing.code, 1);
  EXPECT_EQ(missing.err.rfind("error: not_found: ", 0), 0u) << missing.err;
}

}  // namespace
}  // namespace dsh::app
