#include "time/cron_expr.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <type_traits>
#include <vector>

#include "time/civil.h"
#include "time/errors.h"
#include "time/instant.h"
#include "time/zone_rules.h"

namespace dsh {

static_assert(std::is_trivially_copyable_v<CronExpr>);
static_assert(sizeof(CronExpr) <= 24);

namespace {

using namespace time_internal;

constexpr size_t kMaxCronLength = 1024;

struct FieldSpec {
  const char* name;
  int min;
  int max;       // largest value accepted (day-of-week: 7, folded to 0)
  int star_max;  // what `*` covers
  const char* const* names;  // three-letter names for min.., or nullptr
};

constexpr const char* kMonthNames[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                       "jul", "aug", "sep", "oct", "nov", "dec"};
constexpr const char* kDayNames[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"};

constexpr FieldSpec kFields[5] = {
    {"minute", 0, 59, 59, nullptr},
    {"hour", 0, 23, 23, nullptr},
    {"day-of-month", 1, 31, 31, nullptr},
    {"month", 1, 12, 12, kMonthNames},
    {"day-of-week", 0, 7, 6, kDayNames},
};

Status FieldError(const FieldSpec& f, std::string_view field_text, const std::string& why) {
  return Status(codes::kInvalidCron,
                std::string(f.name) + " field \"" + std::string(field_text.substr(0, 40)) + "\": " + why);
}

struct ParsedField {
  uint64_t bits = 0;
  bool starts_with_star = false;
};

class FieldParser {
 public:
  FieldParser(const FieldSpec& spec, std::string_view text) : f_(spec), text_(text) {}

  Result<ParsedField> Parse() {
    ParsedField out;
    out.starts_with_star = !text_.empty() && text_[0] == '*';
    size_t start = 0;
    while (true) {
      size_t comma = text_.find(',', start);
      std::string_view element = text_.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
      if (element.empty()) return Error("empty list element");
      DSH_RETURN_IF_ERROR(Element(element, out.bits));
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    if (f_.max == 7 && (out.bits & (1u << 7))) out.bits = (out.bits & 0x7F) | 1u;  // 7 is Sunday
    return out;
  }

 private:
  Status Error(const std::string& why) const { return FieldError(f_, text_, why); }

  Status Element(std::string_view e, uint64_t& bits) {
    int lo, hi;
    bool range = false;
    size_t slash = e.find('/');
    std::string_view base = e.substr(0, slash);
    if (base == "*") {
      lo = f_.min;
      hi = f_.star_max;
      range = true;
    } else {
      size_t dash = base.find('-');
      DSH_ASSIGN_OR_RETURN(lo, Value(base.substr(0, dash)));
      hi = lo;
      if (dash != std::string_view::npos) {
        DSH_ASSIGN_OR_RETURN(hi, Value(base.substr(dash + 1)));
        range = true;
        if (hi < lo) {
          return Error("range " + std::string(base) + " is reversed (write the smaller value first)");
        }
      }
    }
    int step = 1;
    if (slash != std::string_view::npos) {
      if (!range) {
        return Error("a step needs a range or '*' before it, e.g. */15 or " + std::string(base) + "-" +
                     std::to_string(f_.star_max) + "/n");
      }
      std::string_view s = e.substr(slash + 1);
      const int span = f_.star_max - f_.min + 1;
      if (s.empty() || s.size() > 4 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        return Error("step \"" + std::string(s.substr(0, 8)) + "\" is not a number");
      }
      step = std::stoi(std::string(s));
      if (step < 1 || step > span) {
        return Error("step " + std::to_string(step) + " is out of range (1-" + std::to_string(span) + ")");
      }
    }
    for (int v = lo; v <= hi; v += step) bits |= uint64_t{1} << v;
    return Status::Ok();
  }

  Result<int> Value(std::string_view v) {
    if (v.empty()) return Error("missing value");
    if (v.find_first_of("#?") != std::string_view::npos ||
        (std::isalpha(static_cast<unsigned char>(v[0])) && v.find_first_not_of("LWlw") == std::string_view::npos)) {
      return Error("\"" + std::string(v.substr(0, 12)) + "\" is not supported (Vixie cron has no L, W, # or ?)");
    }
    if (std::isalpha(static_cast<unsigned char>(v[0]))) {
      if (f_.names == nullptr) return Error("\"" + std::string(v.substr(0, 12)) + "\" is not a number");
      if (v.size() == 3) {
        const int count = f_.names == kMonthNames ? 12 : 7;
        for (int i = 0; i < count; ++i) {
          const char* n = f_.names[i];
          if (std::tolower(static_cast<unsigned char>(v[0])) == n[0] &&
              std::tolower(static_cast<unsigned char>(v[1])) == n[1] &&
              std::tolower(static_cast<unsigned char>(v[2])) == n[2]) {
            return f_.min + i;
          }
        }
      }
      return Error("unknown name \"" + std::string(v.substr(0, 12)) + "\" (use " +
                   (f_.names == kMonthNames ? "jan-dec" : "sun-sat") + ")");
    }
    for (char c : v) {
      if (c == 'L' || c == 'W') {
        return Error("\"" + std::string(v.substr(0, 12)) + "\" is not supported (Vixie cron has no L, W, # or ?)");
      }
      if (c < '0' || c > '9') return Error("\"" + std::string(v.substr(0, 12)) + "\" is not a number");
    }
    if (v.size() > 4) return Error("value " + std::string(v.substr(0, 12)) + " is out of range (" + Range() + ")");
    int n = std::stoi(std::string(v));
    if (n < f_.min || n > f_.max) return Error("value " + std::to_string(n) + " is out of range (" + Range() + ")");
    return n;
  }

  std::string Range() const { return std::to_string(f_.min) + "-" + std::to_string(f_.max); }

  const FieldSpec& f_;
  std::string_view text_;
};

struct Macro {
  const char* name;
  const char* expansion;
};
constexpr Macro kMacros[] = {
    {"@yearly", "0 0 1 1 *"},  {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"}, {"@weekly", "0 0 * * 0"},
    {"@daily", "0 0 * * *"},   {"@midnight", "0 0 * * *"}, {"@hourly", "0 * * * *"},
};

bool IsSpace(char c) { return c == ' ' || c == '\t'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (IsSpace(s.front()) || s.front() == '\n' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (IsSpace(s.back()) || s.back() == '\n' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

int64_t CeilToMinute(int64_t s) { return FloorDiv(s, 60) * 60 + (FloorMod(s, 60) != 0 ? 60 : 0); }
int64_t FloorToMinute(int64_t s) { return FloorDiv(s, 60) * 60; }

// Memoizes one search of a monotone "first match at or after x" function
// (kForward) or "last match at or before x" (!kForward): no match lies
// between `from` and the result, so any x in that interval has the same
// answer. Consecutive periods of one Next()/LatestAtOrBefore() call usually
// hit it.
template <bool kForward, typename Fn>
class SearchMemo {
 public:
  explicit SearchMemo(Fn fn) : fn_(fn) {}
  std::optional<int64_t> operator()(int64_t x) {
    bool outside = kForward ? (x < from_ || (result_ && x > *result_)) : (x > from_ || (result_ && x < *result_));
    if (!valid_ || outside) {
      from_ = x;
      result_ = fn_(x);
      valid_ = true;
    }
    return result_;
  }

 private:
  Fn fn_;
  bool valid_ = false;
  int64_t from_ = 0;
  std::optional<int64_t> result_;
};
template <typename Fn>
SearchMemo<true, Fn> ForwardMemo(Fn fn) {
  return SearchMemo<true, Fn>(fn);
}
template <typename Fn>
SearchMemo<false, Fn> BackwardMemo(Fn fn) {
  return SearchMemo<false, Fn>(fn);
}

}  // namespace

class CronParser {
 public:
  static Result<CronExpr> Parse(std::string_view text) {
    if (text.size() > kMaxCronLength) return Status(codes::kInvalidCron, "cron expression is too long");
    std::string_view t = Trim(text);
    if (t.empty()) return Status(codes::kInvalidCron, "cron expression is empty");
    if (t[0] == '@') {
      for (const Macro& m : kMacros) {
        if (EqualsIgnoreCase(t, m.name)) return Parse(m.expansion);
      }
      return Status(codes::kInvalidCron, "unknown macro \"" + std::string(t.substr(0, 16)) +
                                             "\" (use @yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly)");
    }
    std::array<std::string_view, 5> fields;
    size_t count = 0;
    size_t i = 0;
    while (i < t.size()) {
      if (IsSpace(t[i])) {
        ++i;
        continue;
      }
      size_t j = i;
      while (j < t.size() && !IsSpace(t[j])) ++j;
      if (count < fields.size()) fields[count] = t.substr(i, j - i);
      ++count;
      i = j;
    }
    if (count != 5) {
      std::string why = "expected 5 fields (minute hour day-of-month month day-of-week), got " + std::to_string(count);
      if (count == 6) why += "; a seconds or year field is not supported";
      return Status(codes::kInvalidCron, why);
    }
    CronExpr e;
    std::array<ParsedField, 5> parsed;
    for (size_t k = 0; k < 5; ++k) {
      DSH_ASSIGN_OR_RETURN(parsed[k], FieldParser(kFields[k], fields[k]).Parse());
    }
    e.minutes_ = parsed[0].bits;
    e.hours_ = static_cast<uint32_t>(parsed[1].bits);
    e.days_ = static_cast<uint32_t>(parsed[2].bits);
    e.months_ = static_cast<uint16_t>(parsed[3].bits);
    e.weekdays_ = static_cast<uint8_t>(parsed[4].bits);
    e.flags_ = static_cast<uint8_t>((parsed[0].starts_with_star ? CronExpr::kMinuteStar : 0) |
                                    (parsed[1].starts_with_star ? CronExpr::kHourStar : 0) |
                                    (parsed[2].starts_with_star ? CronExpr::kDomStar : 0) |
                                    (parsed[4].starts_with_star ? CronExpr::kDowStar : 0));
    if (!FiresEver(e)) {
      return Status(codes::kCronNeverFires, "\"" + std::string(t) +
                                                "\" never fires: no month in its month field has a day in its "
                                                "day-of-month field");
    }
    return e;
  }

 private:
  // With both day fields restricted, any day-of-week match fires. Otherwise
  // both must match; every existing (month, day) falls on every weekday in
  // some year, so the rule fires iff some selected month has a selected day.
  static bool FiresEver(const CronExpr& e) {
    if (!(e.flags_ & CronExpr::kDomStar) && !(e.flags_ & CronExpr::kDowStar)) return true;
    for (unsigned m = 1; m <= 12; ++m) {
      if (!(e.months_ & (1u << m))) continue;
      const unsigned len = DaysInMonth(2000, m);  // a leap year: February 29 exists
      if (e.days_ & (((1u << len) - 1) << 1)) return true;
    }
    return false;
  }
};

Result<CronExpr> CronExpr::Parse(std::string_view text) { return CronParser::Parse(text); }

uint32_t CronExpr::DayMask(int64_t year, unsigned month) const {
  const unsigned len = DaysInMonth(year, month);
  const uint32_t valid = ((1u << len) - 1) << 1;
  const uint32_t dom = days_ & valid;
  const bool dom_star = flags_ & kDomStar;
  const bool dow_star = flags_ & kDowStar;
  if (weekdays_ == 0x7F && dow_star) return dom;  // "*": every weekday
  const unsigned w1 = WeekdayFromDays(DaysFromCivil(year, month, 1));
  const uint32_t w = weekdays_;
  const uint64_t rotated = ((w >> w1) | (w << (7 - w1))) & 0x7F;  // bit k: weekday of day k+1
  const auto dow = static_cast<uint32_t>((rotated * 0x10204081ull) << 1) & valid;
  return (dom_star || dow_star) ? (dom & dow) : (dom | dow);
}

namespace {

// Local seconds since the epoch as calendar fields, seconds dropped.
struct LocalFields {
  int64_t year;
  unsigned month, day, hour, minute;
};

LocalFields SplitLocal(int64_t local) {
  const int64_t days = FloorDiv(local, kSecondsPerDay);
  const int64_t sod = local - days * kSecondsPerDay;
  const CivilDate c = CivilFromDays(days);
  return {c.year, c.month, c.day, static_cast<unsigned>(sod / 3600), static_cast<unsigned>(sod / 60 % 60)};
}

}  // namespace

std::optional<int64_t> CronExpr::NextLocal(int64_t local) const {
  auto [y, mo, d, h, mi] = SplitLocal(local);
  while (y <= 9999) {
    const uint32_t mmask = months_ & ~((1u << mo) - 1);
    if (mmask == 0) {
      ++y;
      mo = 1, d = 1, h = 0, mi = 0;
      continue;
    }
    const auto m2 = static_cast<unsigned>(std::countr_zero(mmask));
    if (m2 != mo) mo = m2, d = 1, h = 0, mi = 0;
    const uint32_t dmask = d <= 31 ? DayMask(y, mo) & ~((1u << d) - 1) : 0;
    if (dmask == 0) {
      if (++mo > 12) ++y, mo = 1;
      d = 1, h = 0, mi = 0;
      continue;
    }
    const auto d2 = static_cast<unsigned>(std::countr_zero(dmask));
    if (d2 != d) d = d2, h = 0, mi = 0;
    const uint32_t hmask = hours_ & ~((1u << h) - 1);
    if (hmask == 0) {
      ++d, h = 0, mi = 0;
      continue;
    }
    const auto h2 = static_cast<unsigned>(std::countr_zero(hmask));
    if (h2 != h) h = h2, mi = 0;
    const uint64_t mimask = minutes_ & ~((uint64_t{1} << mi) - 1);
    if (mimask == 0) {
      if (++h == 24) ++d, h = 0;
      mi = 0;
      continue;
    }
    const auto mi2 = static_cast<unsigned>(std::countr_zero(mimask));
    return DaysFromCivil(y, mo, d) * kSecondsPerDay + h * 3600 + mi2 * 60;
  }
  return std::nullopt;
}

std::optional<int64_t> CronExpr::PrevLocal(int64_t local) const {
  auto [y, mo, d, h, mi] = SplitLocal(local);
  auto highest = [](uint64_t v) { return static_cast<unsigned>(63 - std::countl_zero(v)); };
  while (y >= 1) {
    const uint32_t mmask = months_ & ((2u << mo) - 1);
    if (mmask == 0) {
      --y;
      mo = 12, d = 31, h = 23, mi = 59;
      continue;
    }
    const unsigned m2 = highest(mmask);
    if (m2 != mo) mo = m2, d = 31, h = 23, mi = 59;
    const uint32_t dmask = DayMask(y, mo) & ((2u << d) - 1);
    if (dmask == 0) {
      if (--mo == 0) --y, mo = 12;
      d = 31, h = 23, mi = 59;
      continue;
    }
    const unsigned d2 = highest(dmask);
    if (d2 != d) d = d2, h = 23, mi = 59;
    const uint32_t hmask = hours_ & ((2u << h) - 1);
    if (hmask == 0) {
      --d, h = 23, mi = 59;  // d == 0 empties the next day mask: previous month
      continue;
    }
    const unsigned h2 = highest(hmask);
    if (h2 != h) h = h2, mi = 59;
    const uint64_t mimask = minutes_ & ((uint64_t{2} << mi) - 1);
    if (mimask == 0) {
      if (h == 0) {
        --d, h = 23;
      } else {
        --h;
      }
      mi = 59;
      continue;
    }
    return DaysFromCivil(y, mo, d) * kSecondsPerDay + h * 3600 + highest(mimask) * 60;
  }
  return std::nullopt;
}

std::optional<WallTime> CronExpr::Next(WallTime after, const TimeZone& zone) const {
  const ZoneRules& rules = zone.rules();
  const bool fixed = !follows_elapsed_time();
  auto next_local = ForwardMemo([this](int64_t x) { return NextLocal(x); });
  // Occurrences are whole seconds, so "strictly after `after`" means ">= s".
  int64_t s = FloorSeconds(after) + 1;
  while (true) {
    const OffsetPeriod p = rules.PeriodAt(s);
    if (fixed && s == p.begin && p.prev_offset < p.offset) {
      // Spring-forward gap: fixed times in it fire once, as the gap ends.
      const std::optional<int64_t> in_gap = next_local(CeilToMinute(p.begin + p.prev_offset));
      if (in_gap && *in_gap < p.begin + p.offset) return WallTimeFromSeconds(p.begin);
    }
    int64_t from = CeilToMinute(s + p.offset);
    if (fixed && p.begin != kBeginningOfTime && p.prev_offset > p.offset) {
      // Wall times repeated after a fall-back fired on their first pass.
      from = std::max(from, CeilToMinute(p.begin + p.prev_offset));
    }
    const std::optional<int64_t> local = next_local(from);
    if (!local) return std::nullopt;
    if (p.end == kEndOfTime || *local < p.end + p.offset) return WallTimeFromSeconds(*local - p.offset);
    s = p.end;
  }
}

std::optional<WallTime> CronExpr::LatestAtOrBefore(WallTime now, const TimeZone& zone) const {
  const ZoneRules& rules = zone.rules();
  const bool fixed = !follows_elapsed_time();
  auto prev_local = BackwardMemo([this](int64_t x) { return PrevLocal(x); });
  int64_t s = FloorSeconds(now);
  while (true) {
    const OffsetPeriod p = rules.PeriodAt(s);
    const std::optional<int64_t> local = prev_local(FloorToMinute(s + p.offset));
    if (!local) return std::nullopt;
    if (p.begin == kBeginningOfTime) return WallTimeFromSeconds(*local - p.offset);
    int64_t low = p.begin + p.offset;
    if (fixed && p.prev_offset > p.offset) low = p.begin + p.prev_offset;  // second pass of an overlap
    if (*local >= low) return WallTimeFromSeconds(*local - p.offset);
    if (fixed && p.prev_offset < p.offset) {
      const std::optional<int64_t> in_gap = prev_local(FloorToMinute(p.begin + p.offset - 1));
      if (in_gap && *in_gap >= p.begin + p.prev_offset) return WallTimeFromSeconds(p.begin);
    }
    s = p.begin - 1;
  }
}

}  // namespace dsh
