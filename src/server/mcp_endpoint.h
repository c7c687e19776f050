#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "agent/tool_registry.h"
#include "base/json.h"

namespace dsh::server {

// Who calls through MCP: what `POST /mcp?session_id=…&client_time_zone=…`
// (and `dsh mcp --session`) name. Without a session the call is a root call.
struct McpCaller {
  std::optional<std::string> session_id;        // non-empty when set
  std::optional<std::string> client_time_zone;  // canonical IANA name
};

// One JSON-RPC 2.0 message whose envelope was checked (McpEndpoint::Parse).
struct McpMessage {
  enum class Kind { kRequest, kNotification, kResponse };
  Kind kind = Kind::kRequest;
  Json id;             // a string or an integer for a request; as sent for a response
  std::string method;  // requests and notifications
  Json params;         // an object; an empty object when absent
};

// dsh as an MCP server (docs/MCP.md): the JSON-RPC methods of MCP revisions
// 2025-06-18 and 2025-03-26 over the host's tool registry — `initialize`,
// `ping`, `tools/list` and `tools/call` for the session and loop tools
// (ExposedTools()). Transport-agnostic: `POST /mcp` (Api) and `dsh mcp`
// (stdio, proxied to `POST /mcp`) both end here. Stateless (no MCP session
// ids) and thread-safe: every member may be called from any thread,
// concurrently. The registry is borrowed and must outlive the endpoint.
class McpEndpoint {
 public:
  // JSON-RPC error codes.
  static constexpr int kParseError = -32700;
  static constexpr int kInvalidRequest = -32600;
  static constexpr int kMethodNotFound = -32601;
  static constexpr int kInvalidParams = -32602;

  // The response to one request; called exactly once, on any thread.
  using Reply = std::function<void(Json response)>;

  // `version`: serverInfo.version.
  McpEndpoint(const agent::ToolRegistry& tools, std::string version)
      : tools_(tools), version_(std::move(version)) {}

  // The protocol revisions this server speaks, newest first; `initialize`
  // answers with the client's when it is one of them, else with the first.
  static const std::vector<std::string>& SupportedVersions();
  static bool SupportsVersion(std::string_view version);
  // The registry tools offered to MCP clients, in the order tools/list gives
  // them (those not registered are left out).
  static const std::vector<std::string>& ExposedTools();

  // Checks one message (a parsed JSON value) against JSON-RPC 2.0: an object
  // with `"jsonrpc": "2.0"`; a request has a string `method`, an `id` that is
  // a string or an integer and optional object `params`; a notification has
  // no `id`; a response has `result` or `error`. Anything else — an array (a
  // batch: not supported since 2025-06-18) included — gives the error
  // response to send instead (-32600, with the message's id when it has a
  // usable one, else null).
  static std::variant<McpMessage, Json> Parse(const Json& message);

  // Answers a request through `reply` (possibly before Handle returns, or
  // later from a tool's thread). Notifications and responses need no answer:
  // they are ignored and `reply` is never called.
  void Handle(const McpMessage& message, const McpCaller& caller, Reply reply) const;

  // A JSON-RPC error response; `data` is left out when null.
  static Json ErrorResponse(const Json& id, int code, const std::string& message, Json data = nullptr);
  // The answer to a body that is not JSON (-32700, id null).
  static Json ParseErrorResponse(const std::string& detail);

 private:
  Json Initialize(const Json& params) const;
  Json ListTools() const;
  void CallTool(const Json& id, const Json& params, const McpCaller& caller, Reply reply) const;

  const agent::ToolRegistry& tools_;
  const std::string version_;
};

}  // namespace dsh::server
