// RunProcess: fork + exec with one pipe for stdout and stderr, then a poll
// loop on that pipe, a pidfd (the child's exit) and an eventfd (a cancel,
// from any thread). Unlike mcp/stdio_transport.cc this forks instead of
// using posix_spawn: joining a cgroup before exec (ProcessSpec::cgroup) is
// not a spawn action, and joining after the spawn would let a fast child
// fork outside the cgroup's limits.

#include "plugins/workspace/process.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <mutex>
#include <string_view>
#include <utility>

#include "base/unique_fd.h"

namespace dsh::workspace {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr size_t kReadChunk = size_t{64} << 10;
// Reads per poll wake-up, so that a flood still lets the deadline be checked.
constexpr int kMaxChunksPerWakeup = 16;
// After the child exited (and its group was killed), how long the pipe is
// still read: only a process that left the group can hold it open longer.
constexpr milliseconds kDrainAfterExit{250};
// Without a pidfd (kernels before 5.3) the child's exit is polled this often.
constexpr milliseconds kExitPollInterval{50};
constexpr const char* kDefaultPath = "/usr/local/bin:/usr/bin:/bin";

std::string ErrnoText(int err) {
  char buffer[256];
  return strerror_r(err, buffer, sizeof buffer);  // the GNU variant returns the text
}

Status Unavailable(std::string message) { return Status(codes::kUnavailable, std::move(message)); }

using Fd = UniqueFd;

// Moves a close-on-exec descriptor above stderr: if the host runs with fd
// 0, 1 or 2 closed, a descriptor there would be clobbered by the child's
// dup2 of another one onto it.
Status MoveAboveStderr(Fd& fd, const char* what) {
  if (!fd.valid()) return Unavailable(std::string("cannot open ") + what + ": " + ErrnoText(errno));
  if (fd.get() > STDERR_FILENO) return Status::Ok();
  int moved = fcntl(fd.get(), F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
  if (moved < 0) return Unavailable(std::string("cannot open ") + what + ": " + ErrnoText(errno));
  fd = Fd(moved);
  return Status::Ok();
}

Status MakePipe(Fd& read_end, Fd& write_end) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Unavailable("cannot create a pipe: " + ErrnoText(errno));
  read_end = Fd(fds[0]);
  write_end = Fd(fds[1]);
  DSH_RETURN_IF_ERROR(MoveAboveStderr(read_end, "a pipe"));
  return MoveAboveStderr(write_end, "a pipe");
}

// Keeps the first head_cap bytes and a ring of the last tail_cap bytes of
// a stream, and counts all of it.
class OutputCapture {
 public:
  explicit OutputCapture(int64_t cap)
      : head_cap_(static_cast<size_t>(cap) / 2), tail_cap_(static_cast<size_t>(cap) - head_cap_) {}

  void Append(std::string_view bytes) {
    total_ += static_cast<int64_t>(bytes.size());
    lines_ += std::count(bytes.begin(), bytes.end(), '\n');
    size_t to_head = std::min(bytes.size(), head_cap_ - head_.size());
    head_.append(bytes.substr(0, to_head));
    bytes.remove_prefix(to_head);
    AppendTail(bytes);
  }

  int64_t total() const { return total_; }
  int64_t lines() const { return lines_; }

  // The kept text; when bytes were dropped, the cut is moved to UTF-8
  // boundaries and marked.
  std::string Take(bool& truncated) {
    std::string tail = tail_.substr(tail_oldest_) + tail_.substr(0, tail_oldest_);
    int64_t kept = static_cast<int64_t>(head_.size() + tail.size());
    truncated = kept < total_;
    if (!truncated) return head_ + tail;
    size_t head_end = Utf8CompletePrefix(head_);
    size_t tail_begin = 0;
    while (tail_begin < tail.size() && tail_begin < 3 &&
           (static_cast<unsigned char>(tail[tail_begin]) & 0xC0) == 0x80) {
      ++tail_begin;
    }
    int64_t cut = total_ - static_cast<int64_t>(head_end + (tail.size() - tail_begin));
    return head_.substr(0, head_end) + "\n… [" + std::to_string(cut) + " bytes cut] …\n" +
           tail.substr(tail_begin);
  }

