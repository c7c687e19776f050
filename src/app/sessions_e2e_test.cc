// End-to-end tests of `dsh sessions …` against a real `dsh web` child:
// the CLI → POST /api/commands → /sessions → the sessions tools.
#include <gtest/gtest.h>

#include "app/testing/dsh_process.h"
#include "base/json.h"
#include "base/testing/temp_dir.h"
#include "server/http_client.h"

namespace dsh::app {
namespace {

using dsh::testing::DshProcess;
using dsh::testing::RunDsh;

class SessionsE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    web_ = std::make_unique<DshProcess>(
        DSH_BINARY, std::vector<std::string>{"web", "--home", Home(), "--port", "0"}, dir_.File("web.log"),
        std::map<std::string, std::string>{{"DSH_TOKEN", "t0ken"}});
    url_ = web_->WaitListening();
    ASSERT_FALSE(url_.empty()) << web_->Stderr();
  }

  std::string Home() const { return dir_.File("home"); }
  dsh::testing::DshRun Sessions(std::vector<std::string> args) {
    args.insert(args.begin(), "sessions");
    args.insert(args.end(), {"--home", Home()});
    return RunDsh(DSH_BINARY, std::move(args), dir_.File("cli.log"));
  }
  std::string GlobalSessionId() {
    auto r = server::HttpRequestSync("GET", url_ + "/api/host", "", {{"Authorization", "Bearer t0ken"}});
    EXPECT_TRUE(r.ok() && r->status == 200) << (r.ok() ? r->body : r.status().ToString());
    if (!r.ok()) return "";
    Json host = Json::parse(r->body, nullptr, false);
    return host.value("global_session_id", "");
  }

  dsh::testing::TempDir dir_;
  std::unique_ptr<DshProcess> web_;
  std::string url_;
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
