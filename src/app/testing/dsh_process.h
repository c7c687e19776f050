#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace dsh::testing {

// Runs the real `dsh` binary as a child process for end-to-end tests:
// stdout through a pipe (read line by line), stderr into a file.
class DshProcess {
 public:
  DshProcess(const std::string& binary, std::vector<std::string> args, const std::string& stderr_path,
             std::map<std::string, std::string> env = {})
      : stderr_path_(stderr_path) {
    int fds[2];
    if (pipe(fds) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<std::string> argv_store = {binary};
    for (auto& a : args) argv_store.push_back(std::move(a));
    std::vector<char*> argv;
    for (auto& a : argv_store) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_store;
    for (char** e = environ; *e; ++e) {
      std::string kv = *e;
      if (!env.count(kv.substr(0, kv.find('=')))) env_store.push_back(kv);
    }
    for (auto& [k, v] : env) env_store.push_back(k + "=" + v);
    std::vector<char*> envp;
    for (auto& e : env_store) envp.push_back(e.data());
    envp.push_back(nullptr);
    if (posix_spawn(&pid_, binary.c_str(), &actions, nullptr, argv.data(), envp.data()) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    out_fd_ = fds[0];
  }
  ~DshProcess() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_fd_ >= 0) close(out_fd_);
  }
  DshProcess(const DshProcess&) = delete;
  DshProcess& operator=(const DshProcess&) = delete;

  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }

  // The next stdout line, or "" after `timeout` or EOF.
  std::string ReadLine(std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      size_t nl = buffer_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return line;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return "";
      pollfd p{out_fd_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) <= 0) return "";
      char buf[4096];
      ssize_t n = read(out_fd_, buf, sizeof buf);
      if (n <= 0) return "";
      buffer_.append(buf, static_cast<size_t>(n));
    }
  }

  // Reads the listening line and returns the URL ("http://127.0.0.1:PORT"),
  // without the trailing slash; "" when it did not come.
  std::string WaitListening() {
    std::string line = ReadLine();
    const std::string prefix = "dsh web listening on ";
    if (line.rfind(prefix, 0) != 0) return "";
    std::string url = line.substr(prefix.size());
    if (!url.empty() && url.back() == '/') url.pop_back();
    return url;
  }

  // Never with a pid of -1 (a spawn that failed): kill(-1) signals every
  // process of the user, the test runner and its shell included.
  void Signal(int signo) {
    if (pid_ > 0 && !exited_) kill(pid_, signo);
  }

  // Waits for exit; returns the exit status, or 128+signal, or -1 on timeout.
  int Wait(std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      int status = 0;
      pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        exited_ = true;
        if (WIFEXITED(status)) return WEXITSTATUS(status);
        if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
        return -1;
      }
      if (std::chrono::steady_clock::now() > deadline) return -1;
      pollfd p{out_fd_, POLLIN, 0};
      poll(&p, 1, 20);  // also drains stdout so the child never blocks on a full pipe
      if (p.revents & POLLIN) {
        char buf[4096];
        ssize_t n = read(out_fd_, buf, sizeof buf);
        if (n > 0) buffer_.append(buf, static_cast<size_t>(n));
      }
    }
  }

  std::string Stderr() const {
    std::ifstream in(stderr_path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  std::string Stdout() const { return buffer_; }

 private:
  std::string stderr_path_;
  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::string buffer_;
  bool exited_ = false;
};

// Runs `dsh ARGS...` to completion; returns {exit status, stdout, stderr}.
struct DshRun {
  int code;
  std::string out;
  std::string err;
};
inline DshRun RunDsh(const std::string& binary, std::vector<std::string> args, const std::string& stderr_path,
                     std::map<std::string, std::string> env = {}) {
  DshProcess p(binary, std::move(args), stderr_path, std::move(env));
  int code = p.Wait();
  return {code, p.Stdout(), p.Stderr()};
}

}  // namespace dsh::testing
