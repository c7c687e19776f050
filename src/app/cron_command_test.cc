#include "app/cron_command.h"

#include <gtest/gtest.h>

#include <sstream>

#include "app/testing/run_cli.h"
#include "time/rfc3339.h"

namespace dsh::app {
namespace {

using dsh::testing::CliRun;

CliRun RunDsh(std::vector<const char*> args, const char* now = "2026-03-07T12:00:00Z") {
  return dsh::testing::RunCliWith(std::move(args), *ParseRfc3339(now));
}

TEST(CronCommand, NextPrintsOccurrencesWithTheZonesOffset) {
  CliRun r = RunDsh({"cron", "next", "30 2 * * *", "--tz", "America/New_York", "--count", "3"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "2026-03-08T03:00:00-04:00\n2026-03-09T02:30:00-04:00\n2026-03-10T02:30:00-04:00\n");
  EXPECT_EQ(r.err, "");
}

TEST(CronCommand, NextStartsAfterFromAndDefaultsToFive) {
  CliRun r = RunDsh({"cron", "next", "30 1 * * *", "--tz", "US/Eastern", "--from", "2026-11-01T05:30:00Z"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "2026-11-02T01:30:00-05:00\n2026-11-03T01:30:00-05:00\n2026-11-04T01:30:00-05:00\n"
            "2026-11-05T01:30:00-05:00\n2026-11-06T01:30:00-05:00\n");
}

TEST(CronCommand, NextUsesTheInjectedClockByDefault) {
  CliRun r = RunDsh({"cron", "next", "@hourly", "--tz", "UTC", "--count", "2"}, "2030-06-01T10:59:59.999Z");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "2030-06-01T11:00:00+00:00\n2030-06-01T12:00:00+00:00\n");
}

TEST(CronCommand, DescribePrintsEnglish) {
  CliRun r = RunDsh({"cron", "describe", "0 9 * * 1-5"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "At 09:00, Monday through Friday\n");
}

TEST(CronCommand, BadInputExitsTwoWithCodeAndMessage) {
  struct Case {
    std::vector<const char*> args;
    const char* err_prefix;
  };
  for (const Case& c : std::vector<Case>{
           {{"cron", "next", "0 0 30 2 *"}, "error: cron_never_fires: "},
           {{"cron", "next", "61 * * * *", "--tz", "UTC"}, "error: invalid_cron: minute field \"61\""},
           {{"cron", "next", "* * * * *", "--tz", "CST"}, "error: invalid_time_zone: time zone \"CST\""},
           {{"cron", "next", "* * * * *", "--from", "2026-03-08 02:30"}, "error: invalid_timestamp: --from: "},
           {{"cron", "next", "* * * * *", "--count", "0"}, "error: invalid_arguments: --count must be between 1"},
           {{"cron", "describe", "0 0 L * *"}, "error: invalid_cron: day-of-month field"},
           {{"cron", "next"}, "error: usage: "},
           {{"cron"}, "error: usage: "},
       }) {
    CliRun r = RunDsh(c.args);
    EXPECT_EQ(r.code, 2) << c.err_prefix;
    EXPECT_EQ(r.err.rfind(c.err_prefix, 0), 0u) << r.err;
    EXPECT_EQ(r.out, "");
  }
}

}  // namespace
}  // namespace dsh::app
