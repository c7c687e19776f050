#include "plugins/workspace/workspace_paths.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <deque>
#include <string>
#include <system_error>

namespace dsh::workspace {
namespace fs = std::filesystem;
namespace {

// Linux's MAXSYMLINKS: how many symbolic links one resolution may follow.
constexpr int kMaxSymlinks = 40;

std::string ErrnoText(int err) { return std::error_code(err, std::generic_category()).message(); }

std::string Quoted(std::string_view path) { return "`" + std::string(path) + "`"; }

Status Outside(std::string_view path, const std::string& why) {
  return Status(kPathOutsideWorkspace, Quoted(path) + " " + why);
}

// Whether `path` is `root` or below it; both canonical. Compares whole
// components, so /ws2 is not inside /ws.
bool IsWithin(const fs::path& path, const fs::path& root) {
  auto [root_end, path_end] = std::mismatch(root.begin(), root.end(), path.begin(), path.end());
  return root_end == root.end();
}

const fs::path* RootHolding(const fs::path& path, const std::vector<fs::path>& roots) {
  for (const fs::path& root : roots) {
    if (IsWithin(path, root)) return &root;
  }
  return nullptr;
}

std::string DescribeRoots(const std::vector<fs::path>& roots) {
  std::string out = roots.front().string();
  for (size_t i = 1; i < roots.size(); ++i)
    out += (i + 1 == roots.size() ? " and " : ", ") + roots[i].string();
  return out;
}

// roots.cwd first, then the extra roots that exist, all canonical.
Result<std::vector<fs::path>> CanonicalRoots(const Roots& roots) {
  std::vector<fs::path> out;
  if (!roots.cwd.is_absolute())
    return Internal("the workspace directory " + Quoted(roots.cwd.string()) + " is not absolute");
  std::error_code ec;
  fs::path cwd = fs::canonical(roots.cwd, ec);
  if (ec) {
    if (ec == std::errc::no_such_file_or_directory) {
      return NotFound("the workspace directory " + Quoted(roots.cwd.string()) + " does not exist");
    }
    return Status(codes::kIo, "cannot resolve the workspace directory " + Quoted(roots.cwd.string()) + ": " +
                                  ec.message());
  }
  if (!fs::is_directory(cwd, ec)) {
    return InvalidArguments("the workspace directory " + Quoted(roots.cwd.string()) + " is not a directory");
  }
  out.push_back(std::move(cwd));
  for (const fs::path& extra : roots.extra) {
    if (!extra.is_absolute()) continue;
    fs::path canonical = fs::canonical(extra, ec);
    // A root that is missing (or not a directory) holds nothing.
    if (!ec && fs::is_directory(canonical, ec)) out.push_back(std::move(canonical));
  }
  return out;
}

bool OnProcFs(const fs::path& dir) {
  struct statfs fs_info {};
  return ::statfs(dir.c_str(), &fs_info) == 0 && fs_info.f_type == PROC_SUPER_MAGIC;
}

Result<std::string> ReadLink(const fs::path& link, std::string_view shown) {
  std::string target(PATH_MAX, '\0');
  ssize_t n = ::readlink(link.c_str(), target.data(), target.size());
  if (n < 0)
    return Status(codes::kIo, "cannot read the symbolic link " + link.string() + " in " + Quoted(shown) +
                                  ": " + ErrnoText(errno));
  if (static_cast<size_t>(n) >= target.size()) {
    return InvalidArguments(Quoted(shown) + ": the symbolic link " + link.string() + " is too long");
  }
  target.resize(static_cast<size_t>(n));
  return target;
}

// One name still to resolve, and whether it came from the tool's argument
// (where `..` may not leave the roots) or from a symbolic link's target.
struct Part {
  std::string name;
  bool from_argument;
};

// Splits at '/', leaving out empty names. A trailing '/' becomes a "." so
// that the last name must be a directory, as the kernel wants it.
void PushFront(std::deque<Part>& parts, std::string_view path, bool from_argument) {
  std::vector<Part> split;
  size_t begin = 0;
  while (begin <= path.size()) {
    size_t end = std::min(path.find('/', begin), path.size());
    if (end > begin) split.push_back({std::string(path.substr(begin, end - begin)), from_argument});
    begin = end + 1;
  }
  if (!path.empty() && path.back() == '/' && !split.empty()) split.push_back({".", from_argument});
  parts.insert(parts.begin(), split.begin(), split.end());
}

Location MakeLocation(fs::path path, const fs::path& root, bool exists) {
  fs::path below = path.lexically_relative(root);
  if (below.empty()) below = ".";
  return Location{std::move(path), root, std::move(below), exists};
}

}  // namespace

Result<Location> Locate(const Roots& roots, std::string_view path, Access access) {
  if (path.empty()) return InvalidArguments("path is empty");
  if (path.find('\0') != std::string_view::npos) return InvalidArguments("path contains a NUL byte");
  if (path.size() >= PATH_MAX) {
    return InvalidArguments("path is " + std::to_string(path.size()) + " bytes long; the limit is " +
                            std::to_string(PATH_MAX - 1));
  }
  DSH_ASSIGN_OR_RETURN(std::vector<fs::path> canonical_roots, CanonicalRoots(roots));
  auto outside_roots = [&] { return "(the workspace is " + DescribeRoots(canonical_roots) + ")"; };

  // Resolution name by name, like the kernel's, so that every symbolic link
  // met on the way is seen and judged. `current` is always canonical.
  fs::path current = path.front() == '/' ? fs::path("/") : canonical_roots.front();
  bool current_is_directory = true;
  struct stat current_stat {};
  bool current_stat_valid = false;
  std::deque<Part> parts;
  PushFront(parts, path, /*from_argument=*/true);
  int links_followed = 0;

  while (!parts.empty()) {
    Part part = std::move(parts.front());
    parts.pop_front();
    if (!current_is_directory) {
      return InvalidArguments(Quoted(path) + ": " + current.string() + " is not a directory");
    }
    if (part.name == ".") continue;
    if (part.name == "..") {
      fs::path parent = current.parent_path();
      if (part.from_argument && !RootHolding(parent, canonical_roots)) {
        return Outside(path, "leads outside the workspace: its `..` goes above " + current.string() + " " +
                                 outside_roots());
      }
      current = std::move(parent);
      current_stat_valid = false;
      continue;
    }
    fs::path candidate = current / part.name;
    struct stat st {};
    if (::lstat(candidate.c_str(), &st) != 0) {
      int err = errno;
      if (err != ENOENT) {
        if (err == ENAMETOOLONG)
          return InvalidArguments(Quoted(path) + ": the name " + Quoted(part.name) + " is too long");
        return Status(codes::kIo,
                      "cannot resolve " + Quoted(path) + " at " + candidate.string() + ": " + ErrnoText(err));
      }
      // `current` is the deepest existing ancestor; it decides, so that a
      // missing path outside is not told apart from an existing one.
      const fs::path* root = RootHolding(current, canonical_roots);
      if (!root) return Outside(path, "is outside the workspace " + outside_roots());
      if (access == Access::kRead) return NotFound(Quoted(path) + " does not exist");
      fs::path result = current;
      parts.push_front(std::move(part));
      for (const Part& rest : parts) {
        if (rest.name == "..") {
          return InvalidArguments(Quoted(path) + ": `..` after a directory that does not exist yet (" +
                                  candidate.string() + ")");
        }
        if (rest.name != ".") result /= rest.name;
      }
      return MakeLocation(std::move(result), *root, /*exists=*/false);
    }
    if (S_ISLNK(st.st_mode)) {
      if (++links_followed > kMaxSymlinks) {
        return InvalidArguments(Quoted(path) + ": too many levels of symbolic links (a loop?)");
      }
      // /proc's links (/proc/self/root, /proc/<pid>/cwd, fd/N) are not what
      // their text says: they lead wherever a process stands.
      if (OnProcFs(current)) {
        return Outside(path,
                       "goes through " + candidate.string() + ", a /proc link; /proc links are not followed");
      }
      DSH_ASSIGN_OR_RETURN(std::string target, ReadLink(candidate, path));
      if (target.empty())
        return InvalidArguments(Quoted(path) + ": " + candidate.string() + " is an empty symbolic link");
      if (target.front() == '/') current = "/";
      PushFront(parts, target, /*from_argument=*/false);
      current_stat_valid = false;
      continue;
    }
    current = std::move(candidate);
    current_is_directory = S_ISDIR(st.st_mode);
    current_stat = st;
    current_stat_valid = true;
  }

  const fs::path* root = RootHolding(current, canonical_roots);
  if (!root) {
    std::string leads = current.string() == path ? "" : "leads to " + current.string() + ", which ";
    return Outside(path, leads + "is outside the workspace " + outside_roots());
  }
  if (!current_stat_valid && ::lstat(current.c_str(), &current_stat) != 0) {
    return Status(codes::kIo, "cannot inspect " + Quoted(path) + ": " + ErrnoText(errno));
  }
  if (S_ISREG(current_stat.st_mode) && current_stat.st_nlink > 1) {
    return Outside(path, "is a hard link (the file has " + std::to_string(current_stat.st_nlink) +
                             " names); another name may be outside the workspace, so it is not used");
  }
  return MakeLocation(std::move(current), *root, /*exists=*/true);
}

Result<fs::path> Resolve(const Roots& roots, std::string_view path, Access access) {
  DSH_ASSIGN_OR_RETURN(Location where, Locate(roots, path, access));
  return std::move(where.path);
}

Result<UniqueFd> OpenRoot(const fs::path& root) {
  int fd = ::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) return NotFound("the workspace root " + Quoted(root.string()) + " does not exist");
    return Status(codes::kIo,
                  "cannot open the workspace root " + Quoted(root.string()) + ": " + ErrnoText(err));
  }
  return UniqueFd(fd);
}

