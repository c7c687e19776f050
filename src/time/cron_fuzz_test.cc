// A long deterministic random-input test of the parsers (the fuzzing the
// acceptance criteria ask for, without requiring clang/libFuzzer): mutated
// and generated cron strings and RFC 3339 strings must either parse into
// something that behaves, or fail with a clear, stable error. Seeded, and
// bounded in iterations so it stays within seconds even under sanitizers.

#include <gtest/gtest.h>

#include <random>

#include "time/cron_expr.h"
#include "time/local_time.h"
#include "time/rfc3339.h"

namespace dsh {
namespace {

constexpr int kCronIterations = 60'000;
constexpr int kTimestampIterations = 60'000;

const std::vector<std::string> kCronSeeds = {
    "*/5 * * * *", "0 9 * * 1-5", "30 2 * * *", "0 0 1 * *", "15 14 1 * *", "0 22 * * 1-5", "23 0-20/2 * * *",
    "5 4 * * sun", "0 0,12 1 */2 *", "0 9 29 2 *", "@daily", "@hourly", "0 0 13 * fri", "1-59/7 */3 1-15 jan-jun mon,wed",
};
const std::string kCronAlphabet = "0123456789*/-, \t@LW#?abcdefghijklmnopqrstuvwxyzJANMONSUN\x01\xff";
const std::vector<std::string> kCronTokens = {"*", "*/", "/", "-", ",", " ", "0", "7", "12", "31", "59", "60", "jan",
                                              "sun", "MON", "@yearly", "@", "L", "W", "#", "?", "99999", "1-5", "5-1"};

std::string MutateCron(std::mt19937_64& rng, std::string s) {
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int i = 0; i < edits; ++i) {
    const size_t pos = s.empty() ? 0 : rng() % (s.size() + 1);
    switch (rng() % 5) {
      case 0:
        s.insert(pos, 1, kCronAlphabet[rng() % kCronAlphabet.size()]);
        break;
      case 1:
        if (!s.empty() && pos < s.size()) s.erase(pos, 1);
        break;
      case 2:
        if (!s.empty() && pos < s.size()) s[pos] = kCronAlphabet[rng() % kCronAlphabet.size()];
        break;
      case 3:
        s.insert(pos, kCronTokens[rng() % kCronTokens.size()]);
        break;
      default:
        s = s.substr(0, pos);
        break;
    }
  }
  return s;
}

std::string RandomCron(std::mt19937_64& rng) {
  std::string s;
  const int fields = 3 + static_cast<int>(rng() % 4);
  for (int f = 0; f < fields; ++f) {
    if (f) s += ' ';
    const int parts = 1 + static_cast<int>(rng() % 3);
    for (int p = 0; p < parts; ++p) s += kCronTokens[rng() % kCronTokens.size()];
  }
  return s;
}

TEST(Fuzz, CronParserNeverCrashesAndFailsClearly) {
  std::mt19937_64 rng(20260308);
  const std::vector<TimeZone> zones = {TimeZone(), *ResolveTimeZone("America/New_York"),
                                       *ResolveTimeZone("Australia/Lord_Howe"), *ResolveTimeZone("Pacific/Apia")};
  const int64_t base = ToUnixMillis(*ParseRfc3339("2000-01-01T00:00:00Z"));
  int accepted = 0, rejected = 0;
  for (int i = 0; i < kCronIterations; ++i) {
    const std::string text = (i % 3 == 0) ? RandomCron(rng) : MutateCron(rng, kCronSeeds[rng() % kCronSeeds.size()]);
    const Result<CronExpr> e = CronExpr::Parse(text);
    if (!e.ok()) {
      ++rejected;
      ASSERT_TRUE(e.status().code() == "invalid_cron" || e.status().code() == "cron_never_fires") << text;
      ASSERT_FALSE(e.status().message().empty()) << text;
      continue;
    }
    ++accepted;
    ASSERT_FALSE(e->Describe().empty()) << text;
    // Within a century of 2000: a century of milliseconds is < 2^42.
    const WallTime t = FromUnixMillis(base + static_cast<int64_t>(rng() % (int64_t{100} * 365 * 86'400'000)));
    const TimeZone& zone = zones[rng() % zones.size()];
    const std::optional<WallTime> next = e->Next(t, zone);
    ASSERT_TRUE(next) << text;
    ASSERT_GT(*next, t) << text;
    ASSERT_EQ(e->LatestAtOrBefore(*next, zone), next) << text;
    const std::optional<WallTime> latest = e->LatestAtOrBefore(t, zone);
    ASSERT_TRUE(latest) << text;
    ASSERT_LE(*latest, t) << text;
    ASSERT_EQ(e->Next(*latest, zone), next) << text << " in " << zone.name() << " at " << FormatRfc3339Utc(t);
  }
  EXPECT_GT(accepted, 1000);
  EXPECT_GT(rejected, 1000);
}

TEST(Fuzz, TimestampParserNeverCrashesAndFailsClearly) {
  std::mt19937_64 rng(1772953200);
  const std::string alphabet = "0123456789-:.TtZz+ \x00\x7f";
  int accepted = 0, rejected = 0;
  for (int i = 0; i < kTimestampIterations; ++i) {
    // A valid stamp from a random instant, then a few random edits.
    const int64_t ms = static_cast<int64_t>(rng() % (int64_t{300} * 365 * 86'400'000)) - int64_t{100} * 365 * 86'400'000;
    std::string s = FormatRfc3339Utc(FromUnixMillis(ms));
    if (rng() % 2) s = s.substr(0, s.size() - 1) + (rng() % 2 ? "+05:30" : "-11:00");
    const int edits = static_cast<int>(rng() % 3);
    for (int k = 0; k < edits; ++k) {
      const size_t pos = rng() % (s.size() + 1);
      const char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
        case 0:
          s.insert(pos, 1, c);
          break;
        case 1:
          if (pos < s.size()) s.erase(pos, 1);
          break;
        default:
          if (pos < s.size()) s[pos] = c;
          break;
      }
    }
    const Result<WallTime> t = ParseRfc3339(s);
    if (!t.ok()) {
      ++rejected;
      ASSERT_EQ(t.status().code(), "invalid_timestamp") << s;
      ASSERT_NE(t.status().message().find("is not an RFC 3339 timestamp"), std::string::npos) << s;
      continue;
    }
    ++accepted;
    const WallTime floored = std::chrono::floor<std::chrono::milliseconds>(*t);
    ASSERT_EQ(*ParseRfc3339(FormatRfc3339Utc(*t)), floored) << s;
  }
  EXPECT_GT(accepted, 1000);
  EXPECT_GT(rejected, 1000);
}

TEST(Fuzz, LocalDateTimeParserNeverCrashes) {
  std::mt19937_64 rng(42);
  const std::string alphabet = "0123456789-: x";
  const TimeZone ny = *ResolveTimeZone("America/New_York");
  for (int i = 0; i < 20'000; ++i) {
    std::string date = "2026-03-08", time = "02:30";
    for (std::string* s : {&date, &time}) {
      const size_t pos = rng() % (s->size() + 1);
      if (rng() % 2 && pos < s->size()) (*s)[pos] = alphabet[rng() % alphabet.size()];
    }
    const Result<LocalDateTime> l = ParseLocalDateTime(date, time);
    if (!l.ok()) {
      ASSERT_EQ(l.status().code(), "invalid_local_time");
      continue;
    }
    const Result<WallTime> t = LocalToInstant(*l, ny);
    if (!t.ok()) {
      ASSERT_EQ(t.status().code(), "invalid_local_time");
    }
  }
}

}  // namespace
}  // namespace dsh
