#include "plugins/time_context/time_context.h"

#include <gtest/gtest.h>

namespace dsh::plugins::time_context {
namespace {

session::SessionHeader Header(std::string zone, int64_t depth = 0) {
  session::SessionHeader h;
  h.id = "ses_1";
  h.time_zone = std::move(zone);
  h.delegation_depth = depth;
  return h;
}

const WallTime kNow = FromUnixMillis(1767225600000);  // 2026-01-01T00:00:00Z, a Thursday

TEST(TimeContext, DifferentZonesAreNamedWithLocalTimesAndTheModelIsToldToAsk) {
  EXPECT_EQ(TimeContextText(Header("Asia/Shanghai"), "America/New_York", kNow),
            "Time context:\n"
            "- Now: 2026-01-01T00:00:00.000Z (UTC)\n"
            "- Session time zone: Asia/Shanghai; local time there 2026-01-01 08:00:00 (Thursday), UTC+08:00\n"
            "- Request time zone: America/New_York; local time there 2025-12-31 19:00:00 (Wednesday), UTC-05:00\n"
            "- Zones: differ: ask the person which zone they mean before assuming one for a local time");
}

TEST(TimeContext, TheSameZoneSaysSoEvenSpelledAsALink) {
  std::string text = TimeContextText(Header("Asia/Kolkata"), "Asia/Calcutta", kNow);
  EXPECT_NE(text.find("- Session time zone: Asia/Kolkata; local time there 2026-01-01 05:30:00 (Thursday), UTC+05:30\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("- Zones: same zone"), std::string::npos) << text;
}

TEST(TimeContext, AMissingClientZoneOrSessionZoneIsSaidPlainly) {
  std::string no_client = TimeContextText(Header("UTC"), std::nullopt, kNow);
  EXPECT_NE(no_client.find("- Request time zone: not given"), std::string::npos) << no_client;
  EXPECT_NE(no_client.find("- Zones: unknown: ask"), std::string::npos) << no_client;
  std::string no_session = TimeContextText(Header(""), "Europe/London", kNow);
  EXPECT_NE(no_session.find("- Session time zone: unavailable"), std::string::npos) << no_session;
  EXPECT_NE(no_session.find("- Zones: differ"), std::string::npos) << no_session;
}

TEST(TimeContext, DelegatedSessionsGetNothing) { EXPECT_EQ(TimeContextText(Header("UTC", 1), "UTC", kNow), ""); }

TEST(TimeContext, OffsetsFollowDaylightSavingTime) {
  WallTime july = FromUnixMillis(1783000000000);  // 2026-07-02T13:46:40Z
  std::string text = TimeContextText(Header("Europe/London"), "Australia/Lord_Howe", july);
  EXPECT_NE(text.find("Europe/London; local time there 2026-07-02 14:46:40 (Thursday), UTC+01:00"), std::string::npos)
      << text;
  EXPECT_NE(text.find("Australia/Lord_Howe; local time there 2026-07-03 00:16:40 (Friday), UTC+10:30"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace dsh::plugins::time_context
