// End-to-end test of `dsh loop …` against a real `dsh web` child: the CLI →
// POST /api/tools/loop_* and GET /api/loops… → the loop plugin's registry.
#include <gtest/gtest.h>

#include "app/testing/web_host_test.h"

namespace dsh::app {
namespace {

class LoopE2E : public dsh::testing::WebHostTest {
 protected:
  dsh::testing::DshRun Loop(std::vector<std::string> args) { return Cli("loop", std::move(args)); }
};

TEST_F(LoopE2E, CreateListRunsAndDeleteALoopThroughTheCli) {
  auto created = Loop({"create", "check the deploy", "--cron", "0 9 * * *", "--tz", "Asia/Shanghai", "--session", "self"});
  ASSERT_EQ(created.code, 0) << created.err;
  Json view = Json::parse(created.out, nullptr, false);
  ASSERT_TRUE(view.is_object()) << created.out;
  std::string id = view.value("loop_id", "");
  ASSERT_FALSE(id.empty()) << created.out;
  EXPECT_EQ(view["schedule"], (Json{{"kind", "cron"}, {"expr", "0 9 * * *"}, {"tz", "Asia/Shanghai"}}));
  EXPECT_EQ(view["session_id"], "self");
  EXPECT_EQ(view["state"], "scheduled");

  auto listed = Loop({"list"});
  ASSERT_EQ(listed.code, 0) << listed.err;
  EXPECT_EQ(std::count(listed.out.begin(), listed.out.end(), '\n'), 1) << listed.out;
  EXPECT_EQ(listed.out.rfind(id + "  scheduled  cron 0 9 * * * (Asia/Shanghai)  self  ", 0), 0u) << listed.out;
  EXPECT_NE(listed.out.find("check the deploy"), std::string::npos) << listed.out;

  // The automation panel's routes see the same loop.
  Json panel = ApiGet("/api/loops?session_id=global");
  ASSERT_EQ(panel["loops"].size(), 1u) << panel.dump();
  EXPECT_EQ(panel["loops"][0]["loop_id"], id);
  auto runs = Loop({"runs", id, "--limit", "5"});
  EXPECT_EQ(runs.code, 0) << runs.err;
  EXPECT_EQ(runs.out, "no runs\n");

  auto deleted = Loop({"delete", id});
  EXPECT_EQ(deleted.code, 0) << deleted.err;
  EXPECT_EQ(deleted.out, "deleted " + id + "\n");
  auto empty = Loop({"list"});
  EXPECT_EQ(empty.code, 0) << empty.err;
  EXPECT_EQ(empty.out, "no active loops\n");
  EXPECT_TRUE(ApiGet("/api/loops?session_id=global")["loops"].empty());

  auto again = Loop({"delete", id});
  EXPECT_EQ(again.code, 1);
  EXPECT_EQ(again.err.rfind("error: unknown_loop: ", 0), 0u) << again.err;
}

TEST_F(LoopE2E, InvalidArgumentsFromTheHostExitWithStatus2) {
  auto bad = Loop({"create", "x", "--every", "0", "--session", "self"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_EQ(bad.err.rfind("error: invalid_arguments: ", 0), 0u) << bad.err;
  EXPECT_NE(bad.err.find("every_seconds"), std::string::npos) << bad.err;
  auto no_caller = Loop({"create", "x", "--every", "60"});
  EXPECT_EQ(no_caller.code, 2) << "an omitted target needs a calling session (--as)";
  EXPECT_EQ(no_caller.err.rfind("error: invalid_arguments: ", 0), 0u) << no_caller.err;
}

}  // namespace
}  // namespace dsh::app
