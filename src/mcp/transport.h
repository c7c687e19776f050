#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/json.h"
#include "base/status.h"

namespace dsh::mcp {

// How to reach one MCP server (`mcp.servers.NAME` in dsh.yml): a child process
// speaking newline-delimited JSON-RPC on stdin/stdout, or a Streamable HTTP
// endpoint (MCP revisions 2025-06-18 and 2025-03-26).
struct ServerSpec {
  std::string name;  // [a-z0-9_-]+, the tool prefix `<name>__`
  // stdio: argv (command[0] looked up on PATH), extra environment (added to
  // the host's), working directory ("" = the host's).
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  std::string cwd;
  // Streamable HTTP: the endpoint URL and extra request headers.
  std::string url;
  std::map<std::string, std::string> headers;
  // A call without an answer after this long fails with `mcp_timeout`.
  std::chrono::milliseconds call_timeout{60'000};
  // Spawning + `initialize` must finish within this, else the start failed.
  std::chrono::milliseconds start_timeout{30'000};

  bool stdio() const { return !command.empty(); }
};

// One JSON-RPC channel to an MCP server. The client (McpClient) owns it;
// one Transport serves one connection: after OnClosed, the client makes a new
// one to reconnect.
class Transport {
 public:
  // A message from the server: a response, a request or a notification.
  using OnMessage = std::function<void(Json)>;
  // The channel is gone (the process exited, its stdout closed, the HTTP
  // session expired with 404); called at most once, never after Close().
  using OnClosed = std::function<void(Status)>;
  // Whether one Send reached the server: Ok, or `mcp_unavailable` (could not
  // write, connection refused, HTTP error status). For a request, the
  // client fails the pending call with that status.
  using OnSent = std::function<void(Status)>;

  virtual ~Transport() = default;

  // Connects (spawns the process). Callbacks run on the transport's own
  // threads, never inside Start/Send/Close, one at a time, in the order the
  // server sent the messages. Errors: `mcp_unavailable` (the command cannot
  // be run, bad URL).
  virtual Status Start(OnMessage on_message, OnClosed on_closed) = 0;
  // Sends one JSON-RPC message without waiting for its answer. `sent` (may be
  // null) is called once, on a transport thread.
  virtual void Send(Json message, OnSent sent) = 0;
  // The negotiated revision, sent as `MCP-Protocol-Version` on later HTTP
  // requests (stdio ignores it).
  virtual void SetProtocolVersion(std::string version) = 0;
  // Closes the channel and waits: stdio closes the child's stdin, sends
  // SIGTERM after 2 s and SIGKILL after 2 s more, and reaps it; HTTP sends
  // DELETE for its session and stops its threads. No callback runs after
  // Close returns. Idempotent; the destructor calls it.
  virtual void Close() = 0;
};

// Makes the transport `spec` names (stdio when `command` is set, else HTTP).
std::unique_ptr<Transport> MakeTransport(const ServerSpec& spec);

// Helpers the transports share (transport.cc).
namespace internal {

// Passes each JSON-RPC message of `payload` to `deliver`: the payload itself
// when it is an object, each element of a batch (an array, which MCP
// 2025-03-26 allows). Anything else is skipped with a warning naming
// `server`.
void ForEachMessage(const std::string& server, Json payload, const std::function<void(Json)>& deliver);

// `text` cut to `max` bytes, with "..." when cut (for messages and logs).
std::string Excerpt(std::string_view text, size_t max = 200);

}  // namespace internal

}  // namespace dsh::mcp
