#include "session/conversation.h"

#include <gtest/gtest.h>

namespace dsh::session {
namespace {

std::vector<Event> Log(std::vector<std::pair<std::string, Json>> items) {
  std::vector<Event> out;
  int64_t seq = 0;
  for (auto& [type, data] : items) out.push_back(Event{++seq, type, 0, data});
  return out;
}

TEST(Conversation, FoldsAStepWithToolCallsIntoOneAssistantBlock) {
  auto blocks = ProjectConversation(
      "s", Log({{"message/user", {{"text", "what time is it?"}}},
                {"turn/start", {}},
                {"message/reasoning", {{"text", "need a tool"}}},
                {"message/assistant", {{"text", "Let me check."}}},
                {"tool/call", {{"call_id", "c1"}, {"name", "clock"}, {"arguments", {{"tz", "UTC"}}}}},
                {"tool/result", {{"call_id", "c1"}, {"name", "clock"}, {"result", {{"now", "12:00"}}}}},
                {"message/assistant", {{"text", "It is noon."}}},
                {"turn/end", {}}}));
  ASSERT_TRUE(blocks.ok()) << blocks.status().ToString();
  ASSERT_EQ(blocks->size(), 4u);
  EXPECT_EQ((*blocks)[0], (Json{{"role", "user"}, {"content", "what time is it?"}}));
  EXPECT_EQ((*blocks)[1]["role"], "assistant");
  EXPECT_EQ((*blocks)[1]["content"], "Let me check.");
  EXPECT_EQ((*blocks)[1]["reasoning"], "need a tool");
  EXPECT_EQ((*blocks)[1]["tool_calls"][0],
            (Json{{"id", "c1"}, {"name", "clock"}, {"arguments", {{"tz", "UTC"}}}}));
  EXPECT_EQ((*blocks)[2],
            (Json{{"role", "tool"}, {"tool_call_id", "c1"}, {"name", "clock"}, {"content", R"({"now":"12:00"})"}}));
  EXPECT_EQ((*blocks)[3], (Json{{"role", "assistant"}, {"content", "It is noon."}}));
}

TEST(Conversation, ParallelToolCallsShareTheirAssistantBlock) {
  auto blocks = ProjectConversation(
      "s", Log({{"message/user", {{"text", "go"}}},
                {"tool/call", {{"call_id", "a"}, {"name", "x"}, {"arguments", Json::object()}}},
                {"tool/call", {{"call_id", "b"}, {"name", "y"}, {"arguments", Json::object()}}},
                {"tool/result", {{"call_id", "a"}, {"name", "x"}, {"result", "ok"}}},
                {"tool/result", {{"call_id", "b"}, {"name", "y"}, {"error", {{"code", "c"}, {"message", "m"}}}}}}));
  ASSERT_TRUE(blocks.ok());
  ASSERT_EQ(blocks->size(), 4u);
  EXPECT_EQ((*blocks)[1]["content"], "");
  EXPECT_EQ((*blocks)[1]["tool_calls"].size(), 2u);
  EXPECT_EQ((*blocks)[2]["content"], "ok");
  EXPECT_EQ((*blocks)[3]["content"], R"({"error":{"code":"c","message":"m"}})");
}

TEST(Conversation, SkipsTraceOnlyEvents) {
  auto blocks = ProjectConversation("s", Log({{"turn/start", {}}, {"loop/change", {{"id", "x"}}}, {"title/user", {{"title", "t"}}}}));
  ASSERT_TRUE(blocks.ok());
  EXPECT_TRUE(blocks->empty());
}

TEST(Conversation, AMalformedConversationEventNamesSessionAndSeq) {
  auto blocks = ProjectConversation("s9", Log({{"message/user", {{"text", "ok"}}}, {"message/user", {{"txt", "bad"}}}}));
  ASSERT_FALSE(blocks.ok());
  EXPECT_EQ(blocks.status().code(), "corrupt_event");
  EXPECT_EQ(blocks.status().message(), "session s9 seq 2: a 'message/user' event needs a string `text`");
}

}  // namespace
}  // namespace dsh::session
