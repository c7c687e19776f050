#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "base/json.h"
#include "base/status.h"

namespace dsh::workspace {

// list({path?, pattern?}): files under `dir` (an already resolved absolute
// directory), relative to `display_root`, `.gitignore` respected, glob
// `pattern` applied, at most `max_entries` with a "more" marker. Uses rg.
Result<Json> ListFiles(const std::filesystem::path& dir, const std::filesystem::path& display_root,
                       const std::optional<std::string>& pattern, int64_t max_entries = 1000);

struct GrepRequest {
  std::string pattern;
  std::filesystem::path path;          // already resolved, absolute (file or directory)
  std::filesystem::path display_root;  // paths in the answer are relative to it
  std::optional<std::string> glob;
  bool ignore_case = false;
  int64_t max_results = 200;
};

// grep: regular-expression matches with file and line, through ripgrep.
Result<Json> Grep(const GrepRequest& request);

}  // namespace dsh::workspace
