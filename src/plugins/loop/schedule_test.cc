#include "plugins/loop/schedule.h"

#include <gtest/gtest.h>

#include "base/clock.h"
#include "time/rfc3339.h"

namespace dsh::plugins::loop {
namespace {

int64_t At(const char* rfc3339) {
  auto t = ParseRfc3339(rfc3339);
  EXPECT_TRUE(t.ok()) << rfc3339;
  return t.ok() ? ToUnixMillis(*t) : 0;
}

Result<Schedule> Decode(const Json& v) {
  Schedule s;
  DSH_RETURN_IF_ERROR(DecodeSchedule(v, "schedule", s));
  return s;
}

void ExpectRejected(const Json& v, const std::string& code, const std::string& mention) {
  auto r = Decode(v);
  ASSERT_FALSE(r.ok()) << "accepted " << v.dump();
  EXPECT_EQ(r.status().code(), code) << v.dump() << ": " << r.status().ToString();
  EXPECT_NE(r.status().message().find(mention), std::string::npos) << v.dump() << ": " << r.status().message();
}

Timetable Make(const Json& v, const TimeZone& host = TimeZone::Utc()) {
  auto s = Decode(v);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  auto t = Timetable::Make(*s, host);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return *t;
}

TEST(LoopSchedule, EachKindDecodesAndPrintsItsDocumentedShape) {
  for (const Json& v : {Json{{"kind", "every"}, {"every_seconds", 60}}, Json{{"kind", "after"}, {"after_seconds", 5}},
                        Json{{"kind", "cron"}, {"expr", "0 9 * * 1-5"}},
                        Json{{"kind", "cron"}, {"expr", "*/5 * * * *"}, {"tz", "Asia/Shanghai"}}}) {
    auto s = Decode(v);
    ASSERT_TRUE(s.ok()) << v.dump() << ": " << s.status().ToString();
    EXPECT_EQ(ScheduleToJson(*s), v);
  }
  // A zone link is stored under its canonical name.
  EXPECT_EQ(Decode({{"kind", "cron"}, {"expr", "0 9 * * *"}, {"tz", "US/Eastern"}})->tz,
            std::optional<std::string>("America/New_York"));
}

TEST(LoopSchedule, EveryAfterAndCronAcceptOnlyTheirDocumentedFields) {
  ExpectRejected({{"kind", "every"}, {"after_seconds", 5}}, "invalid_arguments", "after_seconds");
  ExpectRejected({{"kind", "every"}, {"every_seconds", 5}, {"tz", "UTC"}}, "invalid_arguments", "tz");
  ExpectRejected({{"kind", "after"}, {"every_seconds", 5}}, "invalid_arguments", "every_seconds");
  ExpectRejected({{"kind", "after"}, {"after_seconds", 5}, {"expr", "* * * * *"}}, "invalid_arguments", "expr");
  ExpectRejected({{"kind", "cron"}, {"expr", "* * * * *"}, {"every_seconds", 5}}, "invalid_arguments",
                 "every_seconds");
  ExpectRejected({{"kind", "every"}}, "invalid_arguments", "schedule.every_seconds");
  ExpectRejected({{"kind", "after"}}, "invalid_arguments", "schedule.after_seconds");
  ExpectRejected({{"kind", "cron"}}, "invalid_arguments", "schedule.expr");
  ExpectRejected({{"kind", "cron"}, {"expr", ""}}, "invalid_arguments", "schedule.expr");
  ExpectRejected({{"every_seconds", 5}}, "invalid_arguments", "schedule.kind");
  ExpectRejected({{"kind", "hourly"}}, "invalid_arguments", "schedule.kind");
  ExpectRejected({{"kind", "Every"}, {"every_seconds", 5}}, "invalid_arguments", "schedule.kind");
  ExpectRejected({{"kind", 1}}, "invalid_arguments", "schedule.kind");
  ExpectRejected("every 5", "invalid_arguments", "schedule");
}

TEST(LoopSchedule, EveryDurationUsesSecondsAndRejectsZeroNegativeFractionalAndUnsafeValues) {
  for (const char* kind : {"every", "after"}) {
    std::string field = std::string(kind) + "_seconds";
    for (const Json& bad : {Json(0), Json(-1), Json(1.5), Json(9'007'199'254'740'992.0), Json("60"), Json(nullptr)}) {
      ExpectRejected({{"kind", kind}, {field, bad}}, "invalid_arguments", "schedule." + field);
    }
    EXPECT_EQ(Decode({{"kind", kind}, {field, 9'007'199'254'740'991LL}})->seconds, 9'007'199'254'740'991LL);
  }
}

TEST(LoopSchedule, CronExpressionsAndTimeZonesAreValidatedAtCreation) {
  ExpectRejected({{"kind", "cron"}, {"expr", "61 * * * *"}}, "invalid_cron", "schedule.expr");
  ExpectRejected({{"kind", "cron"}, {"expr", "0 0 * * * *"}}, "invalid_cron", "schedule.expr");
  ExpectRejected({{"kind", "cron"}, {"expr", "0 0 30 2 *"}}, "cron_never_fires", "schedule.expr");
  ExpectRejected({{"kind", "cron"}, {"expr", "0 9 * * *"}, {"tz", "PST"}}, "invalid_time_zone", "schedule.tz");
  ExpectRejected({{"kind", "cron"}, {"expr", "0 9 * * *"}, {"tz", "Mars/Olympus"}}, "invalid_time_zone",
                 "schedule.tz");
  ExpectRejected({{"kind", "cron"}, {"expr", "0 9 * * *"}, {"tz", ""}}, "invalid_arguments", "schedule.tz");
}

TEST(LoopTimetable, TheFirstOccurrenceIsRelativeToCreationOrTheNextRuleTime) {
  int64_t created = At("2026-01-01T00:00:00Z");
  EXPECT_EQ(Make({{"kind", "every"}, {"every_seconds", 90}}).First(created).value(), created + 90'000);
  EXPECT_EQ(Make({{"kind", "after"}, {"after_seconds", 5}}).First(created).value(), created + 5'000);
  // 09:00 in Shanghai (UTC+8) is 01:00Z.
  EXPECT_EQ(Make({{"kind", "cron"}, {"expr", "0 9 * * *"}, {"tz", "Asia/Shanghai"}}).First(created).value(),
            At("2026-01-01T01:00:00Z"));
  // Without tz the host's zone applies.
  auto ny = ResolveTimeZone("America/New_York");
  ASSERT_TRUE(ny.ok());
  EXPECT_EQ(Make({{"kind", "cron"}, {"expr", "0 9 * * *"}}, *ny).First(created).value(), At("2026-01-01T14:00:00Z"));
  // An interval too long to fall in any real year never comes.
  EXPECT_EQ(Make({{"kind", "every"}, {"every_seconds", 9'007'199'254'740'991LL}}).First(created).value(), kNever);
  EXPECT_EQ(Make({{"kind", "every"}, {"every_seconds", 9'007'199'254'740'991LL}}).After(kNever), kNever);
}

TEST(LoopTimetable, AnOccurrenceThatIsNotOverdueIsDeliveredAsIs) {
  auto every = Make({{"kind", "every"}, {"every_seconds", 60}});
  auto c = every.Catch(1'000'000, 1'000'000);
  EXPECT_EQ(c.nominal, 1'000'000);
  EXPECT_EQ(c.skipped, 0);
  EXPECT_EQ(c.following, 1'060'000);
}

TEST(LoopTimetable, AfterDowntimeEveryDeliversOnlyTheLatestDueOccurrenceAndContinuesFromTheNextFutureOne) {
  auto every = Make({{"kind", "every"}, {"every_seconds", 60}});
  int64_t next = At("2026-01-01T00:01:00Z");
  auto c = every.Catch(next, next + 10 * 60'000 + 30'000);  // ten and a half periods late
  EXPECT_EQ(c.nominal, next + 10 * 60'000);
  EXPECT_EQ(c.skipped, 10);
  EXPECT_EQ(c.following, next + 11 * 60'000);
}

TEST(LoopTimetable, ATenYearOutageRecoversWithOneOccurrence) {
  int64_t next = At("2026-01-01T00:01:00Z");
  int64_t now = At("2036-01-01T00:00:30Z");
  auto every = Make({{"kind", "every"}, {"every_seconds", 60}});
  auto c = every.Catch(next, now);
  EXPECT_EQ(c.nominal, At("2036-01-01T00:00:00Z"));
  EXPECT_EQ(c.skipped, (c.nominal - next) / 60'000);
  EXPECT_EQ(c.following, At("2036-01-01T00:01:00Z"));
  // A cron rule firing every minute: the latest minute, the skips counted up to the cap.
  auto cron = Make({{"kind", "cron"}, {"expr", "* * * * *"}});
  auto k = cron.Catch(next, now);
  EXPECT_EQ(k.nominal, At("2036-01-01T00:00:00Z"));
  EXPECT_EQ(k.skipped, Timetable::kMaxCountedSkips);
  EXPECT_TRUE(k.skipped_capped);
  EXPECT_EQ(k.following, At("2036-01-01T00:01:00Z"));
}

TEST(LoopTimetable, CronCatchupCountsTheSkippedRuleTimes) {
  auto cron = Make({{"kind", "cron"}, {"expr", "0 9 * * *"}, {"tz", "Asia/Shanghai"}});
  int64_t next = At("2026-01-01T01:00:00Z");
  auto c = cron.Catch(next, At("2026-01-04T02:00:00Z"));  // 01-01, 01-02, 01-03 and 01-04 were due
  EXPECT_EQ(c.nominal, At("2026-01-04T01:00:00Z"));
  EXPECT_EQ(c.skipped, 3);
  EXPECT_FALSE(c.skipped_capped);
  EXPECT_EQ(c.following, At("2026-01-05T01:00:00Z"));
}

TEST(LoopTimetable, AnAfterLoopHasOneOccurrenceAndNothingFollows) {
  auto after = Make({{"kind", "after"}, {"after_seconds", 30}});
  auto c = after.Catch(5'000, 900'000);
  EXPECT_EQ(c.nominal, 5'000);
  EXPECT_EQ(c.skipped, 0);
  EXPECT_FALSE(c.following.has_value());
  EXPECT_FALSE(after.After(5'000).has_value());
}

}  // namespace
}  // namespace dsh::plugins::loop
