#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/json.h"
#include "base/status.h"

namespace dsh::workspace {

// Both tools run ripgrep (`rg`, found on the host's PATH) directly — no
// shell — with an environment of PATH only, so no RIPGREP_CONFIG_PATH or
// global gitignore of the host applies. They respect .gitignore (also
// outside a git repository), .ignore and .rgignore; they include dotfiles
// but never descend into `.git`; they do not follow symlinks. Paths in the
// answers are relative to `display_root`, or absolute when outside it.
// Blocking; thread-safe.

struct ListRequest {
  std::filesystem::path dir;           // already resolved, absolute directory
  std::filesystem::path display_root;  // absolute
  std::optional<std::string> pattern;  // a glob, as rg --glob reads it ("*.cc", "src/**/test_*")
  int64_t max_entries = 1000;
  // Never listed, even under `dir` (the profile directory).
  std::vector<std::filesystem::path> hidden;
  std::chrono::milliseconds timeout{30'000};
};

// list({path?, pattern?}): files under `dir`, sorted by path, at most
// max_entries. Answer: {"files": [paths], "more": files not listed (an
// estimate when hidden files were among them)}, plus "timed_out": true when
// rg was stopped (the list is then partial).
// Errors: `invalid_arguments` (empty pattern, max_entries outside
// [1, 100000], an invalid glob with rg's message); `unavailable` (rg missing or failing).
Result<Json> ListFiles(const ListRequest& request);

struct GrepRequest {
  std::string pattern;                 // a Rust regex (rg's syntax); may start with '-'
  std::filesystem::path path;          // already resolved, absolute (file or directory)
  std::filesystem::path display_root;  // paths in the answer are relative to it
  std::optional<std::string> glob;
  bool ignore_case = false;
  int64_t max_results = 200;
  // Never searched, even under `path` (the profile directory).
  std::vector<std::filesystem::path> hidden;
  std::chrono::milliseconds timeout{30'000};
};

// grep: matching lines, sorted by path then line, at most max_results.
// Answer: {"matches": [{"path", "line" (from 1), "text" (the line without
// its end, cut to 400 bytes with "…")}], "truncated": whether there were
// more}, plus "timed_out": true when rg was stopped. No match is an empty
// list, not an error.
// Errors: `invalid_arguments` (empty pattern or glob, max_results outside
// [1, 100000], an invalid regex or glob, with rg's message); `unavailable` (rg missing or failing).
Result<Json> Grep(const GrepRequest& request);

}  // namespace dsh::workspace
