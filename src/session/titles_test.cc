#include "session/titles.h"

#include <gtest/gtest.h>

namespace dsh::session {
namespace {

TEST(FallbackTitle, CollapsesWhitespace) { EXPECT_EQ(FallbackTitle("  Fix\n the   build \t"), "Fix the build"); }

TEST(FallbackTitle, CutsLongPromptsAtAWordBoundary) {
  std::string t = FallbackTitle(
      "Please summarize the deployment logs from last night and tell me which services restarted");
  EXPECT_EQ(t, "Please summarize the deployment logs from last night and…");
}

TEST(FallbackTitle, NeverSplitsAMultibyteCharacter) {
  std::string prompt;
  for (int i = 0; i < 40; ++i) prompt += "é";  // 2 bytes each, no spaces
  std::string t = FallbackTitle(prompt);
  EXPECT_EQ(t, std::string(prompt.substr(0, 60)) + "…");
}

TEST(FallbackTitle, IsEmptyForBlankPrompts) { EXPECT_EQ(FallbackTitle(" \n "), ""); }

}  // namespace
}  // namespace dsh::session
