#include "base/clock.h"

namespace dsh {
namespace {

class SystemClock final : public Clock {
 public:
  WallTime Now() const override {
    return std::chrono::floor<std::chrono::milliseconds>(std::chrono::system_clock::now());
  }
  MonoTime MonotonicNow() const override { return std::chrono::steady_clock::now(); }
};

}  // namespace

Clock& RealClock() {
  static auto* clock = new SystemClock();  // intentionally leaked: used until exit
  return *clock;
}

int64_t ToUnixMillis(WallTime t) {
  return t.time_since_epoch().count();
}

WallTime FromUnixMillis(int64_t ms) { return WallTime(std::chrono::milliseconds(ms)); }

FakeClock::FakeClock(WallTime start) : wall_(start) {}

WallTime FakeClock::Now() const {
  std::lock_guard lock(mu_);
  return wall_;
}

MonoTime FakeClock::MonotonicNow() const {
  std::lock_guard lock(mu_);
  return mono_;
}

void FakeClock::Advance(std::chrono::nanoseconds d) {
  std::lock_guard lock(mu_);
  wall_ += std::chrono::floor<WallTime::duration>(d);
  mono_ += std::chrono::duration_cast<MonoTime::duration>(d);
}

void FakeClock::SetWall(WallTime t) {
  std::lock_guard lock(mu_);
  wall_ = t;
}

void FakeClock::StepWall(std::chrono::nanoseconds d) {
  std::lock_guard lock(mu_);
  wall_ += std::chrono::floor<WallTime::duration>(d);
}

}  // namespace dsh
