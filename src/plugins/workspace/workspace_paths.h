#pragma once

#include <filesystem>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace dsh::workspace {

// Error code of every path that resolves outside the workspace.
inline constexpr const char* kPathOutsideWorkspace = "path_outside_workspace";

// The directories a session's workspace tools may touch: the session's cwd
// and the extra roots its preset names. All absolute.
struct Roots {
  std::filesystem::path cwd;
  std::vector<std::filesystem::path> extra;
};

enum class Access { kRead, kWrite };

// Resolves a tool's `path` argument (relative to roots.cwd, or absolute) to
// a canonical absolute path inside one of the roots. kWrite allows a path
// that does not exist yet (its existing ancestors must be inside).
// Errors: `invalid_arguments` (empty, NUL byte); `path_outside_workspace`
// for anything that leads outside (`..`, symlinks, /proc/self/root, a
// regular file with more than one hard link); `not_found` for a missing
// path under kRead.
Result<std::filesystem::path> Resolve(const Roots& roots, std::string_view path, Access access);

}  // namespace dsh::workspace
