#include "base/clock.h"

#include <gtest/gtest.h>

namespace dsh {
namespace {

using namespace std::chrono_literals;

TEST(FakeClock, AdvanceMovesWallAndMonotonicTogether) {
  FakeClock clock(FromUnixMillis(1000));
  MonoTime m0 = clock.MonotonicNow();
  clock.Advance(1500ms);
  EXPECT_EQ(ToUnixMillis(clock.Now()), 2500);
  EXPECT_EQ(clock.MonotonicNow() - m0, 1500ms);
}

TEST(FakeClock, StepWallLeavesMonotonicAlone) {
  FakeClock clock(FromUnixMillis(10'000));
  MonoTime m0 = clock.MonotonicNow();
  clock.StepWall(-1h);
  EXPECT_EQ(ToUnixMillis(clock.Now()), 10'000 - 3'600'000);
  EXPECT_EQ(clock.MonotonicNow(), m0);
}

TEST(Clock, UnixMillisRoundTrips) {
  EXPECT_EQ(ToUnixMillis(FromUnixMillis(1'767'225'600'123)), 1'767'225'600'123);
  EXPECT_EQ(ToUnixMillis(FromUnixMillis(-1)), -1);
}

}  // namespace
}  // namespace dsh
