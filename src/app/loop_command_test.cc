#include "app/loop_command.h"

#include <gtest/gtest.h>

#include "app/testing/run_cli.h"
#include "base/testing/temp_dir.h"

namespace dsh::app {
namespace {

using dsh::testing::RunCliWith;

TEST(LoopCreateBody, MapsEachScheduleFlagToItsScheduleKind) {
  LoopCreateFlags every{.prompt = "p", .every = 60};
  EXPECT_EQ(*LoopCreateBody(every),
            (Json{{"args", {{"prompt", "p"}, {"schedule", {{"kind", "every"}, {"every_seconds", 60}}}}}}));
  LoopCreateFlags after{.prompt = "p", .after = 30};
  EXPECT_EQ((*LoopCreateBody(after))["args"]["schedule"], (Json{{"kind", "after"}, {"after_seconds", 30}}));
  LoopCreateFlags cron{.prompt = "p", .cron = "0 9 * * *"};
  EXPECT_EQ((*LoopCreateBody(cron))["args"]["schedule"], (Json{{"kind", "cron"}, {"expr", "0 9 * * *"}}));
  cron.tz = "Asia/Shanghai";
  EXPECT_EQ((*LoopCreateBody(cron))["args"]["schedule"],
            (Json{{"kind", "cron"}, {"expr", "0 9 * * *"}, {"tz", "Asia/Shanghai"}}));
}

TEST(LoopCreateBody, TargetPresetAndCallingSessionGoWhereTheToolExpectsThem) {
  LoopCreateFlags flags{.prompt = "review", .every = 60, .session = "new", .preset = "coder", .as = "ses_me"};
  EXPECT_EQ(*LoopCreateBody(flags), (Json{{"args",
                                           {{"prompt", "review"},
                                            {"schedule", {{"kind", "every"}, {"every_seconds", 60}}},
                                            {"session_id", "new"},
                                            {"preset", "coder"}}},
                                          {"session_id", "ses_me"}}));
}

TEST(LoopCreateBody, NeedsExactlyOneScheduleFlagAndTzOnlyWithCron) {
  std::vector<LoopCreateFlags> bad = {
      {.prompt = "p"},
      {.prompt = "p", .every = 1, .after = 1},
      {.prompt = "p", .every = 1, .cron = "* * * * *"},
      {.prompt = "p", .every = 1, .after = 1, .cron = "* * * * *"},
  };
  for (const auto& flags : bad) {
    auto r = LoopCreateBody(flags);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), codes::kInvalidArguments);
    EXPECT_NE(r.status().message().find("exactly one of --every"), std::string::npos) << r.status().message();
  }
  auto tz = LoopCreateBody({.prompt = "p", .every = 60, .tz = "UTC"});
  ASSERT_FALSE(tz.ok());
  EXPECT_NE(tz.status().message().find("--tz"), std::string::npos);
}

TEST(LoopCli, ScheduleFlagMistakesAreUsageErrorsBeforeAnyHostIsContacted) {
  dsh::testing::TempDir dir;
  std::string home = dir.File("home");  // no host runs here
  auto both = RunCliWith({"loop", "create", "x", "--every", "5", "--after", "3", "--home", home.c_str()});
  EXPECT_EQ(both.code, 2);
  EXPECT_EQ(both.err, "error: invalid_arguments: give exactly one of --every SECONDS, --after SECONDS, --cron EXPR\n");
  auto none = RunCliWith({"loop", "create", "x", "--home", home.c_str()});
  EXPECT_EQ(none.code, 2);
  auto not_a_number = RunCliWith({"loop", "create", "x", "--every", "soon", "--home", home.c_str()});
  EXPECT_EQ(not_a_number.code, 2);
  EXPECT_EQ(not_a_number.err.rfind("error: usage: ", 0), 0u) << not_a_number.err;
  auto no_sub = RunCliWith({"loop"});
  EXPECT_EQ(no_sub.code, 2);
  EXPECT_TRUE(no_sub.out.empty());
}

