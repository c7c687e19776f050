#pragma once

#include <sys/types.h>

#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "mcp/transport.h"

namespace dsh::mcp {

struct StdioTransportOptions {
  // After closing the child's stdin, how long it may take to exit before
  // SIGTERM goes to its process group; then how long before SIGKILL.
  std::chrono::milliseconds stdin_grace{2'000};
  std::chrono::milliseconds term_grace{2'000};
};

// The MCP "stdio" transport: `spec.command` runs as a child process that
// reads newline-delimited JSON-RPC on its stdin and writes it on its stdout.
//
// The child gets the host's environment plus `spec.env`, runs in `spec.cwd`
// (when set) and leads its own process group, so a Ctrl-C on dsh's terminal
// does not reach it and Close can signal whatever it started too. It inherits
// no descriptor of ours besides its three pipes: every descriptor above 2 is
// closed in the child, close-on-exec or not (Boost Asio's sockets are not).
//
// One I/O thread per transport polls the child's stdout, stderr, stdin and
// exit (a pidfd), and runs every callback, so they never overlap and come in
// the order the server wrote. Send only queues and wakes that thread: it
// never blocks, even while the child has stopped reading. Stdout lines that
// are not JSON are skipped with a warning; lines over 16 MiB are dropped.
// Stderr lines are logged as `mcp NAME: ...` (info; cut at 1000 chars, at
// most 50 lines a second). SIGPIPE stays blocked on the I/O thread, the only
// thread writing to the pipe, so process-wide signal dispositions are left
// alone; the child starts with every signal at its default and none blocked.
//
// When the child closes its stdout or its stdin, it is given the same
// shutdown as Close (below), since the channel is unusable. Once it exited it
// is reaped at once (no zombie), any processes left in its group get
// SIGTERM, and OnClosed reports `mcp_unavailable` "MCP server NAME exited
// (code N)" or "(signal S)" — unless Close was called. Later Sends fail with
// that status.
//
// Thread-safe: Send and SetProtocolVersion from any thread, also inside the
// callbacks. Close from any thread but a callback's (it joins the I/O thread;
// it also waits for a callback already running, so do not hold a lock that
// callbacks take while calling it).
class StdioTransport final : public Transport {
 public:
  using Options = StdioTransportOptions;

  explicit StdioTransport(ServerSpec spec, Options options = {});
  ~StdioTransport() override;

  StdioTransport(const StdioTransport&) = delete;
  StdioTransport& operator=(const StdioTransport&) = delete;

  // Spawns the child. `mcp_unavailable` when it cannot be run (no command,
  // not found on PATH, not executable, `cwd` missing), naming the server, the
  // command and the errno text. The program is looked up on the host's PATH,
  // not on a PATH in `spec.env`. Call once.
  Status Start(OnMessage on_message, OnClosed on_closed) override;
  // Queues one line. `sent` gets Ok once the whole line is in the pipe, or
  // `mcp_unavailable` when the child is gone. A Send before Start waits for
  // Start; once Close has begun, messages are dropped and `sent` is not
  // called (Close runs no callback).
  void Send(Json message, OnSent sent) override;
  void SetProtocolVersion(std::string) override {}
  // Closes the child's stdin, waits `stdin_grace` for it to exit, then
  // SIGTERM to its group, `term_grace`, then SIGKILL; reaps it and joins the
  // I/O thread. Queued messages are dropped without callbacks.
  void Close() override;

  // The child's pid, which is also its process group id; 0 before Start.
  // For tests and logs: after the child was reaped the pid may be reused.
  pid_t pid() const { return pid_; }

 private:
  class Channel;  // the child and the I/O thread's state (stdio_transport.cc)
  struct Outgoing {
    std::string line;  // the JSON text with its '\n'
    OnSent sent;
  };

  // Wakes the I/O thread (a queued message, or Close).
  void Wake();

  const ServerSpec spec_;
  const Options options_;
  int wake_fd_ = -1;  // an eventfd the I/O thread polls; owned

  std::mutex mu_;
  std::deque<Outgoing> outbox_;  // GUARDED_BY(mu_): taken by the I/O thread
  bool stopping_ = false;        // GUARDED_BY(mu_): Close has begun

  std::mutex lifecycle_mu_;           // serializes Start and Close
  bool started_ = false;              // GUARDED_BY(lifecycle_mu_)
  std::unique_ptr<Channel> channel_;  // the I/O thread's; Close destroys it after the join
  std::thread thread_;
  pid_t pid_ = 0;  // set by Start before the I/O thread starts
};

}  // namespace dsh::mcp
