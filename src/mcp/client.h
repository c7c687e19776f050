#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/model.h"
#include "base/json.h"
#include "base/status.h"
#include "mcp/transport.h"

namespace dsh::mcp {

// The protocol revisions this client speaks, newest first; it asks for the
// first and accepts any of them.
inline constexpr const char* kProtocolVersions[] = {"2025-06-18", "2025-03-26"};

// A `tools/list` that has not ended after this many pages is an error.
inline constexpr size_t kMaxToolListPages = 100;
// A connection that stayed up this long resets the reconnection backoff.
inline constexpr std::chrono::seconds kStableConnection{60};

// One tool as an MCP server lists it (`tools/list`).
struct ToolInfo {
  std::string name;
  std::string description;
  Json input_schema;  // a JSON object (a tool listed without one is left out)
};

// A connection to one MCP server that keeps itself up: it connects
// (transport + `initialize`, then `notifications/initialized`, then, once
// the transport reported that sent, `tools/list`) when started, reconnects
// with backoff (min_backoff doubling to max_backoff) whenever it cannot
// start, restarts a server that dies after it worked at once (up to 3 times
// a minute, then with the backoff), and re-lists the tools on
// `notifications/tools/list_changed` (also when one comes during a listing,
// while connecting too). The backoff goes back to min_backoff only after a
// connection stayed up for kStableConnection, so a server that crashes soon
// after each start is retried less and less often.
//
// The tool list follows `nextCursor`; a cursor that repeats, or a list not
// ended within kMaxToolListPages pages, fails the listing like an error
// answer: while connecting the connection fails (last_error says why, and it
// is retried with the backoff), a re-listing keeps the previous list.
// Tools without a name, or whose `inputSchema` is not a JSON object, are
// left out with a warning in the log. Fields of the wrong type in the
// server's messages are treated as missing, never as a crash.
//
// Calls never hang: a call completes with the server's result, or with
// `mcp_unavailable` (not connected, or the server died during the call),
// `mcp_timeout` (no answer within the spec's call_timeout; the server is
// told with `notifications/cancelled`), `mcp_error` (a JSON-RPC error),
// `cancelled` (the caller's token; the server is told if the call was sent)
// or `shutting_down` (Stop). A call made while a (re)connection attempt is in
// progress waits for it; cancelling it answers it at once, and it is never
// sent.
//
// Thread-safe. All protocol state lives on one internal thread; an exception
// escaping a handler there (from `done` or `on_tools`, say) is logged and the
// thread goes on.
class McpClient {
 public:
  enum class State { kConnecting, kReady, kDown, kStopped };
  struct Options {
    ServerSpec spec;
    std::function<std::unique_ptr<Transport>(const ServerSpec&)> make_transport = MakeTransport;
    std::chrono::milliseconds min_backoff{500};
    std::chrono::milliseconds max_backoff{30'000};
    std::string client_version;  // sent as clientInfo.version
    // Called after state() or last_error() changed (starting, ready, down —
    // also down again for another reason — or stopped), on the client's
    // thread or the thread calling Start or Stop, never under the client's
    // lock: it may read the client. Must be quick and must not call Stop.
    std::function<void()> on_state_change;
  };
  // Called on the client's thread after each successful (re)connection and
  // each re-listing, with the whole current tool list.
  using OnTools = std::function<void(std::vector<ToolInfo>)>;
  using Done = std::function<void(Result<Json>)>;

  McpClient(Options options, OnTools on_tools);
  ~McpClient();
  McpClient(const McpClient&) = delete;
  McpClient& operator=(const McpClient&) = delete;

  // Starts connecting in the background; returns at once.
  void Start();
  // Closes the connection (a stdio server is stopped and reaped), completes
  // every pending call with `shutting_down` and joins the thread.
  // Idempotent.
  void Stop();

  // `tools/call`; `done` gets the CallToolResult object as the server sent
  // it, exactly once, on any thread. `cancel` may be null.
  void CallTool(const std::string& tool, Json arguments, std::shared_ptr<agent::CancelToken> cancel, Done done);

