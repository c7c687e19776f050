#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/model.h"
#include "base/status.h"

namespace dsh::workspace {

struct ProcessSpec {
  // argv[0] without a '/' is looked up in the PATH of `env` (or, when `env`
  // has none, /usr/local/bin:/usr/bin:/bin) — never in the host's PATH.
  std::vector<std::string> argv;
  std::filesystem::path cwd;                   // empty: the host's working directory
  std::vector<std::string> env;                // the whole environment ("K=V"); nothing inherited
  std::chrono::milliseconds timeout{120'000};  // must be positive
  int64_t output_cap = 64 << 10;               // bytes kept of stdout+stderr (>= 0): head and tail halves
  std::shared_ptr<agent::CancelToken> cancel;  // nullable
  // When not empty, a cgroup directory (v1 or v2) the child joins before it
  // execs, so that it and everything it starts count against that cgroup's
  // limits from their first instruction (a pids.max there bounds a fork bomb).
  std::filesystem::path cgroup;
};

struct ProcessResult {
  std::optional<int> exit_code;  // absent when killed by a signal
  std::optional<int> signal;     // SIGKILL after a timeout or a cancel
  bool timed_out = false;
  bool cancelled = false;
  // Combined stdout and stderr: all of it when it fits in output_cap, else
  // the first and the last output_cap/2 bytes (cut at UTF-8 boundaries)
  // around a line "… [N bytes cut] …".
  std::string output;
  int64_t output_bytes = 0;  // everything the process wrote
  int64_t output_lines = 0;  // '\n' in everything the process wrote
  bool truncated = false;
  std::chrono::milliseconds duration{0};  // steady clock, from spawn to reaped
};

// Runs `spec` to completion, blocking the calling thread: stdin is
// /dev/null, stdout and stderr share one pipe, the child leads a new session
// (so a new process group), has every signal at its default and unblocked,
// inherits no descriptor but 0-2, and gets SIGKILL if the calling thread
// dies. On timeout or cancel the whole process group gets SIGKILL. When the
// child exits, whatever it left running in its group is killed too, and the
// pipe is read until EOF but for at most ~250 ms more (a process that left
// the group may hold it open). Memory stays bounded by output_cap whatever
// the child writes. Thread-safe: calls may run concurrently on any threads.
//
// A cancel token keeps a small callback (not the descriptor) after the call
// returns: CancelToken offers no way to unregister one.
//
// Errors: `invalid_arguments` (empty argv, non-positive timeout, negative
// output_cap); `cancelled` when the token was cancelled before the start
// (nothing runs); `unavailable` when it cannot be started, with the reason
// (program not found or not executable, bad cwd, cgroup not joinable, no
// pipe). Exit codes and signals of the child are results, not errors.
Result<ProcessResult> RunProcess(const ProcessSpec& spec);

}  // namespace dsh::workspace
