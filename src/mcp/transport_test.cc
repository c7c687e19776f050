#include "mcp/transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <optional>
#include <thread>

#include "mcp/http_transport.h"
#include "mcp/stdio_transport.h"
#include "mcp/testing/canned_http_server.h"

extern char** environ;  // NOLINT

namespace dsh::mcp {
namespace {

using std::chrono::milliseconds;
using testing::CannedHttpServer;
using testing::HttpRequest;
using testing::HttpResponder;
using Clock = std::chrono::steady_clock;

// Long enough for node to start on a loaded CI machine; waits end as soon
// as their condition holds.
constexpr milliseconds kGenerous{30'000};

// curl honours proxy variables; every server here is on loopback.
const bool kProxiesCleared = [] {
  for (const char* name :
       {"http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"}) {
    unsetenv(name);
  }
  return true;
}();

std::string SourceDir() {
  const char* dir = std::getenv("DSH_SOURCE_DIR");
  return dir != nullptr && *dir != '\0' ? dir : DSH_SOURCE_DIR_FALLBACK;
}

bool OnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string_view rest = path != nullptr ? path : "";
  while (!rest.empty()) {
    size_t colon = rest.find(':');
    std::string dir(rest.substr(0, colon));
    if (access((dir + "/" + program).c_str(), X_OK) == 0) return true;
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  return false;
}

// The argv running an MCP server of node_modules with node, or why it cannot
// (the tests fail then: they never skip).
Result<std::vector<std::string>> NodeServer(const std::string& bin, std::vector<std::string> args = {}) {
  if (!OnPath("node"))
    return Status("test_setup", "`node` is not on PATH; install Node.js to run the MCP tests");
  std::string script = SourceDir() + "/node_modules/.bin/" + bin;
  if (access(script.c_str(), R_OK) != 0) {
    return Status("test_setup", script + " is missing: run `npm ci` in " + SourceDir());
  }
  std::vector<std::string> argv{"node", script};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

Json Request(int id, const std::string& method, Json params = Json::object()) {
  return Json{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
}

Json Notification(const std::string& method, Json params = Json::object()) {
  return Json{{"jsonrpc", "2.0"}, {"method", method}, {"params", std::move(params)}};
}

Json Initialize(int id, Json capabilities = Json::object()) {
  return Request(id, "initialize",
                 {{"protocolVersion", "2025-06-18"},
                  {"capabilities", std::move(capabilities)},
                  {"clientInfo", {{"name", "dsh-transport-test"}, {"version", "0"}}}});
}

bool IsResponse(const Json& m, int id) {
  return m.contains("id") && m["id"] == id && (m.contains("result") || m.contains("error"));
}

bool HasMethod(const Json& m, const std::string& method) { return m.value("method", "") == method; }

// Everything a transport reported, observed from the test thread. The
// callbacks share its state, so a transport outliving a failed test is safe.
// It also checks the contract that callbacks never overlap.
class Recorder {
 public:
  Recorder() : state_(std::make_shared<State>()) {}

  Transport::OnMessage OnMessage() {
    return [s = state_](Json message) {
      Guard guard(*s);
      std::lock_guard lock(s->mu);
      s->messages.push_back(std::move(message));
      s->cv.notify_all();
    };
  }
  Transport::OnClosed OnClosed() {
    return [s = state_](Status status) {
      Guard guard(*s);
      std::lock_guard lock(s->mu);
      s->closed.push_back(std::move(status));
      s->cv.notify_all();
    };
  }
  Transport::OnSent OnSent(const std::string& label) {
    return [s = state_, label](Status status) {
      Guard guard(*s);
      std::lock_guard lock(s->mu);
      s->sent.emplace_back(label, std::move(status));
      s->cv.notify_all();
    };
  }

  // The first message satisfying `pred`, waiting for it up to `timeout`.
  std::optional<Json> WaitForMessage(const std::function<bool(const Json&)>& pred,
                                     milliseconds timeout = kGenerous) {
    std::optional<Json> found;
    Wait(timeout, [&] {
      for (const Json& m : state_->messages) {
        if (pred(m)) {
          found = m;
          return true;
        }
      }
      return false;
    });
    return found;
  }
  std::optional<Json> WaitForResponse(int id) {
    return WaitForMessage([id](const Json& m) { return IsResponse(m, id); });
  }
  // The status `sent` got for the Send labelled `label`.
  std::optional<Status> WaitForSent(const std::string& label, milliseconds timeout = kGenerous) {
    std::optional<Status> found;
    Wait(timeout, [&] {
      for (const auto& [l, status] : state_->sent) {
        if (l == label) {
          found = status;
          return true;
        }
      }
      return false;
    });
    return found;
  }
  std::optional<Status> WaitForClosed(milliseconds timeout = kGenerous) {
    std::optional<Status> found;
    Wait(timeout, [&] {
      if (!state_->closed.empty()) found = state_->closed.front();
      return found.has_value();
    });
    return found;
  }
  bool WaitForMessageCount(size_t count, milliseconds timeout = kGenerous) {
    return Wait(timeout, [&] { return state_->messages.size() >= count; });
  }

  std::vector<Json> messages() const {
    std::lock_guard lock(state_->mu);
    return state_->messages;
  }
  size_t closed_count() const {
    std::lock_guard lock(state_->mu);
    return state_->closed.size();
  }
  bool sent_called(const std::string& label) const {
    std::lock_guard lock(state_->mu);
    return std::any_of(state_->sent.begin(), state_->sent.end(),
                       [&](const auto& s) { return s.first == label; });
  }
  bool callbacks_overlapped() const { return state_->overlapped.load(); }

  // Index of the first message satisfying `pred`, or -1.
  int IndexOf(const std::function<bool(const Json&)>& pred) const {
    std::vector<Json> all = messages();
    for (size_t i = 0; i < all.size(); ++i) {
      if (pred(all[i])) return static_cast<int>(i);
    }
    return -1;
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<Json> messages;                        // GUARDED_BY(mu)
    std::vector<Status> closed;                        // GUARDED_BY(mu)
    std::vector<std::pair<std::string, Status>> sent;  // GUARDED_BY(mu)
    std::atomic<bool> in_callback{false};
    std::atomic<bool> overlapped{false};
  };
  // Marks a callback as running; notes when another was already running.
  struct Guard {
    explicit Guard(State& s) : s(s) {
      if (s.in_callback.exchange(true)) s.overlapped = true;
    }
    ~Guard() { s.in_callback = false; }
    State& s;
  };

  template <typename Pred>
  bool Wait(milliseconds timeout, Pred pred) {
    std::unique_lock lock(state_->mu);
    return state_->cv.wait_for(lock, timeout, pred);
  }

  std::shared_ptr<State> state_;
};

// A temporary directory, removed with its contents.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "dsh-mcp-test-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

ServerSpec StdioSpec(std::vector<std::string> command) {
  ServerSpec spec;
  spec.name = "fake";
  spec.command = std::move(command);
  return spec;
}

ServerSpec ShellSpec(const std::string& script) { return StdioSpec({"sh", "-c", script}); }

// True once `pid` is no process: reaped, or a zombie waiting for init.
bool ProcessGone(pid_t pid) {
  if (kill(pid, 0) != 0) return errno == ESRCH;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] == 'Z';
}

// Waits until `pid` is gone (or a zombie). A pidfd becomes readable when
// its process ends, also for a process that is not our child.
bool EventuallyGone(pid_t pid) {
  int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return errno == ESRCH;
  pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
  int ready = poll(&p, 1, static_cast<int>(milliseconds(5'000).count()));
  close(fd);
  return ready == 1 || ProcessGone(pid);
}

// True when `pid` was our child and has been reaped (no zombie left).
bool Reaped(pid_t pid) { return waitpid(pid, nullptr, WNOHANG) < 0 && errno == ECHILD; }

// ----------------------------------------------------------------------------
// stdio

TEST(StdioTransport, TalksToTheEverythingServer) {
  auto command = NodeServer("mcp-server-everything");
  ASSERT_TRUE(command.ok()) << command.status().message();
  ServerSpec spec = StdioSpec(*command);
  spec.name = "everything";
  StdioTransport transport(spec);
  Recorder rec;
  ASSERT_TRUE(transport.Start(rec.OnMessage(), rec.OnClosed()).ok());

  transport.Send(Initialize(1), rec.OnSent("initialize"));
  auto init = rec.WaitForResponse(1);
  ASSERT_TRUE(init) << "no answer to initialize";
  EXPECT_EQ((*init)["result"]["protocolVersion"], "2025-06-18");
  EXPECT_TRUE((*init)["result"]["serverInfo"].contains("name"));
  EXPECT_EQ(rec.WaitForSent("initialize"), Status::Ok());

  transport.Send(Notification("notifications/initialized"), nullptr);
  transport.Send(Request(2, "tools/list"), rec.OnSent("list"));
  auto list = rec.WaitForResponse(2);
  ASSERT_TRUE(list) << "no answer to tools/list";
  bool has_echo = false;
  for (const Json& tool : (*list)["result"]["tools"]) has_echo |= tool.value("name", "") == "echo";
  EXPECT_TRUE(has_echo) << list->dump();

  transport.Send(Request(3, "tools/call", {{"name", "echo"}, {"arguments", {{"message", "hi"}}}}), nullptr);
  auto echo = rec.WaitForResponse(3);
  ASSERT_TRUE(echo) << "no answer to tools/call";
  EXPECT_EQ((*echo)["result"]["content"][0]["text"], "Echo: hi") << echo->dump();

  pid_t pid = transport.pid();
  transport.Close();
  EXPECT_TRUE(Reaped(pid));
  EXPECT_EQ(rec.closed_count(), 0u) << "OnClosed after Close";
  EXPECT_FALSE(rec.callbacks_overlapped());
}

TEST(StdioTransport, StartFailsWhenTheCommandCannotRun) {
  {
    StdioTransport transport(StdioSpec({"dsh-test-no-such-program", "--flag"}));
    Recorder rec;
    Status st = transport.Start(rec.OnMessage(), rec.OnClosed());
    EXPECT_EQ(st.code(), codes::kMcpUnavailable);
    EXPECT_NE(st.message().find("fake"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("dsh-test-no-such-program"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("No such file or directory"), std::string::npos) << st.message();
  }
  {
    TempDir dir;
    std::string script = (dir.path() / "not-executable").string();
    std::ofstream(script) << "#!/bin/sh\n";
    chmod(script.c_str(), 0644);
    StdioTransport transport(StdioSpec({script}));
    Status st = transport.Start(nullptr, nullptr);
    EXPECT_EQ(st.code(), codes::kMcpUnavailable);
    EXPECT_NE(st.message().find("Permission denied"), std::string::npos) << st.message();
  }
  {
    ServerSpec spec = ShellSpec("true");
    spec.cwd = "/dsh-test-no-such-dir";
    StdioTransport transport(spec);
    Status st = transport.Start(nullptr, nullptr);
    EXPECT_EQ(st.code(), codes::kMcpUnavailable);
    EXPECT_NE(st.message().find("/dsh-test-no-such-dir"), std::string::npos) << st.message();
  }
}

TEST(StdioTransport, ReportsTheExitCodeOfAServerThatExits) {
  StdioTransport transport(ShellSpec("echo '{\"last\":1}'; exit 3"));
  Recorder rec;
  ASSERT_TRUE(transport.Start(rec.OnMessage(), rec.OnClosed()).ok());
  auto closed = rec.WaitForClosed();
  ASSERT_TRUE(closed) << "no OnClosed after the server exited";
  EXPECT_EQ(closed->code(), codes::kMcpUnavailable);
  EXPECT_EQ(closed->message(), "MCP server fake exited (code 3)");
  // What it wrote before exiting still arrived, before OnClosed.
  EXPECT_EQ(rec.messages(), (std::vector<Json>{Json{{"last", 1}}}));
  // Reaped by the transport already, without waiting for Close.
  EXPECT_TRUE(Reaped(transport.pid()));

  // A Send now fails with the same reason.
  transport.Send(Request(1, "ping"), rec.OnSent("ping"));
  auto sent = rec.WaitForSent("ping");
  ASSERT_TRUE(sent);
  EXPECT_EQ(sent->code(), codes::kMcpUnavailable);
  EXPECT_NE(sent->message().find("exited (code 3)"), std::string::npos) << sent->message();
  transport.Close();
  EXPECT_EQ(rec.closed_count(), 1u);
}

TEST(StdioTransport, ReportsTheSignalThatKilledTheServer) {
  StdioTransport transport(ShellSpec("kill -KILL $$"));
  Recorder rec;
  ASSERT_TRUE(transport.Start(rec.OnMessage(), rec.OnClosed()).ok());
  auto closed = rec.WaitForClosed();
  ASSERT_TRUE(closed);
  EXPECT_EQ(closed->message(), "MCP server fake exited (signal 9)");
}

TEST(StdioTransport, EndsAServerThatClosesItsStdout) {
  // Without stdout it can never answer; it is stopped like Close would
  // (stdin closed, then SIGTERM after the grace period).
  StdioTransport transport(ShellSpec("exec >&-; sleep 100"),
                           StdioTransport::Options{milliseconds(100), milliseconds(2'000)});
  Recorder rec;
  ASSERT_TRUE(transport.Start(rec.OnMessage(), rec.OnClosed()).ok());
  auto closed = rec.WaitForClosed();
  ASSERT_TRUE(closed);
  EXPECT_EQ(closed->message(), "MCP server fake exited (signal 15) after closing its stdout");
  EXPECT_TRUE(Reaped(transport.pid()));
}

TEST(StdioTransport, CloseKillsAServerThatIgnoresEofAndSigterm) {
  // The shell and its background sleep both ignore SIGTERM (an ignored
  // signal stays ignored across exec) and never read stdin.
  StdioTransport transport(ShellSpec("trap '' TERM; sleep 100 & echo \"{\\\"sleeper\\\":$!}\"; wait"));
  Recorder rec;
  ASSERT_TRUE(transport.Start(rec.OnMessage(), rec.OnClosed()).ok());
  auto ready = rec.WaitForMessage([](const Json& m) { return m.contains("sleeper"); });
  ASSERT_TRUE(ready);
  const pid_t sleeper = (*ready)["sleeper"].get<pid_t>();
  const pid_t pid = transport.pid();

  auto start = Clock::now();
  transport.Close();
  auto took = Clock::now() - start;
  // 2 s after stdin closed, SIGTERM (ignored); 2 s later, SIGKILL.
  EXPECT_GE(took, milliseconds(3'900));
  EXPECT_LT(took, milliseconds(8'000));
  EXPECT_TRUE(Reaped(pid));
  EXPECT_TRUE(ProcessGone(pid));
  EXPECT_TRUE(EventuallyGone(sleeper)) << "the server's child survived: the process group was not killed";
  EXPECT_EQ(rec.closed_count(), 0u);
}

TEST(StdioTransport, RoundTripsLargeMessagesAndClosesAtEof) {
  // `cat` answers every line with itself, and exits when its stdin closes.
  StdioTransport transport(StdioSpec({"cat"}));
  Recorder rec;
  ASSERT_TRUE(transport.Start(rec.OnMessage(), rec.OnClosed()).ok());
  std::vector<Json> sent = {Request(1, "a"), Request(2, "big", {{"blob", std::string(4 << 20, 'x')}}),
                            Request(3, "c", {{"text", "line\nbreak \"quoted\" ünïcode"}})};
  for (size_t i = 0; i < sent.size(); ++i) transport.Send(sent[i], rec.OnSent(std::to_string(i)));
  ASSERT_TRUE(rec.WaitForMessageCount(3));
  EXPECT_EQ(rec.messages(), sent);
  for (size_t i = 0; i < sent.size(); ++i) EXPECT_EQ(rec.WaitForSent(std::to_string(i)), Status::Ok());

  auto start = Clock::now();
  transport.Close();
  EXPECT_LT(Clock::now() - start, milliseconds(2'000)) << "cat should exit on EOF, before any signal";
  EXPECT_FALSE(rec.callbacks_overlapped());
}

TEST(StdioTransport, SendNeverBlocksOnAServerThatDoesNotRead) {
  StdioTransport transport(ShellSpec("exec sleep 100"),
                           StdioTransport::Options{milliseconds(100), milliseconds(2'000)});
  Recorder rec;
  ASSERT_TRUE(transport.Start(rec.OnMessage(), rec.OnClosed()).ok());
  // Far more than a pipe holds: a blocking write would hang here.
  std::promise<void> returned;
  std::thread sender([&] {
    for (int i = 0; i < 8; ++i)
      transport.Send(Request(i, "big", {{"blob", std::string(1 << 20, 'x')}}), rec.OnSent("big"));
    returned.set_value();
  });
  bool done = returned.get_future().wait_for(kGenerous) == std::future_status::ready;
  EXPECT_TRUE(done) << "Send blocked";
  transport.Close();  // also unblocks a stuck sender: the child dies
  sender.join();
  EXPECT_FALSE(rec.sent_called("big")) << "a message that cannot have reached the pipe was reported sent";
}

TEST(StdioTransport, SkipsNonJsonLinesAndKeepsStderrApart) {
  StdioTransport transport(
      ShellSpec("echo 'not json'; echo '{\"a\":1}'; echo '{\"stderr\":1}' >&2; echo oops >&2; printf "
                "'{\"b\":2}\\r\\n'; "
                "echo; echo '[{\"c\":3},{\"d\":4}]'; echo 42; echo '{\"e\":5}'; read line"));
  Recorder rec;
  ASSERT_TRUE(transport.Start(rec.OnMessage(), rec.OnClosed()).ok());
  ASSERT_TRUE(rec.WaitForMessage([](const Json& m) { return m.contains("e"); }));
  std::vector<Json> expected = {Json{{"a", 1}}, Json{{"b", 2}}, Json{{"c", 3}}, Json{{"d", 4}},
                                Json{{"e", 5}}};
  EXPECT_EQ(rec.messages(), expected);
  transport.Close();
}

TEST(StdioTransport, DropsAnOverlongLineAndKeepsGoing) {
  StdioTransport transport(
      ShellSpec("head -c 17000000 /dev/zero | tr '\\0' a; echo; echo '{\"after\":1}'; read line"));
  Recorder rec;
  ASSERT_TRUE(transport.Start(rec.OnMessage(), rec.OnClosed()).ok());
  ASSERT_TRUE(rec.WaitForMessage([](const Json& m) { return m.contains("after"); }));
  EXPECT_EQ(rec.messages(), (std::vector<Json>{Json{{"after", 1}}}));
  transport.Close();
}

TEST(StdioTransport, AppliesEnvironmentAndWorkingDirectory) {
  TempDir dir;
  ServerSpec spec = ShellSpec(
      "printf '{\"cwd\":\"%s\",\"foo\":\"%s\",\"home\":\"%s\",\"path\":\"%s\"}\\n' \"$(pwd -P)\" "
      "\"$DSH_TEST_FOO\" "
      "\"$HOME\" \"$PATH\"; read line");
  spec.env = {{"DSH_TEST_FOO", "bar"}, {"HOME", "/dsh-test-home"}};
  spec.cwd = dir.path().string();
  StdioTransport transport(spec);
  Recorder rec;
  ASSERT_TRUE(transport.Start(rec.OnMessage(), rec.OnClosed()).ok());
  auto report = rec.WaitForMessage([](const Json& m) { return m.contains("cwd"); });
  ASSERT_TRUE(report);
  EXPECT_EQ((*report)["cwd"], std::filesystem::canonical(dir.path()).string());
  EXPECT_EQ((*report)["foo"], "bar");
  EXPECT_EQ((*report)["home"], "/dsh-test-home");     // spec.env replaces the host's
  EXPECT_EQ((*report)["path"], std::getenv("PATH"));  // the rest is the host's
  transport.Close();
}

// The descriptors `pid` has open, from /proc (the test's own listing, so
// nothing of the child's is opened to take it).
std::vector<int> OpenDescriptors(pid_t pid) {
  std::vector<int> fds;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
    fds.push_back(std::stoi(entry.path().filename().string()));
  }
  std::sort(fds.begin(), fds.end());
  return fds;
}

TEST(StdioTransport, ChildInheritsOnlyItsPipes) {
  // Descriptors without close-on-exec, like Boost Asio's sockets: a listening
  // socket and a file.
  int file = open("/dev/null", O_RDONLY);  // NOLINT: no O_CLOEXEC on purpose
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(file, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(listener, 1), 0);

  // `cat` opens nothing that stays open; once it echoed a line it runs.
  StdioTransport transport(StdioSpec({"cat"}));
  Recorder rec;
  ASSERT_TRUE(transport.Start(rec.OnMessage(), rec.OnClosed()).ok());
  transport.Send(Request(1, "ping"), nullptr);
  ASSERT_TRUE(rec.WaitForMessage([](const Json& m) { return HasMethod(m, "ping"); }));
  std::vector<int> fds = OpenDescriptors(transport.pid());
  transport.Close();
  close(file);
  close(listener);
  EXPECT_EQ(fds, (std::vector<int>{0, 1, 2})) << "the child inherited descriptors of the host";
}

// ----------------------------------------------------------------------------
// Streamable HTTP

// A port nothing listens on (right now).
int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// `mcp-server-everything streamableHttp` on a free port; its stdout and
// stderr collected by a thread; killed with its process group on
// destruction.
class EverythingHttpServer {
 public:
  ~EverythingHttpServer() {
    if (pid_ > 0) {
      kill(-pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (reader_.joinable()) reader_.join();  // EOF once the group is gone
  }

  // Spawns it and waits for its "listening on port" line.
  Status Start() {
    auto command = NodeServer("mcp-server-everything", {"streamableHttp"});
    if (!command.ok()) return command.status();
    port_ = FreePort();
    std::vector<std::string> env_strings = {"PORT=" + std::to_string(port_)};
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::string_view(*e).rfind("PORT=", 0) != 0) env_strings.emplace_back(*e);
    }
    std::vector<char*> argv, envp;
    for (std::string& s : *command) argv.push_back(s.data());
    argv.push_back(nullptr);
    for (std::string& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) return Status("test_setup", "pipe: " + std::string(strerror(errno)));
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDERR_FILENO);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    int err = posix_spawnp(&pid_, argv[0], &actions, &attr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    close(out[1]);
    if (err != 0) {
      close(out[0]);
      pid_ = 0;
      return Status("test_setup", "cannot spawn node: " + std::string(strerror(err)));
    }
    reader_ = std::thread([this, fd = out[0]] {
      char buf[4096];
      ssize_t n;
      while ((n = read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
        std::lock_guard lock(mu_);
        if (n > 0) log_.append(buf, static_cast<size_t>(n));
        cv_.notify_all();
      }
      close(fd);
      std::lock_guard lock(mu_);
      eof_ = true;
      cv_.notify_all();
    });
    const std::string listening = "listening on port " + std::to_string(port_);
    if (WaitForLog(listening, kGenerous)) return Status::Ok();
    std::lock_guard lock(mu_);
    return Status("test_setup", std::string(eof_ ? "mcp-server-everything exited at start"
                                                 : "mcp-server-everything did not say it listens") +
                                    "; its output:\n" + log_);
  }

  // True once the server's output contains `text`; false at `timeout` or
  // when the server's output ends without it.
  bool WaitForLog(const std::string& text, milliseconds timeout = kGenerous) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return log_.find(text) != std::string::npos || eof_; }) &&
           log_.find(text) != std::string::npos;
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/mcp"; }
  std::string Log() {
    std::lock_guard lock(mu_);
    return log_;
  }

 private:
  pid_t pid_ = 0;
  int port_ = 0;
  std::thread reader_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string log_;
  bool eof_ = false;
};

ServerSpec HttpSpec(const std::string& url) {
  ServerSpec spec;
  spec.name = "remote";
  spec.url = url;
  return spec;
}

TEST(HttpTransport, TalksToTheEverythingServer) {
  EverythingHttpServer server;
  Status started = server.Start();
  ASSERT_TRUE(started.ok()) << started.message();

  HttpTransport transport(HttpSpec(server.url()));
  Recorder rec;
  ASSERT_TRUE(transport.Start(rec.OnMessage(), rec.OnClosed()).ok());

  // Declaring roots makes the server ask for them on its GET stream.
  transport.Send(Initialize(1, {{"roots", {{"listChanged", true}}}}), rec.OnSent("initialize"));
  auto init = rec.WaitForResponse(1);
  ASSERT_TRUE(init) << "no answer to initialize";
  ASSERT_EQ((*init)["result"]["protocolVersion"], "2025-06-18") << init->dump();
  EXPECT_EQ(rec.WaitForSent("initialize"), Status::Ok());
  transport.SetProtocolVersion("2025-06-18");
  transport.Send(Notification("notifications/initialized"), rec.OnSent("initialized"));
  EXPECT_EQ(rec.WaitForSent("initialized"), Status::Ok());

  // The server rejects requests without the session id it gave.
  transport.Send(Request(2, "tools/list"), rec.OnSent("list"));
  auto list = rec.WaitForResponse(2);
  ASSERT_TRUE(list) << "no answer to tools/list";
  EXPECT_EQ(rec.WaitForSent("list"), Status::Ok());
  bool has_echo = false;
  for (const Json& tool : (*list)["result"]["tools"]) has_echo |= tool.value("name", "") == "echo";
  EXPECT_TRUE(has_echo) << list->dump();

  // A slow call streams its progress, and does not hold up a quick call.
  transport.Send(Request(3, "tools/call",
                         {{"name", "trigger-long-running-operation"},
                          {"arguments", {{"duration", 3}, {"steps", 3}}},
                          {"_meta", {{"progressToken", "p3"}}}}),
                 rec.OnSent("slow"));
  transport.Send(Request(4, "tools/call", {{"name", "echo"}, {"arguments", {{"message", "hi"}}}}), nullptr);
  auto echo = rec.WaitForResponse(4);
  ASSERT_TRUE(echo);
  EXPECT_EQ((*echo)["result"]["content"][0]["text"], "Echo: hi") << echo->dump();
  ASSERT_TRUE(rec.WaitForResponse(3));
  EXPECT_EQ(rec.WaitForSent("slow"), Status::Ok());
  auto is_progress = [](const Json& m) {
    return HasMethod(m, "notifications/progress") && m["params"].value("progressToken", "") == "p3";
  };
  int first_progress = rec.IndexOf(is_progress);
  int slow_answer = rec.IndexOf([](const Json& m) { return IsResponse(m, 3); });
  int quick_answer = rec.IndexOf([](const Json& m) { return IsResponse(m, 4); });
  EXPECT_GE(first_progress, 0) << "no progress notification";
  EXPECT_LT(first_progress, slow_answer);
  EXPECT_LT(quick_answer, slow_answer) << "the quick call waited for the slow one";

  // The GET stream: the server asks for roots 350 ms after `initialized`, and
  // again on each roots/list_changed; it may have asked before the stream
  // was up, so nudge until a request arrives.
  std::optional<Json> roots_request;
  for (auto deadline = Clock::now() + kGenerous; !roots_request && Clock::now() < deadline;) {
    transport.Send(Notification("notifications/roots/list_changed"), nullptr);
    roots_request =
        rec.WaitForMessage([](const Json& m) { return HasMethod(m, "roots/list"); }, milliseconds(2'000));
  }
  ASSERT_TRUE(roots_request) << "no roots/list request on the GET stream";
  transport.Send(
      Json{{"jsonrpc", "2.0"}, {"id", (*roots_request)["id"]}, {"result", {{"roots", Json::array()}}}},
      rec.OnSent("roots"));
  EXPECT_EQ(rec.WaitForSent("roots"), Status::Ok());
  auto log = rec.WaitForMessage([](const Json& m) {
    return HasMethod(m, "notifications/message") && m["params"].value("data", "").find("Roots updated") == 0;
  });
  EXPECT_TRUE(log) << "the server's notification after the roots answer did not arrive";

  transport.Close();
  EXPECT_TRUE(server.WaitForLog("Received session termination request"))
      << "Close did not DELETE the session; server log:\n"
      << server.Log();
  EXPECT_EQ(rec.closed_count(), 0u);
  EXPECT_FALSE(rec.callbacks_overlapped());
}

TEST(HttpTransport, ReportsConnectionRefused) {
  HttpTransport transport(HttpSpec("http://127.0.0.1:" + std::to_string(FreePort()) + "/mcp"));
  Recorder rec;
  ASSERT_TRUE(transport.Start(rec.OnMessage(), rec.OnClosed()).ok());
  transport.Send(Initialize(1), rec.OnSent("initialize"));
  auto sent = rec.WaitForSent("initialize");
  ASSERT_TRUE(sent);
  EXPECT_EQ(sent->code(), codes::kMcpUnavailable);
  EXPECT_NE(sent->message().find("cannot reach MCP server remote at http://127.0.0.1:"), std::string::npos)
      << sent->message();
  transport.Close();
  EXPECT_EQ(rec.closed_count(), 0u);
}

TEST(HttpTransport, ReportsAnErrorStatusWithTheStartOfItsBody) {
  CannedHttpServer server([](const HttpRequest&, HttpResponder& r) {
    r.Reply(500, "text/plain", "boom: the database is on fire" + std::string(1000, '!'));
  });
  HttpTransport transport(HttpSpec(server.url()));
  Recorder rec;
  ASSERT_TRUE(transport.Start(rec.OnMessage(), rec.OnClosed()).ok());
  transport.Send(Initialize(1), rec.OnSent("initialize"));
  auto sent = rec.WaitForSent("initialize");
  ASSERT_TRUE(sent);
  EXPECT_EQ(sent->code(), codes::kMcpUnavailable);
  EXPECT_EQ(sent->message().rfind("MCP server remote answered HTTP 500: boom: the database is on fire!!!", 0),
            0u)
      << sent->message();
  EXPECT_LT(sent->message().size(), 300u) << "the body should be cut";
  transport.Close();
  EXPECT_EQ(rec.closed_count(), 0u);
}

TEST(HttpTransport, StartRejectsBadUrlsAndHeaders) {
  for (const char* url : {"", "not a url", "ftp://example.com/mcp"}) {
    HttpTransport transport(HttpSpec(url));
    Status st = transport.Start(nullptr, nullptr);
    EXPECT_EQ(st.code(), codes::kMcpUnavailable) << url;
    EXPECT_NE(st.message().find("remote"), std::string::npos) << st.message();
  }
  ServerSpec spec = HttpSpec("http://127.0.0.1:1/mcp");
  spec.headers = {{"X-Token", "a\r\nInjected: yes"}};
  HttpTransport transport(spec);
  EXPECT_EQ(transport.Start(nullptr, nullptr).code(), codes::kMcpUnavailable);
}

// A scripted server: the first POST gets a batch and a session id, later
// POSTs 202, the GET stream 405, DELETE 200.
void SessionServer(const HttpRequest& request, HttpResponder& r) {
  if (request.method == "GET") return r.Reply(405, "", "");
  if (request.method == "DELETE") return r.Reply(200, "", "");
  if (request.Header("mcp-session-id").empty()) {
    return r.Reply(
        200, "application/json; charset=utf-8",
        R"([{"jsonrpc":"2.0","id":1,"result":{"ok":true}},{"jsonrpc":"2.0","method":"notifications/message","params":{}}])",
        {{"Mcp-Session-Id", "sess-1"}});
  }
  r.Reply(202, "", "");
}

TEST(HttpTransport, SendsTheSessionAndVersionHeadersAndDeletesTheSession) {
  CannedHttpServer server(SessionServer);
  ServerSpec spec = HttpSpec(server.url());
  spec.headers = {{"X-Api-Key", "k1"}};
  HttpTransport transport(spec);
  Recorder rec;
  ASSERT_TRUE(transport.Start(rec.OnMessage(), rec.OnClosed()).ok());

  transport.Send(Initialize(1), rec.OnSent("initialize"));
  EXPECT_EQ(rec.WaitForSent("initialize"), Status::Ok());
  // A batch arrives as its messages, in order.
  EXPECT_EQ(
      rec.messages(),
      (std::vector<Json>{Json::parse(R"({"jsonrpc":"2.0","id":1,"result":{"ok":true}})"),
                         Json::parse(R"({"jsonrpc":"2.0","method":"notifications/message","params":{}})")}));
  transport.SetProtocolVersion("2025-06-18");
  transport.Send(Notification("notifications/initialized"), rec.OnSent("initialized"));
  EXPECT_EQ(rec.WaitForSent("initialized"), Status::Ok());
  // 202 to a request: its answer will never come.
  transport.Send(Request(2, "tools/list"), rec.OnSent("list"));
  auto list = rec.WaitForSent("list");
  ASSERT_TRUE(list);
  EXPECT_EQ(list->code(), codes::kMcpUnavailable);
  EXPECT_NE(list->message().find("without answering request 2"), std::string::npos) << list->message();
  ASSERT_TRUE(server.WaitForRequests(4, kGenerous));  // 3 POSTs and the GET
  transport.Close();

  std::vector<HttpRequest> posts, gets, deletes;
  for (const HttpRequest& r : server.requests()) {
    (r.method == "POST" ? posts : r.method == "GET" ? gets : deletes).push_back(r);
  }
  ASSERT_EQ(posts.size(), 3u);
  EXPECT_EQ(Json::parse(posts[0].body), Initialize(1));
  EXPECT_EQ(posts[0].target, "/mcp");
  EXPECT_EQ(posts[0].Header("content-type"), "application/json");
  EXPECT_EQ(posts[0].Header("accept"), "application/json, text/event-stream");
  EXPECT_EQ(posts[0].Header("x-api-key"), "k1");
  EXPECT_EQ(posts[0].Header("mcp-session-id"), "");
  EXPECT_EQ(posts[0].Header("mcp-protocol-version"), "");
  for (size_t i : {1, 2}) {
    EXPECT_EQ(posts[i].Header("mcp-session-id"), "sess-1");
    EXPECT_EQ(posts[i].Header("mcp-protocol-version"), "2025-06-18");
    EXPECT_EQ(posts[i].Header("x-api-key"), "k1");
  }
  ASSERT_EQ(gets.size(), 1u) << "405 means no event stream: no retry";
  EXPECT_EQ(gets[0].Header("accept"), "text/event-stream");
  EXPECT_EQ(gets[0].Header("mcp-session-id"), "sess-1");
  ASSERT_EQ(deletes.size(), 1u);
  EXPECT_EQ(deletes[0].method, "DELETE");
  EXPECT_EQ(deletes[0].Header("mcp-session-id"), "sess-1");
  EXPECT_EQ(rec.closed_count(), 0u);
}

TEST(HttpTransport, ReportsAnExpiredSessionOnce) {
  CannedHttpServer server([](const HttpRequest& request, HttpResponder& r) {
    if (request.Header("mcp-session-id").empty()) {
      return r.Reply(200, "application/json", R"({"jsonrpc":"2.0","id":1,"result":{}})",
                     {{"Mcp-Session-Id", "s"}});
    }
    r.Reply(404, "application/json",
            R"({"jsonrpc":"2.0","error":{"code":-32001,"message":"Session not found"}})");
  });
  HttpTransport transport(HttpSpec(server.url()));
  Recorder rec;
  ASSERT_TRUE(transport.Start(rec.OnMessage(), rec.OnClosed()).ok());
  transport.Send(Initialize(1), nullptr);
  ASSERT_TRUE(rec.WaitForResponse(1));
  transport.Send(Request(2, "tools/list"), rec.OnSent("first"));
  auto first = rec.WaitForSent("first");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->code(), codes::kMcpUnavailable);
  EXPECT_NE(first->message().find("HTTP 404"), std::string::npos) << first->message();
  auto closed = rec.WaitForClosed();
  ASSERT_TRUE(closed);
  EXPECT_EQ(closed->code(), codes::kMcpUnavailable);
  EXPECT_NE(closed->message().find("session expired"), std::string::npos) << closed->message();

  transport.Send(Request(3, "tools/list"), rec.OnSent("second"));
  ASSERT_TRUE(rec.WaitForSent("second"));
  transport.Close();
  EXPECT_EQ(rec.closed_count(), 1u);
}

// Opens a gate once; waiting on it times out rather than hanging a test.
class Gate {
 public:
  void Open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  bool Wait() {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kGenerous, [&] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

TEST(HttpTransport, DeliversStreamedEventsAsTheyArrive) {
  Gate gate;
  CannedHttpServer server([&](const HttpRequest& request, HttpResponder& r) {
    Json call = Json::parse(request.body);
    if (call["id"] == 7) {  // its stream ends before the answer
      r.Begin(200, "text/event-stream");
      return r.Write(
          "data: "
          "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":0}}\n\n");
    }
    r.Begin(200, "text/event-stream");
    r.Write(
        ": a comment\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",");
    r.Write("\"params\":{\"progress\":1}}\n\n");
    gate.Wait();  // the answer comes only once the progress was seen
    r.Write("data: {\"jsonrpc\":\"2.0\",\r\ndata: \"id\":5,\"result\":{}}\r\n\r\n");
  });
  HttpTransport transport(HttpSpec(server.url()));
  Recorder rec;
  ASSERT_TRUE(transport.Start(rec.OnMessage(), rec.OnClosed()).ok());
  transport.Send(Request(5, "tools/call"), rec.OnSent("call"));
  auto progress = rec.WaitForMessage([](const Json& m) { return HasMethod(m, "notifications/progress"); });
  // Checked while the server still holds the answer back (after the gate
  // opens the stream may end at any moment).
  EXPECT_FALSE(rec.sent_called("call")) << "sent before the stream ended";
  gate.Open();
  ASSERT_TRUE(progress) << "the event was held back until the stream ended";
  EXPECT_EQ((*progress)["params"]["progress"], 1);
  auto answer = rec.WaitForResponse(5);
  ASSERT_TRUE(answer);
  EXPECT_EQ(rec.WaitForSent("call"), Status::Ok());
  EXPECT_EQ(rec.messages().size(), 2u);

  transport.Send(Request(7, "tools/call"), rec.OnSent("cut"));
  auto cut = rec.WaitForSent("cut");
  ASSERT_TRUE(cut);
  EXPECT_EQ(cut->code(), codes::kMcpUnavailable);
  EXPECT_NE(cut->message().find("without answering request 7"), std::string::npos) << cut->message();
  transport.Close();
}

TEST(HttpTransport, ReopensADroppedEventStream) {
  std::atomic<int> gets{0};
  CannedHttpServer server([&](const HttpRequest& request, HttpResponder& r) {
    if (request.method == "POST") return r.Reply(202, "", "");
    if (request.method != "GET") return r.Reply(200, "", "");
    int n = ++gets;
    if (n > 2) return r.Reply(405, "", "");  // and no more tries after that
    r.Begin(200, "text/event-stream");
    r.Write("data: {\"jsonrpc\":\"2.0\",\"method\":\"n\",\"params\":{\"stream\":" + std::to_string(n) +
            "}}\n\n");
  });
  HttpTransport::Options options;
  options.stream_retry_delay = milliseconds(50);
  HttpTransport transport(HttpSpec(server.url()), options);
  Recorder rec;
  ASSERT_TRUE(transport.Start(rec.OnMessage(), rec.OnClosed()).ok());
  transport.SetProtocolVersion("2025-06-18");
  ASSERT_TRUE(rec.WaitForMessage([](const Json& m) { return m["params"].value("stream", 0) == 2; }));
  ASSERT_TRUE(server.WaitForRequests(3, kGenerous));
  transport.Close();
  EXPECT_EQ(rec.messages().size(), 2u);
  EXPECT_EQ(rec.messages()[0]["params"]["stream"], 1);
  // Three GETs reached the server (the handler may still be counting the
  // third when WaitForRequests sees it recorded).
  auto requests = server.requests();
  EXPECT_EQ(std::count_if(requests.begin(), requests.end(), [](const HttpRequest& r) { return r.method == "GET"; }), 3);
}

TEST(HttpTransport, KeepsReopeningAnEventStreamThatKeepsDropping) {
  // Streams that end without a message, several in a row (a proxy's idle
  // timeout, a restarting server), are each reopened after a growing delay;
  // a message on a later stream arrives.
  std::mutex mu;
  std::vector<Clock::time_point> gets;  // GUARDED_BY(mu): when each GET arrived
  CannedHttpServer server([&](const HttpRequest& request, HttpResponder& r) {
    if (request.method == "POST") return r.Reply(202, "", "");
    if (request.method != "GET") return r.Reply(200, "", "");
    size_t n = 0;
    {
      std::lock_guard lock(mu);
      gets.push_back(Clock::now());
      n = gets.size();
    }
    switch (n) {
      case 1:  // a keep-alive comment, then the end
        r.Begin(200, "text/event-stream");
        return r.Write(": keep-alive\n\n");
      case 2:
      case 3:  // nothing at all
        return r.Begin(200, "text/event-stream");
      case 4:
        return r.Reply(503, "text/plain", "upstream unavailable");
      case 5:  // the connection closes without an answer
        return;
      default:
        r.Begin(200, "text/event-stream");
        return r.Write("data: {\"jsonrpc\":\"2.0\",\"method\":\"n\",\"params\":{\"stream\":" +
                       std::to_string(n) + "}}\n\n");
    }
  });
  const milliseconds delay(10);
  HttpTransport::Options options;
  options.stream_retry_delay = delay;
  options.stream_retry_max_delay = milliseconds(10'000);
  HttpTransport transport(HttpSpec(server.url()), options);
  Recorder rec;
  ASSERT_TRUE(transport.Start(rec.OnMessage(), rec.OnClosed()).ok());
  transport.SetProtocolVersion("2025-06-18");
  auto message = rec.WaitForMessage([](const Json& m) { return m["params"].value("stream", 0) == 6; });
  transport.Close();
  ASSERT_TRUE(message) << "the event stream was not reopened after repeated drops";

  std::lock_guard lock(mu);
  ASSERT_GE(gets.size(), 6u);
  // The keep-alive comment counted as a working stream (the first delay);
  // each failed attempt after it doubled the delay.
  const std::vector<milliseconds> at_least = {delay, 2 * delay, 4 * delay, 8 * delay, 16 * delay};
  for (size_t i = 0; i < at_least.size(); ++i) {
    EXPECT_GE(gets[i + 1] - gets[i], at_least[i]) << "between GET " << i + 1 << " and GET " << i + 2;
  }
  EXPECT_EQ(rec.closed_count(), 0u);
}

TEST(HttpTransport, EndsAPostWhoseStreamStaysOpenAfterTheAnswer) {
  // The server keeps the response stream open after the answer (it only
  // SHOULD close it): the transport must not keep a connection per call.
  Gate answer;
  std::promise<bool> client_closed;
  CannedHttpServer server([&](const HttpRequest& request, HttpResponder& r) {
    if (request.method != "POST") return r.Reply(405, "", "");
    r.Begin(200, "text/event-stream");
    // Before the answer: a notification, and a request of the server's that
    // has the same id (it is no answer).
    r.Write(
        "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\n"
        "data: {\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\"}\n\n");
    answer.Wait();
    r.Write("data: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}\n\n");
    client_closed.set_value(r.WaitForClientClose(kGenerous));
  });
  HttpTransport transport(HttpSpec(server.url()));
  Recorder rec;
  ASSERT_TRUE(transport.Start(rec.OnMessage(), rec.OnClosed()).ok());
  transport.Send(Request(5, "tools/call"), rec.OnSent("call"));
  ASSERT_TRUE(rec.WaitForMessage([](const Json& m) { return HasMethod(m, "ping"); }));
  EXPECT_FALSE(rec.sent_called("call")) << "the transfer ended before the answer";
  answer.Open();
  ASSERT_TRUE(rec.WaitForResponse(5));
  EXPECT_EQ(rec.WaitForSent("call"), Status::Ok());
  std::future<bool> closed = client_closed.get_future();
  ASSERT_EQ(closed.wait_for(kGenerous), std::future_status::ready);
  EXPECT_TRUE(closed.get()) << "the transport kept the answered POST's connection open";
  transport.Close();
  EXPECT_EQ(rec.messages().size(), 3u);
  EXPECT_EQ(rec.closed_count(), 0u);
}

TEST(MakeTransport, PicksStdioForACommandElseHttp) {
  ServerSpec stdio = StdioSpec({"cat"});
  EXPECT_NE(dynamic_cast<StdioTransport*>(MakeTransport(stdio).get()), nullptr);
  ServerSpec http = HttpSpec("http://127.0.0.1:1/mcp");
  EXPECT_NE(dynamic_cast<HttpTransport*>(MakeTransport(http).get()), nullptr);
}

}  // namespace
}  // namespace dsh::mcp
