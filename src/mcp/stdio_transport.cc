// The stdio transport: posix_spawn with three pipes, and one I/O thread that
// polls the pipes, an eventfd (wake-ups from Send and Close) and a pidfd (the
// child's exit). Everything about the child — its pipes, lines half read,
// messages half written, the shutdown timers — belongs to that thread, so
// only the outbox and the stopping flag are shared under a lock.

#include "mcp/stdio_transport.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "base/strings.h"
#include "base/unique_fd.h"

extern char** environ;  // NOLINT: POSIX declares it nowhere

namespace dsh::mcp {
namespace {

using Clock = std::chrono::steady_clock;
using internal::Excerpt;
using std::chrono::milliseconds;

constexpr size_t kMaxMessageBytes = size_t{16} << 20;
constexpr size_t kMaxStderrLine = 1000;
constexpr int kStderrLinesPerSecond = 50;
constexpr size_t kReadChunk = size_t{64} << 10;
// Without a pidfd (kernels before 5.3) the child's exit is polled this often.
constexpr milliseconds kExitPollInterval{50};
// After the child exited, at most this much is still read from its pipes (a
// process it left behind may hold them open and keep writing).
constexpr size_t kMaxDrainBytes = size_t{64} << 20;

std::string ErrnoText(int err) {
  char buffer[256];
  return strerror_r(err, buffer, sizeof buffer);  // the GNU variant returns the text
}

Status Unavailable(std::string message) { return Status(codes::kMcpUnavailable, std::move(message)); }

// A descriptor that polls readable once `pid` exited; -1 when the kernel has
// none (before 5.3). The system call directly: glibc 2.36's <sys/pidfd.h>
// lacks extern "C".
int PidfdOpen(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

using Fd = UniqueFd;

// A close-on-exec pipe whose ends are above stderr: if the host runs with
// fd 0, 1 or 2 closed, a pipe end there would be clobbered by the child's
// dup2 of another pipe onto it.
Status MakePipe(Fd& read_end, Fd& write_end) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Unavailable("cannot create a pipe: " + ErrnoText(errno));
  Fd ends[2] = {Fd(fds[0]), Fd(fds[1])};
  for (Fd& end : ends) {
    if (end.get() > STDERR_FILENO) continue;
    int moved = fcntl(end.get(), F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
    if (moved < 0) return Unavailable("cannot create a pipe: " + ErrnoText(errno));
    end = Fd(moved);
  }
  read_end = std::move(ends[0]);
  write_end = std::move(ends[1]);
  return Status::Ok();
}

Status SetNonBlocking(const Fd& fd) {
  int flags = fcntl(fd.get(), F_GETFL);
  if (flags < 0 || fcntl(fd.get(), F_SETFL, flags | O_NONBLOCK) != 0) {
    return Unavailable("cannot make a pipe non-blocking: " + ErrnoText(errno));
  }
  return Status::Ok();
}

// The host's environment with `extra` added, replacing variables of the
// same name. (Another thread's setenv during the copy is the usual caveat.)
std::vector<std::string> ChildEnvironment(const std::map<std::string, std::string>& extra) {
  std::vector<std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view text(*entry);
    if (extra.count(std::string(text.substr(0, text.find('=')))) > 0) continue;
    env.emplace_back(text);
  }
  for (const auto& [name, value] : extra) env.push_back(name + "=" + value);
  return env;
}

// Pointers into `strings` for exec, null-terminated. `strings` must outlive
// the result.
std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

std::string DescribeExit(int wait_status) {
  if (WIFEXITED(wait_status)) return "code " + std::to_string(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) return "signal " + std::to_string(WTERMSIG(wait_status));
  return "wait status " + std::to_string(wait_status);
}

// posix_spawn's attribute objects, destroyed on every path.
struct SpawnSetup {
  SpawnSetup() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;

  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
};

struct Child {
  pid_t pid = 0;
  Fd stdin_w;  // our ends of its pipes
  Fd stdout_r;
  Fd stderr_r;
};

// Runs `spec.command` with pipes on its stdin, stdout and stderr, leading a
// new process group. glibc's posix_spawn reports a failed exec or chdir as
// its return value, so a missing or non-executable program is an error here
// rather than an early exit later.
Result<Child> Spawn(const ServerSpec& spec) {
  Fd child_stdin, child_stdout, child_stderr;
  Child child;
  for (auto [read, write] : {std::pair{&child_stdin, &child.stdin_w}, std::pair{&child.stdout_r, &child_stdout},
                             std::pair{&child.stderr_r, &child_stderr}}) {
    if (Status st = MakePipe(*read, *write); !st.ok()) {
      return Unavailable("cannot run MCP server " + spec.name + ": " + st.message());
    }
  }

  SpawnSetup setup;
  // dup2 clears close-on-exec on the copies. Then every descriptor above
  // stderr is closed in the child: not all of ours are close-on-exec (Boost
  // Asio's sockets are not), and a server, or a process it leaves behind,
  // must not hold dsh's listening socket or connections. File actions run in
  // order, so the closefrom comes after the dup2s.
  posix_spawn_file_actions_adddup2(&setup.actions, child_stdin.get(), STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&setup.actions, child_stdout.get(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&setup.actions, child_stderr.get(), STDERR_FILENO);
  if (int err = posix_spawn_file_actions_addclosefrom_np(&setup.actions, STDERR_FILENO + 1); err != 0) {
    return Unavailable("cannot run MCP server " + spec.name + ": " + ErrnoText(err));
  }
  if (!spec.cwd.empty()) posix_spawn_file_actions_addchdir_np(&setup.actions, spec.cwd.c_str());

  // Its own process group; no signal blocked; every signal at its default,
  // since a disposition of SIG_IGN (say for SIGPIPE) would survive exec.
  sigset_t no_signals, all_signals;
  sigemptyset(&no_signals);
  sigfillset(&all_signals);
  sigdelset(&all_signals, SIGKILL);
  sigdelset(&all_signals, SIGSTOP);
  posix_spawnattr_setflags(&setup.attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&setup.attr, 0);
  posix_spawnattr_setsigmask(&setup.attr, &no_signals);
  posix_spawnattr_setsigdefault(&setup.attr, &all_signals);

  std::vector<std::string> args = spec.command;
  std::vector<std::string> env = ChildEnvironment(spec.env);
  std::vector<char*> argv = CStrings(args);
  std::vector<char*> envp = CStrings(env);
  int err = posix_spawnp(&child.pid, argv[0], &setup.actions, &setup.attr, argv.data(), envp.data());
  if (err != 0) {
    std::string where = spec.cwd.empty() ? "" : " in " + spec.cwd;
    return Unavailable("cannot run MCP server " + spec.name + ": `" + spec.command[0] + "`" + where + ": " +
                       ErrnoText(err));
  }
  // Our ends never block the I/O thread; the child's ends (other open file
  // descriptions) stay blocking.
  for (const Fd* fd : {&child.stdin_w, &child.stdout_r, &child.stderr_r}) {
    Status st = SetNonBlocking(*fd);
    if (!st.ok()) {
      kill(-child.pid, SIGKILL);
      waitpid(child.pid, nullptr, 0);
      return st;
    }
  }
  return child;
}

// Blocks SIGPIPE on the calling thread, the only one writing to the child's
// stdin: a write after the child closed it then fails with EPIPE instead of
// killing dsh. The kernel directs that SIGPIPE at the writing thread, where
// it stays pending and harmless; no process-wide disposition changes.
void BlockSigpipe() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

// Splits a byte stream at '\n', dropping a '\r' before it. Keeps at most
// `max_line` bytes of a line: the rest is discarded and the line is reported
// as truncated, so memory stays bounded whatever the child writes.
class LineSplitter {
 public:
  explicit LineSplitter(size_t max_line) : max_line_(max_line) {}

  // Calls on_line(std::string_view line, bool truncated) for each line
  // `bytes` completes.
  template <typename OnLine>
  void Feed(std::string_view bytes, OnLine&& on_line) {
    while (!bytes.empty()) {
      size_t newline = bytes.find('\n');
      Append(bytes.substr(0, newline));
      if (newline == std::string_view::npos) return;
      Emit(on_line);
      bytes.remove_prefix(newline + 1);
    }
  }

  // At the end of the stream: the last line, when it had no '\n'.
  template <typename OnLine>
  void Finish(OnLine&& on_line) {
    if (!line_.empty() || truncated_) Emit(on_line);
  }

 private:
  void Append(std::string_view piece) {
    size_t room = max_line_ - std::min(max_line_, line_.size());
    if (piece.size() > room) {
      truncated_ = true;
      piece = piece.substr(0, room);
    }
    line_.append(piece);
  }

  template <typename OnLine>
  void Emit(OnLine& on_line) {
    std::string_view line(line_);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    on_line(line, truncated_);
    truncated_ = false;
    if (line_.capacity() > kReadChunk) {
      std::string().swap(line_);  // give back the memory of a huge line
    } else {
      line_.clear();
    }
  }

  const size_t max_line_;
  std::string line_;
  bool truncated_ = false;
};

}  // namespace

// The child and everything the I/O thread does with it.
class StdioTransport::Channel {
 public:
  Channel(StdioTransport& transport, Child child, OnMessage on_message, OnClosed on_closed)
      : transport_(transport),
        name_(transport.spec_.name),
        child_(std::move(child)),
        pidfd_(PidfdOpen(child_.pid)),
        on_message_(std::move(on_message)),
        on_closed_(std::move(on_closed)),
        read_buffer_(kReadChunk, '\0') {}