Result<UniqueFd> OpenBeneath(int dir_fd, const fs::path& relative, int flags, std::string_view shown,
                             mode_t mode) {
  open_how how{};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
  how.mode = (flags & (O_CREAT | O_TMPFILE)) != 0 ? mode : 0;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS;
  const char* name = relative.empty() ? "." : relative.c_str();
  // EAGAIN: a concurrent rename or mount made the kernel unsure of the
  // containment; it asks to try again.
  for (int attempt = 0;; ++attempt) {
    long fd = ::syscall(SYS_openat2, dir_fd, name, &how, sizeof how);
    if (fd >= 0) return UniqueFd(static_cast<int>(fd));
    int err = errno;
    if ((err == EINTR || err == EAGAIN) && attempt < 16) continue;
    switch (err) {
      case EXDEV:
      case ELOOP:
        return Outside(
            shown, "changed while it was being opened: a symbolic link or `..` in it leads elsewhere now");
      case ENOENT:
        return NotFound(Quoted(shown) + " does not exist");
      case ENOTDIR:
        return InvalidArguments(Quoted(shown) + ": a part of it is not a directory");
      case EISDIR:
        return InvalidArguments(Quoted(shown) + " is a directory");
      case ENXIO:
        return InvalidArguments(Quoted(shown) + " is not a regular file");
      case ENAMETOOLONG:
        return InvalidArguments(Quoted(shown) + ": a name in it is too long");
      case ENOSYS:
        return Status(codes::kUnavailable,
                      "cannot open " + Quoted(shown) +
                          ": openat2(2) is not available here (Linux 5.6 or later is needed)");
      default:
        return Status(codes::kIo, "cannot open " + Quoted(shown) + ": " + ErrnoText(err));
    }
  }
}

}  // namespace dsh::workspace
