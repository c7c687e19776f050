#include "time/posix_tz.h"

#include <cctype>

#include "time/civil.h"

namespace dsh::time_internal {
namespace {

class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}

  bool AtEnd() const { return pos_ == s_.size(); }
  char Peek() const { return AtEnd() ? '\0' : s_[pos_]; }
  bool Consume(char c) {
    if (Peek() != c) return false;
    ++pos_;
    return true;
  }

  // An abbreviation: three or more letters, or <...> of letters, digits, + and -.
  bool Name() {
    size_t start = pos_;
    if (Consume('<')) {
      while (!AtEnd() && (std::isalnum(static_cast<unsigned char>(Peek())) || Peek() == '+' || Peek() == '-')) ++pos_;
      size_t len = pos_ - start - 1;
      return Consume('>') && len >= 3;
    }
    while (!AtEnd() && std::isalpha(static_cast<unsigned char>(Peek()))) ++pos_;
    return pos_ - start >= 3;
  }

  // [+-]hh[:mm[:ss]] with hh <= max_hours; returns seconds.
  std::optional<int32_t> Duration(int max_hours) {
    int sign = 1;
    if (Consume('-')) {
      sign = -1;
    } else {
      Consume('+');
    }
    auto hours = Number(3);
    if (!hours || *hours > max_hours) return std::nullopt;
    int32_t total = *hours * 3600;
    for (int32_t unit : {60, 1}) {
      if (!Consume(':')) break;
      auto part = Number(2);
      if (!part || *part > 59) return std::nullopt;
      total += *part * unit;
    }
    return sign * total;
  }

  std::optional<int32_t> Number(int max_digits) {
    int32_t value = 0;
    int digits = 0;
    while (digits < max_digits && std::isdigit(static_cast<unsigned char>(Peek()))) {
      value = value * 10 + (s_[pos_++] - '0');
      ++digits;
    }
    if (digits == 0) return std::nullopt;
    return value;
  }

  std::optional<PosixTzDate> Date() {
    PosixTzDate d;
    if (Consume('M')) {
      auto m = Number(2);
      if (!m || *m < 1 || *m > 12 || !Consume('.')) return std::nullopt;
      auto w = Number(1);
      if (!w || *w < 1 || *w > 5 || !Consume('.')) return std::nullopt;
      auto wd = Number(1);
      if (!wd || *wd > 6) return std::nullopt;
      d.kind = PosixTzDate::Kind::kMonthWeekDay;
      d.month = *m;
      d.week = *w;
      d.weekday = *wd;
    } else if (Consume('J')) {
      auto n = Number(3);
      if (!n || *n < 1 || *n > 365) return std::nullopt;
      d.kind = PosixTzDate::Kind::kJulianNoLeap;
      d.day = *n;
    } else {
      auto n = Number(3);
      if (!n || *n > 365) return std::nullopt;
      d.kind = PosixTzDate::Kind::kZeroBasedDay;
      d.day = *n;
    }
    if (Consume('/')) {
      auto t = Duration(167);
      if (!t) return std::nullopt;
      d.time = *t;
    }
    return d;
  }

 private:
  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

int64_t PosixTzDate::DayIn(int64_t year) const {
  switch (kind) {
    case Kind::kJulianNoLeap: {
      int64_t doy = day - 1;  // February 29 is never counted
      if (IsLeapYear(year) && day >= 60) ++doy;
      return DaysFromCivil(year, 1, 1) + doy;
    }
    case Kind::kZeroBasedDay:
      return DaysFromCivil(year, 1, 1) + day;
    case Kind::kMonthWeekDay:
      break;
  }
  const int64_t first = DaysFromCivil(year, static_cast<unsigned>(month), 1);
  const int first_weekday = static_cast<int>(WeekdayFromDays(first));
  int64_t dom = 1 + (weekday - first_weekday + 7) % 7 + (week - 1) * 7;
  const auto len = static_cast<int64_t>(DaysInMonth(year, static_cast<unsigned>(month)));
  while (dom > len) dom -= 7;  // week 5 means "the last"
  return first + dom - 1;
}

PosixTz::YearTransitions PosixTz::TransitionsIn(int64_t year) const {
  return {start.DayIn(year) * kSecondsPerDay + start.time - std_offset,
          end.DayIn(year) * kSecondsPerDay + end.time - dst_offset};
}

std::optional<PosixTz> ParsePosixTz(std::string_view text) {
  Reader r(text);
  PosixTz tz;
  if (!r.Name()) return std::nullopt;
  auto std_offset = r.Duration(24);
  if (!std_offset) return std::nullopt;
  tz.std_offset = -*std_offset;
  if (r.AtEnd()) return tz;
  if (!r.Name()) return std::nullopt;
  tz.has_dst = true;
  tz.dst_offset = tz.std_offset + 3600;
  if (!r.AtEnd() && r.Peek() != ',') {
    auto dst_offset = r.Duration(24);
    if (!dst_offset) return std::nullopt;
    tz.dst_offset = -*dst_offset;
  }
  if (r.AtEnd()) {
    // POSIX leaves the rule to the implementation; zic never omits it. Use the US rule.
    tz.start = {PosixTzDate::Kind::kMonthWeekDay, 0, 3, 2, 0, 7200};
    tz.end = {PosixTzDate::Kind::kMonthWeekDay, 0, 11, 1, 0, 7200};
    return tz;
  }
  if (!r.Consume(',')) return std::nullopt;
  auto start = r.Date();
  if (!start || !r.Consume(',')) return std::nullopt;
  auto end = r.Date();
  if (!end || !r.AtEnd()) return std::nullopt;
  tz.start = *start;
  tz.end = *end;
  return tz;
}

}  // namespace dsh::time_internal