  // Only when Start failed after the spawn: the I/O thread reaps otherwise.
  ~Channel() {
    if (reaped_) return;
    kill(-child_.pid, SIGKILL);
    while (waitpid(child_.pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  }

  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  // The I/O thread. Returns once Close was called and the child is reaped.
  void Run() {
    BlockSigpipe();
    for (;;) {
      if (Stopping() && shutdown_ == Shutdown::kNone) BeginShutdown("");
      if (reaped_ && Stopping()) return;
      TakeOutbox();
      PollOnce();
      if (!reaped_) AdvanceShutdown();
    }
  }

 private:
  // How far the child's shutdown got: after its stdin closed (by Close, or
  // because the channel broke) it has a grace period, then SIGTERM, then
  // SIGKILL.
  enum class Shutdown { kNone, kStdinClosed, kTermSent, kKillSent };
  enum class ReadResult { kData, kNoData, kEof };

  struct PendingWrite {
    std::string line;
    size_t written = 0;
    OnSent sent;
  };

  bool Stopping() {
    std::lock_guard lock(transport_.mu_);
    return transport_.stopping_;
  }

  // Once Close has begun no callback runs: it may be waiting for this thread
  // while holding locks the callbacks take.
  void Report(OnSent& sent, Status status) {
    if (sent && !Stopping()) sent(std::move(status));
  }

  void Deliver(Json payload) {
    internal::ForEachMessage(name_, std::move(payload), [this](Json message) {
      if (!Stopping()) on_message_(std::move(message));
    });
  }

  void PollOnce() {
    pollfd fds[5];
    fds[0] = pollfd{transport_.wake_fd_, POLLIN, 0};
    nfds_t count = 1;
    auto add = [&](const Fd& fd, short events) {
      if (!fd.valid()) return -1;
      fds[count] = pollfd{fd.get(), events, 0};
      return static_cast<int>(count++);
    };
    const int out = add(child_.stdout_r, POLLIN);
    const int err = add(child_.stderr_r, POLLIN);
    const int in = writes_.empty() ? -1 : add(child_.stdin_w, POLLOUT);
    const int exit = reaped_ ? -1 : add(pidfd_, POLLIN);

    if (poll(fds, count, PollTimeoutMs()) < 0) {
      if (errno != EINTR) spdlog::error("mcp {}: poll failed: {}", name_, ErrnoText(errno));
      return;
    }
    if (fds[0].revents != 0) DrainWakeups();
    if (out >= 0 && fds[out].revents != 0) ReadStdout();
    if (err >= 0 && fds[err].revents != 0) ReadStderr();
    if (in >= 0 && fds[in].revents != 0) WriteStdin();
    if (!reaped_ && (!pidfd_.valid() || (exit >= 0 && fds[exit].revents != 0))) CheckExit();
  }

  int PollTimeoutMs() const {
    std::optional<milliseconds> wait;
    if (!reaped_ && !pidfd_.valid()) wait = kExitPollInterval;
    if (!reaped_ && (shutdown_ == Shutdown::kStdinClosed || shutdown_ == Shutdown::kTermSent)) {
      auto until_signal = std::chrono::ceil<milliseconds>(next_signal_at_ - Clock::now());
      until_signal = std::max(until_signal, milliseconds(0));
      wait = wait ? std::min(*wait, until_signal) : until_signal;
    }
    return wait ? static_cast<int>(wait->count()) : -1;
  }

  void DrainWakeups() {
    uint64_t count = 0;
    while (read(transport_.wake_fd_, &count, sizeof count) < 0 && errno == EINTR) {
    }
  }

  // Moves what Send queued to the write queue, or fails it once the child's
  // stdin is gone.
  void TakeOutbox() {
    std::deque<Outgoing> taken;
    {
      std::lock_guard lock(transport_.mu_);
      taken.swap(transport_.outbox_);
    }
    if (taken.empty()) return;
    for (Outgoing& o : taken) {
      if (gone_) {
        Report(o.sent, *gone_);
      } else {
        writes_.push_back(PendingWrite{std::move(o.line), 0, std::move(o.sent)});
      }
    }
    WriteStdin();  // most lines fit in the pipe at once
  }

  void WriteStdin() {
    while (!writes_.empty() && child_.stdin_w.valid()) {
      PendingWrite& w = writes_.front();
      ssize_t n = write(child_.stdin_w.get(), w.line.data() + w.written, w.line.size() - w.written);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN) return;  // the pipe is full: POLLOUT resumes
        // EPIPE: the child closed its stdin (or exited), so it cannot be
        // talked to any more.
        gone_ = Unavailable("cannot write to MCP server " + name_ + ": " + ErrnoText(errno));
        BeginShutdown(" after closing its stdin");
        return;
      }
      w.written += static_cast<size_t>(n);
      if (w.written < w.line.size()) continue;
      OnSent sent = std::move(w.sent);
      writes_.pop_front();
      Report(sent, Status::Ok());
    }
  }

