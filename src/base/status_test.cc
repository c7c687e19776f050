#include "base/status.h"

#include <gtest/gtest.h>

namespace dsh {
namespace {

Result<int> Half(int v) {
  if (v % 2 != 0) return InvalidArguments("odd");
  return v / 2;
}

Result<int> Quarter(int v) {
  DSH_ASSIGN_OR_RETURN(int h, Half(v));
  return Half(h);
}

TEST(Status, OkHasNoCode) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.ToString(), "ok");
}

TEST(Status, ErrorCarriesCodeAndMessage) {
  Status s = NotFound("session x");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), "not_found");
  EXPECT_EQ(s.ToString(), "not_found: session x");
  EXPECT_EQ(s.WithContext("read").message(), "read: session x");
}

TEST(Result, PropagatesErrorsThroughAssignOrReturn) {
  EXPECT_EQ(Quarter(8).value(), 2);
  auto r = Quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), "invalid_arguments");
}

}  // namespace
}  // namespace dsh
