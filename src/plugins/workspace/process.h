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
  std::vector<std::string> argv;  // argv[0] is found on PATH when it has no '/'
  std::filesystem::path cwd;
  std::vector<std::string> env;   // the whole environment ("K=V"); nothing inherited
  std::chrono::milliseconds timeout{120'000};
  int64_t output_cap = 64 << 10;  // bytes kept of stdout+stderr: head and tail halves
  std::shared_ptr<agent::CancelToken> cancel;  // nullable
};

struct ProcessResult {
  std::optional<int> exit_code;   // absent when killed by a signal
  std::optional<int> signal;
  bool timed_out = false;
  bool cancelled = false;
  std::string output;             // combined stdout and stderr, head + marker + tail when cut
  int64_t output_bytes = 0;       // everything the process wrote
  bool truncated = false;
  std::chrono::milliseconds duration{0};
};

// Runs `spec` to completion in a new process group, blocking the calling
// thread. On timeout or cancel the whole group is killed (SIGKILL).
// Memory stays bounded by output_cap whatever the child writes.
// Errors: `unavailable` when it cannot be started (with the reason).
Result<ProcessResult> RunProcess(const ProcessSpec& spec);

}  // namespace dsh::workspace
