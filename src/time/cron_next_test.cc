// Table tests: explicit expected instants for Next() and LatestAtOrBefore(),
// including DST transitions in the zones named by the acceptance criteria.

#include <gtest/gtest.h>

#include "time/cron_expr.h"
#include "time/rfc3339.h"

namespace dsh {
namespace {

WallTime At(const char* rfc3339) {
  auto t = ParseRfc3339(rfc3339);
  EXPECT_TRUE(t.ok()) << rfc3339;
  return t.ok() ? *t : WallTime();
}

TimeZone Zone(const char* name) {
  auto z = ResolveTimeZone(name);
  EXPECT_TRUE(z.ok()) << name;
  return z.ok() ? *z : TimeZone();
}

struct NextCase {
  const char* expr;
  const char* zone;
  const char* after;
  std::vector<const char*> want;  // consecutive occurrences, canonical UTC
};

void ExpectChain(const NextCase& c) {
  auto e = CronExpr::Parse(c.expr);
  ASSERT_TRUE(e.ok()) << c.expr;
  const TimeZone zone = Zone(c.zone);
  WallTime t = At(c.after);
  for (const char* want : c.want) {
    std::optional<WallTime> next = e->Next(t, zone);
    ASSERT_TRUE(next) << c.expr << " in " << c.zone << " after " << FormatRfc3339Utc(t);
    EXPECT_EQ(FormatRfc3339Utc(*next), want) << c.expr << " in " << c.zone << " after " << FormatRfc3339Utc(t);
    t = *next;
  }
}

TEST(CronNext, PlainRulesInUtc) {
  for (const NextCase& c : std::vector<NextCase>{
           {"* * * * *", "UTC", "2026-01-01T00:00:00Z", {"2026-01-01T00:01:00.000Z", "2026-01-01T00:02:00.000Z"}},
           {"* * * * *", "UTC", "2026-01-01T00:00:00.500Z", {"2026-01-01T00:01:00.000Z"}},
           {"* * * * *", "UTC", "2026-01-01T00:00:59.999Z", {"2026-01-01T00:01:00.000Z"}},
           {"*/15 * * * *", "UTC", "2026-12-31T23:50:00Z", {"2027-01-01T00:00:00.000Z", "2027-01-01T00:15:00.000Z"}},
           {"0 9 * * 1-5", "UTC", "2026-01-02T09:00:00Z", {"2026-01-05T09:00:00.000Z", "2026-01-06T09:00:00.000Z"}},
           {"0 0 29 2 *", "UTC", "2026-01-01T00:00:00Z", {"2028-02-29T00:00:00.000Z", "2032-02-29T00:00:00.000Z"}},
           {"0 0 29 2 *", "UTC", "2096-03-01T00:00:00Z", {"2104-02-29T00:00:00.000Z"}},
           {"0 0 31 * *", "UTC", "2026-01-31T00:00:00Z", {"2026-03-31T00:00:00.000Z", "2026-05-31T00:00:00.000Z"}},
           // Both day fields restricted: either matches (Fridays, and the 13th).
           {"0 0 13 * 5", "UTC", "2026-01-01T00:00:00Z",
            {"2026-01-02T00:00:00.000Z", "2026-01-09T00:00:00.000Z", "2026-01-13T00:00:00.000Z",
             "2026-01-16T00:00:00.000Z"}},
           // Day-of-month starts with '*': both must match (1st/11th/21st/31st that is a Monday).
           {"0 0 */10 * 1", "UTC", "2026-01-01T00:00:00Z", {"2026-05-11T00:00:00.000Z", "2026-06-01T00:00:00.000Z"}},
           {"@weekly", "UTC", "2026-01-01T00:00:00Z", {"2026-01-04T00:00:00.000Z", "2026-01-11T00:00:00.000Z"}},
           {"0 12 * * 7", "UTC", "2026-01-01T00:00:00Z", {"2026-01-04T12:00:00.000Z"}},
           {"59 23 31 12 *", "UTC", "2026-06-01T00:00:00Z", {"2026-12-31T23:59:00.000Z", "2027-12-31T23:59:00.000Z"}},
           {"0 0,12 1 */2 *", "UTC", "2026-01-01T00:00:00Z",
            {"2026-01-01T12:00:00.000Z", "2026-03-01T00:00:00.000Z", "2026-03-01T12:00:00.000Z"}},
           {"23 0-20/2 * * *", "UTC", "2026-01-01T20:23:00Z", {"2026-01-02T00:23:00.000Z", "2026-01-02T02:23:00.000Z"}},
       }) {
    ExpectChain(c);
  }
}

TEST(CronNext, NewYorkSpringForward) {
  for (const NextCase& c : std::vector<NextCase>{
           // 02:30 does not exist on 2026-03-08: a fixed time fires once as the gap ends (03:00 EDT).
           {"30 2 * * *", "America/New_York", "2026-03-07T12:00:00Z",
            {"2026-03-08T07:00:00.000Z", "2026-03-09T06:30:00.000Z", "2026-03-10T06:30:00.000Z"}},
           {"0,30 2 * * *", "America/New_York", "2026-03-08T00:00:00Z",
            {"2026-03-08T07:00:00.000Z", "2026-03-09T06:00:00.000Z", "2026-03-09T06:30:00.000Z"}},
           {"0 3 * * *", "America/New_York", "2026-03-08T00:00:00Z",
            {"2026-03-08T07:00:00.000Z", "2026-03-09T07:00:00.000Z"}},
           // Elapsed time: hourly skips the missing hour.
           {"0 * * * *", "America/New_York", "2026-03-08T05:30:00Z",
            {"2026-03-08T06:00:00.000Z", "2026-03-08T07:00:00.000Z", "2026-03-08T08:00:00.000Z"}},
           {"30 * * * *", "America/New_York", "2026-03-08T06:00:00Z",
            {"2026-03-08T06:30:00.000Z", "2026-03-08T07:30:00.000Z"}},
           // Beyond the explicit tz data: 2040-03-11.
           {"30 2 * * *", "America/New_York", "2040-03-10T12:00:00Z",
            {"2040-03-11T07:00:00.000Z", "2040-03-12T06:30:00.000Z"}},
       }) {
    ExpectChain(c);
  }
}

TEST(CronNext, NewYorkFallBack) {
  for (const NextCase& c : std::vector<NextCase>{
           // 01:30 happens twice on 2026-11-01: a fixed time fires at the first (EDT) only.
           {"30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z",
            {"2026-11-01T05:30:00.000Z", "2026-11-02T06:30:00.000Z"}},
           {"0 1 * * *", "America/New_York", "2026-11-01T05:00:00Z", {"2026-11-02T06:00:00.000Z"}},
           {"0 2 * * *", "America/New_York", "2026-11-01T00:00:00Z", {"2026-11-01T07:00:00.000Z"}},
           // Elapsed time: both passes.
           {"*/30 * * * *", "America/New_York", "2026-11-01T04:45:00Z",
            {"2026-11-01T05:00:00.000Z", "2026-11-01T05:30:00.000Z", "2026-11-01T06:00:00.000Z",
             "2026-11-01T06:30:00.000Z", "2026-11-01T07:00:00.000Z"}},
           {"30 1 * 11 *", "America/New_York", "2026-11-01T05:30:00Z", {"2026-11-02T06:30:00.000Z"}},
       }) {
    ExpectChain(c);
  }
}

TEST(CronNext, London) {
  for (const NextCase& c : std::vector<NextCase>{
           {"30 1 * * *", "Europe/London", "2026-03-28T12:00:00Z",
            {"2026-03-29T01:00:00.000Z", "2026-03-30T00:30:00.000Z"}},
           {"30 1 * * *", "Europe/London", "2026-10-24T12:00:00Z",
            {"2026-10-25T00:30:00.000Z", "2026-10-26T01:30:00.000Z"}},
           {"0 9 * * 1-5", "Europe/London", "2026-03-27T12:00:00Z",
            {"2026-03-30T08:00:00.000Z", "2026-03-31T08:00:00.000Z"}},
       }) {
    ExpectChain(c);
  }
}

TEST(CronNext, LordHoweShiftsByThirtyMinutes) {
  for (const NextCase& c : std::vector<NextCase>{
           // Gap 02:00-02:30 on 2026-10-04.
           {"15 2 * * *", "Australia/Lord_Howe", "2026-10-03T00:00:00Z",
            {"2026-10-03T15:30:00.000Z", "2026-10-04T15:15:00.000Z"}},
           {"*/15 * * * *", "Australia/Lord_Howe", "2026-10-03T15:10:00Z",
            {"2026-10-03T15:15:00.000Z", "2026-10-03T15:30:00.000Z", "2026-10-03T15:45:00.000Z"}},
           // Overlap 01:30-02:00 on 2026-04-05.
           {"45 1 * * *", "Australia/Lord_Howe", "2026-04-04T00:00:00Z",
            {"2026-04-04T14:45:00.000Z", "2026-04-05T15:15:00.000Z"}},
           {"*/15 * * * *", "Australia/Lord_Howe", "2026-04-04T14:40:00Z",
            {"2026-04-04T14:45:00.000Z", "2026-04-04T15:00:00.000Z", "2026-04-04T15:15:00.000Z",
             "2026-04-04T15:30:00.000Z"}},
       }) {
    ExpectChain(c);
  }
}

TEST(CronNext, TransitionsAtMidnight) {
  for (const NextCase& c : std::vector<NextCase>{
           // Cairo: 2026-04-24 00:00 -> 01:00; 2026-10-29 24:00 -> 23:00.
           {"0 0 * * *", "Africa/Cairo", "2026-04-23T12:00:00Z",
            {"2026-04-23T22:00:00.000Z", "2026-04-24T21:00:00.000Z"}},
           {"30 23 * * *", "Africa/Cairo", "2026-10-29T12:00:00Z",
            {"2026-10-29T20:30:00.000Z", "2026-10-30T21:30:00.000Z"}},
           {"*/30 * * * *", "Africa/Cairo", "2026-10-29T20:15:00Z",
            {"2026-10-29T20:30:00.000Z", "2026-10-29T21:00:00.000Z", "2026-10-29T21:30:00.000Z",
             "2026-10-29T22:00:00.000Z"}},
           // Hebron 2021: 2021-03-27 00:00 -> 01:00; 2021-10-29 01:00 -> 00:00.
           {"0 0 * * *", "Asia/Hebron", "2021-03-26T12:00:00Z",
            {"2021-03-26T22:00:00.000Z", "2021-03-27T21:00:00.000Z"}},
           {"0 0 * * *", "Asia/Hebron", "2021-10-28T12:00:00Z",
            {"2021-10-28T21:00:00.000Z", "2021-10-29T22:00:00.000Z"}},
           {"30 * * * *", "Asia/Hebron", "2021-10-28T21:00:00Z",
            {"2021-10-28T21:30:00.000Z", "2021-10-28T22:30:00.000Z", "2021-10-28T23:30:00.000Z"}},
       }) {
    ExpectChain(c);
  }
}

TEST(CronNext, ApiaSkippedADayAndKiritimatiIsUtcPlus14) {
  for (const NextCase& c : std::vector<NextCase>{
           // 2011-12-30 did not exist in Samoa: its 09:00 fires as the gap ends (12-31 00:00 +14).
           {"0 9 * * *", "Pacific/Apia", "2011-12-29T00:00:00Z",
            {"2011-12-29T19:00:00.000Z", "2011-12-30T10:00:00.000Z", "2011-12-30T19:00:00.000Z"}},
           {"0 */6 * * *", "Pacific/Apia", "2011-12-29T20:00:00Z",
            {"2011-12-29T22:00:00.000Z", "2011-12-30T04:00:00.000Z", "2011-12-30T10:00:00.000Z",
             "2011-12-30T16:00:00.000Z"}},
           {"0 0 30 12 *", "Pacific/Apia", "2011-06-01T00:00:00Z", {"2011-12-30T10:00:00.000Z", "2012-12-29T10:00:00.000Z"}},
           {"0 0 1 1 *", "Pacific/Kiritimati", "2025-06-01T00:00:00Z",
            {"2025-12-31T10:00:00.000Z", "2026-12-31T10:00:00.000Z"}},
           {"0 9 * * *", "Pacific/Kiritimati", "2026-01-01T00:00:00Z",
            {"2026-01-01T19:00:00.000Z", "2026-01-02T19:00:00.000Z"}},
       }) {
    ExpectChain(c);
  }
}

TEST(CronNext, NoOccurrenceBeyondTheLastRepresentableYear) {
  auto e = CronExpr::Parse("0 0 29 2 *");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(FormatRfc3339Utc(*e->Next(At("2260-03-01T00:00:00Z"), TimeZone())), "2264-02-29T00:00:00.000Z");
  EXPECT_FALSE(e->Next(At("9996-02-29T00:00:00Z"), TimeZone()));  // 9999 is no leap year; 10000 is out of range
}

struct LatestCase {
  const char* expr;
  const char* zone;
  const char* now;
  const char* want;
};

TEST(CronLatestAtOrBefore, FindsTheOneOccurrenceToDeliver) {
  for (const LatestCase& c : std::vector<LatestCase>{
           {"0 9 * * *", "UTC", "2026-01-10T08:59:59Z", "2026-01-09T09:00:00.000Z"},
           {"0 9 * * *", "UTC", "2026-01-10T09:00:00Z", "2026-01-10T09:00:00.000Z"},
           {"*/5 * * * *", "America/New_York", "2026-05-01T12:03:20Z", "2026-05-01T12:00:00.000Z"},
           {"0 0 29 2 *", "UTC", "2027-06-01T00:00:00Z", "2024-02-29T00:00:00.000Z"},
           {"0 0 29 2 *", "UTC", "2103-06-01T00:00:00Z", "2096-02-29T00:00:00.000Z"},
           {"30 2 * * *", "America/New_York", "2026-03-08T08:00:00Z", "2026-03-08T07:00:00.000Z"},
           {"30 1 * * *", "America/New_York", "2026-11-01T07:00:00Z", "2026-11-01T05:30:00.000Z"},
           {"30 * * * *", "America/New_York", "2026-11-01T06:45:00Z", "2026-11-01T06:30:00.000Z"},
           {"0 9 * * *", "Pacific/Apia", "2011-12-30T12:00:00Z", "2011-12-30T10:00:00.000Z"},
           {"15 2 * * *", "Australia/Lord_Howe", "2026-10-03T15:40:00Z", "2026-10-03T15:30:00.000Z"},
       }) {
    auto e = CronExpr::Parse(c.expr);
    ASSERT_TRUE(e.ok()) << c.expr;
    auto got = e->LatestAtOrBefore(At(c.now), Zone(c.zone));
    ASSERT_TRUE(got) << c.expr;
    EXPECT_EQ(FormatRfc3339Utc(*got), c.want) << c.expr << " in " << c.zone << " at " << c.now;
  }
}

// A loop down for ten years recovers with one call, not ten years of steps:
// the answer is the same occurrence that chaining Next() would reach last.
TEST(CronLatestAtOrBefore, TenYearsOfDowntimeRecoverAtOnce) {
  auto e = CronExpr::Parse("*/5 * * * *");
  ASSERT_TRUE(e.ok());
  const TimeZone ny = Zone("America/New_York");
  const WallTime last_delivery = At("2016-03-01T00:00:00Z");
  const WallTime now = At("2026-03-08T07:12:34Z");
  auto latest = e->LatestAtOrBefore(now, ny);
  ASSERT_TRUE(latest);
  EXPECT_EQ(FormatRfc3339Utc(*latest), "2026-03-08T07:10:00.000Z");
  EXPECT_GT(*latest, last_delivery);
  EXPECT_GT(*e->Next(*latest, ny), now);
  EXPECT_EQ(FormatRfc3339Utc(*e->Next(*latest, ny)), "2026-03-08T07:15:00.000Z");
}

}  // namespace
}  // namespace dsh
