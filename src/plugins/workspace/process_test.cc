#include "plugins/workspace/process.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/testing/temp_dir.h"

namespace dsh::workspace {
namespace {

using std::chrono::milliseconds;
namespace fs = std::filesystem;

ProcessSpec Shell(const std::string& script) {
  ProcessSpec spec;
  spec.argv = {"sh", "-c", script};
  spec.env = {"PATH=/usr/bin:/bin"};
  spec.timeout = milliseconds(10'000);
  return spec;
}

ProcessResult MustRun(const ProcessSpec& spec) {
  Result<ProcessResult> r = RunProcess(spec);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : ProcessResult{};
}

std::string ReadText(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Whether `pid` is no longer running (gone, or a zombie nobody reaped yet)
// within `limit`: killing is asynchronous for processes we did not reap. A
// pidfd becomes readable when its process exits.
bool StopsWithin(pid_t pid, milliseconds limit) {
  int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return errno == ESRCH;  // already gone
  pollfd p{fd, POLLIN, 0};
  int ready = poll(&p, 1, static_cast<int>(limit.count()));
  close(fd);
  return ready == 1;
}

TEST(Process, ReportsTheExitCode) {
  ProcessResult r = MustRun(Shell("exit 3"));
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_FALSE(r.signal.has_value());
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(MustRun(Shell("true")).exit_code, 0);
}

TEST(Process, ReportsTheSignalThatKilledIt) {
  ProcessResult r = MustRun(Shell("kill -TERM $$"));
  EXPECT_FALSE(r.exit_code.has_value());
  EXPECT_EQ(r.signal, SIGTERM);
}

TEST(Process, CombinesStdoutAndStderrInOrder) {
  ProcessResult r = MustRun(Shell("echo out; echo err >&2; echo out2"));
  EXPECT_EQ(r.output, "out\nerr\nout2\n");
  EXPECT_EQ(r.output_bytes, 13);
  EXPECT_EQ(r.output_lines, 3);
  EXPECT_FALSE(r.truncated);
}

TEST(Process, GetsExactlyTheGivenEnvironment) {
  setenv("DSH_PROCESS_TEST_SECRET", "hunter2", 1);
  ProcessSpec spec;
  spec.argv = {"env"};
  spec.env = {"PATH=/usr/bin:/bin", "ONLY=this"};
  ProcessResult r = MustRun(spec);
  unsetenv("DSH_PROCESS_TEST_SECRET");
  EXPECT_EQ(r.output, "PATH=/usr/bin:/bin\nONLY=this\n");
}

TEST(Process, RunsInTheCwdWithStdinAtEof) {
  testing::TempDir dir;
  ProcessSpec spec = Shell("pwd; cat; echo done");
  spec.cwd = dir.path();
  ProcessResult r = MustRun(spec);
  EXPECT_EQ(r.output, dir.path().string() + "\ndone\n");
}

TEST(Process, InheritsNoDescriptorOfTheHost) {
  testing::TempDir dir;
  int fd = ::open(dir.File("held").c_str(), O_CREAT | O_WRONLY, 0600);  // not close-on-exec
  ASSERT_GE(fd, 0);
  ProcessResult r = MustRun(Shell("ls /proc/self/fd"));
  ::close(fd);
  // 0, 1, 2 and the descriptor ls opened for the listing.
  EXPECT_EQ(r.output_lines, 4) << r.output;
}

TEST(Process, TimeoutKillsTheWholeGroupEvenWhenSigtermIsIgnored) {
  testing::TempDir dir;
  std::string pids = dir.File("pids");
  ProcessSpec spec = Shell("trap '' TERM; sleep 100 & echo $! > " + pids + "; echo $$ >> " + pids + "; wait");
  spec.timeout = milliseconds(300);
  ProcessResult r = MustRun(spec);
  EXPECT_TRUE(r.timed_out);
  EXPECT_FALSE(r.cancelled);
  EXPECT_EQ(r.signal, SIGKILL);
  EXPECT_GE(r.duration, milliseconds(300));
  EXPECT_LT(r.duration, milliseconds(5'000));
  std::istringstream in(ReadText(pids));
  pid_t grandchild = 0, child = 0;
  in >> grandchild >> child;
  ASSERT_GT(grandchild, 0);
  EXPECT_TRUE(StopsWithin(grandchild, milliseconds(2'000)));
  EXPECT_TRUE(StopsWithin(child, milliseconds(100)));
}

TEST(Process, CancelKillsTheGroup) {
  auto cancel = std::make_shared<agent::CancelToken>();
  testing::TempDir dir;
  fs::path fifo = fs::path(dir.path()) / "started";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  ProcessSpec spec = Shell("sleep 100 & echo > " + fifo.string() + "; sleep 100");
  spec.cancel = cancel;
  std::thread canceller([cancel, fifo] {  // once the group runs
    std::ifstream(fifo).get();
    cancel->Cancel();
  });
  ProcessResult r = MustRun(spec);
  canceller.join();
  EXPECT_TRUE(r.cancelled);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.signal, SIGKILL);
  EXPECT_LT(r.duration, milliseconds(5'000));
}

TEST(Process, AnAlreadyCancelledTokenRunsNothing) {
  testing::TempDir dir;
  auto cancel = std::make_shared<agent::CancelToken>();
  cancel->Cancel();
  ProcessSpec spec = Shell("touch ran");
  spec.cwd = dir.path();
  spec.cancel = cancel;
  Result<ProcessResult> r = RunProcess(spec);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), codes::kCancelled);
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "ran"));
}

TEST(Process, ACancelAfterTheRunIsHarmless) {
  auto cancel = std::make_shared<agent::CancelToken>();
  ProcessSpec spec = Shell("echo hi");
  spec.cancel = cancel;
  EXPECT_EQ(MustRun(spec).output, "hi\n");
  cancel->Cancel();  // the eventfd is closed: the callback must not write to a reused descriptor
  EXPECT_EQ(MustRun(Shell("echo again")).output, "again\n");
}

TEST(Process, KeepsTheHeadAndTailAroundAMarker) {
  ProcessSpec spec = Shell("seq 1 100000");
  spec.output_cap = 1000;
  ProcessResult r = MustRun(spec);
  std::string all;
  for (int i = 1; i <= 100000; ++i) all += std::to_string(i) + "\n";
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(r.truncated);
  EXPECT_EQ(r.output_bytes, static_cast<int64_t>(all.size()));
  EXPECT_EQ(r.output_lines, 100000);
  std::string marker = "\n… [" + std::to_string(all.size() - 1000) + " bytes cut] …\n";
  EXPECT_EQ(r.output, all.substr(0, 500) + marker + all.substr(all.size() - 500));
}

TEST(Process, OutputThatFitsIsNotMarked) {
  ProcessSpec spec = Shell("printf 0123456789");
  spec.output_cap = 10;
  ProcessResult r = MustRun(spec);
  EXPECT_EQ(r.output, "0123456789");
  EXPECT_FALSE(r.truncated);
}

TEST(Process, CutsAtUtf8Boundaries) {
  ProcessSpec spec = Shell("i=0; while [ $i -lt 200 ]; do printf 'é'; i=$((i+1)); done");
  spec.output_cap = 102;  // 51 bytes each side: both cuts fall inside an 'é'
  ProcessResult r = MustRun(spec);
  std::string e25;
  for (int i = 0; i < 25; ++i) e25 += "é";
  EXPECT_EQ(r.output, e25 + "\n… [300 bytes cut] …\n" + e25);
}

TEST(Process, AFloodKeepsMemoryBounded) {
  ProcessSpec spec = Shell("yes | head -c 200000000");
  spec.output_cap = 4096;
  ProcessResult r = MustRun(spec);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output_bytes, 200'000'000);
  EXPECT_LT(r.output.size(), 4096u + 64);
  EXPECT_TRUE(r.output.starts_with("y\ny\n"));
  EXPECT_TRUE(r.output.ends_with("y\ny\n"));
}

TEST(Process, AnEndlessFloodStillTimesOut) {
  ProcessSpec spec;
  spec.argv = {"cat", "/dev/zero"};
  spec.timeout = milliseconds(300);
  spec.output_cap = 1000;
  ProcessResult r = MustRun(spec);
  EXPECT_TRUE(r.timed_out);
  EXPECT_GT(r.output_bytes, 1'000'000);
  EXPECT_LT(r.output.size(), 1000u + 64);
}

TEST(Process, ProcessesLeftInTheGroupAreKilledWhenItExits) {
  ProcessResult r = MustRun(Shell("sleep 100 & echo $!"));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_LT(r.duration, milliseconds(2'000));
  pid_t sleeper = std::atoi(r.output.c_str());
  ASSERT_GT(sleeper, 0);
  EXPECT_TRUE(StopsWithin(sleeper, milliseconds(2'000)));
}

TEST(Process, AnEscapedDescendantHoldingThePipeDoesNotHangIt) {
  // setsid leaves the group, so only the drain limit ends the wait.
  // (The pause lets it leave before the group is killed.)
  ProcessResult r = MustRun(Shell("setsid sleep 30 & echo $!; sleep 0.3"));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_LT(r.duration, milliseconds(3'000));
  pid_t escaped = std::atoi(r.output.c_str());
  ASSERT_GT(escaped, 0);
  EXPECT_EQ(kill(escaped, SIGKILL), 0) << "the test did not leave a process holding the pipe";
}

TEST(Process, AMissingProgramIsUnavailable) {
  ProcessSpec spec;
  spec.argv = {"dsh-no-such-program"};
  spec.env = {"PATH=/usr/bin:/bin"};
  Result<ProcessResult> r = RunProcess(spec);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), codes::kUnavailable);
  EXPECT_NE(r.status().message().find("dsh-no-such-program"), std::string::npos);
  EXPECT_NE(r.status().message().find("not found"), std::string::npos);
}

TEST(Process, ANonExecutableFileIsUnavailable) {
  testing::TempDir dir;
  std::ofstream(dir.File("script")) << "#!/bin/sh\necho hi\n";
  ProcessSpec spec;
  spec.argv = {dir.File("script")};
  Result<ProcessResult> r = RunProcess(spec);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), codes::kUnavailable);
  EXPECT_NE(r.status().message().find("Permission denied"), std::string::npos) << r.status().message();
}

TEST(Process, AMissingCwdIsUnavailable) {
  ProcessSpec spec = Shell("true");
  spec.cwd = "/nonexistent/dsh-test";
  Result<ProcessResult> r = RunProcess(spec);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), codes::kUnavailable);
  EXPECT_NE(r.status().message().find("/nonexistent/dsh-test"), std::string::npos);
}

TEST(Process, RejectsBadSpecs) {
  ProcessSpec empty;
  EXPECT_EQ(RunProcess(empty).status().code(), codes::kInvalidArguments);
  ProcessSpec zero_timeout = Shell("true");
  zero_timeout.timeout = milliseconds(0);
  EXPECT_EQ(RunProcess(zero_timeout).status().code(), codes::kInvalidArguments);
  ProcessSpec negative_cap = Shell("true");
  negative_cap.output_cap = -1;
  EXPECT_EQ(RunProcess(negative_cap).status().code(), codes::kInvalidArguments);
}

}  // namespace
}  // namespace dsh::workspace
