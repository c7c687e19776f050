#include "time/zone_rules.h"

#include <date/tz.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include "time/civil.h"

namespace dsh::time_internal {

ZoneRules ZoneRules::Fixed(int32_t offset) { return ZoneRules(offset, {}, std::nullopt); }

ZoneRules::ZoneRules(int32_t initial_offset, const std::vector<Transition>& transitions,
                     std::optional<PosixTz> tail)
    : initial_offset_(initial_offset) {
  int32_t current = initial_offset;
  for (const Transition& t : transitions) {
    if (t.offset == current) continue;
    at_.push_back(t.at);
    offset_.push_back(t.offset);
    current = t.offset;
  }
  if (tail && tail->has_dst) tail_ = tail;
}

std::string_view TzifFooter(std::string_view tzif) {
  if (tzif.size() < 6 || tzif.substr(0, 4) != "TZif" || tzif[4] == '\0') return {};
  if (tzif.back() != '\n') return {};
  std::string_view body = tzif.substr(0, tzif.size() - 1);
  size_t nl = body.rfind('\n');
  if (nl == std::string_view::npos) return {};
  return body.substr(nl + 1);
}

Result<ZoneRules> ZoneRules::Compile(const date::time_zone& zone, std::string_view tzdir) {
  using std::chrono::seconds;
  std::vector<Transition> transitions;
  int32_t initial = 0;
  try {
    const date::sys_seconds last{date::sys_days{date::year::max() / 1 / 1}};
    date::sys_seconds t{date::sys_days{date::year::min() / 1 / 1}};
    date::sys_info info = zone.get_info(t);
    initial = static_cast<int32_t>(info.offset.count());
    while (info.end < last) {
      t = info.end;
      info = zone.get_info(t);
      transitions.push_back({t.time_since_epoch().count(), static_cast<int32_t>(info.offset.count())});
    }
  } catch (const std::exception& e) {
    return Internal("cannot read time zone " + zone.name() + ": " + e.what());
  }
  std::optional<PosixTz> tail;
  std::ifstream in(std::string(tzdir) + "/" + zone.name(), std::ios::binary);
  if (in) {
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    tail = ParsePosixTz(TzifFooter(bytes));
  }
  return ZoneRules(initial, transitions, tail);
}

OffsetPeriod ZoneRules::PeriodAt(int64_t t) const {
  const size_t n = at_.size();
  const size_t i = static_cast<size_t>(std::upper_bound(at_.begin(), at_.end(), t) - at_.begin());
  if (tail_ && i == n) return TailPeriodAt(t);
  OffsetPeriod p;
  p.begin = i > 0 ? at_[i - 1] : kBeginningOfTime;
  p.offset = i > 0 ? offset_[i - 1] : initial_offset_;
  p.prev_offset = i > 1 ? offset_[i - 2] : initial_offset_;
  p.end = i < n ? at_[i] : kEndOfTime;
  return p;
}

OffsetPeriod ZoneRules::TailPeriodAt(int64_t t) const {
  struct Item {
    int64_t at;
    int32_t offset;
  };
  const int64_t year = CivilFromDays(FloorDiv(t, kSecondsPerDay)).year;
  std::array<Item, 10> items;
  size_t count = 0;
  for (int64_t y = year - 2; y <= year + 2; ++y) {
    PosixTz::YearTransitions yt = tail_->TransitionsIn(y);
    items[count++] = {yt.dst_start, tail_->dst_offset};
    items[count++] = {yt.dst_end, tail_->std_offset};
  }
  std::sort(items.begin(), items.begin() + count, [](const Item& a, const Item& b) { return a.at < b.at; });

  // The explicit data is authoritative up to its last transition.
  const int64_t floor_at = at_.empty() ? kBeginningOfTime : at_.back();
  Item base{floor_at, at_.empty() ? initial_offset_ : offset_.back()};
  int32_t base_prev = at_.size() > 1 ? offset_[at_.size() - 2] : initial_offset_;

  OffsetPeriod p{base.at, kEndOfTime, base.offset, base_prev};
  for (size_t k = 0; k < count; ++k) {
    const Item& it = items[k];
    if (it.at <= floor_at) continue;
    // Two rule changes at one instant (all-year DST): only the later one counts.
    if (k + 1 < count && items[k + 1].at == it.at) continue;
    if (it.offset == p.offset) continue;
    if (it.at <= t) {
      p.prev_offset = p.offset;
      p.begin = it.at;
      p.offset = it.offset;
    } else {
      p.end = it.at;
      break;
    }
  }
  return p;
}

}  // namespace dsh::time_internal
