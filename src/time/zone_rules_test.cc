#include "time/zone_rules.h"

#include <date/tz.h>
#include <gtest/gtest.h>

#include "time/civil.h"
#include "time/time_zone.h"

namespace dsh::time_internal {
namespace {

int64_t Utc(int64_t y, unsigned m, unsigned d, int64_t h = 0, int64_t mi = 0) {
  return DaysFromCivil(y, m, d) * kSecondsPerDay + h * 3600 + mi * 60;
}

TEST(PosixTz, ParsesZicFooters) {
  auto ny = ParsePosixTz("EST5EDT,M3.2.0,M11.1.0");
  ASSERT_TRUE(ny);
  EXPECT_EQ(ny->std_offset, -5 * 3600);
  EXPECT_TRUE(ny->has_dst);
  EXPECT_EQ(ny->dst_offset, -4 * 3600);
  auto t = ny->TransitionsIn(2026);
  EXPECT_EQ(t.dst_start, Utc(2026, 3, 8, 7));
  EXPECT_EQ(t.dst_end, Utc(2026, 11, 1, 6));

  auto lh = ParsePosixTz("<+1030>-10:30<+11>-11,M10.1.0,M4.1.0");
  ASSERT_TRUE(lh);
  EXPECT_EQ(lh->std_offset, 10 * 3600 + 1800);
  EXPECT_EQ(lh->dst_offset, 11 * 3600);
  // 2026-10-04 02:00 +10:30 and 2026-04-05 02:00 +11.
  EXPECT_EQ(lh->TransitionsIn(2026).dst_start, Utc(2026, 10, 3, 15, 30));
  EXPECT_EQ(lh->TransitionsIn(2026).dst_end, Utc(2026, 4, 4, 15));

  // Cairo: last Friday of April at 00:00, last Thursday of October at 24:00.
  auto cairo = ParsePosixTz("EET-2EEST,M4.5.5/0,M10.5.4/24");
  ASSERT_TRUE(cairo);
  EXPECT_EQ(cairo->TransitionsIn(2026).dst_start, Utc(2026, 4, 23, 22));
  EXPECT_EQ(cairo->TransitionsIn(2026).dst_end, Utc(2026, 10, 29, 21));

  auto tokyo = ParsePosixTz("JST-9");
  ASSERT_TRUE(tokyo);
  EXPECT_FALSE(tokyo->has_dst);
  EXPECT_EQ(tokyo->std_offset, 9 * 3600);
}

TEST(PosixTz, JulianDayRules) {
  // Jn never counts February 29; n counts it.
  auto j = ParsePosixTz("AAA0BBB,J60/0,300/0");
  ASSERT_TRUE(j);
  EXPECT_EQ(j->start.DayIn(2024), DaysFromCivil(2024, 3, 1));
  EXPECT_EQ(j->start.DayIn(2025), DaysFromCivil(2025, 3, 1));
  EXPECT_EQ(j->end.DayIn(2024), DaysFromCivil(2024, 1, 1) + 300);
  EXPECT_EQ(j->dst_offset, 3600);  // default: one hour ahead of standard time
}

TEST(PosixTz, RejectsMalformedStrings) {
  for (const char* bad : {"", "E5", "EST", "EST5EDT,M13.1.0,M11.1.0", "EST5EDT,M3.6.0,M11.1.0", "EST5EDT,M3.2.7,M11.1.0",
                          "EST5EDT,M3.2.0", "EST5EDT,J0,J365", "EST5EDT,M3.2.0/200,M11.1.0", "<+1>-1", "EST5EDT,M3.2.0,M11.1.0x"}) {
    EXPECT_FALSE(ParsePosixTz(bad)) << bad;
  }
}

TEST(ZoneRules, TzifFooterIsTheLastLine) {
  EXPECT_EQ(TzifFooter(std::string_view("TZif2....\nEST5EDT,M3.2.0,M11.1.0\n")), "EST5EDT,M3.2.0,M11.1.0");
  EXPECT_EQ(TzifFooter(std::string_view("TZif\0...", 8)), "");  // version 1: no footer
  EXPECT_EQ(TzifFooter("not a tzif file\nX\n"), "");
}

TEST(ZoneRules, PeriodsKnowTheirNeighbours) {
  auto ny = ResolveTimeZone("America/New_York");
  ASSERT_TRUE(ny.ok());
  OffsetPeriod summer = ny->rules().PeriodAt(Utc(2026, 7, 1));
  EXPECT_EQ(summer.begin, Utc(2026, 3, 8, 7));
  EXPECT_EQ(summer.end, Utc(2026, 11, 1, 6));
  EXPECT_EQ(summer.offset, -4 * 3600);
  EXPECT_EQ(summer.prev_offset, -5 * 3600);
  EXPECT_EQ(ny->rules().PeriodAt(Utc(2026, 3, 8, 7)).offset, -4 * 3600);
  EXPECT_EQ(ny->rules().PeriodAt(Utc(2026, 3, 8, 7) - 1).offset, -5 * 3600);
}

// date/tz over the OS tzdb stops at the last explicit transition (2037); the
// footer rule must carry DST on.
TEST(ZoneRules, DaylightSavingContinuesAfter2037) {
  auto ny = ResolveTimeZone("America/New_York");
  ASSERT_TRUE(ny.ok());
  EXPECT_EQ(ny->rules().OffsetAt(Utc(2040, 7, 1)), -4 * 3600);
  EXPECT_EQ(ny->rules().OffsetAt(Utc(2040, 1, 1)), -5 * 3600);
  OffsetPeriod p = ny->rules().PeriodAt(Utc(2100, 7, 1));
  EXPECT_EQ(p.begin, Utc(2100, 3, 14, 7));
  EXPECT_EQ(p.end, Utc(2100, 11, 7, 6));
  EXPECT_EQ(p.prev_offset, -5 * 3600);
  // The first period after the explicit data ends where the rule says.
  OffsetPeriod winter = ny->rules().PeriodAt(Utc(2037, 12, 1));
  EXPECT_EQ(winter.begin, Utc(2037, 11, 1, 6));
  EXPECT_EQ(winter.end, Utc(2038, 3, 14, 7));

  auto lh = ResolveTimeZone("Australia/Lord_Howe");
  ASSERT_TRUE(lh.ok());
  EXPECT_EQ(lh->rules().OffsetAt(Utc(2050, 1, 15)), 11 * 3600);
  EXPECT_EQ(lh->rules().OffsetAt(Utc(2050, 7, 15)), 10 * 3600 + 1800);

  auto dublin = ResolveTimeZone("Europe/Dublin");  // negative DST: GMT in winter
  ASSERT_TRUE(dublin.ok());
  EXPECT_EQ(dublin->rules().OffsetAt(Utc(2045, 1, 15)), 0);
  EXPECT_EQ(dublin->rules().OffsetAt(Utc(2045, 7, 15)), 3600);
}

// The POSIX tail must agree with zic's explicit transitions wherever both
// exist: for every zone in the database, compute the footer rule's
// transitions for the years the explicit data also covers and compare.
TEST(ZoneRules, FooterRuleMatchesExplicitTransitionsForEveryZone) {
  const date::tzdb& db = date::get_tzdb();
  int zones_checked = 0;
  for (const date::time_zone& z : db.zones) {
    if (z.name().find('/') == std::string::npos || z.name().rfind("Etc/", 0) == 0) continue;
    auto compiled = ZoneRules::Compile(z, "/usr/share/zoneinfo");
    ASSERT_TRUE(compiled.ok()) << z.name();
    const ZoneRules& rules = *compiled;
    if (!rules.tail()) continue;
    const std::vector<int64_t>& at = rules.explicit_transitions();
    ASSERT_FALSE(at.empty()) << z.name();
    const int64_t last = at.back();
    const int64_t last_year = CivilFromDays(FloorDiv(last, kSecondsPerDay)).year;
    for (int64_t y = last_year - 6; y < last_year; ++y) {
      auto yt = rules.tail()->TransitionsIn(y);
      for (int64_t instant : {yt.dst_start, yt.dst_end}) {
        if (instant <= Utc(2026, 1, 1)) continue;  // the rule may have changed before it
        EXPECT_TRUE(std::binary_search(at.begin(), at.end(), instant))
            << z.name() << ": footer transition " << instant << " in " << y << " is not in the explicit data";
      }
    }
    ++zones_checked;
  }
  EXPECT_GT(zones_checked, 100);
}

}  // namespace
}  // namespace dsh::time_internal
