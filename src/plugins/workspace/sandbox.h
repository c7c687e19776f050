#pragma once

#include <chrono>
#include <cstdint>
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
  // Visible read-write besides the cwd (the preset's extra roots). Roots
  // that do not exist are left out.
  std::vector<std::filesystem::path> extra_roots;
  // Never visible inside, even under a bound directory (the profile
  // directory). A cwd or extra root inside one of them is refused.
  std::vector<std::filesystem::path> hidden;
  // Tasks (processes and threads) one command may have at once, enforced by
  // a pids cgroup made for the command when the host allows it (see
  // CheckProcessLimit); 0: no cap. Also applies with enabled == false.
  int64_t max_processes = 1024;
  // When the cap cannot be applied: true fails with `sandbox_unavailable`,
  // false runs without it.
  bool require_process_limit = false;
};

struct BashRequest {
  std::string command;
  std::filesystem::path cwd;  // the session's directory, absolute, read-write
  std::chrono::milliseconds timeout{120'000};
  int64_t output_cap = 64 << 10;
  std::shared_ptr<agent::CancelToken> cancel;
};

// Whether `bash` can run sandboxed here; the reason when not
// (`sandbox_unavailable`: bubblewrap missing, or refused by the kernel, with
// bwrap's own words). Runs bwrap once, on the first call; the answer is kept
// for the life of the process. Thread-safe.
Status CheckSandbox();

// What CheckSandbox does, uncached and with the given bwrap executable (for
// tests and diagnostics).
Status ProbeSandbox(const std::filesystem::path& bwrap);

// Whether RunBash can cap the processes of a command: ok when a pids cgroup
// (v1, or v2 with the pids controller enabled for our cgroup's children)
// can be created under this process's own; else `sandbox_unavailable` with
// the reason. Checked once, kept for the life of the process. Thread-safe.
Status CheckProcessLimit();

// Runs `bash -c command` under bubblewrap, blocking the calling thread:
//  - the system read-only (/usr, /etc and the /bin, /lib… links or
//    directories), /etc's password hashes and SSH host keys masked;
//  - the cwd and the extra roots read-write; options.hidden masked (a
//    directory by an empty tmpfs, a file by /dev/null) after every bind;
//  - a private /proc (its /proc/sys read-only), a minimal /dev, a private
//    /tmp, HOME=/tmp/home (empty);
//  - only PATH, HOME, LANG=C.UTF-8 and TERM=dumb in the environment, for the
//    command and for bwrap itself (so /proc/1/environ inside shows no more);
//  - new user (when the kernel allows), PID, IPC, UTS, cgroup and network
//    namespaces (the network shared only when options.network), no
//    capabilities, no further user namespaces, a new session,
//    --die-with-parent.
// The command's exit code is bwrap's (128+N when signal N ended it inside).
// On timeout or cancel bwrap is killed, and with it the PID namespace and
// everything in it; when a pids cgroup is in use, RunBash returns only once
// the cgroup is empty. With options.enabled == false it runs `bash -c`
// directly, with the same environment, process group, limits and caps.
//
// What this does not protect against: reading what the host's uid may read
// in the bound directories (a hard link to a hidden file inside the cwd, a
// bind mount of the profile elsewhere on the host), the network when
// options.network, memory or disk exhaustion, and — without a pids cgroup —
// a fork bomb until the timeout kills its namespace.
//
// Errors: `invalid_arguments` (empty command, cwd not an absolute existing
// directory, cwd or an extra root inside a hidden path); `sandbox_unavailable`
// (the sandbox is enabled but unusable, or the process cap is required but
// impossible); `cancelled`; `unavailable` (bwrap or bash cannot be started).
Result<ProcessResult> RunBash(const BashRequest& request, const SandboxOptions& options);

}  // namespace dsh::workspace
