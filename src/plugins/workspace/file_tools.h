#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/json.h"
#include "base/status.h"
#include "plugins/workspace/workspace_paths.h"

namespace dsh::workspace {

struct FileLimits {
  int64_t max_read_bytes = 1 << 20;     // a larger file is refused by read
  int64_t default_read_lines = 2000;    // read's limit when none is given
  int64_t max_line_chars = 2000;        // longer lines are cut (and say so)
  int64_t max_write_bytes = 8 << 20;    // write/edit content cap
};

// read({path, offset?, limit?}): the text file's lines numbered from 1
// (offset is the first line, 1-based), with the window and total lines.
Result<Json> ReadFile(const Roots& roots, const std::string& path, std::optional<int64_t> offset,
                      std::optional<int64_t> limit, const FileLimits& limits = {});
// write({path, content}): create or replace atomically (temporary file +
// rename), parent directories created.
Result<Json> WriteFile(const Roots& roots, const std::string& path, const std::string& content,
                       const FileLimits& limits = {});
// edit({path, old_string, new_string, replace_all?}): exact replacement.
Result<Json> EditFile(const Roots& roots, const std::string& path, const std::string& old_string,
                      const std::string& new_string, bool replace_all, const FileLimits& limits = {});

}  // namespace dsh::workspace
