#include "time/cron_expr.h"

#include <gtest/gtest.h>

namespace dsh {
namespace {

uint64_t Bits(std::initializer_list<int> values) {
  uint64_t b = 0;
  for (int v : values) b |= uint64_t{1} << v;
  return b;
}

TEST(CronParse, FieldsBecomeBitsets) {
  auto e = CronExpr::Parse("*/15 9-17 1,15 jan-MAR Mon-fri");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->minutes(), Bits({0, 15, 30, 45}));
  EXPECT_EQ(e->hours(), Bits({9, 10, 11, 12, 13, 14, 15, 16, 17}));
  EXPECT_EQ(e->days_of_month(), Bits({1, 15}));
  EXPECT_EQ(e->months(), Bits({1, 2, 3}));
  EXPECT_EQ(e->days_of_week(), Bits({1, 2, 3, 4, 5}));
  EXPECT_TRUE(e->follows_elapsed_time());
  EXPECT_FALSE(e->day_of_month_starts_with_star());

  auto steps = CronExpr::Parse("1-30/2 0-20/2 */10 */3 *");
  ASSERT_TRUE(steps.ok());
  EXPECT_EQ(steps->minutes(), Bits({1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29}));
  EXPECT_EQ(steps->hours(), Bits({0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20}));
  EXPECT_EQ(steps->days_of_month(), Bits({1, 11, 21, 31}));
  EXPECT_EQ(steps->months(), Bits({1, 4, 7, 10}));
  EXPECT_TRUE(steps->day_of_month_starts_with_star());
  EXPECT_FALSE(steps->follows_elapsed_time());
}

TEST(CronParse, SevenAndZeroAreSunday) {
  EXPECT_EQ(*CronExpr::Parse("0 0 * * 7"), *CronExpr::Parse("0 0 * * 0"));
  EXPECT_EQ(*CronExpr::Parse("0 0 * * SUN"), *CronExpr::Parse("0 0 * * 0"));
  EXPECT_EQ(CronExpr::Parse("0 0 * * 5-7")->days_of_week(), Bits({0, 5, 6}));
  EXPECT_EQ(CronExpr::Parse("0 0 * * 0-7")->days_of_week(), Bits({0, 1, 2, 3, 4, 5, 6}));
}

TEST(CronParse, MacrosExpand) {
  EXPECT_EQ(*CronExpr::Parse("@yearly"), *CronExpr::Parse("0 0 1 1 *"));
  EXPECT_EQ(*CronExpr::Parse("@annually"), *CronExpr::Parse("0 0 1 1 *"));
  EXPECT_EQ(*CronExpr::Parse("@monthly"), *CronExpr::Parse("0 0 1 * *"));
  EXPECT_EQ(*CronExpr::Parse("@weekly"), *CronExpr::Parse("0 0 * * 0"));
  EXPECT_EQ(*CronExpr::Parse("@daily"), *CronExpr::Parse("0 0 * * *"));
  EXPECT_EQ(*CronExpr::Parse("@midnight"), *CronExpr::Parse("0 0 * * *"));
  EXPECT_EQ(*CronExpr::Parse(" @HOURLY "), *CronExpr::Parse("0 * * * *"));
  EXPECT_EQ(*CronExpr::Parse("\t0  9 *\t* 1-5 "), *CronExpr::Parse("0 9 * * 1-5"));
}

TEST(CronParse, RejectsWithAMessageNamingTheField) {
  struct Case {
    const char* text;
    const char* code;
    const char* says;
  };
  for (const Case& c : {
           Case{"", "invalid_cron", "empty"},
           Case{"   ", "invalid_cron", "empty"},
           Case{"0 0 * * * *", "invalid_cron", "got 6; a seconds or year field"},
           Case{"0 0 * *", "invalid_cron", "expected 5 fields"},
           Case{"60 * * * *", "invalid_cron", "minute field \"60\": value 60 is out of range (0-59)"},
           Case{"* 24 * * *", "invalid_cron", "hour field \"24\": value 24 is out of range (0-23)"},
           Case{"* * 0 * *", "invalid_cron", "day-of-month field \"0\": value 0 is out of range (1-31)"},
           Case{"* * 32 * *", "invalid_cron", "day-of-month field"},
           Case{"* * * 13 *", "invalid_cron", "month field \"13\""},
           Case{"* * * * 8", "invalid_cron", "day-of-week field \"8\": value 8 is out of range (0-7)"},
           Case{"5-1 * * * *", "invalid_cron", "minute field \"5-1\": range 5-1 is reversed"},
           Case{"*/0 * * * *", "invalid_cron", "minute field \"*/0\": step 0 is out of range (1-60)"},
           Case{"*/61 * * * *", "invalid_cron", "step 61 is out of range"},
           Case{"5/15 * * * *", "invalid_cron", "a step needs a range or '*'"},
           Case{"*/ * * * *", "invalid_cron", "is not a number"},
           Case{"0 0 L * *", "invalid_cron", "day-of-month field \"L\": \"L\" is not supported"},
           Case{"0 0 15W * *", "invalid_cron", "not supported"},
           Case{"0 0 LW * *", "invalid_cron", "not supported"},
           Case{"0 0 * * 5L", "invalid_cron", "day-of-week field"},
           Case{"0 0 * * 1#2", "invalid_cron", "not supported"},
           Case{"0 0 ? * 1", "invalid_cron", "day-of-month field \"?\""},
           Case{"0 0 * * mon#2", "invalid_cron", "not supported"},
           Case{"0 0 * * monday", "invalid_cron", "unknown name \"monday\" (use sun-sat)"},
           Case{"0 0 * foo *", "invalid_cron", "unknown name \"foo\" (use jan-dec)"},
           Case{"0 jan * * *", "invalid_cron", "hour field \"jan\": \"jan\" is not a number"},
           Case{"1,,2 * * * *", "invalid_cron", "empty list element"},
           Case{"1, * * * *", "invalid_cron", "empty list element"},
           Case{"-5 * * * *", "invalid_cron", "missing value"},
           Case{"1- * * * *", "invalid_cron", "missing value"},
           Case{"99999 * * * *", "invalid_cron", "out of range"},
           Case{"@reboot", "invalid_cron", "unknown macro \"@reboot\""},
           Case{"@daily 5", "invalid_cron", "unknown macro"},
           Case{"0 0 30 2 *", "cron_never_fires", "never fires"},
           Case{"0 0 31 4,6,9,11 *", "cron_never_fires", "never fires"},
           Case{"0 0 30,31 feb *", "cron_never_fires", "never fires"},
           Case{"0 0 31 2 */2", "cron_never_fires", "never fires"},
       }) {
    auto e = CronExpr::Parse(c.text);
    ASSERT_FALSE(e.ok()) << "accepted: " << c.text;
    EXPECT_EQ(e.status().code(), c.code) << c.text;
    EXPECT_NE(e.status().message().find(c.says), std::string::npos) << c.text << " -> " << e.status().message();
  }
}

TEST(CronParse, RareButPossibleRulesAreAccepted) {
  for (const char* text : {"0 0 29 2 *", "0 0 31 * *", "0 0 30 2 mon", "0 0 31 4 1-5", "59 23 31 12 *",
                           "0 0 * * 0,7", "*/60 * * * *", "0 0 */31 * *"}) {
    EXPECT_TRUE(CronExpr::Parse(text).ok()) << text << ": " << CronExpr::Parse(text).status().ToString();
  }
}

TEST(CronDescribe, ReadsLikeEnglish) {
  struct Case {
    const char* text;
    const char* want;
  };
  for (const Case& c : {
           Case{"0 9 * * 1-5", "At 09:00, Monday through Friday"},
           Case{"* * * * *", "Every minute"},
           Case{"*/5 * * * *", "Every 5 minutes"},
           Case{"*/15 9-17 * * *", "Every 15 minutes, between 09:00 and 17:59"},
           Case{"30 2 * * *", "At 02:30"},
           Case{"@daily", "At 00:00"},
           Case{"@hourly", "At the start of every hour"},
           Case{"@weekly", "At 00:00, only on Sunday"},
           Case{"@yearly", "At 00:00, on day 1 of the month, only in January"},
           Case{"0 0 1 * *", "At 00:00, on day 1 of the month"},
           Case{"15 14 1 * *", "At 14:15, on day 1 of the month"},
           Case{"0 22 * * 1-5", "At 22:00, Monday through Friday"},
           Case{"23 0-20/2 * * *", "At 23 minutes past the hour, every 2 hours from 00:00 through 20:00"},
           Case{"5 4 * * sun", "At 04:05, only on Sunday"},
           Case{"0 0,12 1 */2 *", "At 00:00 and 12:00, on day 1 of the month, every 2 months"},
           Case{"0 9 29 2 *", "At 09:00, on day 29 of the month, only in February"},
           Case{"0 0 13 * 5", "At 00:00, on day 13 of the month or on Friday"},
           Case{"0 8 * * 1,3,5", "At 08:00, only on Monday, Wednesday and Friday"},
           Case{"5 * * * *", "At 5 minutes past every hour"},
           Case{"0,30 * * * *", "Every 30 minutes"},
           Case{"0,20 * * * *", "At minutes 0 and 20 past every hour"},
           Case{"10-50/20 * * * *", "At minutes 10, 30 and 50 past every hour"},
           Case{"* 9 * * *", "Every minute, between 09:00 and 09:59"},
           Case{"0 9 1,15 * *", "At 09:00, on days 1 and 15 of the month"},
           Case{"0 9 * 6-8 *", "At 09:00, June through August"},
           Case{"0 0 */2 * 1", "At 00:00, every 2 days of the month, starting on day 1, if it is a Monday"},
       }) {
    auto e = CronExpr::Parse(c.text);
    ASSERT_TRUE(e.ok()) << c.text;
    EXPECT_EQ(e->Describe(), c.want) << c.text;
  }
}

}  // namespace
}  // namespace dsh