 private:
  void AppendTail(std::string_view bytes) {
    if (bytes.empty() || tail_cap_ == 0) return;
    if (bytes.size() >= tail_cap_) {
      tail_.assign(bytes.substr(bytes.size() - tail_cap_));
      tail_oldest_ = 0;
      return;
    }
    if (tail_.size() < tail_cap_) {  // still filling: the oldest byte is at 0
      size_t n = std::min(bytes.size(), tail_cap_ - tail_.size());
      tail_.append(bytes.substr(0, n));
      bytes.remove_prefix(n);
    }
    while (!bytes.empty()) {  // full: overwrite the oldest bytes
      size_t n = std::min(bytes.size(), tail_cap_ - tail_oldest_);
      std::memcpy(tail_.data() + tail_oldest_, bytes.data(), n);
      tail_oldest_ = (tail_oldest_ + n) % tail_cap_;
      bytes.remove_prefix(n);
    }
  }

  // The length of `s` without a multi-byte sequence cut short at its end.
  static size_t Utf8CompletePrefix(const std::string& s) {
    for (size_t back = 1; back <= 4 && back <= s.size(); ++back) {
      auto byte = static_cast<unsigned char>(s[s.size() - back]);
      if ((byte & 0xC0) == 0x80) continue;  // a continuation byte: look further back
      size_t len = byte < 0x80 ? 1 : (byte & 0xE0) == 0xC0 ? 2 : (byte & 0xF0) == 0xE0 ? 3 : 4;
      return len > back ? s.size() - back : s.size();
    }
    return s.size();
  }

  const size_t head_cap_;
  const size_t tail_cap_;
  std::string head_;
  std::string tail_;        // a ring once it holds tail_cap_ bytes
  size_t tail_oldest_ = 0;  // index of the oldest byte of tail_
  int64_t total_ = 0;
  int64_t lines_ = 0;
};

// The eventfd a cancel writes to. Shared with the token's callback, which
// outlives RunProcess: after Close the callback does nothing.
class Waker {
 public:
  explicit Waker(Fd fd) : fd_(std::move(fd)), poll_fd_(fd_.get()) {}

  void Wake() {
    std::lock_guard lock(mu_);
    if (!fd_.valid()) return;
    uint64_t one = 1;
    // Fails only when the counter would overflow, and then a wake-up is pending.
    while (write(fd_.get(), &one, sizeof one) < 0 && errno == EINTR) {
    }
  }
  void Close() {
    std::lock_guard lock(mu_);
    fd_.Reset();
  }
  // For the owning thread's poll, before Close.
  int poll_fd() const { return poll_fd_; }

