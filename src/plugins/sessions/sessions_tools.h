#pragma once

#include "agent/agent_manager.h"
#include "agent/tool_registry.h"
#include "base/status.h"
#include "session/session_store.h"

namespace dsh::host {
class Host;
}

namespace dsh::plugins::sessions {

// The tool group presets select these tools by.
inline constexpr const char* kToolGroup = "sessions";

// Registers the read-only session tools in group "sessions":
//   session_status({session_id?, recent_n?}) -> {sessions: SessionStatusView[]}
//   session_read({session_id, offset?, limit?}) -> {session_id, offset, messages, total_messages, footer}
//   list_sessions({limit?}) -> {sessions: SessionView[]}
//   check_session_status({session_id}) -> SessionStatusView
// (docs/SESSIONS.md). The tools keep references to `store` and `agents`,
// which must outlive `tools`. Errors: `already_exists` when a name is taken.
Status RegisterSessionsTools(agent::ToolRegistry& tools, session::SessionStore& store,
                             const agent::AgentManager& agents);

// The plugin over a host: call after Host::Open and before Host::Start.
Status RegisterSessionsPlugin(host::Host& host);

}  // namespace dsh::plugins::sessions
