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
TEST(FallbackTitle, OfALoopDeliveryIsItsPromptNotItsMarkup) {
  EXPECT_EQ(FallbackTitle("<loop>\n  <loop_id>loop_01abc</loop_id>\n  <prompt>Check &lt;deploy&gt; &amp; &quot;report&quot;</prompt>\n</loop>"),
            "Check <deploy> & \"report\"");
  // A title stored from the markup before (cut before the prompt) reads "Loop run".
  Titles old{std::nullopt, std::nullopt, "<loop> <loop_id>loop_01kdvdna008p7ptbknga2p5gk7</loop_id>…"};
  EXPECT_EQ(old.Effective(), "Loop run");
  Titles cut{std::nullopt, std::nullopt, "<loop> <loop_id>l1</loop_id> <prompt>Summarize the night's…"};
  EXPECT_EQ(cut.Effective(), "Summarize the night's…");
  Titles renamed{"Nightly report", std::nullopt, "<loop> <loop_id>l1</loop_id>…"};
  EXPECT_EQ(renamed.Effective(), "Nightly report");
  // Text that merely mentions a loop stays as it is.
  EXPECT_EQ(FallbackTitle("why does <loop> fail?"), "why does <loop> fail?");
}

TEST(Titles, SourceNamesTheKindTheEffectiveTitleComesFrom) {
  EXPECT_EQ((Titles{"Mine", "Generated", "first prompt"}).Source(), "user");
  EXPECT_EQ((Titles{std::nullopt, "Generated", "first prompt"}).Source(), "generated");
  EXPECT_EQ((Titles{std::nullopt, std::nullopt, "first prompt"}).Source(), "fallback");
  EXPECT_EQ(Titles{}.Source(), std::nullopt);
  EXPECT_EQ(Titles{}.Effective(), std::nullopt);
}

}  // namespace dsh::session
