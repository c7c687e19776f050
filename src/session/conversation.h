#pragma once

#include <string>
#include <vector>

#include "base/json.h"
#include "base/status.h"
#include "session/event.h"

namespace dsh::session {

// The conversation projection: the model-facing message blocks of a session
// log, as turns send them to the model and as `session_read` shows them.
//
//   {"role": "user", "content": TEXT}
//   {"role": "assistant", "content": TEXT, "reasoning"?: TEXT,
//    "tool_calls"?: [{"id": CALL_ID, "name": NAME, "arguments": JSON}]}
//   {"role": "tool", "tool_call_id": CALL_ID, "name": NAME, "content": TEXT}
//
// Reasoning, text and tool calls of one model step fold into one assistant
// block; a tool result's content is its JSON result (or `{"error": ...}`)
// serialized. Events of other types are trace-only and skipped.
//
// Fails with `corrupt_event` naming session and seq when a conversation event
// lacks a required field. Pure; thread-compatible.
Result<std::vector<Json>> ProjectConversation(const std::string& session_id, const std::vector<Event>& events);

}  // namespace dsh::session
