#pragma once

#include <chrono>
#include <mutex>

namespace dsh {

// Wall-clock instants in whole milliseconds since the Unix epoch (the
// precision dsh stores); spans far beyond the years 0001-9999 dsh accepts.
using WallTime = std::chrono::time_point<std::chrono::system_clock, std::chrono::milliseconds>;
using MonoTime = std::chrono::steady_clock::time_point;

// The only source of time in dsh (CONVENTIONS.md rule 6). Wall time decides
// what is due and what is recorded; monotonic time measures waits.
// Implementations are thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual WallTime Now() const = 0;
  virtual MonoTime MonotonicNow() const = 0;
};

// The process-wide real clock. Never destroyed.
Clock& RealClock();

// Wall time in whole milliseconds since the Unix epoch: how dsh stores instants.
int64_t ToUnixMillis(WallTime t);
WallTime FromUnixMillis(int64_t ms);

// A clock that moves only when told. Wall and monotonic time advance together
// with Advance(); SetWall()/StepWall() move the wall clock alone, as an NTP
// correction or an operator would. Thread-safe.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(WallTime start = FromUnixMillis(1'767'225'600'000));  // 2026-01-01T00:00:00Z

  WallTime Now() const override;
  MonoTime MonotonicNow() const override;

  void Advance(std::chrono::nanoseconds d);
  void SetWall(WallTime t);
  void StepWall(std::chrono::nanoseconds d);

 private:
  mutable std::mutex mu_;
  WallTime wall_;           // GUARDED_BY(mu_)
  MonoTime mono_{};         // GUARDED_BY(mu_)
};

}  // namespace dsh
