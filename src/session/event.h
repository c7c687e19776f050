#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/json.h"

namespace dsh::session {

// An event to append. `type` is "area/name" (see docs/STORAGE.md for the
// catalog); `data` is a JSON object.
struct EventDraft {
  std::string type;
  Json data = Json::object();
};

// A durable event: `seq` is 1, 2, 3, ... within its session with no gaps;
// `at` is the Unix millisecond time it was appended.
struct Event {
  int64_t seq = 0;
  std::string type;
  int64_t at = 0;
  Json data;
};

Json EventToJson(const Event& e);

// Event types the session layer understands. Other layers add their own
// ("loop/change", "schedule/change", "turn/...") and the projections below
// skip what they do not know.
namespace event_types {
inline constexpr std::string_view kUserMessage = "message/user";            // {text, message_id?}
inline constexpr std::string_view kAssistantMessage = "message/assistant";  // {text}
inline constexpr std::string_view kReasoning = "message/reasoning";         // {text}
inline constexpr std::string_view kToolCall = "tool/call";                  // {call_id, name, arguments}
inline constexpr std::string_view kToolResult = "tool/result";              // {call_id, name, result | error}
inline constexpr std::string_view kTitleUser = "title/user";                // {title | null}
inline constexpr std::string_view kTitleGenerated = "title/generated";      // {title}
inline constexpr std::string_view kTitleFallback = "title/fallback";        // {title}
// A person's rename: {title: TEXT} sets the user title, {title: null} clears
// it (the generated or fallback title shows again). kTitleUser above.
// Archived or not, as the person chose (out of the default session list):
inline constexpr std::string_view kArchived = "session/archived";            // {archived: bool}
// A turn's bounds (the agent appends them, docs/AGENTS.md). A seq is a turn
// boundary when every turn/start at or before it has its turn/end there too.
inline constexpr std::string_view kTurnStart = "turn/start";
inline constexpr std::string_view kTurnEnd = "turn/end";
}  // namespace event_types

}  // namespace dsh::session
