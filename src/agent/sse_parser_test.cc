#include "agent/sse_parser.h"

#include <gtest/gtest.h>

namespace dsh::agent {
namespace {

std::vector<std::string> Data(const std::vector<SseEvent>& events) {
  std::vector<std::string> out;
  for (const auto& e : events) out.push_back(e.data);
  return out;
}

TEST(SseParser, DispatchesEachEventAtItsBlankLine) {
  SseParser p;
  EXPECT_EQ(Data(p.Feed("data: {\"a\":1}\n\ndata: [DONE]\n\n")), (std::vector<std::string>{"{\"a\":1}", "[DONE]"}));
  EXPECT_TRUE(p.Finish().empty());
}

TEST(SseParser, ReassemblesLinesSplitAcrossChunks) {
  SseParser p;
  std::vector<std::string> got;
  for (std::string_view piece : {"da", "ta: hel", "lo\n", "\n", "data: wor", "ld\n\nda"}) {
    for (auto& d : Data(p.Feed(piece))) got.push_back(d);
  }
  EXPECT_EQ(got, (std::vector<std::string>{"hello", "world"}));
}

TEST(SseParser, AcceptsCrlfAndBareCrEvenWhenCrlfIsSplit) {
  SseParser p;
  auto first = p.Feed("data: one\r\n\r\ndata: two\r");
  EXPECT_EQ(Data(first), (std::vector<std::string>{"one"}));
  // The LF that completes "two\r\n" arrives in the next chunk; it must not
  // count as a second (blank) line on its own.
  auto second = p.Feed("\ndata: more\r\n\r\n");
  EXPECT_EQ(Data(second), (std::vector<std::string>{"two\nmore"}));
  EXPECT_EQ(Data(p.Feed("data: three\r\rdata: x\r\r")), (std::vector<std::string>{"three", "x"}));
}

TEST(SseParser, SkipsCommentsAndUnknownFields) {
  SseParser p;
  auto events = p.Feed(": keep-alive\n\nid: 7\nretry: 100\nevent: delta\ndata: x\n\n: ping\n\n");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].event, "delta");
  EXPECT_EQ(events[0].data, "x");
}

TEST(SseParser, JoinsMultiLineDataWithNewlines) {
  SseParser p;
  auto events = p.Feed("data: {\"a\":\ndata:1}\ndata\n\n");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].data, "{\"a\":\n1}\n");
}

TEST(SseParser, FinishDeliversAnEventTheServerDidNotTerminate) {
  SseParser p;
  EXPECT_TRUE(p.Feed("data: {\"x\":1}\n").empty());
  EXPECT_EQ(Data(p.Finish()), (std::vector<std::string>{"{\"x\":1}"}));
  SseParser q;
  EXPECT_TRUE(q.Feed("data: tail").empty());
  EXPECT_EQ(Data(q.Finish()), (std::vector<std::string>{"tail"}));
}

}  // namespace
}  // namespace dsh::agent
