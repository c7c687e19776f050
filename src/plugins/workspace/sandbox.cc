// The `bash` tool's sandbox: bubblewrap for the filesystem, namespaces and
// capabilities, plus a pids cgroup per command against fork bombs.
//
// What bounds a runaway command, and what does not:
//  - The timeout (and a cancel) SIGKILLs bwrap; --die-with-parent then
//    kills the PID namespace's init, and the kernel kills everything in the
//    namespace. No process of the command survives that, whatever it does
//    with its signals, sessions or process groups.
//  - RLIMIT_NPROC does not help: the kernel exempts processes whose real
//    uid is the host's root (and inside bwrap's user namespace the command's
//    uid maps to the host's uid, root here), so a fork bomb is bounded only
//    by a pids cgroup. RunBash makes one per command under this process's own
//    cgroup (cgroup v1's pids hierarchy, or v2 when pids is enabled for our
//    children) and the child joins it before exec, so nothing escapes it.
//    Without one (no write access to the cgroup tree, v2 without delegation)
//    a fork bomb can fill the PID space until the timeout: give the service
//    a TasksMax (systemd) or a delegated cgroup.
//  - Running as the host's root without capabilities still means uid 0 for
//    file permissions: the sandbox can read what root owns in what is bound
//    (hence /etc's secrets are masked) and would write to /proc/sys
//    (hence it is bound read-only). Capabilities are dropped so that the
//    masks over hidden paths cannot be unmounted; nested user namespaces are
//    refused (--disable-userns), and mounts copied into one would be locked.
//  - Memory, disk and CPU are not limited here.

#include "plugins/workspace/sandbox.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string_view>
#include <thread>
#include <utility>

