#include "host/profile.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/ids.h"
#include "base/json.h"

namespace dsh::host {
namespace fs = std::filesystem;
namespace {

Status IoError(const std::string& what) {
  return Status(codes::kIo, what + ": " + std::strerror(errno));
}

Result<std::string> ReadSmallFile(const fs::path& p) {
  std::ifstream in(p);
  if (!in) return IoError("cannot read " + p.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Writes `content` to `path` with `mode` atomically (temp file + rename), or
// exclusively when `exclusive` (fails with already_exists if present).
Status WriteFileMode(const fs::path& path, const std::string& content, mode_t mode, bool exclusive) {
  fs::path tmp = exclusive ? path : fs::path(path.string() + ".tmp" + std::to_string(getpid()));
  int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (exclusive ? O_EXCL : O_TRUNC);
  if (!exclusive) ::unlink(tmp.c_str());  // a stale one would keep its own mode
  int fd = ::open(tmp.c_str(), flags, mode);
  if (fd < 0) {
    if (errno == EEXIST) return Status(codes::kAlreadyExists, path.string() + " exists");
    return IoError("cannot create " + tmp.string());
  }
  bool ok = ::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size());
  ok = ok && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) return IoError("cannot write " + tmp.string());
  if (!exclusive && ::rename(tmp.c_str(), path.c_str()) != 0) return IoError("cannot rename to " + path.string());
  return Status::Ok();
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

Status WriteFileAtomically(const std::filesystem::path& path, const std::string& content, unsigned mode) {
  return WriteFileMode(path, content, static_cast<mode_t>(mode), /*exclusive=*/false);
}

Result<std::optional<std::string>> ReadFileIfPresent(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::optional<std::string>();
  std::ifstream in(path);
  if (!in) return Status(codes::kIo, "cannot read " + path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return std::optional<std::string>(ss.str());
}

Result<fs::path> Profile::ResolveHome(const std::optional<std::string>& home_flag) {
  fs::path home;
  if (home_flag && !home_flag->empty()) {
    home = *home_flag;
  } else if (const char* env = std::getenv("DSH_HOME"); env && *env) {
    home = env;
  } else if (const char* h = std::getenv("HOME"); h && *h) {
    home = fs::path(h) / ".dsh";
  } else {
    return Status(codes::kIo, "cannot find the profile: set --home, $DSH_HOME or $HOME");
  }
  std::error_code ec;
  home = fs::absolute(home, ec);
  if (ec) return Status(codes::kIo, "cannot resolve the profile directory: " + ec.message());
  return home;
}

Result<Profile> Profile::Open(const std::optional<std::string>& home_flag) {
  DSH_ASSIGN_OR_RETURN(fs::path home, ResolveHome(home_flag));
  std::error_code ec;
  if (!fs::exists(home, ec)) {
    fs::create_directories(home, ec);
    if (ec) return Status(codes::kIo, "cannot create profile directory " + home.string() + ": " + ec.message());
    ::chmod(home.c_str(), 0700);
  } else if (!fs::is_directory(home, ec)) {
    return Status(codes::kIo, "profile path " + home.string() + " is not a directory");
  }
  return Profile(home);
}

Result<Profile> Profile::Find(const std::optional<std::string>& home_flag) {
  DSH_ASSIGN_OR_RETURN(fs::path home, ResolveHome(home_flag));
  return Profile(home);
}

Result<std::string> Profile::LoadOrCreateToken() const {
  fs::path p = token_path();
  std::error_code ec;
  if (!fs::exists(p, ec)) {
    Status st = WriteFileMode(p, RandomHex(16) + "\n", 0600, /*exclusive=*/true);
    if (!st.ok() && st.code() != codes::kAlreadyExists) return st;
  }
  DSH_ASSIGN_OR_RETURN(std::string token, ReadSmallFile(p));
  token = Trim(token);
  if (token.empty()) return Status(codes::kIo, p.string() + " is empty; delete it to generate a new token");
  return token;
}

Status Profile::WriteRunFile(const RunningHost& host) const {
  fs::path dir = home_ / "run";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status(codes::kIo, "cannot create " + dir.string() + ": " + ec.message());
  Json j = {{"url", host.url}, {"token", host.token}, {"pid", host.pid}};
  return WriteFileMode(dir / (std::to_string(host.pid) + ".json"), j.dump() + "\n", 0600, false);
}

void Profile::RemoveRunFile(int64_t pid) const {
  std::error_code ec;
  fs::remove(home_ / "run" / (std::to_string(pid) + ".json"), ec);
}

Result<Profile::RunningHost> Profile::FindRunningHost() const {
  fs::path dir = home_ / "run";
  std::error_code ec;
  std::optional<RunningHost> best;
  fs::file_time_type best_time{};
  if (fs::is_directory(dir, ec)) {
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      if (entry.path().extension() != ".json") continue;
      auto text = ReadSmallFile(entry.path());
      if (!text.ok()) continue;
      auto j = ParseJson(*text);
      if (!j.ok() || !j->is_object() || !(*j)["url"].is_string() || !(*j)["token"].is_string() ||
          !(*j)["pid"].is_number_integer()) {
        continue;
      }
      RunningHost h{(*j)["url"].get<std::string>(), (*j)["token"].get<std::string>(), (*j)["pid"].get<int64_t>()};
      if (::kill(static_cast<pid_t>(h.pid), 0) != 0 && errno == ESRCH) {
        fs::remove(entry.path(), ec);  // left behind by a host that died
        continue;
      }
      auto t = entry.last_write_time(ec);
      if (!best || t > best_time) {
        best = h;
        best_time = t;
      }
    }
  }
  if (!best) {
    return Status(codes::kUnavailable, "no dsh host is running on profile " + home_.string() +
                                           " (start one with `dsh web --home " + home_.string() + "`)");
  }
  return *best;
}

}  // namespace dsh::host
