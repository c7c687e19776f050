#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "agent/tool.h"
#include "agent/tool_registry.h"
#include "base/status.h"

namespace dsh::host {
class Host;
}

namespace dsh::plugins::workspace {

// The tool group presets select these tools by.
inline constexpr const char* kToolGroup = "workspace";

// What one call may touch: its session's directory and its preset's
// settings (docs/TOOLS.md).
struct CallScope {
  std::optional<std::filesystem::path> cwd;  // none: only fetch works
  std::vector<std::filesystem::path> roots;  // the preset's extra roots
  bool network = false;                      // bash may reach the network
  bool fetch_private = false;                // fetch may reach loopback and private addresses
};

struct WorkspaceOptions {
  // false only when the operator turned the sandbox off (`tools.sandbox`).
  bool sandbox = true;
  // Never visible to bash (the profile directory: database, token, keys).
  std::vector<std::filesystem::path> hidden;
  // The scope of a call: the cwd of its session (ToolContext::cwd for an
  // agent's call; the session's header for a person's call naming a
  // session) and the preset's settings. Called on a pool thread; may block.
  std::function<Result<CallScope>(const agent::ToolContext&)> scope;
  // Threads for the tools' blocking work (files, processes, HTTP).
  size_t threads = 4;
};

// Registers read, write, edit, list, grep, bash and fetch in the group
// "workspace". The tools share a thread pool, stopped when the last of them
// is destroyed (a call still running then is waited for; bash calls end at
// their timeout or when their turn is cancelled). Errors: `already_exists`
// when a name is taken.
Status RegisterWorkspaceTools(agent::ToolRegistry& tools, WorkspaceOptions options);

// The plugin over a host (after Host::Open, before Host::Start; on by
// default, `plugins.workspace.enabled`): the tools with the host's sessions
// and presets, the profile directory hidden, and the sandbox's state logged.
Status RegisterWorkspacePlugin(host::Host& host);

}  // namespace dsh::plugins::workspace
