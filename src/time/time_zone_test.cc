#include "time/time_zone.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "time/rfc3339.h"

namespace dsh {
namespace {

TEST(TimeZone, AcceptsUtcAndAreaLocationNames) {
  for (const char* name : {"UTC", "America/New_York", "Europe/London", "Australia/Lord_Howe", "Asia/Hebron",
                           "Africa/Cairo", "Pacific/Apia", "Pacific/Kiritimati", "America/Argentina/Buenos_Aires",
                           "America/Port-au-Prince", "Asia/Shanghai"}) {
    auto zone = ResolveTimeZone(name);
    ASSERT_TRUE(zone.ok()) << name << ": " << zone.status().ToString();
    EXPECT_EQ(zone->name(), name);
    EXPECT_NE(zone->date_zone(), nullptr) << name;
  }
}

TEST(TimeZone, LinksCanonicalizeToTheirTarget) {
  auto eastern = ResolveTimeZone("US/Eastern");
  ASSERT_TRUE(eastern.ok());
  EXPECT_EQ(eastern->name(), "America/New_York");
  EXPECT_EQ(*eastern, *ResolveTimeZone("America/New_York"));
  EXPECT_EQ(ResolveTimeZone("Asia/Calcutta")->name(), "Asia/Kolkata");
  EXPECT_EQ(ResolveTimeZone("Etc/UTC")->name(), "UTC");
  EXPECT_EQ(ResolveTimeZone("Etc/Zulu")->name(), "UTC");
  EXPECT_EQ(*ResolveTimeZone("UTC"), TimeZone::Utc());
}

TEST(TimeZone, RejectsAbbreviationsOffsetsAndUnknownNames) {
  struct Case {
    const char* input;
    const char* says;
  };
  for (const Case& c : {Case{"", "empty"}, Case{"CST", "abbreviation"}, Case{"PST", "abbreviation"},
                        Case{"EST", "abbreviation"}, Case{"+08:00", "fixed UTC offset"}, Case{"UTC+8", "fixed UTC offset"},
                        Case{"GMT-5", "fixed UTC offset"}, Case{"Etc/GMT+8", "fixed-offset zone"},
                        Case{"EST5EDT", "not a time zone"}, Case{"Japan", "not a time zone"}, Case{"Zulu", "not a time zone"},
                        Case{"Mars/Olympus_Mons", "not in the time zone database"},
                        Case{"america/new_york", "not in the time zone database"},
                        Case{"../etc/passwd", "not a time zone"}, Case{"America/New_York ", "not a time zone"},
                        Case{"posix/America/New_York", "not in the time zone database"}}) {
    auto zone = ResolveTimeZone(c.input);
    ASSERT_FALSE(zone.ok()) << c.input;
    EXPECT_EQ(zone.status().code(), "invalid_time_zone") << c.input;
    EXPECT_NE(zone.status().message().find(c.says), std::string::npos) << zone.status().message();
    if (*c.input) {
      EXPECT_NE(zone.status().message().find(std::string("\"") + c.input + "\""), std::string::npos);
    }
  }
}

TEST(TimeZone, OffsetAtFollowsDst) {
  auto ny = ResolveTimeZone("America/New_York");
  ASSERT_TRUE(ny.ok());
  EXPECT_EQ(ny->OffsetAt(*ParseRfc3339("2026-07-01T00:00:00Z")), std::chrono::hours(-4));
  EXPECT_EQ(ny->OffsetAt(*ParseRfc3339("2026-01-01T00:00:00Z")), std::chrono::hours(-5));
  EXPECT_EQ(TimeZone().OffsetAt(*ParseRfc3339("2026-07-01T00:00:00Z")), std::chrono::seconds(0));
}

class HostZone : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("dsh-host-zone-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    sources_.localtime_path = (dir_ / "localtime").string();
    sources_.timezone_path = (dir_ / "timezone").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;
  HostZoneSources sources_;
};

TEST_F(HostZone, TzVariableWins) {
  std::filesystem::create_symlink("/usr/share/zoneinfo/Europe/Paris", sources_.localtime_path);
  sources_.tz_env = "America/New_York";
  EXPECT_EQ(HostTimeZoneFrom(sources_).name(), "America/New_York");
  sources_.tz_env = ":Asia/Tokyo";
  EXPECT_EQ(HostTimeZoneFrom(sources_).name(), "Asia/Tokyo");
  sources_.tz_env = "EST5EDT";  // a POSIX rule, not a name: ignored
  EXPECT_EQ(HostTimeZoneFrom(sources_).name(), "Europe/Paris");
}

TEST_F(HostZone, LocaltimeLinkThenTimezoneFileThenUtc) {
  EXPECT_EQ(HostTimeZoneFrom(sources_).name(), "UTC");
  std::ofstream(sources_.timezone_path) << "Australia/Lord_Howe\n";
  EXPECT_EQ(HostTimeZoneFrom(sources_).name(), "Australia/Lord_Howe");
  std::filesystem::create_symlink("/usr/share/zoneinfo/US/Pacific", sources_.localtime_path);
  EXPECT_EQ(HostTimeZoneFrom(sources_).name(), "America/Los_Angeles");
}

}  // namespace
}  // namespace dsh
