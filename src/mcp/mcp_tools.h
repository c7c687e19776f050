#pragma once

#include <memory>
#include <string>
#include <vector>

#include "agent/tool_registry.h"
#include "base/json.h"
#include "mcp/client.h"

namespace dsh::mcp {

// The name dsh gives tool `tool` of server `server`: `<server>__<tool>`, with
// every character model APIs refuse (outside [A-Za-z0-9_-]) replaced by `_`,
// cut to 64 characters.
std::string ToolName(const std::string& server, const std::string& tool);

// What the model sees of a `tools/call` result: the text when the result is
// only text; else {"content": [...], "structured_content": ...} where images,
// audio and binary resources are summarized by their MIME type and size
// (their bytes are left out). A result with `isError` is an `mcp_error`
// carrying its text. `tool` names the tool in messages.
Result<Json> ToolResultForModel(const std::string& tool, const Json& result);

// The MCP servers of `mcp.servers` and their tools in a ToolRegistry: each
// server's tools are the group `mcp:<name>`, named by ToolName, with the
// server's JSON Schema as their parameters, and replaced whenever the server
// lists them again (after a restart or `notifications/tools/list_changed`).
// Arguments are checked against the schema before a call is sent. Servers
// start with the host (Start), which waits for each server's first attempt
// (at most its start_timeout, all in parallel) so that the first turn sees
// their tools; a server that failed is retried in the background.
//
// Start and Stop from one thread; Describe and Find from any.
class McpServers {
 public:
  // Called whenever what Describe() returns may have changed: a server's
  // state or error changed, or its tool list was replaced. It runs on the
  // thread of that server's client (or the caller of Start or Stop), never
  // under a lock of ours: it must be quick, thread-safe and must not call
  // Start or Stop (the host publishes a change "mcp" on its EventHub).
  using OnChange = std::function<void()>;

  McpServers(agent::ToolRegistry& tools, std::vector<ServerSpec> specs, std::string version,
             OnChange on_change = nullptr,
             std::function<std::unique_ptr<Transport>(const ServerSpec&)> make_transport = MakeTransport);
  ~McpServers();

  // Starts every server; returns once each is ready or failed its first
  // attempt (or its start timeout passed).
  void Start();
  // Stops every server (stdio children are stopped and reaped) and removes
  // their tools. Idempotent.
  void Stop();

  // [{"name", "transport": "stdio"|"http", "state": "starting"|"ready"|"down"|"stopped",
  //   "tools": N, "protocol_version", "last_error"}] in name order.
  Json Describe() const;
  // nullptr when there is no such server.
  McpClient* Find(const std::string& name) const;

 private:
  struct Server {
    std::shared_ptr<McpClient> client;
    std::atomic<int64_t> tools{0};
  };
  void Register(Server& server, std::vector<ToolInfo> tools);

  agent::ToolRegistry& registry_;
  const OnChange on_change_;  // may be null
  std::vector<std::unique_ptr<Server>> servers_;
};

}  // namespace dsh::mcp
