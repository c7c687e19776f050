#include "base/json.h"

#include <gtest/gtest.h>

namespace dsh {
namespace {

TEST(StringMember, IsTheMemberOnlyWhenItIsAString) {
  Json object = {{"s", "text"}, {"n", 5}, {"z", nullptr}, {"o", Json::object()}};
  ASSERT_NE(StringMember(object, "s"), nullptr);
  EXPECT_EQ(*StringMember(object, "s"), "text");
  for (const char* key : {"n", "z", "o", "missing"}) EXPECT_EQ(StringMember(object, key), nullptr) << key;
  for (const Json& not_object : {Json(nullptr), Json("s"), Json::array({"s"}), Json(1)}) {
    EXPECT_EQ(StringMember(not_object, "s"), nullptr) << not_object;
  }
}

}  // namespace
}  // namespace dsh
