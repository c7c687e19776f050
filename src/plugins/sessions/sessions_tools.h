#pragma once

#include "agent/agent_manager.h"
#include "agent/tool_registry.h"
#include "base/status.h"
#include "plugins/sessions/session_actions.h"
#include "session/session_store.h"

namespace dsh::host {
class Host;
}

namespace dsh::plugins::sessions {

// The tool group presets select these tools by.
inline constexpr const char* kToolGroup = "sessions";

// Registers the session tools in group "sessions":
//   session_status({session_id?, recent_n?}) -> {sessions: SessionStatusView[]}
//   session_read({session_id, offset?, limit?}) -> {session_id, offset, messages, total_messages, footer}
//   session_send({session_id, message, mode?}) -> {message_id}
//   session_create({prompt, preset?, model?, cwd?}) -> {session_id, accepted, status, workspace_id?, cwd?}
//   list_sessions({limit?}) -> {sessions: SessionView[]}
//   check_session_status({session_id}) -> SessionStatusView
// (docs/SESSIONS.md). The tools keep references to `store` and `agents`,
// which must outlive `tools`. Errors: `already_exists` when a name is taken.
Status RegisterSessionsTools(agent::ToolRegistry& tools, session::SessionStore& store, agent::AgentManager& agents,
                             CreateEnvironment env);

// The deployment's create environment: default preset and route, configured
// presets, model validation and workspaces of `host`.
CreateEnvironment HostCreateEnvironment(host::Host& host);

// The plugin over a host: the tools and the `/sessions` command. Call after
// Host::Open and before Host::Start.
Status RegisterSessionsPlugin(host::Host& host);

}  // namespace dsh::plugins::sessions
