// The workspace tools as agents and people call them: through the registry,
// with a call's scope (docs/TOOLS.md).
#include "plugins/workspace/workspace_plugin.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>

#include "base/testing/temp_dir.h"

namespace dsh::plugins::workspace {
namespace {

class WorkspaceToolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(Project() + "/.dsh");
    std::ofstream(Project() + "/.dsh/auth-token") << "secret";
    std::ofstream(Project() + "/notes.txt") << "one\ntwo\n";
    WorkspaceOptions options;
    options.hidden = {Project() + "/.dsh"};
    options.threads = 2;
    options.scope = [this](const agent::ToolContext& ctx) -> Result<CallScope> {
      CallScope scope;
      if (ctx.cwd) scope.cwd = *ctx.cwd;
      return scope;
    };
    ASSERT_TRUE(RegisterWorkspaceTools(tools_, options).ok());
  }
  std::string Project() const { return dir_.File("project"); }
  Result<Json> Invoke(const std::string& name, const Json& args, bool with_cwd = true) {
    agent::ToolContext ctx;
    if (with_cwd) ctx.cwd = Project();
    std::promise<Result<Json>> p;
    tools_.Invoke(name, ctx, args, [&](Result<Json> r) { p.set_value(std::move(r)); });
    return p.get_future().get();
  }

  dsh::testing::TempDir dir_;
  agent::ToolRegistry tools_;
};

TEST_F(WorkspaceToolsTest, TheToolsAreAGroupWithTheirDefaultsAndNeeds) {
  for (const char* name : {"read", "write", "edit", "list", "grep", "bash", "fetch"}) {
    auto tool = tools_.Find(name);
    ASSERT_NE(tool, nullptr) << name;
    EXPECT_EQ(tools_.GroupOf(name), kToolGroup);
    EXPECT_EQ(tool->needs_cwd(), std::string(name) != "fetch") << name;
  }
  for (const char* name : {"read", "list", "grep"}) EXPECT_EQ(tools_.Find(name)->default_permission(), agent::Permission::kAllow);
  for (const char* name : {"write", "edit", "bash", "fetch"}) {
    EXPECT_EQ(tools_.Find(name)->default_permission(), agent::Permission::kAsk) << name;
  }
}

TEST_F(WorkspaceToolsTest, WhatAPersonApprovingACallSees) {
  EXPECT_EQ(tools_.Find("bash")->DescribeCall({{"command", "df -h"}}), (Json{{"summary", "df -h"}}));
  Json edit = tools_.Find("edit")->DescribeCall({{"path", "a.txt"}, {"old_string", "x\ny"}, {"new_string", "z"}});
  EXPECT_EQ(edit["summary"], "edit a.txt");
  EXPECT_EQ(edit["detail"], "-x\n-y\n+z\n");
  Json write = tools_.Find("write")->DescribeCall({{"path", "r.md"}, {"content", "# R\n"}});
  EXPECT_EQ(write["summary"], "write r.md (4 bytes)");
  EXPECT_EQ(tools_.Find("fetch")->DescribeCall({{"url", "https://example.com/"}})["summary"], "GET https://example.com/");
}

TEST_F(WorkspaceToolsTest, ReadsInTheCwdAndNeverTheProfileDirectory) {
  auto read = Invoke("read", {{"path", "notes.txt"}});
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ((*read)["total_lines"], 2);
  for (const auto& [tool, args] : std::vector<std::pair<std::string, Json>>{
           {"read", {{"path", ".dsh/auth-token"}}},
           {"write", {{"path", ".dsh/auth-token"}, {"content", "x"}}},
           {"edit", {{"path", ".dsh/auth-token"}, {"old_string", "secret"}, {"new_string", "x"}}},
           {"list", {{"path", ".dsh"}}},
           {"grep", {{"pattern", "secret"}, {"path", ".dsh"}}}}) {
    auto r = Invoke(tool, args);
    ASSERT_FALSE(r.ok()) << tool;
    EXPECT_EQ(r.status().code(), "path_outside_workspace") << tool << ": " << r.status().ToString();
  }
  std::ifstream token(Project() + "/.dsh/auth-token");
  std::string kept;
  token >> kept;
  EXPECT_EQ(kept, "secret");
  // A search of the whole cwd does not list or match it either.
  auto grep = Invoke("grep", {{"pattern", "secret"}});
  ASSERT_TRUE(grep.ok()) << grep.status().ToString();
  EXPECT_EQ(grep->dump().find("auth-token"), std::string::npos) << grep->dump();
  auto list = Invoke("list", Json::object());
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(list->dump().find("auth-token"), std::string::npos) << list->dump();
}

TEST_F(WorkspaceToolsTest, WithoutACwdOnlyFetchWorks) {
  auto r = Invoke("read", {{"path", "notes.txt"}}, /*with_cwd=*/false);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), "invalid_arguments");
  EXPECT_NE(r.status().message().find("session_id"), std::string::npos) << r.status().message();
  auto bad = Invoke("fetch", {{"url", "file:///etc/passwd"}}, false);
  EXPECT_EQ(bad.status().code(), "invalid_arguments") << bad.status().ToString();
  auto local = Invoke("fetch", {{"url", "http://127.0.0.1:1/"}}, false);
  EXPECT_EQ(local.status().code(), "address_not_allowed") << local.status().ToString();
}

TEST_F(WorkspaceToolsTest, BashAnswersItsExitCodeAndOutputAndRefusesBadArguments) {
  auto r = Invoke("bash", {{"command", "echo hi; exit 3"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)["exit_code"], 3);
  EXPECT_EQ((*r)["output"], "hi\n");
  EXPECT_EQ(Invoke("bash", {{"command", "true"}, {"timeout_seconds", 601}}).status().code(), "invalid_arguments");
  EXPECT_EQ(Invoke("bash", {{"command", "true"}, {"cwd", "/"}}).status().code(), "invalid_arguments");
}

}  // namespace
}  // namespace dsh::plugins::workspace
