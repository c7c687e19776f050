#include "base/ids.h"

#include <gtest/gtest.h>

#include <set>

namespace dsh {
namespace {

TEST(Ids, HavePrefixAndFixedLength) {
  FakeClock clock;
  std::string id = NewId("ses_", clock);
  EXPECT_EQ(id.rfind("ses_", 0), 0u);
  EXPECT_EQ(id.size(), 4u + 26u);
  EXPECT_EQ(id.find_first_not_of("0123456789abcdefghjkmnpqrstvwxyz_se"), std::string::npos);
}

TEST(Ids, AreUniqueAndSortByTime) {
  FakeClock clock;
  std::set<std::string> seen;
  std::string prev;
  for (int i = 0; i < 10000; ++i) {
    clock.Advance(std::chrono::milliseconds(1));
    std::string id = NewId("x", clock);
    EXPECT_TRUE(seen.insert(id).second);
    EXPECT_LT(prev.substr(0, 11), id.substr(0, 11) + "~");
    EXPECT_LE(prev.substr(0, 11), id.substr(0, 11));
    prev = id;
  }
}

TEST(Ids, RandomHexHasRequestedLength) {
  std::string a = RandomHex(16), b = RandomHex(16);
  EXPECT_EQ(a.size(), 32u);
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace dsh
