#include "session/export.h"

#include <gtest/gtest.h>

namespace dsh::session {
namespace {

Event E(int64_t seq, std::string type, Json data) {
  // 2026-12-03T12:00:00Z + seq seconds
  return Event{seq, std::move(type), 1'796'299'200'000 + seq * 1000, std::move(data)};
}

SessionHeader Header() {
  SessionHeader h;
  h.id = "ses_1";
  h.created_at = 1'796'299'200'000;
  h.route = {"openai", "gpt-x", std::nullopt};
  h.time_zone = "Europe/Berlin";
  return h;
}

TEST(ExportMarkdown, ReadsLikeTheConversationInTheSessionsZone) {
  std::vector<Event> events = {
      E(1, "turn/start", Json::object()),
      E(2, "message/user", {{"text", "What is 2+2?"}, {"message_id", "m1"}}),
      E(3, "message/reasoning", {{"text", "Simple sum."}}),
      E(4, "tool/call", {{"call_id", "c1"}, {"name", "calc"}, {"arguments", {{"expr", "2+2"}}}}),
      E(5, "tool/result", {{"call_id", "c1"}, {"name", "calc"}, {"result", {{"value", 4}}}}),
      E(6, "message/assistant", {{"text", "It is **4**.\n\n```\ncode with ``` inside\n```"}}),
      E(7, "turn/end", {{"status", "completed"}}),
      E(8, "title/generated", {{"title", "Sums"}}),
  };
  std::string md = ExportMarkdown(Header(), "Sums", events);
  EXPECT_EQ(md.rfind("# Sums\n\nSession `ses_1` · created 2026-12-03T13:00:00+01:00 · model `openai/gpt-x` · zone "
                     "Europe/Berlin\n\n",
                     0),
            0u)
      << md;
  EXPECT_NE(md.find("## You · 2026-12-03T13:00:02+01:00\n\nWhat is 2+2?\n"), std::string::npos) << md;
  EXPECT_NE(md.find("<details><summary>Reasoning</summary>"), std::string::npos) << md;
  EXPECT_NE(md.find("<details><summary>Tool call <code>calc</code></summary>\n\n```json\n{\n  \"expr\": \"2+2\"\n}\n```"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("Tool result <code>calc</code>"), std::string::npos) << md;
  EXPECT_NE(md.find("## Assistant · 2026-12-03T13:00:06+01:00\n\nIt is **4**."), std::string::npos) << md;
  EXPECT_EQ(md.find("turn/"), std::string::npos) << "bookkeeping is left out: " << md;
  EXPECT_EQ(md.find("Sums\n", 3), std::string::npos) << "a title event is no message: " << md;
}

TEST(ExportMarkdown, DeliveriesShowTheirPromptAndFailuresSaySo) {
  std::vector<Event> events = {
      E(1, "turn/start", Json::object()),
      E(2, "message/user",
        {{"text", "<loop><loop_id>loop_1</loop_id><prompt>Check &lt;the&gt; build</prompt></loop>"},
         {"meta", {{"origin", "loop"}, {"loop_id", "loop_1"}}}}),
      E(3, "turn/end", {{"status", "error"}, {"error", {{"code", "model_unavailable"}, {"message", "down"}}}}),
      E(4, "turn/start", Json::object()),
      E(5, "message/user",
        {{"text", "[SCHEDULE REMINDER] schedule_id: \"schedule-1\" occurrence_at: 2026-12-03T12:00:05Z prompt: "
                  "\"Stretch\\nnow\""},
         {"meta", {{"origin", "schedule"}, {"schedule_id", "schedule-1"}}}}),
      E(6, "message/assistant", {{"text", "Half an ans"}, {"partial", true}}),
      E(7, "turn/end", {{"status", "error"}, {"error", {{"code", "cancelled"}, {"message", "stopped"}}}}),
  };
  SessionHeader h = Header();
  h.parent_id = "ses_0";
  h.seed_length = 0;
  std::string md = ExportMarkdown(h, std::nullopt, events);
  EXPECT_EQ(md.rfind("# ses_1\n", 0), 0u) << md;
  EXPECT_NE(md.find("forked from `ses_0` after event 0"), std::string::npos) << md;
  EXPECT_NE(md.find("## Loop run `loop_1` · 2026-12-03T13:00:02+01:00\n\n> Check <the> build\n"), std::string::npos)
      << md;
  EXPECT_EQ(md.find("<loop>"), std::string::npos) << md;
  EXPECT_NE(md.find("*The turn ended with an error:* `model_unavailable` down"), std::string::npos) << md;
  EXPECT_NE(md.find("## Reminder `schedule-1` · 2026-12-03T13:00:05+01:00\n\n> Stretch\n> now\n"), std::string::npos)
      << md;
  EXPECT_NE(md.find("## Assistant (stopped — partial answer)"), std::string::npos) << md;
  EXPECT_NE(md.find("*Stopped.*"), std::string::npos) << md;
}

TEST(ExportMarkdown, TimesAreToTheSecond) {
  Event e = E(1, "message/user", {{"text", "hi"}});
  e.at += 789;
  std::string md = ExportMarkdown(Header(), "t", {e});
  EXPECT_NE(md.find("## You · 2026-12-03T13:00:01+01:00\n"), std::string::npos) << md;
}

}  // namespace
}  // namespace dsh::session
