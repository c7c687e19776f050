#include "plugins/workspace/sandbox.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/testing/temp_dir.h"

namespace dsh::workspace {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

#define REQUIRE_SANDBOX()                                                    \
  do {                                                                       \
    Status st = CheckSandbox();                                              \
    ASSERT_TRUE(st.ok()) << st.ToString() << " (scripts/test installs bubblewrap)"; \
  } while (0)

std::string ReadText(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteText(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

ProcessResult Bash(const std::string& command, const fs::path& cwd, const SandboxOptions& options = {},
                   milliseconds timeout = milliseconds(10'000)) {
  BashRequest request;
  request.command = command;
  request.cwd = cwd;
  request.timeout = timeout;
  Result<ProcessResult> r = RunBash(request, options);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : ProcessResult{};
}

// Live (not zombie) processes whose command line contains `marker`.
std::vector<pid_t> ProcessesWith(const std::string& marker) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (fs::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = ReadText(it->path() / "cmdline");
    if (cmdline.find(marker) == std::string::npos) continue;
    std::string stat = ReadText(it->path() / "stat");
    size_t paren = stat.rfind(')');
    if (paren != std::string::npos && stat.size() > paren + 2 && stat[paren + 2] == 'Z') continue;
    out.push_back(std::stoi(name));
  }
  return out;
}

std::string Marker(const std::string& what) { return "dsh-" + what + "-" + std::to_string(getpid()); }

TEST(Sandbox, IsAvailableOnThisHost) {
  // bubblewrap is part of the supported setup (see the README): if this
  // fails, the reason says why bash would be refused.
  EXPECT_TRUE(CheckSandbox().ok()) << CheckSandbox().ToString();
}

TEST(Sandbox, AMissingBubblewrapIsSandboxUnavailable) {
  Status st = ProbeSandbox("/nonexistent/bwrap");
  EXPECT_EQ(st.code(), kSandboxUnavailable);
  EXPECT_NE(st.message().find("not installed"), std::string::npos) << st.message();
}

TEST(Sandbox, QuotesBubblewrapWhenTheKernelRefuses) {
  testing::TempDir dir;
  fs::path fake = dir.path() / "bwrap";
  WriteText(fake, "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n");
  fs::permissions(fake, fs::perms::owner_all);
  Status st = ProbeSandbox(fake);
  EXPECT_EQ(st.code(), kSandboxUnavailable);
  EXPECT_NE(st.message().find("No permissions to create new namespace"), std::string::npos) << st.message();
}

TEST(Sandbox, ReportsTheExitCode) {
  REQUIRE_SANDBOX();
  testing::TempDir dir;
  ProcessResult r = Bash("echo out; echo err >&2; exit 7", dir.path());
  EXPECT_EQ(r.exit_code, 7);
  EXPECT_EQ(r.output, "out\nerr\n");
}

TEST(Sandbox, WritesInTheCwdPersist) {
  REQUIRE_SANDBOX();
  testing::TempDir dir;
  ProcessResult r = Bash("pwd; mkdir sub && echo hello > sub/file", dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, fs::canonical(dir.path()).string() + "\n");
  EXPECT_EQ(ReadText(dir.path() / "sub" / "file"), "hello\n");
}

TEST(Sandbox, ExtraRootsAreWritable) {
  REQUIRE_SANDBOX();
  testing::TempDir dir, extra;
  SandboxOptions options;
  options.extra_roots = {extra.path()};
  ProcessResult r = Bash("echo x > " + extra.File("made"), dir.path(), options);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(extra.path() / "made"));
}

TEST(Sandbox, TheSystemIsReadOnly) {
  REQUIRE_SANDBOX();
  testing::TempDir dir;
  ProcessResult r = Bash("touch /usr/dsh-sandbox-test || touch /etc/dsh-sandbox-test", dir.path());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("Read-only file system"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists("/usr/dsh-sandbox-test"));
  EXPECT_FALSE(fs::exists("/etc/dsh-sandbox-test"));
  // Tools of the system still run.
  EXPECT_EQ(Bash("ls / >/dev/null && sed -n 1p /etc/passwd | cut -d: -f1", dir.path()).output, "root\n");
}

TEST(Sandbox, SysctlsAreReadOnly) {
  REQUIRE_SANDBOX();
  testing::TempDir dir;
  ProcessResult r = Bash(
      "v=$(cat /proc/sys/kernel/printk_ratelimit_burst) && echo $v > /proc/sys/kernel/printk_ratelimit_burst",
      dir.path());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("Read-only file system"), std::string::npos) << r.output;
}

TEST(Sandbox, TmpIsPrivate) {
  REQUIRE_SANDBOX();
  testing::TempDir dir, host_neighbour;
  std::string inside_name = Marker("tmp-inside");
  ProcessResult r = Bash("ls -A /tmp; echo x > /tmp/" + inside_name, dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find(host_neighbour.path().filename().string()), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(fs::path("/tmp") / inside_name));
}

TEST(Sandbox, HomeIsFreshAndWritable) {
  REQUIRE_SANDBOX();
  testing::TempDir dir;
  ProcessResult r =
      Bash("echo $HOME; ls -A \"$HOME\" | wc -l; touch \"$HOME/f\" && echo writable", dir.path());
  EXPECT_EQ(r.output, "/tmp/home\n0\nwritable\n");
}

TEST(Sandbox, TheHostEnvironmentNeverReachesTheCommand) {
  REQUIRE_SANDBOX();
  testing::TempDir dir;
  setenv("OPENAI_API_KEY", "sk-dsh-test-secret", 1);
  ProcessResult r = Bash(
      "env; echo ---; tr '\\0' '\\n' < /proc/1/environ; echo ---; ls /proc | grep -c '^[0-9]'; "
      "cat /proc/" +
          std::to_string(getpid()) + "/environ",
      dir.path());
  unsetenv("OPENAI_API_KEY");
  EXPECT_EQ(r.output.find("sk-dsh-test-secret"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("OPENAI_API_KEY"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("LANG=C.UTF-8"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("TERM=dumb"), std::string::npos) << r.output;
}

TEST(Sandbox, HidesTheProfileDirectoryUnderTheCwd) {
  REQUIRE_SANDBOX();
  testing::TempDir dir;
  WriteText(dir.path() / ".dsh" / "token", "secret-token-1\n");
  SandboxOptions options;
  options.hidden = {dir.path() / ".dsh"};
  ProcessResult r = Bash(
      "cat .dsh/token; ls -A .dsh; grep -r secret-token . ; umount .dsh; cat .dsh/token; "
      "echo planted > .dsh/x",
      dir.path(), options);
  EXPECT_EQ(r.output.find("secret-token-1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("No such file"), std::string::npos) << r.output;
  // What the command writes there goes to the mask, not to the profile.
  EXPECT_FALSE(fs::exists(dir.path() / ".dsh" / "x"));
  EXPECT_EQ(ReadText(dir.path() / ".dsh" / "token"), "secret-token-1\n");
}

TEST(Sandbox, HidesTheProfileDirectoryBesideTheCwd) {
  REQUIRE_SANDBOX();
  testing::TempDir dir;
  fs::create_directories(dir.path() / "work");
  WriteText(dir.path() / "profile" / "token", "secret-token-2\n");
  SandboxOptions options;
  options.hidden = {dir.path() / "profile"};
  std::string command = "cat " + dir.File("profile/token") + "; ls -A " + dir.File("profile");
  ProcessResult beside = Bash(command, dir.path() / "work", options);
  EXPECT_EQ(beside.output.find("secret-token-2"), std::string::npos) << beside.output;
  // Still hidden when the cwd, or an extra root, is its parent.
  ProcessResult from_parent = Bash(command, dir.path(), options);
  EXPECT_EQ(from_parent.output.find("secret-token-2"), std::string::npos) << from_parent.output;
  options.extra_roots = {dir.path()};
  ProcessResult from_extra = Bash(command, dir.path() / "work", options);
  EXPECT_EQ(from_extra.output.find("secret-token-2"), std::string::npos) << from_extra.output;
}

TEST(Sandbox, HidesAHiddenFile) {
  REQUIRE_SANDBOX();
  testing::TempDir dir;
  WriteText(dir.path() / "token.txt", "secret-token-3\n");
  SandboxOptions options;
  options.hidden = {dir.path() / "token.txt"};
  ProcessResult r = Bash("cat token.txt; echo overwrite > token.txt", dir.path(), options);
  EXPECT_EQ(r.output.find("secret-token-3"), std::string::npos) << r.output;
  EXPECT_EQ(ReadText(dir.path() / "token.txt"), "secret-token-3\n");
}

TEST(Sandbox, RefusesACwdInsideAHiddenDirectory) {
  testing::TempDir dir;
  fs::create_directories(dir.path() / "profile" / "sessions");
  SandboxOptions options;
  options.hidden = {dir.path() / "profile"};
  BashRequest request;
  request.command = "true";
  request.cwd = dir.path() / "profile" / "sessions";
  EXPECT_EQ(RunBash(request, options).status().code(), codes::kInvalidArguments);
}

TEST(Sandbox, RejectsBadRequests) {
  testing::TempDir dir;
  BashRequest request;
  request.cwd = dir.path();
  EXPECT_EQ(RunBash(request, {}).status().code(), codes::kInvalidArguments);  // empty command
  request.command = "true";
  request.cwd = "relative/dir";
  EXPECT_EQ(RunBash(request, {}).status().code(), codes::kInvalidArguments);
  request.cwd = dir.path() / "missing";
  EXPECT_EQ(RunBash(request, {}).status().code(), codes::kInvalidArguments);
}

class Listener {
 public:
  Listener() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 || listen(fd_, 16) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ADD_FAILURE() << "cannot listen on loopback";
    }
    port_ = ntohs(addr.sin_port);
  }
  ~Listener() { close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

TEST(Sandbox, HasNoNetworkUnlessAllowed) {
  REQUIRE_SANDBOX();
  testing::TempDir dir;
  Listener listener;
  std::string command =
      "echo hi > /dev/tcp/127.0.0.1/" + std::to_string(listener.port()) + " && echo connected";
  ProcessResult closed = Bash(command, dir.path());
  EXPECT_NE(closed.exit_code, 0);
  EXPECT_EQ(closed.output.find("connected"), std::string::npos) << closed.output;
  SandboxOptions options;
  options.network = true;
  ProcessResult open = Bash(command, dir.path(), options);
  EXPECT_EQ(open.exit_code, 0) << open.output;
  EXPECT_EQ(open.output, "connected\n");
}

TEST(Sandbox, TimeoutLeavesNothingRunning) {
  REQUIRE_SANDBOX();
  testing::TempDir dir;
  std::string marker = Marker("timeout");
  ProcessResult r = Bash(": " + marker + "; trap '' TERM; setsid sleep 100 & sleep 100 & echo started; wait",
                         dir.path(), {}, milliseconds(500));
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.output, "started\n");
  EXPECT_LT(r.duration, milliseconds(5'000));
  // RunBash returns once the command's pids cgroup is empty.
  EXPECT_TRUE(ProcessesWith(marker).empty());
}

TEST(Sandbox, CancelEndsTheCommand) {
  REQUIRE_SANDBOX();
  testing::TempDir dir;
  auto cancel = std::make_shared<agent::CancelToken>();
  // The command opens a FIFO once it runs; the canceller's open returns then.
  fs::path fifo = fs::path(dir.path()) / "started";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  BashRequest request;
  request.command = "echo > started; sleep 100";
  request.cwd = dir.path();
  request.cancel = cancel;
  std::thread canceller([cancel, fifo] {
    std::ifstream(fifo).get();
    cancel->Cancel();
  });
  Result<ProcessResult> r = RunBash(request, {});
  canceller.join();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->cancelled);
  EXPECT_LT(r->duration, milliseconds(5'000));
}

TEST(Sandbox, AForkBombEndsAtTheTimeoutAndLeavesNothing) {
  REQUIRE_SANDBOX();
  // Without a pids cgroup nothing would bound the bomb before the timeout:
  // the test machine must offer one (root on cgroup v1's pids hierarchy).
  Status limit = CheckProcessLimit();
  ASSERT_TRUE(limit.ok()) << limit.ToString();
  testing::TempDir dir;
  std::string marker = Marker("fork-bomb");
  SandboxOptions options;
  options.max_processes = 64;
  options.require_process_limit = true;
  ProcessResult r =
      Bash(": " + marker + "; :(){ :|:& };:; sleep 100", dir.path(), options, milliseconds(2'000));
  EXPECT_TRUE(r.timed_out);
  EXPECT_LT(r.duration, milliseconds(10'000));
  EXPECT_NE(r.output.find("fork"), std::string::npos)
      << r.output;  // "fork: retry: Resource temporarily unavailable"
  // RunBash returns once the command's cgroup is empty.
  EXPECT_TRUE(ProcessesWith(marker).empty());
}

TEST(Sandbox, TheProcessCapAlsoAppliesUnsandboxed) {
  Status limit = CheckProcessLimit();
  ASSERT_TRUE(limit.ok()) << limit.ToString();
  testing::TempDir dir;
  SandboxOptions options;
  options.enabled = false;
  options.max_processes = 4;
  options.require_process_limit = true;
  ProcessResult r =
      Bash("for i in 1 2 3 4 5 6; do sleep 5 & done; wait", dir.path(), options, milliseconds(1'000));
  EXPECT_NE(r.output.find("Resource temporarily unavailable"), std::string::npos) << r.output;
}

TEST(Sandbox, UnsandboxedModeStillHasACleanEnvironment) {
  testing::TempDir dir;
  setenv("OPENAI_API_KEY", "sk-dsh-test-secret", 1);
  SandboxOptions options;
  options.enabled = false;
  ProcessResult r = Bash("echo \"[$OPENAI_API_KEY]\"; pwd; echo $LANG $TERM", dir.path(), options);
  unsetenv("OPENAI_API_KEY");
  EXPECT_EQ(r.output, "[]\n" + fs::canonical(dir.path()).string() + "\nC.UTF-8 dumb\n");
  // It is not sandboxed: the host's /tmp is the command's.
  std::string name = Marker("unsandboxed");
  EXPECT_EQ(Bash("echo x > /tmp/" + name, dir.path(), options).exit_code, 0);
  EXPECT_TRUE(fs::exists(fs::path("/tmp") / name));
  fs::remove(fs::path("/tmp") / name);
}

}  // namespace
}  // namespace dsh::workspace
