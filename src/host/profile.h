#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "base/status.h"

namespace dsh::host {

// A profile directory: `dsh.yml`, the SQLite database `dsh.db`, the auth
// token `auth-token` (mode 0600), and `run/<pid>.json` (mode 0600) for each
// running host, which the CLI reads to find a host's address and token.
// Thread-compatible.
class Profile {
 public:
  // `--home`, else $DSH_HOME, else ~/.dsh. The directory is created (0700)
  // when missing. Errors: `io_error`.
  static Result<Profile> Open(const std::optional<std::string>& home_flag);
  // The profile Open would give, without creating its directory: for
  // commands that only look for a running host (`dsh tool`, `dsh mcp`), so
  // that a mistyped --home creates nothing.
  static Result<Profile> Find(const std::optional<std::string>& home_flag);
  // The absolute directory Open would use, without creating or checking it.
  static Result<std::filesystem::path> ResolveHome(const std::optional<std::string>& home_flag);

  const std::filesystem::path& home() const { return home_; }
  std::string config_path() const { return (home_ / "dsh.yml").string(); }
  std::string database_path() const { return (home_ / "dsh.db").string(); }
  std::string token_path() const { return (home_ / "auth-token").string(); }

  // The profile's token, generated once (128 random bits, hex) into
  // `auth-token` with mode 0600. Concurrent first starts agree on one token.
  Result<std::string> LoadOrCreateToken() const;

  struct RunningHost {
    std::string url;    // "http://127.0.0.1:7433/"
    std::string token;
    int64_t pid = 0;
  };
  // Records this process as a running host (run/<pid>.json, 0600).
  Status WriteRunFile(const RunningHost& host) const;
  void RemoveRunFile(int64_t pid) const;
  // The most recently started host of this profile whose process is alive.
  // Errors: `unavailable` when none runs.
  Result<RunningHost> FindRunningHost() const;

 private:
  explicit Profile(std::filesystem::path home) : home_(std::move(home)) {}
  std::filesystem::path home_;
};

// Writes `content` to `path` atomically: a temp file beside it, created with
// `mode` (say 0600), written and fsynced, then renamed over `path`. Readers
// see the old or the new content, never a part. Not safe against a
// concurrent write of the same path from this process (the temp file's name
// is per process). Errors: `io_error`.
Status WriteFileAtomically(const std::filesystem::path& path, const std::string& content, unsigned mode);

// The content of `path`, or nullopt when it does not exist. Errors:
// `io_error` (it exists but cannot be read).
Result<std::optional<std::string>> ReadFileIfPresent(const std::filesystem::path& path);

}  // namespace dsh::host
