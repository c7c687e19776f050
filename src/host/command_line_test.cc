#include "host/command_line.h"

#include <gtest/gtest.h>

namespace dsh::host {
namespace {

std::vector<std::string> Values(std::string_view text) {
  auto tokens = SplitCommandLine(text);
  EXPECT_TRUE(tokens.ok()) << text << ": " << tokens.status().ToString();
  std::vector<std::string> out;
  if (tokens.ok()) {
    for (const auto& t : *tokens) out.push_back(t.value);
  }
  return out;
}

using V = std::vector<std::string>;

TEST(SplitCommandLine, WhitespaceAnywhereIsOneSeparator) {
  EXPECT_EQ(Values("status --recent 5"), (V{"status", "--recent", "5"}));
  EXPECT_EQ(Values("   status    --recent\t5  \n"), (V{"status", "--recent", "5"}));
  EXPECT_EQ(Values(""), V{});
  EXPECT_EQ(Values("   "), V{});
}

TEST(SplitCommandLine, QuotesGroupWordsAndCanJoinAdjacentParts) {
  EXPECT_EQ(Values(R"(create "fix the  parser" --preset x)"),
            (V{"create", "fix the  parser", "--preset", "x"}));
  EXPECT_EQ(Values("send ses_1 'it''s \"fine\"'"), (V{"send", "ses_1", "its \"fine\""}));
  EXPECT_EQ(Values(R"(a"b c"'d e'f)"), (V{"ab cd ef"}));
  EXPECT_EQ(Values(R"(x '' "")"), (V{"x", "", ""}));
}

TEST(SplitCommandLine, BackslashEscapesOutsideQuotesAndInDoubleQuotes) {
  EXPECT_EQ(Values(R"(a\ b \'c\")"), (V{"a b", "'c\""}));
  EXPECT_EQ(Values(R"("say \"hi\" \\ \n")"), (V{R"(say "hi" \ \n)"}));
  EXPECT_EQ(Values(R"('no \escapes\ here')"), (V{R"(no \escapes\ here)"}));
  EXPECT_EQ(Values("one\\\ntwo"), (V{"onetwo"}));
}

TEST(SplitCommandLine, RecordsWhereEachTokenStartsAndWhetherItWasQuoted) {
  auto tokens = SplitCommandLine(R"( create {"prompt": "x"})");
  ASSERT_TRUE(tokens.ok());
  ASSERT_EQ(tokens->size(), 3u);
  EXPECT_EQ((*tokens)[0].offset, 1u);
  EXPECT_FALSE((*tokens)[0].quoted);
  EXPECT_EQ((*tokens)[1].offset, 8u);
  EXPECT_EQ((*tokens)[1].value, "{prompt:");
  EXPECT_TRUE((*tokens)[1].quoted);
}

TEST(SplitCommandLine, AnUnterminatedQuoteOrTrailingBackslashIsInvalidArguments) {
  for (std::string_view bad : {"create 'fix it", "send ses_1 \"hello", "a \\", R"("a \")"}) {
    auto r = SplitCommandLine(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), codes::kInvalidArguments) << bad;
  }
  EXPECT_NE(SplitCommandLine("x 'y").status().message().find("unterminated single quote at column 3"),
            std::string::npos);
}

TEST(QuoteCommandArgument, EveryArgumentSplitsBackToItself) {
  V args = {"status",
            "--recent",
            "5",
            "",
            "two words",
            "it's",
            "\"double\"",
            "back\\slash",
            "tab\there",
            "new\nline",
            "'",
            "''",
            "{\"prompt\": \"a b\"}",
            "ses_01kd/x.y",
            "ünïcode ✓",
            "$HOME",
            "a;b|c&d"};
  std::string line;
  for (const auto& a : args) line += (line.empty() ? "" : " ") + QuoteCommandArgument(a);
  EXPECT_EQ(Values(line), args) << line;
  EXPECT_EQ(QuoteCommandArgument("ses_01kd"), "ses_01kd");
  EXPECT_EQ(QuoteCommandArgument("it's"), R"('it'\''s')");
  EXPECT_EQ(QuoteCommandArgument(""), "''");
}

}  // namespace
}  // namespace dsh::host
