#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "plugins/workspace/process.h"

namespace dsh::workspace {

inline constexpr const char* kSandboxUnavailable = "sandbox_unavailable";

struct SandboxOptions {
  bool enabled = true;  // false only when the operator turned the sandbox off in dsh.yml
  bool network = false;
  // Visible read-write besides the cwd (the preset's extra roots).
  std::vector<std::filesystem::path> extra_roots;
  // Never visible inside, even under a bound directory (the profile directory).
  std::vector<std::filesystem::path> hidden;
};

struct BashRequest {
  std::string command;
  std::filesystem::path cwd;  // the session's directory, read-write
  std::chrono::milliseconds timeout{120'000};
  int64_t output_cap = 64 << 10;
  std::shared_ptr<agent::CancelToken> cancel;
};

// Whether `bash` can run sandboxed here; the reason when not
// (`sandbox_unavailable`: bubblewrap missing, or refused by the kernel).
Status CheckSandbox();

// Runs `bash -c command` under bubblewrap: a read-only view of the system,
// the cwd read-write, a private /tmp, a fresh HOME, a clean environment, no
// network unless options.network, new PID/IPC/UTS namespaces,
// --die-with-parent. Blocking.
Result<ProcessResult> RunBash(const BashRequest& request, const SandboxOptions& options);

}  // namespace dsh::workspace