namespace dsh::workspace {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr const char* kSandboxPath = "/usr/local/bin:/usr/bin:/bin";
constexpr const char* kSandboxHome = "/tmp/home";
constexpr milliseconds kProbeTimeout{10'000};
// How long RunBash waits for a command's cgroup to empty after bwrap ended
// (the kernel tears the PID namespace down asynchronously).
constexpr milliseconds kCgroupEmptyLimit{5'000};
constexpr size_t kMaxQuotedOutput = 600;

Status SandboxUnavailable(std::string message) { return Status(kSandboxUnavailable, std::move(message)); }

std::string ErrnoText(int err) {
  char buffer[256];
  return strerror_r(err, buffer, sizeof buffer);  // the GNU variant returns the text
}

std::string ReadSmallFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool WriteSmallFile(const fs::path& path, std::string_view text) {
  std::ofstream out(path);
  out << text;
  out.flush();
  return static_cast<bool>(out);
}

// Output of a failed helper as an error message quotes it.
std::string Quote(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  if (text.empty()) return "(no output)";
  if (text.size() > kMaxQuotedOutput) return std::string(text.substr(0, kMaxQuotedOutput)) + "…";
  return std::string(text);
}

// The environment of bwrap and of the command: nothing of the host's.
std::vector<std::string> CleanEnvironment(const std::string& home) {
  return {std::string("PATH=") + kSandboxPath, "HOME=" + home, "LANG=C.UTF-8", "TERM=dumb"};
}

std::optional<fs::path> FindOnHostPath(const std::string& name) {
  const char* env = std::getenv("PATH");
  std::string_view list = env != nullptr ? env : kSandboxPath;
  while (true) {
    size_t colon = list.find(':');
    fs::path candidate = fs::path(std::string(list.substr(0, colon))) / name;
    if (candidate.is_absolute() && access(candidate.c_str(), X_OK) == 0) return candidate;
    if (colon == std::string_view::npos) return std::nullopt;
    list.remove_prefix(colon + 1);
  }
}

bool IsUnder(const fs::path& path, const fs::path& dir) {
  const std::string& p = path.native();
  const std::string& d = dir.native();
  if (d == "/") return true;
  return p == d || (p.size() > d.size() && p.starts_with(d) && p[d.size()] == '/');
}

size_t Depth(const fs::path& path) {
  const std::string& p = path.native();
  return p == "/" ? 0 : static_cast<size_t>(std::count(p.begin(), p.end(), '/'));
}

// ---------------------------------------------------------------------------
// The bwrap command line.

struct Mount {
  fs::path dest;
  std::vector<std::string> args;
  bool exposes_host = false;  // a bind: host files under `dest` become visible
};

// The system, read-only, as this host lays it out (merged /usr or not), and
// the private /proc, /dev, /tmp and HOME.
std::vector<Mount> SystemMounts() {
  std::vector<Mount> mounts;
  std::error_code ec;
  for (const char* dir : {"/usr", "/etc"}) {
    if (fs::is_directory(fs::symlink_status(dir, ec))) mounts.push_back({dir, {"--ro-bind", dir, dir}, true});
  }
  for (const char* dir : {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}) {
    fs::file_status st = fs::symlink_status(dir, ec);
    if (fs::is_symlink(st)) {
      fs::path target = fs::read_symlink(dir, ec);
      if (!ec) mounts.push_back({dir, {"--symlink", target.string(), dir}});
    } else if (fs::is_directory(st)) {
      mounts.push_back({dir, {"--ro-bind", dir, dir}, true});
    }
  }
  mounts.push_back({"/proc", {"--proc", "/proc"}});
  // Root without capabilities may still write most sysctls.
  mounts.push_back({"/proc/sys", {"--ro-bind", "/proc/sys", "/proc/sys"}});
  mounts.push_back({"/dev", {"--dev", "/dev"}});
  mounts.push_back({"/tmp", {"--tmpfs", "/tmp"}});
  mounts.push_back({kSandboxHome, {"--dir", kSandboxHome}});
  return mounts;
}

// Secrets of the host's /etc that the sandbox's uid 0 could read.
std::vector<fs::path> SystemSecrets() {
  std::vector<fs::path> out = {"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-"};
  std::error_code ec;
  for (fs::directory_iterator it("/etc/ssh", ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.starts_with("ssh_host_") && name.ends_with("_key")) out.push_back(it->path());
  }
  return out;
}

std::vector<std::string> NamespaceFlags(bool user_namespace, bool network) {
  std::vector<std::string> flags = {"--unshare-all"};
  if (user_namespace) {
    flags.insert(flags.end(), {"--unshare-user", "--disable-userns"});
  }
  if (network) flags.push_back("--share-net");
  flags.insert(flags.end(), {"--cap-drop", "ALL", "--new-session", "--die-with-parent"});
  return flags;
}

struct BwrapMode {
  fs::path bwrap;
  bool user_namespace = true;
};

Result<std::vector<std::string>> BwrapCommand(const BwrapMode& mode, const fs::path& cwd,
                                              const std::vector<fs::path>& writable,
                                              const std::vector<fs::path>& hidden, bool network,
                                              const std::string& command) {
  std::vector<Mount> mounts = SystemMounts();
  for (const fs::path& root : writable)
    mounts.push_back({root, {"--bind", root.string(), root.string()}, true});
  // The deeper mount wins: a cwd under /usr stays writable, a cwd of / does
  // not make /usr writable or show the host's /proc.
  std::stable_sort(mounts.begin(), mounts.end(),
                   [](const Mount& a, const Mount& b) { return Depth(a.dest) < Depth(b.dest); });

  std::vector<std::string> args = {mode.bwrap.string()};
  std::vector<std::string> flags = NamespaceFlags(mode.user_namespace, network);
  args.insert(args.end(), flags.begin(), flags.end());
  args.push_back("--clearenv");
  for (const std::string& entry : CleanEnvironment(kSandboxHome)) {
    size_t eq = entry.find('=');
    args.insert(args.end(), {"--setenv", entry.substr(0, eq), entry.substr(eq + 1)});
  }
  for (const Mount& m : mounts) args.insert(args.end(), m.args.begin(), m.args.end());

  // Masks last, so that no bind covers them again.
  std::vector<fs::path> masked = SystemSecrets();
  masked.insert(masked.end(), hidden.begin(), hidden.end());
  for (const fs::path& path : masked) {
    std::error_code ec;
    fs::file_status st = fs::symlink_status(path, ec);
    if (ec || !fs::exists(st)) continue;
    bool visible = std::any_of(mounts.begin(), mounts.end(),
                               [&](const Mount& m) { return m.exposes_host && IsUnder(path, m.dest); });
    if (!visible) continue;  // the sandbox's root holds nothing else of the host
    if (fs::is_directory(st)) {
      args.insert(args.end(), {"--tmpfs", path.string()});
    } else {
      args.insert(args.end(), {"--ro-bind", "/dev/null", path.string()});
    }
  }
  args.insert(args.end(), {"--chdir", cwd.string(), "--", "bash", "-c", command});
  return args;
}

Result<BwrapMode> Probe(const fs::path& bwrap) {
  if (access(bwrap.c_str(), X_OK) != 0) {
    return SandboxUnavailable("bubblewrap is not installed (" + bwrap.string() + ": " + ErrnoText(errno) +
                              "); install the bubblewrap package or turn the sandbox off in dsh.yml");
  }
  std::string first_failure;
  for (bool user_namespace : {true, false}) {
    std::vector<std::string> argv = {bwrap.string()};
    std::vector<std::string> flags = NamespaceFlags(user_namespace, false);
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.push_back("--clearenv");
    for (const Mount& m : SystemMounts()) argv.insert(argv.end(), m.args.begin(), m.args.end());
    argv.insert(argv.end(), {"--", "true"});
    ProcessSpec spec;
    spec.argv = std::move(argv);
    spec.env = CleanEnvironment("/");
    spec.timeout = kProbeTimeout;
    spec.output_cap = 4096;
    Result<ProcessResult> r = RunProcess(spec);
    if (!r.ok()) return SandboxUnavailable("cannot run bubblewrap: " + r.status().message());
    if (r->exit_code == 0) {
      if (!user_namespace) {
        spdlog::warn("bash sandbox: without a user namespace ({}); still no capabilities inside",
                     Quote(first_failure));
      }
      return BwrapMode{bwrap, user_namespace};
    }
    if (first_failure.empty()) first_failure = r->timed_out ? "timed out" : r->output;
  }
  return SandboxUnavailable(
      "bubblewrap cannot create a sandbox here (are namespaces refused by the kernel?): " +
      Quote(first_failure));
}

const Result<BwrapMode>& CachedMode() {
  static const Result<BwrapMode> mode = [] {
    std::optional<fs::path> bwrap = FindOnHostPath("bwrap");
    return Probe(bwrap ? *bwrap : fs::path("/usr/bin/bwrap"));
  }();
  return mode;
}

// ---------------------------------------------------------------------------
// Pids cgroups.

// This process's cgroup in a hierarchy with the pids controller.
struct PidsHierarchy {
  fs::path dir;           // where it is mounted here
  std::string proc_path;  // as /proc/<pid>/cgroup names it
};

struct MountInfo {
  std::string root;
  std::string mount_point;
  std::string fs_type;
  std::string super_options;
};

std::vector<MountInfo> ReadMountInfo() {
  std::vector<MountInfo> out;
  std::istringstream in(ReadSmallFile("/proc/self/mountinfo"));
  for (std::string line; std::getline(in, line);) {
    size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream left(line.substr(0, dash)), right(line.substr(dash + 3));
    std::string id, parent, devices;
    MountInfo m;
    left >> id >> parent >> devices >> m.root >> m.mount_point;
    std::string source;
    right >> m.fs_type >> source >> m.super_options;
    out.push_back(std::move(m));
  }
  return out;
}

bool HasWord(std::string_view list, std::string_view word, char separator) {
  while (true) {
    size_t end = list.find(separator);
    if (list.substr(0, end) == word) return true;
    if (end == std::string_view::npos) return false;
    list.remove_prefix(end + 1);
  }
}

std::optional<fs::path> Locate(const std::string& proc_path, const MountInfo& m) {
  if (m.root == "/") return fs::path(m.mount_point + (proc_path == "/" ? "" : proc_path));
  if (IsUnder(proc_path, m.root)) return fs::path(m.mount_point + proc_path.substr(m.root.size()));
  return std::nullopt;
}

Result<PidsHierarchy> FindPidsHierarchy() {
  std::optional<std::string> v1_path, v2_path;
  std::istringstream in(ReadSmallFile("/proc/self/cgroup"));
  for (std::string line; std::getline(in, line);) {
    size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::string controllers = line.substr(a + 1, b - a - 1);
    if (line.substr(0, a) == "0" && controllers.empty()) v2_path = line.substr(b + 1);
    if (HasWord(controllers, "pids", ',')) v1_path = line.substr(b + 1);
  }
  std::vector<MountInfo> mounts = ReadMountInfo();
  if (v1_path) {
    for (const MountInfo& m : mounts) {
      if (m.fs_type != "cgroup" || !HasWord(m.super_options, "pids", ',')) continue;
      if (std::optional<fs::path> dir = Locate(*v1_path, m)) return PidsHierarchy{*dir, *v1_path};
    }
  }
  if (v2_path) {
    for (const MountInfo& m : mounts) {
      if (m.fs_type != "cgroup2") continue;
      std::optional<fs::path> dir = Locate(*v2_path, m);
      if (!dir) continue;
      // Our children get pids.max only when pids is enabled for them, which
      // cgroup v2 allows for a cgroup with processes of its own (ours) only
      // at the root.
      std::string enabled = ReadSmallFile(*dir / "cgroup.subtree_control");
      while (!enabled.empty() && enabled.back() == '\n') enabled.pop_back();
      if (HasWord(enabled, "pids", ' ')) return PidsHierarchy{*dir, *v2_path};
      return SandboxUnavailable("the pids controller is not enabled for the children of cgroup " +
                                dir->string() +
                                " (delegate a cgroup to dsh, or set TasksMax for its service)");
    }
  }
  return SandboxUnavailable("no pids cgroup controller is mounted for this process");
}

std::string NewCgroupName() {
  static std::atomic<uint64_t> counter{0};
  return "dsh-bash-" + std::to_string(getpid()) + "-" + std::to_string(counter.fetch_add(1) + 1);
}

// A pids cgroup for one command, emptied (SIGKILL) and removed on
// destruction.
class PidsCgroup {
 public:
  static Result<std::unique_ptr<PidsCgroup>> Create(const PidsHierarchy& hierarchy, int64_t max_tasks) {
    std::string name = NewCgroupName();
    fs::path dir = hierarchy.dir / name;
    if (mkdir(dir.c_str(), 0755) != 0) {
      return SandboxUnavailable("cannot create cgroup " + dir.string() + ": " + ErrnoText(errno));
    }
    std::string proc_path = (hierarchy.proc_path == "/" ? "" : hierarchy.proc_path) + "/" + name;
    auto cgroup = std::unique_ptr<PidsCgroup>(new PidsCgroup(dir, std::move(proc_path)));
    if (!WriteSmallFile(dir / "pids.max", std::to_string(max_tasks))) {
      return SandboxUnavailable("cannot set " + (dir / "pids.max").string());
    }
    return cgroup;
  }

  ~PidsCgroup() {
    auto until = Clock::now() + kCgroupEmptyLimit;
    bool can_kill_all = fs::exists(dir_ / "cgroup.kill");
    while (true) {
      std::vector<pid_t> pids = Members();
      if (pids.empty() && (rmdir(dir_.c_str()) == 0 || errno == ENOENT)) return;
      if (Clock::now() > until) {
        spdlog::warn("bash sandbox: cgroup {} still has {} processes; left in place", dir_.string(),
                     pids.size());
        return;
      }
      if (can_kill_all) {
        (void)WriteSmallFile(dir_ / "cgroup.kill", "1");
      } else {
        for (pid_t pid : pids) KillIfMember(pid);
      }
      std::this_thread::sleep_for(milliseconds(2));  // the kernel offers no wake-up on cgroup v1
    }
  }

  PidsCgroup(const PidsCgroup&) = delete;
  PidsCgroup& operator=(const PidsCgroup&) = delete;

  const fs::path& dir() const { return dir_; }

 private:
  PidsCgroup(fs::path dir, std::string proc_path) : dir_(std::move(dir)), proc_path_(std::move(proc_path)) {}

  std::vector<pid_t> Members() const {
    std::vector<pid_t> pids;
    std::istringstream in(ReadSmallFile(dir_ / "cgroup.procs"));
    for (pid_t pid; in >> pid;) pids.push_back(pid);
    return pids;
  }

  // The pid may have been reused since cgroup.procs listed it: a pidfd pins
  // the process, and its cgroup is checked before the signal.
  void KillIfMember(pid_t pid) const {
    int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    if (pidfd < 0) return;
    std::string cgroups = ReadSmallFile("/proc/" + std::to_string(pid) + "/cgroup");
    if (cgroups.find(":" + proc_path_ + "\n") != std::string::npos) {
      syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0);
    }
    close(pidfd);
  }

  const fs::path dir_;
  const std::string proc_path_;
};

const Result<PidsHierarchy>& CachedPidsHierarchy() {
  static const Result<PidsHierarchy> hierarchy = []() -> Result<PidsHierarchy> {
    Result<PidsHierarchy> found = FindPidsHierarchy();
    if (found.ok()) {
      // Creating one is the only real test of the permission.
      Result<std::unique_ptr<PidsCgroup>> probe = PidsCgroup::Create(*found, 1);
      if (!probe.ok()) found = probe.status();
    }
    if (!found.ok()) {
      spdlog::warn("bash: no cap on the number of processes of a command: {}", found.status().message());
    }
    return found;
  }();
  return hierarchy;
}

// Canonical existing directory, or an `invalid_arguments` naming `what`.
Result<fs::path> ExistingDirectory(const fs::path& path, const std::string& what) {
  if (!path.is_absolute()) return InvalidArguments(what + " must be an absolute path: " + path.string());
  std::error_code ec;
  fs::path canonical = fs::canonical(path, ec);
  if (ec) return InvalidArguments(what + " " + path.string() + ": " + ec.message());
  if (!fs::is_directory(canonical, ec))
    return InvalidArguments(what + " " + path.string() + " is not a directory");
  return canonical;
}

}  // namespace

Status ProbeSandbox(const fs::path& bwrap) { return Probe(bwrap).status(); }

Status CheckSandbox() { return CachedMode().status(); }

Status CheckProcessLimit() { return CachedPidsHierarchy().status(); }

Result<ProcessResult> RunBash(const BashRequest& request, const SandboxOptions& options) {
  if (request.command.empty()) return InvalidArguments("command is empty");
  if (options.max_processes < 0) return InvalidArguments("max_processes must not be negative");
  DSH_ASSIGN_OR_RETURN(fs::path cwd, ExistingDirectory(request.cwd, "cwd"));

  std::vector<fs::path> writable = {cwd};
  for (const fs::path& root : options.extra_roots) {
    std::error_code ec;
    fs::path canonical = fs::canonical(root, ec);
    if (!ec && root.is_absolute() && fs::is_directory(canonical, ec)) writable.push_back(canonical);
  }
  std::vector<fs::path> hidden;
  for (const fs::path& path : options.hidden) {
    std::error_code ec;
    fs::path canonical = fs::weakly_canonical(fs::absolute(path), ec);
    if (ec) continue;
    for (const fs::path& root : writable) {
      if (IsUnder(root, canonical)) {
        return InvalidArguments("directory " + root.string() + " is inside " + canonical.string() +
                                ", which the sandbox must hide");
      }
    }
    hidden.push_back(std::move(canonical));
  }

  ProcessSpec spec;
  spec.cwd = cwd;
  spec.timeout = request.timeout;
  spec.output_cap = request.output_cap;
  spec.cancel = request.cancel;
  if (options.enabled) {
    const Result<BwrapMode>& mode = CachedMode();
    if (!mode.ok()) return mode.status();
    DSH_ASSIGN_OR_RETURN(spec.argv,
                         BwrapCommand(*mode, cwd, writable, hidden, options.network, request.command));
    spec.env = CleanEnvironment(kSandboxHome);
  } else {
    spec.argv = {"bash", "-c", request.command};
    const char* home = std::getenv("HOME");
    spec.env = CleanEnvironment(home != nullptr && *home != '\0' ? home : "/");
  }

  std::unique_ptr<PidsCgroup> cgroup;
  if (options.max_processes > 0) {
    Status limit = CheckProcessLimit();
    if (limit.ok()) {
      Result<std::unique_ptr<PidsCgroup>> made =
          PidsCgroup::Create(*CachedPidsHierarchy(), options.max_processes);
      if (made.ok()) {
        cgroup = std::move(made).value();
      } else {
        limit = made.status();
      }
    }
    if (!limit.ok() && options.require_process_limit) return limit;
    if (cgroup) spec.cgroup = cgroup->dir();
  }
  Result<ProcessResult> result = RunProcess(spec);
  cgroup.reset();  // waits until nothing of the command is left
  return result;
}

}  // namespace dsh::workspace
