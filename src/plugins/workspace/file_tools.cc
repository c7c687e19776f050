#include "plugins/workspace/file_tools.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <random>
#include <string_view>
#include <system_error>
#include <vector>

#include "base/strings.h"

namespace dsh::workspace {
namespace fs = std::filesystem;
namespace {

// How much of a file decides whether it is text.
constexpr size_t kBinaryProbeBytes = 8 << 10;
// Where edit's diff is cut.
constexpr size_t kMaxDiffBytes = 8 << 10;
constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";

std::string ErrnoText(int err) { return std::error_code(err, std::generic_category()).message(); }

std::string Quoted(std::string_view path) { return "`" + std::string(path) + "`"; }

Status IoError(const std::string& what, int err) { return Status(codes::kIo, what + ": " + ErrnoText(err)); }

// The length of the well-formed UTF-8 sequence at s[i]; 0 when the bytes
// there are not one (stray continuation, overlong form, surrogate, past
// U+10FFFF, or cut by the end of `s`).
size_t Utf8SequenceLength(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char lead = byte(i);
  if (lead < 0x80) return 1;
  size_t length = 0;
  uint32_t code_point = 0;
  uint32_t smallest = 0;
  if ((lead & 0xE0) == 0xC0) {
    length = 2, code_point = lead & 0x1Fu, smallest = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3, code_point = lead & 0x0Fu, smallest = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4, code_point = lead & 0x07u, smallest = 0x10000;
  } else {
    return 0;
  }
  if (s.size() - i < length) return 0;
  for (size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    code_point = (code_point << 6) | (byte(i + k) & 0x3Fu);
  }
  if (code_point < smallest || code_point > 0x10FFFF || (code_point >= 0xD800 && code_point <= 0xDFFF))
    return 0;
  return length;
}

// A NUL byte or invalid UTF-8 in the first kBinaryProbeBytes (a character
// that starts there may end after).
bool LooksBinary(std::string_view content) {
  size_t probe = std::min(content.size(), kBinaryProbeBytes);
  for (size_t i = 0; i < probe;) {
    if (content[i] == '\0') return true;
    size_t length = Utf8SequenceLength(content, i);
    if (length == 0) return true;
    i += length;
  }
  return false;
}

// Appends `text` with every invalid byte as U+FFFD, cut after `max_chars`
// characters with a marker that gives the full length. Returns whether cut.
bool AppendText(std::string& out, std::string_view text, int64_t max_chars) {
  int64_t chars = 0;
  size_t i = 0;
  for (; i < text.size() && chars < max_chars; ++chars) {
    size_t length = Utf8SequenceLength(text, i);
    if (length == 0) {
      out += kReplacementCharacter;
      i += 1;
    } else {
      out.append(text.substr(i, length));
      i += length;
    }
  }
  if (i == text.size()) return false;
  for (; i < text.size(); ++chars) i += std::max<size_t>(1, Utf8SequenceLength(text, i));
  out += " … [line cut: " + std::to_string(chars) + " characters]";
  return true;
}

// The resolved path as results show it: relative to the cwd when inside it.
std::string ShownPath(const Roots& roots, const fs::path& canonical) {
  std::error_code ec;
  fs::path cwd = fs::canonical(roots.cwd, ec);
  if (!ec) {
    fs::path relative = canonical.lexically_relative(cwd);
    if (!relative.empty() && *relative.begin() != "..") return relative.string();
  }
  return canonical.string();
}

Status HardLinkRefused(std::string_view path, nlink_t links) {
  return Status(kPathOutsideWorkspace,
                Quoted(path) + " is a hard link (the file has " + std::to_string(links) +
                    " names); another name may be outside the workspace, so it is not used");
}

struct FileContent {
  std::string data;
  struct stat stat {};
};

// Reads the regular file open as `fd`, refusing from its size alone one
// larger than `cap` (`too_large_hint` ends that message).
Result<FileContent> ReadRegularFile(int fd, std::string_view path, int64_t cap,
                                    const std::string& too_large_hint) {
  FileContent file;
  if (::fstat(fd, &file.stat) != 0) return IoError("cannot inspect " + Quoted(path), errno);
  if (S_ISDIR(file.stat.st_mode))
    return InvalidArguments(Quoted(path) + " is a directory; use list to see what is in it");
  if (!S_ISREG(file.stat.st_mode)) return InvalidArguments(Quoted(path) + " is not a regular file");
  // Again on the open file: the name checked by Locate may have been swapped.
  if (file.stat.st_nlink > 1) return HardLinkRefused(path, file.stat.st_nlink);
  auto too_large = [&](int64_t size) {
    return InvalidArguments(Quoted(path) + " is " + std::to_string(size) + " bytes; " + too_large_hint + " " +
                            std::to_string(cap) + " bytes");
  };
  if (file.stat.st_size > cap) return too_large(file.stat.st_size);
  // Reading stops one byte past the cap: that tells a file grown since fstat.
  const size_t most = static_cast<size_t>(cap) + 1;
  file.data.resize(std::min(static_cast<size_t>(file.stat.st_size) + 1, most));
  size_t filled = 0;
  for (;;) {
    if (filled == file.data.size()) {
      if (filled == most) break;
      file.data.resize(std::min(2 * filled, most));
    }
    ssize_t n = ::read(fd, file.data.data() + filled, file.data.size() - filled);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return IoError("cannot read " + Quoted(path), errno);
    if (n == 0) break;
    filled += static_cast<size_t>(n);
  }
  if (filled > static_cast<size_t>(cap)) return too_large(static_cast<int64_t>(filled));
  file.data.resize(filled);
  return file;
}

Status BinaryRefused(std::string_view path, std::string_view tool) {
  return InvalidArguments(Quoted(path) +
                          " is a binary file (a NUL byte or invalid UTF-8 in its first 8 KiB); " +
                          std::string(tool) + " works on text files only");
}

// Opens the directory `relative` beneath `root_fd` one name at a time,
// creating the missing ones when `create`. Returns it opened for reading (the
// anchor of the *at calls, and fsync-able).
Result<UniqueFd> OpenDirectory(int root_fd, const fs::path& relative, bool create, std::string_view path) {
  DSH_ASSIGN_OR_RETURN(UniqueFd dir, OpenBeneath(root_fd, ".", O_PATH | O_DIRECTORY, path));
  fs::path walked;
  for (const fs::path& name : relative) {
    if (name.empty() || name == ".") continue;
    walked /= name;
    Result<UniqueFd> next = OpenBeneath(dir.get(), name, O_PATH | O_DIRECTORY, path);
    if (!next.ok() && next.status().code() == codes::kNotFound && create) {
      if (::mkdirat(dir.get(), name.c_str(), 0777) != 0 && errno != EEXIST) {
        return IoError("cannot create the directory " + Quoted(walked.string()) + " for " + Quoted(path),
                       errno);
      }
      // Opened again without following links: a link raced in is refused.
      next = OpenBeneath(dir.get(), name, O_PATH | O_DIRECTORY, path);
    }
    if (!next.ok()) return next.status();
    dir = std::move(next).value();
  }
  return OpenBeneath(dir.get(), ".", O_RDONLY | O_DIRECTORY, path);
}

std::string TemporaryName(const std::string& name) {
  thread_local std::mt19937_64 random{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string suffix;
  for (uint64_t bits = random(), i = 0; i < 12; ++i, bits >>= 4) suffix += kHex[bits & 0xF];
  // Short enough that the temporary name fits NAME_MAX whatever `name` is.
  return "." + std::string(Utf8Prefix(name, 200)) + ".dsh-" + suffix + ".tmp";
}

Status WriteAll(int fd, std::string_view content) {
  while (!content.empty()) {
    ssize_t n = ::write(fd, content.data(), content.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status(codes::kIo, ErrnoText(errno));
    content.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

// Puts `content` at `name` in the directory `dir_fd` atomically (temporary
// file, fsync, rename, fsync of the directory). A replaced file's mode and
// owner carry over. With `expected`, the file must still be the one of that
// stat (same inode, size and mtime), else `conflict`. Returns whether the file
// was created.
Result<bool> ReplaceFile(int dir_fd, const std::string& name, std::string_view content,
                         const struct stat* expected, std::string_view path) {
  struct stat existing {};
  bool exists = ::fstatat(dir_fd, name.c_str(), &existing, AT_SYMLINK_NOFOLLOW) == 0;
  if (!exists && errno != ENOENT) return IoError("cannot inspect " + Quoted(path), errno);
  if (exists) {
    if (S_ISDIR(existing.st_mode)) return InvalidArguments(Quoted(path) + " is a directory");
    if (S_ISLNK(existing.st_mode)) {
      return Status(kPathOutsideWorkspace,
                    Quoted(path) + " changed while it was being written: it is a symbolic link now");
    }
    if (!S_ISREG(existing.st_mode)) return InvalidArguments(Quoted(path) + " is not a regular file");
    if (existing.st_nlink > 1) return HardLinkRefused(path, existing.st_nlink);
  }
  if (expected &&
      (!exists || existing.st_dev != expected->st_dev || existing.st_ino != expected->st_ino ||
       existing.st_size != expected->st_size || existing.st_mtim.tv_sec != expected->st_mtim.tv_sec ||
       existing.st_mtim.tv_nsec != expected->st_mtim.tv_nsec)) {
    return Status(codes::kConflict,
                  Quoted(path) + " changed while it was being edited; read it again and redo the edit");
  }

  std::string temporary;
  UniqueFd file;
  for (int attempt = 0; !file.valid(); ++attempt) {
    temporary = TemporaryName(name);
    // O_EXCL: never an existing file, never through a symlink.
    int fd =
        ::openat(dir_fd, temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, exists ? 0600 : 0666);
    if (fd >= 0) {
      file = UniqueFd(fd);
    } else if (errno != EEXIST || attempt == 16) {
      return IoError("cannot create a temporary file next to " + Quoted(path), errno);
    }
  }
  Status status;
  if (exists) {
    // Best effort: only root may give the file to another owner. Before
    // fchmod, which chown would strip of set-id bits.
    (void)::fchown(file.get(), existing.st_uid, existing.st_gid);
    if (::fchmod(file.get(), existing.st_mode & 07777) != 0)
      status = IoError("cannot set the mode of " + Quoted(path), errno);
  }
  if (status.ok()) {
    status = WriteAll(file.get(), content);
    if (!status.ok()) status = Status(codes::kIo, "cannot write " + Quoted(path) + ": " + status.message());
  }
  if (status.ok() && ::fsync(file.get()) != 0)
    status = IoError("cannot write " + Quoted(path) + " to disk", errno);
  file.Reset();
  if (status.ok() && ::renameat(dir_fd, temporary.c_str(), dir_fd, name.c_str()) != 0) {
    status = IoError("cannot replace " + Quoted(path), errno);
  }
  if (!status.ok()) {
    ::unlinkat(dir_fd, temporary.c_str(), 0);
    return status;
  }
  if (::fsync(dir_fd) != 0)
    return IoError("cannot write the directory of " + Quoted(path) + " to disk", errno);
  return !exists;
}

// Lines of `text`, without their '\n'; a final '\n' ends the last line
// rather than starting an empty one.
std::vector<std::string_view> SplitLines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    lines.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return lines;
}

std::string HunkRange(int64_t first, size_t count) {
  // A range of no lines names the line before it, as diff -U0 does.
  return count == 0 ? std::to_string(first - 1) + ",0" : std::to_string(first) + "," + std::to_string(count);
}

struct Diff {
  std::string text;
  int64_t first_changed_line = 0;  // the first line that differs (or where lines were removed)
};

// A unified diff without context of replacing `old_string` in `old_text` by
// `new_string` (every occurrence when replace_all). Occurrences that share a
// line make one hunk. Cut past kMaxDiffBytes.
Diff UnifiedDiff(const std::string& shown, std::string_view old_text, std::string_view old_string,
                 std::string_view new_string, bool replace_all, int64_t max_line_chars) {
  auto line_start = [&](size_t pos) {
    size_t newline = pos == 0 ? std::string_view::npos : old_text.rfind('\n', pos - 1);
    return newline == std::string_view::npos ? 0 : newline + 1;
  };
  // The end (past its '\n') of the line holding `pos`; a line that starts
  // at `pos` is included, so that a change ending with '\n' sees what follows.
  auto line_end = [&](size_t pos) {
    size_t newline = pos >= old_text.size() ? std::string_view::npos : old_text.find('\n', pos);
    return newline == std::string_view::npos ? old_text.size() : newline + 1;
  };
  Diff diff;
  std::string& out = diff.text;
  out = "--- " + shown + "\n+++ " + shown + "\n";
  int64_t line_number = 1;  // of old_text[counted_to]
  size_t counted_to = 0;
  int64_t line_delta = 0;  // lines the earlier hunks added (negative: removed)
  size_t at = old_text.find(old_string);
  while (at != std::string_view::npos) {
    size_t start = line_start(at);
    size_t end = line_end(at + old_string.size());
    std::string new_region;
    size_t cursor = start;
    while (at != std::string_view::npos && at < end) {
      new_region.append(old_text.substr(cursor, at - cursor));
      new_region.append(new_string);
      cursor = at + old_string.size();
      end = std::max(end, line_end(cursor));
      at = replace_all ? old_text.find(old_string, cursor) : std::string_view::npos;
    }
    new_region.append(old_text.substr(cursor, end - cursor));
    std::string_view old_region = old_text.substr(start, end - start);
    line_number += std::count(old_text.begin() + static_cast<ptrdiff_t>(counted_to),
                              old_text.begin() + static_cast<ptrdiff_t>(start), '\n');
    counted_to = start;

    std::vector<std::string_view> removed = SplitLines(old_region);
    std::vector<std::string_view> added = SplitLines(new_region);
    size_t same_head = 0;
    while (same_head < removed.size() && same_head < added.size() && removed[same_head] == added[same_head])
      ++same_head;
    size_t same_tail = 0;
    while (same_tail < removed.size() - same_head && same_tail < added.size() - same_head &&
           removed[removed.size() - 1 - same_tail] == added[added.size() - 1 - same_tail]) {
      ++same_tail;
    }
    size_t removed_count = removed.size() - same_head - same_tail;
    size_t added_count = added.size() - same_head - same_tail;
    int64_t first = line_number + static_cast<int64_t>(same_head);
    if (diff.first_changed_line == 0) diff.first_changed_line = first;
    out += "@@ -" + HunkRange(first, removed_count) + " +" + HunkRange(first + line_delta, added_count) +
           " @@\n";
    for (size_t i = same_head; i < same_head + removed_count; ++i) {
      out += '-';
      AppendText(out, removed[i], max_line_chars);
      out += '\n';
    }
    for (size_t i = same_head; i < same_head + added_count; ++i) {
      out += '+';
      AppendText(out, added[i], max_line_chars);
      out += '\n';
    }
    line_delta += std::count(new_region.begin(), new_region.end(), '\n') -
                  std::count(old_region.begin(), old_region.end(), '\n');
    if (out.size() > kMaxDiffBytes) {
      out.resize(Utf8Prefix(out, kMaxDiffBytes).size());
      out += "\n[diff cut at " + std::to_string(kMaxDiffBytes) + " bytes]\n";
      break;
    }
  }
  return diff;
}

}  // namespace

Result<Json> ReadFile(const Roots& roots, const std::string& path, std::optional<int64_t> offset,
                      std::optional<int64_t> limit, const FileLimits& limits) {
  if (offset && *offset < 1) {
    return InvalidArguments("offset must be 1 or more (the first line is 1), not " + std::to_string(*offset));
  }
  if (limit && *limit < 1) return InvalidArguments("limit must be 1 or more, not " + std::to_string(*limit));
  DSH_ASSIGN_OR_RETURN(Location where, Locate(roots, path, Access::kRead));
  DSH_ASSIGN_OR_RETURN(UniqueFd root, OpenRoot(where.root));
  // O_NONBLOCK: opening a FIFO must not wait for a writer.
  DSH_ASSIGN_OR_RETURN(UniqueFd fd,
                       OpenBeneath(root.get(), where.below, O_RDONLY | O_NONBLOCK | O_NOCTTY, path));
  DSH_ASSIGN_OR_RETURN(
      FileContent file,
      ReadRegularFile(fd.get(), path, limits.max_read_bytes,
                      "use grep, or bash with head or sed, for a part of it; read takes files up to"));
  if (LooksBinary(file.data)) return BinaryRefused(path, "read");

  std::vector<std::string_view> lines = SplitLines(file.data);
  auto total = static_cast<int64_t>(lines.size());
  int64_t first = offset.value_or(1);
  if (first > std::max<int64_t>(total, 1)) {
    return InvalidArguments("offset " + std::to_string(first) + " is past the end of " + Quoted(path) + " (" +
                            std::to_string(total) + " lines)");
  }
  int64_t count = std::min(limit.value_or(limits.default_read_lines), total - first + 1);
  int64_t last = first - 1 + std::max<int64_t>(count, 0);
  std::string content;
  int64_t cut_lines = 0;
  for (int64_t number = first; number <= last; ++number) {
    char prefix[32];
    std::snprintf(prefix, sizeof prefix, "%6lld\t", static_cast<long long>(number));
    content += prefix;
    if (AppendText(content, lines[static_cast<size_t>(number - 1)], limits.max_line_chars)) ++cut_lines;
    content += '\n';
  }
  Json result = {{"path", ShownPath(roots, where.path)},
                 {"content", std::move(content)},
                 {"first_line", total == 0 ? 0 : first},
                 {"last_line", last},
                 {"total_lines", total}};
  if (last < total) result["next_offset"] = last + 1;
  if (cut_lines > 0) result["cut_lines"] = cut_lines;
  return result;
}

Result<Json> WriteFile(const Roots& roots, const std::string& path, const std::string& content,
                       const FileLimits& limits) {
  if (static_cast<int64_t>(content.size()) > limits.max_write_bytes) {
    return InvalidArguments("content is " + std::to_string(content.size()) + " bytes; write takes up to " +
                            std::to_string(limits.max_write_bytes) + " bytes");
  }
  if (!path.empty() && path.back() == '/')
    return InvalidArguments(Quoted(path) + " ends with '/'; write needs a file");
  DSH_ASSIGN_OR_RETURN(Location where, Locate(roots, path, Access::kWrite));
  if (where.below == ".") return InvalidArguments(Quoted(path) + " is a directory");
  DSH_ASSIGN_OR_RETURN(UniqueFd root, OpenRoot(where.root));
  DSH_ASSIGN_OR_RETURN(UniqueFd dir,
                       OpenDirectory(root.get(), where.below.parent_path(), /*create=*/true, path));
  DSH_ASSIGN_OR_RETURN(bool created,
                       ReplaceFile(dir.get(), where.below.filename().string(), content, nullptr, path));
  return Json{{"path", ShownPath(roots, where.path)},
              {"bytes_written", static_cast<int64_t>(content.size())},
              {"created", created}};
}

Result<Json> EditFile(const Roots& roots, const std::string& path, const std::string& old_string,
                      const std::string& new_string, bool replace_all, const FileLimits& limits) {
  if (old_string.empty()) return InvalidArguments("old_string is empty; to write a whole file, use write");
  if (old_string == new_string)
    return InvalidArguments("old_string and new_string are the same; nothing would change");
  if (static_cast<int64_t>(new_string.size()) > limits.max_write_bytes) {
    return InvalidArguments("new_string is " + std::to_string(new_string.size()) +
                            " bytes; edit writes files up to " + std::to_string(limits.max_write_bytes) +
                            " bytes");
  }
  DSH_ASSIGN_OR_RETURN(Location where, Locate(roots, path, Access::kRead));
  DSH_ASSIGN_OR_RETURN(UniqueFd root, OpenRoot(where.root));
  DSH_ASSIGN_OR_RETURN(UniqueFd fd,
                       OpenBeneath(root.get(), where.below, O_RDONLY | O_NONBLOCK | O_NOCTTY, path));
  DSH_ASSIGN_OR_RETURN(FileContent file,
                       ReadRegularFile(fd.get(), path, limits.max_write_bytes, "edit takes files up to"));
  fd.Reset();
  if (LooksBinary(file.data)) return BinaryRefused(path, "edit");

  std::string_view text = file.data;
  int64_t found = 0;
  for (size_t at = text.find(old_string); at != std::string_view::npos;
       at = text.find(old_string, at + old_string.size())) {
    ++found;
  }
  if (found == 0) return InvalidArguments("old_string not found in " + Quoted(path));
  if (found > 1 && !replace_all) {
    return InvalidArguments("old_string found " + std::to_string(found) + " times in " + Quoted(path) +
                            "; give more context to make it unique, or set replace_all");
  }
  // Sizes are at most max_write_bytes each, so this cannot overflow.
  int64_t new_size = static_cast<int64_t>(text.size()) + found * (static_cast<int64_t>(new_string.size()) -
                                                                  static_cast<int64_t>(old_string.size()));
  if (new_size > limits.max_write_bytes) {
    return InvalidArguments("the edited " + Quoted(path) + " would be " + std::to_string(new_size) +
                            " bytes; edit writes files up to " + std::to_string(limits.max_write_bytes) +
                            " bytes");
  }
  std::string edited;
  edited.reserve(static_cast<size_t>(new_size));
  size_t cursor = 0;
  for (size_t at = text.find(old_string); at != std::string_view::npos; at = text.find(old_string, cursor)) {
    edited.append(text.substr(cursor, at - cursor));
    edited.append(new_string);
    cursor = at + old_string.size();
  }
  edited.append(text.substr(cursor));

  DSH_ASSIGN_OR_RETURN(UniqueFd dir,
                       OpenDirectory(root.get(), where.below.parent_path(), /*create=*/false, path));
  Result<bool> replaced = ReplaceFile(dir.get(), where.below.filename().string(), edited, &file.stat, path);
  if (!replaced.ok()) return replaced.status();
  std::string shown = ShownPath(roots, where.path);
  Diff diff = UnifiedDiff(shown, text, old_string, new_string, replace_all, limits.max_line_chars);
  return Json{{"path", std::move(shown)},
              {"replacements", found},
              {"first_changed_line", diff.first_changed_line},
              {"diff", std::move(diff.text)}};
}

}  // namespace dsh::workspace