 private:
  std::mutex mu_;
  Fd fd_;  // GUARDED_BY(mu_)
  const int poll_fd_;
};

// What the forked child needs, prepared before the fork: after it only
// async-signal-safe calls are allowed (another thread may hold malloc's lock).
struct ExecPlan {
  std::string path;
  std::vector<char*> argv;
  std::vector<char*> envp;
  const char* cwd = nullptr;
  int stdin_fd = -1;
  int output_fd = -1;
  int cgroup_fd = -1;
  int error_fd = -1;
  pid_t parent = 0;
};

// Why the child did not get to exec, sent to the parent over a pipe.
enum class Step : int32_t { kSession, kCgroup, kStdio, kChdir, kExec };
struct ChildError {
  Step step;
  int32_t err;
};

std::string StepText(Step step) {
  switch (step) {
    case Step::kSession:
      return "cannot start a new session";
    case Step::kCgroup:
      return "cannot join the cgroup";
    case Step::kStdio:
      return "cannot set up stdin/stdout/stderr";
    case Step::kChdir:
      return "cannot change to the working directory";
    case Step::kExec:
      return "cannot execute it";
  }
  return "cannot start it";
}

[[noreturn]] void ChildFail(int error_fd, Step step) {
  ChildError e{step, errno};
  ssize_t ignored = write(error_fd, &e, sizeof e);
  (void)ignored;
  _exit(127);
}

// Runs in the forked child.
[[noreturn]] void ExecChild(const ExecPlan& plan) {
  if (setsid() < 0) ChildFail(plan.error_fd, Step::kSession);
  if (plan.cgroup_fd >= 0 && write(plan.cgroup_fd, "0", 1) != 1) ChildFail(plan.error_fd, Step::kCgroup);
  // Dies with the thread that forked it; if that is gone already, stop here.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != plan.parent) _exit(127);
  if (dup2(plan.stdin_fd, STDIN_FILENO) < 0 || dup2(plan.output_fd, STDOUT_FILENO) < 0 ||
      dup2(plan.output_fd, STDERR_FILENO) < 0) {
    ChildFail(plan.error_fd, Step::kStdio);
  }
  if (plan.cwd != nullptr && chdir(plan.cwd) != 0) ChildFail(plan.error_fd, Step::kChdir);
  // A disposition of SIG_IGN and the signal mask survive exec: reset both,
  // the dispositions first so that no handler of the host runs here.
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &default_action, nullptr);  // EINVAL for glibc's own
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  // Not every descriptor of the host is close-on-exec (Boost Asio's sockets
  // are not); the command must inherit none of them.
  if (close_range(STDERR_FILENO + 1, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
    for (int fd = STDERR_FILENO + 1; fd < 65536; ++fd) fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  execve(plan.path.c_str(), plan.argv.data(), plan.envp.data());
  ChildFail(plan.error_fd, Step::kExec);
}

// The executable `name` names: itself when it has a '/', else the first
// executable regular file of that name on `path_list`.
std::optional<std::string> FindProgram(const std::string& name, std::string_view path_list) {
  if (name.find('/') != std::string::npos) return name;
  while (true) {
    size_t colon = path_list.find(':');
    std::string dir(path_list.substr(0, colon));
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    struct stat st {};
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    if (colon == std::string_view::npos) return std::nullopt;
    path_list.remove_prefix(colon + 1);
  }
}

std::string_view PathOf(const std::vector<std::string>& env) {
  for (const std::string& entry : env) {
    if (entry.starts_with("PATH=")) return std::string_view(entry).substr(5);
  }
  return kDefaultPath;
}

// A descriptor that polls readable once `pid` exited; -1 when the kernel has
// none (before 5.3). The system call directly: glibc 2.36's <sys/pidfd.h>
// lacks extern "C".
int PidfdOpen(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

struct Child {
  pid_t pid = 0;
  Fd output;  // our end of its stdout+stderr pipe, non-blocking
  Fd pidfd;   // invalid without kernel support
};

Result<Child> Spawn(const ProcessSpec& spec) {
  const std::string& program = spec.argv[0];
  std::string_view path_list = PathOf(spec.env);
  std::optional<std::string> path = FindProgram(program, path_list);
  if (!path) return Unavailable("cannot run `" + program + "`: not found in PATH " + std::string(path_list));
  if (!spec.cwd.empty()) {
    struct stat st {};
    if (stat(spec.cwd.c_str(), &st) != 0) {
      return Unavailable("cannot run `" + program + "` in " + spec.cwd.string() + ": " + ErrnoText(errno));
    }
    if (!S_ISDIR(st.st_mode)) {
      return Unavailable("cannot run `" + program + "` in " + spec.cwd.string() + ": not a directory");
    }
  }

  Fd output_r, output_w, error_r, error_w;
  DSH_RETURN_IF_ERROR(MakePipe(output_r, output_w));
  DSH_RETURN_IF_ERROR(MakePipe(error_r, error_w));
  Fd null_fd(open("/dev/null", O_RDONLY | O_CLOEXEC));
  DSH_RETURN_IF_ERROR(MoveAboveStderr(null_fd, "/dev/null"));
  Fd cgroup_fd;
  if (!spec.cgroup.empty()) {
    std::string procs = (spec.cgroup / "cgroup.procs").string();
    cgroup_fd = Fd(open(procs.c_str(), O_WRONLY | O_CLOEXEC));
    if (!cgroup_fd.valid()) return Unavailable("cannot open " + procs + ": " + ErrnoText(errno));
  }

  std::vector<std::string> args = spec.argv;
  std::vector<std::string> env = spec.env;
  ExecPlan plan;
  plan.path = *path;
  for (std::string& a : args) plan.argv.push_back(a.data());
  plan.argv.push_back(nullptr);
  for (std::string& e : env) plan.envp.push_back(e.data());
  plan.envp.push_back(nullptr);
  plan.cwd = spec.cwd.empty() ? nullptr : spec.cwd.c_str();
  plan.stdin_fd = null_fd.get();
  plan.output_fd = output_w.get();
  plan.cgroup_fd = cgroup_fd.get();
  plan.error_fd = error_w.get();
  plan.parent = getpid();

  pid_t pid = fork();
  if (pid < 0) return Unavailable("cannot run `" + program + "`: fork: " + ErrnoText(errno));
  if (pid == 0) ExecChild(plan);

  output_w.Reset();  // else the pipe never reports EOF
  error_w.Reset();
  ChildError failure{};
  size_t got = 0;
  while (got < sizeof failure) {
    ssize_t n = read(error_r.get(), reinterpret_cast<char*>(&failure) + got, sizeof failure - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: the exec succeeded and closed the pipe
    got += static_cast<size_t>(n);
  }
  if (got > 0) {
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    std::string where = spec.cwd.empty() ? "" : " in " + spec.cwd.string();
    return Unavailable("cannot run `" + program + "`" + where + ": " + StepText(failure.step) + ": " +
                       ErrnoText(failure.err));
  }

  Child child;
  child.pid = pid;
  child.pidfd = Fd(PidfdOpen(pid));
  int flags = fcntl(output_r.get(), F_GETFL);
  if (flags < 0 || fcntl(output_r.get(), F_SETFL, flags | O_NONBLOCK) != 0) {
    int err = errno;
    kill(-pid, SIGKILL);
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    return Unavailable("cannot make a pipe non-blocking: " + ErrnoText(err));
  }
  child.output = std::move(output_r);
  return child;
}

int PollTimeoutMs(Clock::time_point until) {
  auto left = std::chrono::ceil<milliseconds>(until - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, INT_MAX));
}

// Watches one spawned child until it is reaped and its output read.
class Supervisor {
 public:
  Supervisor(const ProcessSpec& spec, Child child, int wake_fd, Clock::time_point start)
      : child_(std::move(child)),
        wake_fd_(wake_fd),
        start_(start),
        deadline_(start + spec.timeout),
        capture_(spec.output_cap),
        buffer_(kReadChunk, '\0') {}

  ProcessResult Run() {
    while (!reaped_ || (child_.output.valid() && Clock::now() < drain_until_)) PollOnce();
    ProcessResult result;
    if (wait_status_ && WIFEXITED(*wait_status_)) result.exit_code = WEXITSTATUS(*wait_status_);
    if (wait_status_ && WIFSIGNALED(*wait_status_)) result.signal = WTERMSIG(*wait_status_);
    result.timed_out = timed_out_;
    result.cancelled = cancelled_;
    result.output = capture_.Take(result.truncated);
    result.output_bytes = capture_.total();
    result.output_lines = capture_.lines();
    result.duration = std::chrono::duration_cast<milliseconds>(Clock::now() - start_);
    return result;
  }

 private:
  void PollOnce() {
    pollfd fds[3];
    nfds_t count = 0;
    auto add = [&](int fd) {
      fds[count] = pollfd{fd, POLLIN, 0};
      return static_cast<int>(count++);
    };
    const int out = child_.output.valid() ? add(child_.output.get()) : -1;
    const int exit = !reaped_ && child_.pidfd.valid() ? add(child_.pidfd.get()) : -1;
    const int wake = !reaped_ && !killed_ && wake_fd_ >= 0 ? add(wake_fd_) : -1;

    int timeout_ms = -1;  // killed: the pidfd reports the end
    if (reaped_) {
      timeout_ms = PollTimeoutMs(drain_until_);
    } else if (!killed_) {
      timeout_ms = PollTimeoutMs(deadline_);
    }
    if (!reaped_ && !child_.pidfd.valid()) {
      int interval = static_cast<int>(kExitPollInterval.count());
      timeout_ms = timeout_ms < 0 ? interval : std::min(timeout_ms, interval);
    }

    if (poll(fds, count, timeout_ms) < 0 && errno != EINTR) {
      // Cannot wait any more: end the child rather than leave it behind.
      if (!reaped_) KillGroup();
      if (!reaped_) Reap();
      child_.output.Reset();
      return;
    }
    if (out >= 0 && fds[out].revents != 0) ReadOutput();
    if (wake >= 0 && fds[wake].revents != 0 && !killed_) {
      uint64_t count_ignored = 0;
      ssize_t n = read(wake_fd_, &count_ignored, sizeof count_ignored);
      (void)n;
      cancelled_ = true;
      KillGroup();
    }
    if (!reaped_ && !killed_ && Clock::now() >= deadline_) {
      timed_out_ = true;
      KillGroup();
    }
    if (!reaped_ && (exit < 0 || fds[exit].revents != 0)) CheckExit();
  }

  // Only before the child is reaped: until then its pid, and so its process
  // group id, cannot be reused.
  void KillGroup() {
    killed_ = true;
    kill(-child_.pid, SIGKILL);
  }

  void ReadOutput() {
    for (int i = 0; i < kMaxChunksPerWakeup; ++i) {
      ssize_t n = read(child_.output.get(), buffer_.data(), buffer_.size());
      if (n > 0) {
        capture_.Append(std::string_view(buffer_.data(), static_cast<size_t>(n)));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return;
      child_.output.Reset();  // EOF (or a broken pipe: nothing more will come)
      return;
    }
  }

  void CheckExit() {
    siginfo_t info{};
    // WNOWAIT leaves it a zombie, so the group can still be killed by its id.
    if (waitid(P_PID, static_cast<id_t>(child_.pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
      if (errno == EINTR) return;
      // ECHILD: reaped by someone else (SIGCHLD ignored process-wide).
      reaped_ = true;
      drain_until_ = Clock::now() + kDrainAfterExit;
      return;
    }
    if (info.si_pid == 0) return;  // still running
    // What it leaves running in its group is not wanted any more.
    kill(-child_.pid, SIGKILL);
    Reap();
  }

  void Reap() {
    int status = 0;
    pid_t r;
    while ((r = waitpid(child_.pid, &status, 0)) < 0 && errno == EINTR) {
    }
    if (r == child_.pid) wait_status_ = status;
    reaped_ = true;
    child_.pidfd.Reset();
    drain_until_ = Clock::now() + kDrainAfterExit;
  }

  Child child_;
  const int wake_fd_;  // -1 without a cancel token
  const Clock::time_point start_;
  const Clock::time_point deadline_;
  OutputCapture capture_;
  std::string buffer_;

  bool killed_ = false;
  bool timed_out_ = false;
  bool cancelled_ = false;
  bool reaped_ = false;
  std::optional<int> wait_status_;
  Clock::time_point drain_until_;
};

}  // namespace

Result<ProcessResult> RunProcess(const ProcessSpec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty()) return InvalidArguments("argv: the program to run is empty");
  if (spec.timeout <= milliseconds(0)) return InvalidArguments("timeout must be positive");
  if (spec.output_cap < 0) return InvalidArguments("output_cap must not be negative");
  if (spec.cancel && spec.cancel->cancelled()) {
    return Status(codes::kCancelled, "cancelled before `" + spec.argv[0] + "` started");
  }
  std::shared_ptr<Waker> waker;
  if (spec.cancel) {
    Fd event_fd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!event_fd.valid()) return Unavailable("cannot create an eventfd: " + ErrnoText(errno));
    waker = std::make_shared<Waker>(std::move(event_fd));
  }

  const Clock::time_point start = Clock::now();
  DSH_ASSIGN_OR_RETURN(Child child, Spawn(spec));
  // Registered after the spawn: a cancel in between runs the callback at once.
  if (waker) spec.cancel->OnCancel([waker] { waker->Wake(); });
  Supervisor supervisor(spec, std::move(child), waker ? waker->poll_fd() : -1, start);
  ProcessResult result = supervisor.Run();
  if (waker) waker->Close();
  return result;
}

}  // namespace dsh::workspace
