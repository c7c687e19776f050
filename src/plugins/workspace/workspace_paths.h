#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"

namespace dsh::workspace {

// Error code of every path that resolves outside the workspace.
inline constexpr const char* kPathOutsideWorkspace = "path_outside_workspace";

// The directories a session's workspace tools may touch: the session's cwd
// and the extra roots its preset names. All absolute; a root may itself be
// reached through symbolic links (it is canonicalized on every call).
struct Roots {
  std::filesystem::path cwd;
  std::vector<std::filesystem::path> extra;
};

enum class Access { kRead, kWrite };

// Where a tool's path argument lies in the workspace.
struct Location {
  std::filesystem::path path;   // canonical and absolute: no symlink, `.` or `..` in it
  std::filesystem::path root;   // the canonical root that holds `path`
  std::filesystem::path below;  // `path` relative to `root`; "." for the root itself
  bool exists = false;          // false only under kWrite, for a path still to be created
};

// Resolves a tool's `path` argument (relative to roots.cwd, or absolute) to
// a canonical absolute path inside one of the roots, following symbolic
// links wherever they are.
//  - `..` in the argument may not step out of the roots, even on the way
//    back in ("a/../b" is fine, "../cwd/b" is not).
//  - A symlink is fine when what it leads to is inside; the result is the
//    target's path. /proc's links (/proc/self/root, /proc/<pid>/cwd, /dev/fd
//    ...) are refused wherever they appear.
//  - An existing regular file with more than one hard link is refused: the
//    other name may be outside the workspace.
//  - kWrite allows a path that does not exist yet when its deepest existing
//    ancestor is inside and the missing rest has no `..`.
//  - A trailing `/` requires a directory when the path exists.
// Errors: `invalid_arguments` (empty, NUL byte, too long, a file used as a
// directory, `..` after a missing directory, a symlink loop);
// `path_outside_workspace` for anything that leads outside; `not_found` for
// a missing path under kRead, or when roots.cwd itself is missing; `io_error`.
// Messages name the path as given. Blocking (file system calls).
Result<Location> Locate(const Roots& roots, std::string_view path, Access access);

// Locate(...).path.
Result<std::filesystem::path> Resolve(const Roots& roots, std::string_view path, Access access);


// Opens the directory `root` (absolute) as an O_PATH descriptor, the anchor
// of OpenBeneath. Errors: `not_found`, `io_error`.
Result<UniqueFd> OpenRoot(const std::filesystem::path& root);

// Opens `relative` beneath the directory `dir_fd` with openat2(2) and
// RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS: the kernel
// refuses `..` above dir_fd, absolute paths and every symbolic link, so a
// path Locate checked cannot be swapped for a link leading out before it is
// opened. `relative` is meant to be a Location's `below` (symlink-free);
// `flags` are open(2) flags (O_CLOEXEC is added), `mode` is for O_CREAT.
// `shown` names the path in messages.
// Errors: `path_outside_workspace` (what was checked changed: a link or `..`
// leads out now), `not_found`, `invalid_arguments` (ENOTDIR, EISDIR ...),
// `unavailable` (no openat2 here), `io_error`.
Result<UniqueFd> OpenBeneath(int dir_fd, const std::filesystem::path& relative, int flags,
                             std::string_view shown, mode_t mode = 0);

}  // namespace dsh::workspace