  const std::string& name() const { return options_.spec.name; }
  const ServerSpec& spec() const { return options_.spec; }
  State state() const;
  // Why the server is down or last went down, a whole message naming the
  // server ("" when never). A call made while it is down fails with it.
  std::string last_error() const;
  // The revision the server agreed to ("" before the first connection).
  std::string protocol_version() const;
  // How many times a connection was made (1 after the first start).
  int64_t connections() const;
  // Waits until the client is not connecting (ready, down or stopped) or
  // `timeout` passed; true when it is not.
  bool WaitSettled(std::chrono::milliseconds timeout) const;

 private:
  struct Pending {
    std::string method;
    std::string what;  // for messages: "tools/call echo"
    Done done;
    std::unique_ptr<boost::asio::steady_timer> timer;
  };

  // A tools/list in progress, page by page.
  struct Listing {
    std::vector<ToolInfo> tools;
    std::set<std::string> cursors;  // each page's after the first
  };

  // The client's thread: runs io_ until Stop, surviving exceptions.
  void Run();
  // All below run on the client's thread.
  void Connect();
  void OnConnectFailed(uint64_t generation, Status why);
  void Request(const std::string& method, Json params, std::string what, std::chrono::milliseconds timeout,
               Done done);
  void Notify(const std::string& method, Json params);
  void OnMessage(uint64_t generation, Json message);
  void OnClosed(uint64_t generation, Status why);
  void ListTools(std::optional<std::string> cursor, Listing so_far);
  void OnListFailed(uint64_t generation, const Status& why);
  void StartQueuedCalls();
  void CancelQueuedCall(int64_t key);
  void SendCall(std::string tool, Json arguments, std::shared_ptr<agent::CancelToken> cancel, Done done);
  // Any thread: runs `fn` on the client's thread once `cancel` is cancelled,
  // unless the client is gone by then (a token may outlive it).
  void PostOnCancel(agent::CancelToken& cancel, std::function<void()> fn);
  void AbandonCall(int64_t id, const std::string& reason, Status status);
  void FailAllPending(const Status& why);
  void CloseTransport();
  // Sets the state (and the error when not empty); calls on_state_change
  // when either changed. Takes mu_: never call it holding it.
  void SetState(State s, std::string error = "");
  void NotifyStateChange();

  // Lets a cancel token that outlives the client find out it is gone.
  struct Alive {
    explicit Alive(McpClient* c) : client(c) {}
    std::mutex mu;
    McpClient* client;
  };

  Options options_;
  OnTools on_tools_;
  std::shared_ptr<Alive> alive_ = std::make_shared<Alive>(this);
  boost::asio::io_context io_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::thread thread_;
  boost::asio::steady_timer backoff_timer_;
  boost::asio::steady_timer start_timer_;

  // On the client's thread only.
  std::unique_ptr<Transport> transport_;
  uint64_t generation_ = 0;  // of transport_; stale callbacks are dropped
  int64_t next_id_ = 1;
  std::map<int64_t, Pending> pending_;
  struct QueuedCall {
    int64_t key;  // for cancelling it
    std::string tool;
    Json arguments;
    std::shared_ptr<agent::CancelToken> cancel;
    Done done;
  };
  std::vector<QueuedCall> queued_;  // calls waiting for a connection attempt
  int64_t next_queued_key_ = 1;
  std::chrono::milliseconds backoff_{0};               // the last wait; 0 after a stable connection
  std::chrono::steady_clock::time_point ready_since_;  // of the current connection
  std::vector<std::chrono::steady_clock::time_point> quick_restarts_;  // restarts at once in the last minute
  bool relist_again_ = false;  // a list_changed came during the listing
  bool listing_ = false;

  mutable std::mutex mu_;  // guards the fields below, read from any thread
  mutable std::condition_variable settled_;  // state_ left kConnecting
  State state_ = State::kDown;
  std::string last_error_;
  std::string protocol_version_;
  int64_t connections_ = 0;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace dsh::mcp
