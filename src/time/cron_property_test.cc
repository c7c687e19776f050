// Property sweeps around every DST transition of the acceptance zones in
// 2020-2030. Next() and LatestAtOrBefore() are compared with an independent
// oracle that walks every minute, asks date/tz directly for offsets and local
// time classification, and applies the DST policy literally.

#include <date/tz.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "time/cron_expr.h"
#include "time/rfc3339.h"
#include "time/local_time.h"

namespace dsh {
namespace {

using std::chrono::seconds;

constexpr const char* kZones[] = {"America/New_York", "Europe/London",  "Australia/Lord_Howe", "Asia/Hebron",
                                  "Africa/Cairo",     "Pacific/Apia",   "Pacific/Kiritimati",  "UTC"};

constexpr const char* kRules[] = {"30 2 * * *", "0 0 * * *",    "30 1 * * *", "0 1 * * *",   "15,45 2 * * *",
                                  "30 23 * * *", "*/15 * * * *", "0 * * * *",  "5 */2 * * *", "0 9 * * 1-5"};

constexpr const char* kDailyFixedRules[] = {"30 2 * * *", "0 0 * * *", "30 1 * * *", "0 1 * * *", "30 23 * * *",
                                            "15 2 * * *"};

int64_t DayNumber(const std::string& yyyy_mm_dd) {
  const date::year_month_day ymd{date::year{std::stoi(yyyy_mm_dd.substr(0, 4))},
                                 date::month{static_cast<unsigned>(std::stoi(yyyy_mm_dd.substr(5, 2)))},
                                 date::day{static_cast<unsigned>(std::stoi(yyyy_mm_dd.substr(8, 2)))}};
  return date::sys_days{ymd}.time_since_epoch().count();
}

TimeZone Zone(const char* name) { return *ResolveTimeZone(name); }
WallTime FromSeconds(int64_t s) { return WallTime(seconds(s)); }
int64_t ToSeconds(WallTime t) { return std::chrono::floor<seconds>(t.time_since_epoch()).count(); }

// A local wall time's calendar fields, by date/tz.
struct Civil {
  unsigned minute, hour, dom, month, dow;
};

Civil CivilOf(int64_t local_seconds) {
  const date::local_seconds ls{seconds(local_seconds)};
  const auto day = date::floor<date::days>(ls);
  const date::year_month_day ymd{day};
  const date::hh_mm_ss hms{ls - day};
  return {static_cast<unsigned>(hms.minutes().count()), static_cast<unsigned>(hms.hours().count()),
          static_cast<unsigned>(ymd.day()), static_cast<unsigned>(ymd.month()), date::weekday{day}.c_encoding()};
}

// Does a local wall time match the rule? A direct reading of Vixie's rule.
bool Matches(const CronExpr& e, const Civil& c) {
  if (!(e.minutes() >> c.minute & 1) || !(e.hours() >> c.hour & 1)) return false;
  if (!(e.months() >> c.month & 1)) return false;
  const bool dom_ok = e.days_of_month() >> c.dom & 1;
  const bool dow_ok = e.days_of_week() >> c.dow & 1;
  if (e.day_of_month_starts_with_star() || e.day_of_week_starts_with_star()) return dom_ok && dow_ok;
  return dom_ok || dow_ok;
}

// What date/tz says about one minute of a window, computed once per window
// and shared by every rule.
struct Minute {
  int64_t t;            // instant
  int64_t local;        // wall time then
  int64_t gap_from;     // when t starts a spring-forward gap: its first wall time, else == local
  bool second_pass;     // wall time already shown earlier (fall-back overlap)
  Civil civil;          // of `local`
};

std::vector<Minute> Minutes(const date::time_zone* tz, int64_t from, int64_t to) {
  std::vector<Minute> out;
  date::sys_info info = tz->get_info(date::sys_seconds{seconds(from)});
  for (int64_t t = from; t < to; t += 60) {
    if (date::sys_seconds{seconds(t)} >= info.end) info = tz->get_info(date::sys_seconds{seconds(t)});
    const int64_t begin = info.begin.time_since_epoch().count();
    Minute m{t, t + info.offset.count(), t + info.offset.count(), false, CivilOf(t + info.offset.count())};
    if (begin == t) {
      const date::sys_info before = tz->get_info(date::sys_seconds{seconds(t - 1)});
      if (before.offset < info.offset) m.gap_from = t + before.offset.count();
    }
    if (t - begin < 86400) {  // only the first day of a period can repeat wall times
      const date::local_info li = tz->get_info(date::local_seconds{seconds(m.local)});
      m.second_pass = li.result == date::local_info::ambiguous && m.local - li.first.offset.count() != t;
    }
    out.push_back(m);
  }
  return out;
}

// Every occurrence among `minutes`, by the policy's literal definition.
std::vector<int64_t> Oracle(const CronExpr& e, const std::vector<Minute>& minutes) {
  std::vector<int64_t> out;
  const bool fixed = !e.follows_elapsed_time();
  for (const Minute& m : minutes) {
    if (fixed) {
      bool in_gap = false;  // a fixed time in the gap fires as the gap ends
      for (int64_t l = m.gap_from; l < m.local && !in_gap; l += 60) in_gap = Matches(e, CivilOf(l));
      if (in_gap || (Matches(e, m.civil) && !m.second_pass)) out.push_back(m.t);
    } else if (Matches(e, m.civil)) {
      out.push_back(m.t);
    }
  }
  return out;
}

std::vector<int64_t> TransitionsBetween(const date::time_zone* tz, int from_year, int to_year) {
  std::vector<int64_t> out;
  date::sys_seconds t{date::sys_days{date::year{from_year} / 1 / 1}};
  const date::sys_seconds end{date::sys_days{date::year{to_year + 1} / 1 / 1}};
  while (t < end) {
    const date::sys_info info = tz->get_info(t);
    if (info.end >= end) break;
    if (tz->get_info(info.end).offset != info.offset) out.push_back(info.end.time_since_epoch().count());
    t = info.end;
  }
  return out;
}

// Sanitizer and debug builds run the sweep ~30x slower: there, probe every
// minute within 2 h of a transition and every 17th minute elsewhere.
#if defined(__SANITIZE_ADDRESS__) || !defined(NDEBUG)
constexpr int64_t kSparseStep = 17 * 60;
constexpr int64_t kDenseRadius = 2 * 3600;
#else
constexpr int64_t kSparseStep = 60;
constexpr int64_t kDenseRadius = 26 * 3600;
#endif

// Windows of ±26 h around each transition; a few ordinary days for zones without any.
std::vector<std::pair<int64_t, int64_t>> Windows(const TimeZone& zone) {
  std::vector<std::pair<int64_t, int64_t>> windows;
  constexpr int64_t kHalf = 26 * 3600;
  if (zone.date_zone() != nullptr) {
    for (int64_t t : TransitionsBetween(zone.date_zone(), 2020, 2030)) windows.emplace_back(t - kHalf, t + kHalf);
  }
  if (windows.empty()) {
    for (const char* day : {"2020-02-28T00:00:00Z", "2024-12-31T00:00:00Z", "2030-06-15T00:00:00Z"}) {
      int64_t t = ToSeconds(*ParseRfc3339(day));
      windows.emplace_back(t - kHalf, t + kHalf);
    }
  }
  return windows;
}

TEST(CronProperty, NextAndLatestAgreeWithTheOracleAroundEveryTransition) {
  int64_t checked = 0;
  for (const char* zone_name : kZones) {
    const TimeZone zone = Zone(zone_name);
    ASSERT_NE(zone.date_zone(), nullptr);
    const auto windows = Windows(zone);
    if (std::string(zone_name) != "Pacific/Kiritimati" && std::string(zone_name) != "UTC") {
      EXPECT_GE(windows.size(), 3u) << zone_name;  // Apia dropped DST in 2021; the rest kept it
    }
    for (auto [from, to] : windows) {
      // Wider than the window by more than any rule's longest pause (a weekend).
      const std::vector<Minute> minutes = Minutes(zone.date_zone(), from - 4 * 86400, to + 4 * 86400);
      const int64_t middle = (from + to) / 2;
      for (const char* rule : kRules) {
        const CronExpr e = *CronExpr::Parse(rule);
        const std::vector<int64_t> occ = Oracle(e, minutes);
        for (int64_t t = from; t < to; t += (t > middle - kDenseRadius && t < middle + kDenseRadius) ? 60 : kSparseStep) {
          for (int64_t probe : {t, t + 1, t + 59}) {
            auto want = std::upper_bound(occ.begin(), occ.end(), probe);
            ASSERT_NE(want, occ.end());
            std::optional<WallTime> got = e.Next(FromSeconds(probe), zone);
            ASSERT_TRUE(got);
            ASSERT_EQ(ToSeconds(*got), *want) << rule << " in " << zone_name << " after "
                                              << FormatRfc3339Utc(FromSeconds(probe)) << ": got "
                                              << FormatRfc3339Utc(*got) << ", want "
                                              << FormatRfc3339Utc(FromSeconds(*want));
            ASSERT_GT(*got, FromSeconds(probe));
            auto latest_want = std::upper_bound(occ.begin(), occ.end(), probe) - 1;
            std::optional<WallTime> latest = e.LatestAtOrBefore(FromSeconds(probe), zone);
            ASSERT_TRUE(latest);
            ASSERT_EQ(ToSeconds(*latest), *latest_want)
                << rule << " in " << zone_name << " at " << FormatRfc3339Utc(FromSeconds(probe));
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, kSparseStep == 60 ? 1'000'000 : 100'000);
}

// next(t) > t, and next is constant on [t, next(t)): probing the interval at
// its ends and inside gives the same answer. Sub-second instants included.
TEST(CronProperty, NextIsConstantUntilItFires) {
  for (const char* zone_name : kZones) {
    const TimeZone zone = Zone(zone_name);
    for (const char* rule : kRules) {
      const CronExpr e = *CronExpr::Parse(rule);
      for (auto [from, to] : Windows(zone)) {
        WallTime t = FromSeconds(from);
        while (t < FromSeconds(to)) {
          const WallTime next = *e.Next(t, zone);
          ASSERT_GT(next, t);
          const auto span = next - t;
          for (auto probe : {t + span / 3, t + span / 2, next - std::chrono::milliseconds(1), next - seconds(1)}) {
            if (probe < t) continue;
            ASSERT_EQ(*e.Next(probe, zone), next) << rule << " in " << zone_name;
          }
          t = next;
        }
      }
    }
  }
}

// A fixed-time daily rule fires exactly once on every local day, including
// the days clocks change.
TEST(CronProperty, FixedDailyRuleFiresOncePerLocalDay) {
  for (const char* zone_name : kZones) {
    const TimeZone zone = Zone(zone_name);
    for (const char* rule : kDailyFixedRules) {
      const CronExpr e = *CronExpr::Parse(rule);
      for (auto [from, to] : Windows(zone)) {
        std::map<std::string, int> per_day;
        WallTime t = FromSeconds(from - 3 * 86400);
        while (t < FromSeconds(to + 3 * 86400)) {
          t = *e.Next(t, zone);
          per_day[FormatRfc3339InZone(t, zone).substr(0, 10)]++;
        }
        // Every local day strictly inside the chain's range, once.
        ASSERT_GE(per_day.size(), 6u);
        auto first = per_day.begin();
        auto last = std::prev(per_day.end());
        for (auto it = std::next(first); it != last; ++it) {
          EXPECT_EQ(it->second, 1) << rule << " in " << zone_name << " on " << it->first;
        }
        // And no local day is missing between them.
        int64_t day_count = 0;
        for (auto it = first; it != last; ++it) {
          day_count += DayNumber(std::next(it)->first) - DayNumber(it->first);
        }
        EXPECT_EQ(day_count + 1, static_cast<int64_t>(per_day.size())) << rule << " in " << zone_name;
      }
    }
  }
}

// LocalToInstant agrees with date/tz's own classification of local times.
TEST(LocalTimeProperty, AgreesWithDateTzAroundEveryTransition) {
  for (const char* zone_name : kZones) {
    const TimeZone zone = Zone(zone_name);
    for (auto [from, to] : Windows(zone)) {
      const int64_t offset = zone.OffsetAt(FromSeconds(from)).count();
      for (int64_t local = from + offset; local < to + offset; local += 60) {
        const date::local_seconds ls{seconds(local)};
        const auto day = date::floor<date::days>(ls);
        const date::year_month_day ymd{day};
        const date::hh_mm_ss hms{ls - day};
        LocalDateTime l{static_cast<int>(ymd.year()), static_cast<unsigned>(ymd.month()),
                        static_cast<unsigned>(ymd.day()), static_cast<unsigned>(hms.hours().count()),
                        static_cast<unsigned>(hms.minutes().count()), 0};
        const Result<WallTime> got = LocalToInstant(l, zone);
        const date::local_info li = zone.date_zone()->get_info(ls);
        if (li.result == date::local_info::nonexistent) {
          ASSERT_FALSE(got.ok());
          EXPECT_EQ(got.status().code(), "invalid_local_time");
        } else {
          ASSERT_TRUE(got.ok()) << got.status().ToString();
          EXPECT_EQ(ToSeconds(*got), local - li.first.offset.count()) << zone_name;
        }
      }
    }
  }
}

}  // namespace
}  // namespace dsh