  ReadResult ReadInto(Fd& fd, LineSplitter& lines, void (Channel::*on_line)(std::string_view, bool)) {
    auto handle = [&](std::string_view line, bool truncated) { (this->*on_line)(line, truncated); };
    for (;;) {
      ssize_t n = read(fd.get(), read_buffer_.data(), read_buffer_.size());
      if (n > 0) {
        lines.Feed(std::string_view(read_buffer_.data(), static_cast<size_t>(n)), handle);
        return ReadResult::kData;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return ReadResult::kNoData;
      if (n < 0) spdlog::warn("mcp {}: cannot read from the server: {}", name_, ErrnoText(errno));
      lines.Finish(handle);
      fd.Reset();
      return ReadResult::kEof;
    }
  }

  void ReadStdout() {
    if (ReadInto(child_.stdout_r, stdout_lines_, &Channel::OnStdoutLine) != ReadResult::kEof) return;
    // Without its stdout the server cannot answer: end it like Close would.
    if (shutdown_ == Shutdown::kNone) BeginShutdown(" after closing its stdout");
  }

  void ReadStderr() { (void)ReadInto(child_.stderr_r, stderr_lines_, &Channel::OnStderrLine); }

  void OnStdoutLine(std::string_view line, bool truncated) {
    if (truncated) {
      spdlog::warn("mcp {}: dropped a message longer than {} bytes", name_, kMaxMessageBytes);
      return;
    }
    if (IsBlank(line)) return;
    Result<Json> parsed = ParseJson(line);
    if (!parsed.ok()) {
      spdlog::warn("mcp {}: skipped a stdout line that is not JSON ({}): {}", name_,
                   parsed.status().message(), Excerpt(line));
      return;
    }
    Deliver(std::move(parsed).value());
  }

  // Logs a stderr line, at most kStderrLinesPerSecond a second; the count of
  // lines left out is logged when the next second starts.
  void OnStderrLine(std::string_view line, bool truncated) {
    if (IsBlank(line)) return;
    auto now = Clock::now();
    if (now - stderr_window_start_ >= std::chrono::seconds(1)) {
      if (stderr_suppressed_ > 0) {
        spdlog::info("mcp {}: ({} more stderr lines not logged)", name_, stderr_suppressed_);
      }
      stderr_window_start_ = now;
      stderr_logged_ = 0;
      stderr_suppressed_ = 0;
    }
    if (stderr_logged_ >= kStderrLinesPerSecond) {
      ++stderr_suppressed_;
      return;
    }
    ++stderr_logged_;
    spdlog::info("mcp {}: {}{}", name_, line, truncated ? " [...]" : "");
  }

  // Closes the child's stdin so it can exit cleanly; AdvanceShutdown
  // escalates. `why` (" after closing its stdout") explains an exit the
  // channel did not ask for; "" when Close asked.
  void BeginShutdown(std::string why) {
    shutdown_ = Shutdown::kStdinClosed;
    shutdown_reason_ = std::move(why);
    next_signal_at_ = Clock::now() + transport_.options_.stdin_grace;
    child_.stdin_w.Reset();
    if (!gone_) {
      gone_ = Unavailable(
          "MCP server " + name_ +
          (shutdown_reason_.empty() ? " is shutting down" : " is shutting down" + shutdown_reason_));
    }
    FailWrites(*gone_);
  }

  void AdvanceShutdown() {
    if (shutdown_ != Shutdown::kStdinClosed && shutdown_ != Shutdown::kTermSent) return;
    if (Clock::now() < next_signal_at_) return;
    // The child is not reaped yet, so its pid still names its process group.
    if (shutdown_ == Shutdown::kStdinClosed) {
      spdlog::info("mcp {}: still running {} ms after its stdin closed; sending SIGTERM", name_,
                   transport_.options_.stdin_grace.count());
      kill(-child_.pid, SIGTERM);
      shutdown_ = Shutdown::kTermSent;
      next_signal_at_ = Clock::now() + transport_.options_.term_grace;
    } else {
      spdlog::warn("mcp {}: still running {} ms after SIGTERM; sending SIGKILL", name_,
                   transport_.options_.term_grace.count());
      kill(-child_.pid, SIGKILL);
      shutdown_ = Shutdown::kKillSent;
    }
  }

  // Reaps the child once it exited.
  void CheckExit() {
    siginfo_t info{};
    // WNOWAIT leaves it a zombie: its pid, and so its process group id,
    // cannot be reused before the kill below.
    if (waitid(P_PID, static_cast<id_t>(child_.pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
      if (errno == EINTR) return;
      // ECHILD: someone else reaped it (SIGCHLD ignored process-wide).
      OnExited(std::nullopt);
      return;
    }
    if (info.si_pid == 0) return;  // still running
    // Processes it leaves behind in its group have nobody to talk to.
    kill(-child_.pid, SIGTERM);
    int wait_status = 0;
    while (waitpid(child_.pid, &wait_status, 0) < 0 && errno == EINTR) {
    }
    OnExited(wait_status);
  }

  void OnExited(std::optional<int> wait_status) {
    reaped_ = true;
    pidfd_.Reset();
    // What it wrote before exiting is still in the pipes.
    Drain(child_.stdout_r, stdout_lines_, &Channel::OnStdoutLine);
    Drain(child_.stderr_r, stderr_lines_, &Channel::OnStderrLine);
    child_.stdout_r.Reset();
    child_.stderr_r.Reset();
    child_.stdin_w.Reset();
    // The reason matters only when it had to be signalled: a server exiting
    // by itself closes its stdout a moment before it becomes a zombie.
    bool signalled = shutdown_ == Shutdown::kTermSent || shutdown_ == Shutdown::kKillSent;
    Status closed = Unavailable("MCP server " + name_ + " exited" +
                                (wait_status ? " (" + DescribeExit(*wait_status) + ")" : std::string()) +
                                (signalled ? shutdown_reason_ : std::string()));
    gone_ = closed;
    FailWrites(closed);
    if (!Stopping()) on_closed_(std::move(closed));
  }

  void Drain(Fd& fd, LineSplitter& lines, void (Channel::*on_line)(std::string_view, bool)) {
    for (size_t drained = 0; fd.valid() && drained < kMaxDrainBytes; drained += read_buffer_.size()) {
      if (ReadInto(fd, lines, on_line) != ReadResult::kData) break;
    }
  }

  void FailWrites(const Status& status) {
    std::deque<PendingWrite> failed;
    failed.swap(writes_);
    for (PendingWrite& w : failed) Report(w.sent, status);
  }

  StdioTransport& transport_;
  const std::string& name_;
  Child child_;
  Fd pidfd_;  // invalid when the kernel has no pidfd_open: exits are polled
  bool reaped_ = false;
  OnMessage on_message_;
  OnClosed on_closed_;

  std::string read_buffer_;
  LineSplitter stdout_lines_{kMaxMessageBytes};
  LineSplitter stderr_lines_{kMaxStderrLine};
  std::deque<PendingWrite> writes_;  // in order; the front may be half written
  std::optional<Status> gone_;       // set once the child cannot take messages: why Sends fail

  Shutdown shutdown_ = Shutdown::kNone;
  std::string shutdown_reason_;
  Clock::time_point next_signal_at_;

  Clock::time_point stderr_window_start_;
  int stderr_logged_ = 0;
  int stderr_suppressed_ = 0;
};

StdioTransport::StdioTransport(ServerSpec spec, Options options)
    : spec_(std::move(spec)), options_(options), wake_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

StdioTransport::~StdioTransport() {
  Close();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

Status StdioTransport::Start(OnMessage on_message, OnClosed on_closed) {
  std::lock_guard lifecycle(lifecycle_mu_);
  assert(!started_ && "StdioTransport::Start called twice");
  if (started_) return Unavailable("the transport of MCP server " + spec_.name + " was already started");
  started_ = true;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return Unavailable("the transport of MCP server " + spec_.name + " is closed");
  }
  if (spec_.command.empty() || spec_.command[0].empty()) {
    return Unavailable("MCP server " + spec_.name + " has no command to run");
  }
  if (wake_fd_ < 0) return Unavailable("cannot create an eventfd for MCP server " + spec_.name);

  DSH_ASSIGN_OR_RETURN(Child child, Spawn(spec_));
  pid_ = child.pid;
  channel_ = std::make_unique<Channel>(*this, std::move(child), std::move(on_message), std::move(on_closed));
  try {
    thread_ = std::thread([this] { channel_->Run(); });
  } catch (const std::system_error& e) {
    channel_.reset();  // kills and reaps the child
    return Unavailable("cannot start a thread for MCP server " + spec_.name + ": " + e.what());
  }
  return Status::Ok();
}

void StdioTransport::Send(Json message, OnSent sent) {
  std::string line = DumpJson(message);  // compact: no newline inside
  line += '\n';
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    outbox_.push_back(Outgoing{std::move(line), std::move(sent)});
  }
  Wake();
}

void StdioTransport::Close() {
  std::lock_guard lifecycle(lifecycle_mu_);
  assert(std::this_thread::get_id() != thread_.get_id() && "StdioTransport::Close called from a callback");
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    outbox_.clear();
  }
  Wake();
  if (thread_.joinable()) thread_.join();
  channel_.reset();
}

void StdioTransport::Wake() {
  uint64_t one = 1;
  // Fails only when the counter would overflow, and then a wake-up is pending.
  while (write(wake_fd_, &one, sizeof one) < 0 && errno == EINTR) {
  }
}

}  // namespace dsh::mcp
