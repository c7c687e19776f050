// CronExpr::Describe: an English rendering of the field sets for the UI and
// the CLI ("At 09:00, Monday through Friday"). Works from the bitsets, so a
// macro and its expansion read the same.

#include <cstdio>
#include <string>
#include <vector>

#include "time/cron_expr.h"

namespace dsh {
namespace {

constexpr const char* kMonths[] = {"January", "February", "March",     "April",   "May",      "June",
                                   "July",    "August",   "September", "October", "November", "December"};
constexpr const char* kWeekdays[] = {"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"};

std::vector<int> Values(uint64_t bits, int lo, int hi) {
  std::vector<int> v;
  for (int i = lo; i <= hi; ++i) {
    if (bits & (uint64_t{1} << i)) v.push_back(i);
  }
  return v;
}

bool IsAll(const std::vector<int>& v, int lo, int hi) { return static_cast<int>(v.size()) == hi - lo + 1; }

// The step of an arithmetic progression of values an equal distance > 1
// apart: three or more values, or two that cover the field from `lo` on.
int StepOf(const std::vector<int>& v, int lo, int hi) {
  if (v.size() < 2) return 0;
  const int step = v[1] - v[0];
  if (step < 2) return 0;
  for (size_t i = 2; i < v.size(); ++i) {
    if (v[i] - v[i - 1] != step) return 0;
  }
  if (v.size() == 2 && !(v.front() == lo && v.back() + step > hi)) return 0;
  return step;
}

// Like StepOf, but only for progressions from `lo` through the end of the field (`*/n`).
int FullStepOf(const std::vector<int>& v, int lo, int hi) {
  const int step = StepOf(v, lo, hi);
  return step && v.front() == lo && v.back() + step > hi ? step : 0;
}

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += i + 1 == items.size() ? " and " : ", ";
    out += items[i];
  }
  return out;
}

// "1 through 5 and 10", with runs of three or more written as ranges.
template <typename Name>
std::string Runs(const std::vector<int>& v, Name name) {
  std::vector<std::string> items;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (j - i >= 2) {
      items.push_back(name(v[i]) + " through " + name(v[j]));
    } else {
      for (size_t k = i; k <= j; ++k) items.push_back(name(v[k]));
    }
    i = j + 1;
  }
  return Join(items);
}

std::string Clock(int h, int m) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%02d:%02d", h, m);
  return buf;
}

std::string Number(int n) { return std::to_string(n); }

std::string HourPhrase(const std::vector<int>& h) {
  if (h.size() == 1) return "between " + Clock(h[0], 0) + " and " + Clock(h[0], 59);
  if (h.back() - h.front() + 1 == static_cast<int>(h.size())) {
    return "between " + Clock(h.front(), 0) + " and " + Clock(h.back(), 59);
  }
  if (int step = StepOf(h, 0, 23)) {
    std::string out = "every " + Number(step) + " hours";
    if (!FullStepOf(h, 0, 23)) out += " from " + Clock(h.front(), 0) + " through " + Clock(h.back(), 0);
    return out;
  }
  return "during the hours starting " + Runs(h, [](int x) { return Clock(x, 0); });
}

std::string TimePhrase(const std::vector<int>& m, const std::vector<int>& h) {
  const bool all_m = IsAll(m, 0, 59);
  const bool all_h = IsAll(h, 0, 23);
  const int mstep = FullStepOf(m, 0, 59);
  if (all_m) return all_h ? "Every minute" : "Every minute, " + HourPhrase(h);
  if (mstep) {
    std::string out = "Every " + Number(mstep) + " minutes";
    return all_h ? out : out + ", " + HourPhrase(h);
  }
  if (!all_h && m.size() * h.size() <= 4) {
    std::vector<std::string> times;
    for (int hh : h) {
      for (int mm : m) times.push_back(Clock(hh, mm));
    }
    return "At " + Join(times);
  }
  std::string minutes;
  if (m.size() == 1 && m[0] == 0) {
    minutes = "At the start of";
  } else if (m.size() == 1) {
    minutes = "At " + Number(m[0]) + (m[0] == 1 ? " minute" : " minutes") + " past";
  } else {
    minutes = "At minutes " + Runs(m, Number) + " past";
  }
  if (all_h) return minutes + " every hour";
  return minutes + " the hour, " + HourPhrase(h);
}

std::string DayOfMonthPhrase(const std::vector<int>& d) {
  if (d.size() == 1) return "on day " + Number(d[0]) + " of the month";
  if (int step = FullStepOf(d, 1, 31)) return "every " + Number(step) + " days of the month, starting on day 1";
  return "on days " + Runs(d, Number) + " of the month";
}

std::string DayOfWeekPhrase(const std::vector<int>& w) {
  auto name = [](int x) { return std::string(kWeekdays[x]); };
  if (w.size() == 1) return "only on " + name(w[0]);
  std::string runs = Runs(w, name);
  return runs.find(" through ") != std::string::npos && runs.find(" and ") == std::string::npos ? runs
                                                                                                 : "only on " + runs;
}

std::string MonthPhrase(const std::vector<int>& mo) {
  auto name = [](int x) { return std::string(kMonths[x - 1]); };
  if (mo.size() == 1) return "only in " + name(mo[0]);
  if (int step = FullStepOf(mo, 1, 12)) return "every " + Number(step) + " months";
  std::string runs = Runs(mo, name);
  return runs.find(" through ") != std::string::npos && runs.find(" and ") == std::string::npos ? runs
                                                                                                 : "only in " + runs;
}

}  // namespace

std::string CronExpr::Describe() const {
  const std::vector<int> m = Values(minutes_, 0, 59);
  const std::vector<int> h = Values(hours_, 0, 23);
  const std::vector<int> d = Values(days_, 1, 31);
  const std::vector<int> mo = Values(months_, 1, 12);
  const std::vector<int> w = Values(weekdays_, 0, 6);
  std::string out = TimePhrase(m, h);

  const bool dom_all = IsAll(d, 1, 31);
  const bool dow_all = IsAll(w, 0, 6);
  const bool either = !(flags_ & kDomStar) && !(flags_ & kDowStar);
  if (either) {
    out += ", " + DayOfMonthPhrase(d) + " or " + (w.size() == 1 ? "on " + std::string(kWeekdays[w[0]]) : "on " + Runs(w, [](int x) { return std::string(kWeekdays[x]); }));
  } else if (!dom_all && !dow_all) {
    out += ", " + DayOfMonthPhrase(d) + ", if it is a " + Runs(w, [](int x) { return std::string(kWeekdays[x]); });
  } else if (!dom_all) {
    out += ", " + DayOfMonthPhrase(d);
  } else if (!dow_all) {
    out += ", " + DayOfWeekPhrase(w);
  }
  if (!IsAll(mo, 1, 12)) out += ", " + MonthPhrase(mo);
  return out;
}

}  // namespace dsh