TEST(LoopCli, WithoutARunningHostItFailsWithStatus1) {
  dsh::testing::TempDir dir;
  std::string home = dir.File("home");
  auto r = RunCliWith({"loop", "list", "--home", home.c_str()});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  EXPECT_TRUE(r.out.empty());
}

TEST(DescribeSchedule, SaysTheScheduleInWords) {
  EXPECT_EQ(DescribeSchedule({{"kind", "every"}, {"every_seconds", 60}}), "every 60 s");
  EXPECT_EQ(DescribeSchedule({{"kind", "after"}, {"after_seconds", 30}}), "after 30 s");
  EXPECT_EQ(DescribeSchedule({{"kind", "cron"}, {"expr", "0 9 * * *"}, {"tz", "Asia/Shanghai"}}),
            "cron 0 9 * * * (Asia/Shanghai)");
  EXPECT_EQ(DescribeSchedule({{"kind", "cron"}, {"expr", "@daily"}}), "cron @daily");
}

TEST(FormatLoopList, OneAlignedLinePerLoop) {
  Json views = Json::array({
      {{"loop_id", "loop_a"},
       {"state", "scheduled"},
       {"schedule", {{"kind", "every"}, {"every_seconds", 60}}},
       {"session_id", "ses_0123"},
       {"next_at", 1'767'225'660'000},
       {"prompt", "check\nthe deploy"}},
      {{"loop_id", "loop_bb"},
       {"state", "overdue"},
       {"schedule", {{"kind", "cron"}, {"expr", "0 9 * * *"}, {"tz", "Asia/Shanghai"}}},
       {"session_id", "self"},
       {"prompt", "x"}},
  });
  EXPECT_EQ(FormatLoopList(views),
            "loop_a   scheduled  every 60 s                      ses_0123  2026-01-01T00:01:00.000Z  check the deploy\n"
            "loop_bb  overdue    cron 0 9 * * * (Asia/Shanghai)  self      -                         x\n");
  EXPECT_EQ(FormatLoopList(Json::array()), "no active loops\n");
}

TEST(FormatLoopList, PromptPreviewIsAtMostFiftyCharacters) {
  std::string exact(50, 'a');
  std::string longer;
  for (int i = 0; i < 60; ++i) longer += "é";
  auto line = [](const std::string& prompt) {
    return FormatLoopList(Json::array({{{"loop_id", "l"},
                                        {"state", "scheduled"},
                                        {"schedule", {{"kind", "after"}, {"after_seconds", 1}}},
                                        {"session_id", "s"},
                                        {"prompt", prompt}}}));
  };
  EXPECT_EQ(line(exact), "l  scheduled  after 1 s  s  -  " + exact + "\n");
  std::string cut;
  for (int i = 0; i < 49; ++i) cut += "é";
  EXPECT_EQ(line(longer), "l  scheduled  after 1 s  s  -  " + cut + "…\n");
}

TEST(FormatLoopRuns, OneLinePerRunWithSkipsAndErrors) {
  Json runs = Json::array({
      {{"nominal_at", 1'767'225'720'000},
       {"claimed_at", 1'767'225'720'000},
       {"result", "failed"},
       {"attempts", 2},
       {"skipped", 0},
       {"error", "session gone"}},
      {{"nominal_at", 1'767'225'660'000},
       {"claimed_at", 1'767'225'660'000},
       {"result", "delivered"},
       {"target_session_id", "ses_1"},
       {"attempts", 1},
       {"skipped", 3}},
  });
  EXPECT_EQ(FormatLoopRuns(runs),
            "2026-01-01T00:02:00.000Z  failed     -      attempts 2  error: session gone\n"
            "2026-01-01T00:01:00.000Z  delivered  ses_1  attempts 1  skipped 3\n");
  EXPECT_EQ(FormatLoopRuns(Json::array()), "no runs\n");
}

}  // namespace
}  // namespace dsh::app
