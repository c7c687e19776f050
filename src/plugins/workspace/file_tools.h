#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/json.h"
#include "base/status.h"
#include "plugins/workspace/workspace_paths.h"

namespace dsh::workspace {

struct FileLimits {
  int64_t max_read_bytes = 1 << 20;   // a larger file is refused by read
  int64_t default_read_lines = 2000;  // read's limit when none is given
  int64_t max_line_chars = 2000;      // longer lines are cut (and say so)
  int64_t max_write_bytes = 8 << 20;  // write/edit content cap (edit: the file before and after)
};

// The file tools: the path rules of Locate (workspace_paths.h) decide, then
// every file and directory is opened with OpenBeneath relative to its root,
// so a link swapped in after the check cannot lead out. All functions are
// blocking and thread-safe (no shared state). In every result, "path" is the
// resolved path relative to roots.cwd, or absolute when it is in another
// root. Errors are those of Locate plus the ones listed; `io_error` for the
// file system's own failures.

// read({path, offset?, limit?}): the text file's lines numbered from 1 as
// `cat -n` does ("     1\tfirst line\n"), starting at line `offset` (default
// 1), at most `limit` lines (default limits.default_read_lines). A line
// longer than limits.max_line_chars characters is cut, with
// " … [line cut: N characters]" after it. Invalid UTF-8 past the first 8 KiB
// shows as U+FFFD.
// Result: {path, content, first_line, last_line, total_lines} (first_line and
// last_line are 0 for an empty file), plus next_offset when lines remain
// after the window and cut_lines when lines were cut.
// Errors, all `invalid_arguments`: offset or limit < 1; offset past the last
// line; a directory; not a regular file (FIFO, device: never blocks); a file
// larger than limits.max_read_bytes (refused from its size, unread); a binary
// file (a NUL byte or invalid UTF-8 in its first 8 KiB).
Result<Json> ReadFile(const Roots& roots, const std::string& path, std::optional<int64_t> offset,
                      std::optional<int64_t> limit, const FileLimits& limits = {});

// write({path, content}): creates or replaces the file atomically: a
// temporary file in the same directory, written and fsynced, renamed over the
// path, then the directory fsynced. A reader sees the old or the new content,
// never a mix. Missing parent directories are created one by one beneath the
// root. A replaced file keeps its mode (and owner when permitted); a new one
// gets 0666 less the umask. A final symlink that leads inside is followed:
// its target is written and the link stays.
// Result: {path, bytes_written, created}.
// Errors: `invalid_arguments` for content over limits.max_write_bytes, a
// path ending with '/', a directory or another non-regular file at the path.
Result<Json> WriteFile(const Roots& roots, const std::string& path, const std::string& content,
                       const FileLimits& limits = {});

// edit({path, old_string, new_string, replace_all?}): replaces the exact text
// `old_string` by `new_string`: its only occurrence, or every
// (non-overlapping) one when replace_all. Written back as write does.
// Result: {path, replacements, first_changed_line, diff}: `diff` is a
// unified diff of the changed lines (no context lines), cut past 8 KiB.
// Errors, `invalid_arguments` unless said: old_string empty; old_string equal
// to new_string; old_string not found; found more than once without
// replace_all (the message gives the count); a binary file, a directory, not
// a regular file; the file before or after over limits.max_write_bytes;
// `not_found` for a missing file; `conflict` when the file changed between
// being read and being replaced.
Result<Json> EditFile(const Roots& roots, const std::string& path, const std::string& old_string,
                      const std::string& new_string, bool replace_all, const FileLimits& limits = {});

}  // namespace dsh::workspace
