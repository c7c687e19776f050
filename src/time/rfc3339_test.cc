#include "time/rfc3339.h"

#include <gtest/gtest.h>

namespace dsh {
namespace {

WallTime Ms(int64_t ms) { return FromUnixMillis(ms); }

TEST(Rfc3339, ParsesZAndOffsets) {
  struct Case {
    const char* text;
    const char* canonical;
  };
  for (const Case& c : {
           Case{"2026-11-01T05:30:00Z", "2026-11-01T05:30:00.000Z"},
           Case{"2026-11-01T01:30:00-04:00", "2026-11-01T05:30:00.000Z"},
           Case{"2026-03-08T03:00:00-04:00", "2026-03-08T07:00:00.000Z"},
           Case{"2026-01-01T09:00:00+14:00", "2025-12-31T19:00:00.000Z"},
           Case{"2026-01-01T00:00:00.5Z", "2026-01-01T00:00:00.500Z"},
           Case{"2026-01-01T00:00:00.123456789Z", "2026-01-01T00:00:00.123Z"},
           Case{"2026-01-01T00:00:00.9999999999999Z", "2026-01-01T00:00:00.999Z"},
           Case{"2024-02-29T23:59:59+00:00", "2024-02-29T23:59:59.000Z"},
           Case{"2026-06-01t12:00:00z", "2026-06-01T12:00:00.000Z"},
           Case{"2026-06-01T12:00:00-00:00", "2026-06-01T12:00:00.000Z"},
           Case{"1970-01-01T00:00:00Z", "1970-01-01T00:00:00.000Z"},
           Case{"1969-12-31T23:59:59.999Z", "1969-12-31T23:59:59.999Z"},
       }) {
    auto t = ParseRfc3339(c.text);
    ASSERT_TRUE(t.ok()) << c.text << ": " << t.status().ToString();
    EXPECT_EQ(FormatRfc3339Utc(*t), c.canonical) << c.text;
  }
}

TEST(Rfc3339, RejectsEverythingElseWithAReason) {
  struct Case {
    const char* text;
    const char* says;
  };
  for (const Case& c : {
           Case{"2026-11-01T05:30:00", "missing UTC offset"},
           Case{"2026-11-01 05:30:00Z", "'T'"},
           Case{"2026-11-01", "'T'"},
           Case{"2026-11-01T24:00:00Z", "hour 24"},
           Case{"2026-12-31T23:59:60Z", "second 60"},
           Case{"2026-02-30T00:00:00Z", "day 30 does not exist in 2026-02"},
           Case{"2025-02-29T00:00:00Z", "day 29 does not exist"},
           Case{"2026-13-01T00:00:00Z", "month 13"},
           Case{"0000-01-01T00:00:00Z", "year 0000"},
           Case{"26-01-01T00:00:00Z", "YYYY-MM-DD"},
           Case{"2026-1-01T00:00:00Z", "YYYY-MM-DD"},
           Case{"2026-01-01T0:00:00Z", "HH:MM:SS"},
           Case{"2026-01-01T00:00Z", "HH:MM:SS"},
           Case{"2026-01-01T00:00:00.Z", "fraction digits"},
           Case{"2026-01-01T00:00:00+0800", "±HH:MM"},
           Case{"2026-01-01T00:00:00+08", "±HH:MM"},
           Case{"2026-01-01T00:00:00+24:00", "out of range"},
           Case{"2026-01-01T00:00:00UTC", "Z or ±HH:MM"},
           Case{"2026-01-01T00:00:00Zjunk", "unexpected text"},
           Case{" 2026-01-01T00:00:00Z", "YYYY-MM-DD"},
           Case{"2026-01-01T00:00:00Z ", "unexpected text"},
           Case{"", "YYYY-MM-DD"},
           Case{"9999-12-31T23:59:59-00:01", "outside the supported range"},
           Case{"0001-01-01T00:00:00+00:01", "outside the supported range"},
       }) {
    auto t = ParseRfc3339(c.text);
    ASSERT_FALSE(t.ok()) << c.text;
    EXPECT_EQ(t.status().code(), "invalid_timestamp");
    EXPECT_NE(t.status().message().find(c.says), std::string::npos) << c.text << " -> " << t.status().message();
  }
}

TEST(Rfc3339, CanonicalOutputHasMilliseconds) {
  EXPECT_EQ(FormatRfc3339Utc(Ms(0)), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatRfc3339Utc(Ms(-1)), "1969-12-31T23:59:59.999Z");
  EXPECT_EQ(FormatRfc3339Utc(Ms(1'767'225'600'123)), "2026-01-01T00:00:00.123Z");
  EXPECT_EQ(FormatRfc3339Utc(*ParseRfc3339("2026-01-01T00:00:00.123999Z")), "2026-01-01T00:00:00.123Z");
}

TEST(Rfc3339, FormatsInZoneWithTheZonesOffset) {
  auto ny = ResolveTimeZone("America/New_York");
  auto lh = ResolveTimeZone("Australia/Lord_Howe");
  auto ny_1850 = ParseRfc3339("1850-01-01T12:00:00Z");
  ASSERT_TRUE(ny.ok() && lh.ok() && ny_1850.ok());
  EXPECT_EQ(FormatRfc3339InZone(*ParseRfc3339("2026-03-08T07:00:00Z"), *ny), "2026-03-08T03:00:00-04:00");
  EXPECT_EQ(FormatRfc3339InZone(*ParseRfc3339("2026-03-08T06:59:00Z"), *ny), "2026-03-08T01:59:00-05:00");
  EXPECT_EQ(FormatRfc3339InZone(*ParseRfc3339("2026-07-01T00:00:00.250Z"), *ny), "2026-06-30T20:00:00.250-04:00");
  EXPECT_EQ(FormatRfc3339InZone(*ParseRfc3339("2026-01-01T00:00:00Z"), *lh), "2026-01-01T11:00:00+11:00");
  EXPECT_EQ(FormatRfc3339InZone(*ParseRfc3339("2026-07-01T00:00:00Z"), *lh), "2026-07-01T10:30:00+10:30");
  EXPECT_EQ(FormatRfc3339InZone(*ParseRfc3339("2026-07-01T00:00:00Z"), TimeZone()), "2026-07-01T00:00:00+00:00");
  // Local mean time (-04:56:02) is rounded to -04:56 and the text still names the instant.
  std::string lmt = FormatRfc3339InZone(*ny_1850, *ny);
  EXPECT_EQ(lmt, "1850-01-01T07:04:00-04:56");
  EXPECT_EQ(*ParseRfc3339(lmt), *ny_1850);
}

TEST(Rfc3339, AcceptsTheWholeRangeOfYears) {
  EXPECT_EQ(FormatRfc3339Utc(*ParseRfc3339("0001-01-01T00:00:00Z")), "0001-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatRfc3339Utc(*ParseRfc3339("9999-12-31T23:59:59.999Z")), "9999-12-31T23:59:59.999Z");
  EXPECT_EQ(FormatRfc3339Utc(*ParseRfc3339("9999-12-31T23:59:59+01:00")), "9999-12-31T22:59:59.000Z");
}

TEST(Rfc3339, RoundTripsThroughBothFormats) {
  auto ny = ResolveTimeZone("America/New_York");
  ASSERT_TRUE(ny.ok());
  for (int64_t ms : {int64_t{0}, int64_t{1'772'953'200'000}, int64_t{1'793'511'000'000}, int64_t{-5'000'000'000'001}}) {
    EXPECT_EQ(*ParseRfc3339(FormatRfc3339Utc(Ms(ms))), Ms(ms));
    EXPECT_EQ(*ParseRfc3339(FormatRfc3339InZone(Ms(ms), *ny)), Ms(ms));
  }
}

}  // namespace
}  // namespace dsh
