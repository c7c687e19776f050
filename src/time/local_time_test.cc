#include "time/local_time.h"

#include <gtest/gtest.h>

#include "time/rfc3339.h"

namespace dsh {
namespace {

TimeZone Zone(const char* name) {
  auto z = ResolveTimeZone(name);
  EXPECT_TRUE(z.ok()) << name;
  return z.ok() ? *z : TimeZone();
}

std::string Resolve(const char* zone, const char* date, const char* time) {
  auto local = ParseLocalDateTime(date, time);
  if (!local.ok()) return local.status().ToString();
  auto t = LocalToInstant(*local, Zone(zone));
  if (!t.ok()) return t.status().ToString();
  return FormatRfc3339Utc(*t);
}

TEST(LocalToInstant, OneShotPolicyTable) {
  struct Case {
    const char* zone;
    const char* date;
    const char* time;
    const char* want;  // canonical instant, or the start of the error
  };
  for (const Case& c : {
           Case{"America/New_York", "2026-07-04", "12:00", "2026-07-04T16:00:00.000Z"},
           // Fall-back overlap: the first of the two 01:30s (EDT).
           Case{"America/New_York", "2026-11-01", "01:30", "2026-11-01T05:30:00.000Z"},
           Case{"America/New_York", "2026-11-01", "01:00:00", "2026-11-01T05:00:00.000Z"},
           Case{"America/New_York", "2026-11-01", "02:00", "2026-11-01T07:00:00.000Z"},
           // Spring-forward gap: 02:00-02:59 does not exist.
           Case{"America/New_York", "2026-03-08", "02:30", "invalid_local_time: 2026-03-08 02:30:00 does not exist"},
           Case{"America/New_York", "2026-03-08", "02:00", "invalid_local_time"},
           Case{"America/New_York", "2026-03-08", "01:59:59", "2026-03-08T06:59:59.000Z"},
           Case{"America/New_York", "2026-03-08", "03:00", "2026-03-08T07:00:00.000Z"},
           Case{"Europe/London", "2026-03-29", "01:30", "invalid_local_time"},
           Case{"Europe/London", "2026-10-25", "01:30", "2026-10-25T00:30:00.000Z"},
           // Lord Howe shifts by 30 minutes: gap 02:00-02:30, overlap 01:30-02:00.
           Case{"Australia/Lord_Howe", "2026-10-04", "02:15", "invalid_local_time"},
           Case{"Australia/Lord_Howe", "2026-10-04", "02:30", "2026-10-03T15:30:00.000Z"},
           Case{"Australia/Lord_Howe", "2026-04-05", "01:45", "2026-04-04T14:45:00.000Z"},
           Case{"Australia/Lord_Howe", "2026-04-05", "02:00", "2026-04-04T15:30:00.000Z"},
           // Cairo springs forward at midnight: 00:00-00:59 on 2026-04-24 does not exist.
           Case{"Africa/Cairo", "2026-04-24", "00:30", "invalid_local_time"},
           Case{"Africa/Cairo", "2026-04-24", "01:00", "2026-04-23T22:00:00.000Z"},
           // ...and falls back at 24:00 on 2026-10-29: 23:00-23:59 happens twice.
           Case{"Africa/Cairo", "2026-10-29", "23:30", "2026-10-29T20:30:00.000Z"},
           // Samoa skipped 2011-12-30 entirely.
           Case{"Pacific/Apia", "2011-12-30", "12:00", "invalid_local_time"},
           Case{"Pacific/Apia", "2011-12-29", "23:59", "2011-12-30T09:59:00.000Z"},
           Case{"Pacific/Apia", "2011-12-31", "00:00", "2011-12-30T10:00:00.000Z"},
           Case{"Pacific/Kiritimati", "2026-01-01", "00:00", "2025-12-31T10:00:00.000Z"},
           Case{"UTC", "2026-02-28", "23:59:59", "2026-02-28T23:59:59.000Z"},
           // Beyond the explicit tz data (2037): DST still applies.
           Case{"America/New_York", "2040-03-11", "02:30", "invalid_local_time"},
           Case{"America/New_York", "2040-07-01", "12:00", "2040-07-01T16:00:00.000Z"},
       }) {
    std::string got = Resolve(c.zone, c.date, c.time);
    EXPECT_EQ(got.rfind(c.want, 0), 0u) << c.zone << " " << c.date << " " << c.time << " -> " << got;
  }
}

TEST(LocalToInstant, GapErrorNamesTheGap) {
  std::string got = Resolve("America/New_York", "2026-03-08", "02:30");
  EXPECT_EQ(got,
            "invalid_local_time: 2026-03-08 02:30:00 does not exist in America/New_York: the clocks in "
            "America/New_York jump from 02:00 to 03:00 at 2026-03-08T07:00:00.000Z; choose a time outside the gap");
}

TEST(ParseLocalDateTime, RejectsMalformedFields) {
  for (auto [date, time, says] : std::initializer_list<std::tuple<const char*, const char*, const char*>>{
           {"2026-02-30", "10:00", "does not exist"},
           {"2026-2-3", "10:00", "YYYY-MM-DD"},
           {"2026-01-01", "24:00", "hour 24"},
           {"2026-01-01", "9:30", "HH:MM"},
           {"2026-01-01", "09:60", "minute 60"},
           {"2026-01-01", "09:30:60", "second 60"},
           {"2026-01-01", "09:30:5", "HH:MM"},
           {"2026-13-01", "09:30", "month 13"},
           {"0000-01-01", "09:30", "year 0"},
       }) {
    auto l = ParseLocalDateTime(date, time);
    ASSERT_FALSE(l.ok()) << date << " " << time;
    EXPECT_EQ(l.status().code(), "invalid_local_time");
    EXPECT_NE(l.status().message().find(says), std::string::npos) << l.status().message();
  }
  auto ok = ParseLocalDateTime("2028-02-29", "23:59:59");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, (LocalDateTime{2028, 2, 29, 23, 59, 59}));
}

}  // namespace
}  // namespace dsh
