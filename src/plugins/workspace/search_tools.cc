#include "plugins/workspace/search_tools.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <utility>

#include "plugins/workspace/process.h"

namespace dsh::workspace {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxLineBytes = 400;
constexpr size_t kMaxQuotedOutput = 600;
// Output kept of rg: enough for the requested entries whatever their
// length, within bounds.
constexpr int64_t kMinOutputCap = int64_t{1} << 20;
constexpr int64_t kMaxOutputCap = int64_t{64} << 20;
constexpr int64_t kMaxCount = 100'000;  // of max_entries and max_results

bool IsUnder(const fs::path& path, const fs::path& dir) {
  const std::string& p = path.native();
  const std::string& d = dir.native();
  if (d == "/") return true;
  return p == d || (p.size() > d.size() && p.starts_with(d) && p[d.size()] == '/');
}

std::string Quote(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  if (text.size() > kMaxQuotedOutput) return std::string(text.substr(0, kMaxQuotedOutput)) + "…";
  return std::string(text);
}

// How `path` is named to rg, run in `root`, so that it prints paths
// relative to `root` (behind a "./" that DisplayPath removes; the "./" also
// keeps a name starting with '-' from reading as an option) or absolute
// ones when `path` is outside `root`.
std::string PathArgument(const fs::path& path, const fs::path& root) {
  if (!IsUnder(path, root)) return path.string();
  fs::path rel = path.lexically_relative(root);
  return rel == "." ? "." : "./" + rel.string();
}

std::string DisplayPath(std::string raw) {
  if (raw.starts_with("./")) raw.erase(0, 2);
  return raw;
}

class HiddenPaths {
 public:
  HiddenPaths(const std::vector<fs::path>& hidden, fs::path root) : root_(std::move(root)) {
    for (const fs::path& h : hidden) {
      std::error_code ec;
      fs::path canonical = fs::weakly_canonical(fs::absolute(h), ec);
      paths_.push_back(ec ? fs::absolute(h).lexically_normal() : canonical);
    }
  }
  // `display` as DisplayPath made it.
  bool Hides(const std::string& display) const {
    if (paths_.empty()) return false;
    fs::path absolute = fs::path(display).is_absolute() ? fs::path(display) : root_ / display;
    absolute = absolute.lexically_normal();
    return std::any_of(paths_.begin(), paths_.end(), [&](const fs::path& h) { return IsUnder(absolute, h); });
  }

 private:
  fs::path root_;
  std::vector<fs::path> paths_;
};

Result<ProcessResult> RunRipgrep(std::vector<std::string> args, const fs::path& root,
                                 std::chrono::milliseconds timeout, int64_t output_cap) {
  ProcessSpec spec;
  spec.argv = {"rg",    "--no-config", "--no-messages", "--no-require-git", "--hidden", "--glob",
               "!.git", "--sort",      "path"};
  spec.argv.insert(spec.argv.end(), std::make_move_iterator(args.begin()),
                   std::make_move_iterator(args.end()));
  spec.cwd = root;
  const char* host_path = std::getenv("PATH");
  spec.env = {std::string("PATH=") +
              (host_path != nullptr && *host_path != '\0' ? host_path : "/usr/local/bin:/usr/bin:/bin")};
  spec.timeout = timeout;
  spec.output_cap = std::clamp(output_cap, kMinOutputCap, kMaxOutputCap);
  return RunProcess(spec);
}

// The complete lines of the head of `r.output`: all of them when nothing
// was cut, else those before the marker but the last (cut short).
std::vector<std::string_view> CompleteLines(const ProcessResult& r) {
  std::string_view text = r.output;
  if (r.truncated) {
    size_t marker = text.find("\n… [");
    text = text.substr(0, marker == std::string_view::npos ? 0 : marker + 1);
    size_t last_newline = text.rfind('\n');
    text = text.substr(0, last_newline == std::string_view::npos ? 0 : last_newline + 1);
  }
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    size_t newline = text.find('\n');
    lines.push_back(text.substr(0, newline));
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
  }
  return lines;
}

Status RipgrepFailure(const ProcessResult& r, const std::string& what) {
  if (r.output.find("error parsing glob") != std::string::npos) {
    return InvalidArguments("invalid glob: " + Quote(r.output));
  }
  return Status(codes::kUnavailable,
                what + " failed" + (r.exit_code ? " (exit code " + std::to_string(*r.exit_code) + ")" : "") +
                    ": " + Quote(r.output));
}

std::string DecodeBase64(std::string_view in) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  uint32_t bits = 0;
  int count = 0;
  for (char c : in) {
    int v = value(c);
    if (v < 0) continue;  // '=' padding
    bits = (bits << 6) | static_cast<uint32_t>(v);
    count += 6;
    if (count >= 8) {
      count -= 8;
      out.push_back(static_cast<char>((bits >> count) & 0xFF));
    }
  }
  return out;
}

// rg --json spells data as {"text": "..."} or, when not UTF-8, {"bytes": base64}.
std::string ArbitraryData(const Json& data) {
  if (const std::string* text = StringMember(data, "text")) return *text;
  if (const std::string* bytes = StringMember(data, "bytes")) return DecodeBase64(*bytes);
  return "";
}

std::string CutLine(std::string line) {
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  if (line.size() <= kMaxLineBytes) return line;
  size_t end = kMaxLineBytes;
  while (end > 0 && (static_cast<unsigned char>(line[end]) & 0xC0) == 0x80) --end;  // not inside a character
  line.resize(end);
  return line + "…";
}

}  // namespace

Result<Json> ListFiles(const ListRequest& request) {
  if (request.pattern && request.pattern->empty()) return InvalidArguments("pattern must not be empty");
  if (request.max_entries < 1 || request.max_entries > kMaxCount) {
    return InvalidArguments("max_entries must be between 1 and " + std::to_string(kMaxCount));
  }
  std::vector<std::string> args = {"--files"};
  if (request.pattern) args.insert(args.end(), {"--glob", *request.pattern});
  args.insert(args.end(), {"--", PathArgument(request.dir, request.display_root)});
  DSH_ASSIGN_OR_RETURN(ProcessResult r, RunRipgrep(std::move(args), request.display_root, request.timeout,
                                                   request.max_entries * 2048));
  // 1: no file. 2 with paths printed: some could not be read.
  if (!r.timed_out && r.exit_code != 0 && r.exit_code != 1 &&
      (r.exit_code != 2 || r.output_lines == 0 || r.output.find("error parsing glob") != std::string::npos)) {
    return RipgrepFailure(r, "rg --files");
  }

  HiddenPaths hidden(request.hidden, request.display_root);
  std::vector<std::string_view> lines = CompleteLines(r);
  Json files = Json::array();
  int64_t not_listed = r.output_lines - static_cast<int64_t>(lines.size());  // those cut from the output
  for (std::string_view line : lines) {
    std::string path = DisplayPath(std::string(line));
    if (hidden.Hides(path)) continue;
    if (static_cast<int64_t>(files.size()) < request.max_entries) {
      files.push_back(std::move(path));
    } else {
      ++not_listed;
    }
  }
  Json answer = {{"files", std::move(files)}, {"more", std::max<int64_t>(not_listed, 0)}};
  if (r.timed_out) answer["timed_out"] = true;
  return answer;
}

Result<Json> Grep(const GrepRequest& request) {
  if (request.pattern.empty()) return InvalidArguments("pattern must not be empty");
  if (request.glob && request.glob->empty()) return InvalidArguments("glob must not be empty");
  if (request.max_results < 1 || request.max_results > kMaxCount) {
    return InvalidArguments("max_results must be between 1 and " + std::to_string(kMaxCount));
  }
  // One more per file than can be shown, so that a file with too many says so.
  std::vector<std::string> args = {"--json", "--max-count", std::to_string(request.max_results + 1)};
  if (request.ignore_case) args.push_back("--ignore-case");
  if (request.glob) args.insert(args.end(), {"--glob", *request.glob});
  args.insert(args.end(), {"--", request.pattern, PathArgument(request.path, request.display_root)});
  DSH_ASSIGN_OR_RETURN(ProcessResult r, RunRipgrep(std::move(args), request.display_root, request.timeout,
                                                   request.max_results * (int64_t{16} << 10)));

  HiddenPaths hidden(request.hidden, request.display_root);
  Json matches = Json::array();
  bool more = r.truncated;
  bool any_json = false;
  std::string messages;  // what rg said besides its JSON
  for (std::string_view line : CompleteLines(r)) {
    Result<Json> parsed =
        line.starts_with('{') ? ParseJson(line) : Result<Json>(Status(codes::kInvalidJson, ""));
    if (!parsed.ok()) {
      messages.append(line).append("\n");
      continue;
    }
    any_json = true;
    const Json& event = *parsed;
    const std::string* type = StringMember(event, "type");
    if (type == nullptr || *type != "match" || !event.contains("data") || !event["data"].is_object())
      continue;
    const Json& data = event["data"];
    std::string path = DisplayPath(ArbitraryData(data.value("path", Json::object())));
    if (hidden.Hides(path)) continue;
    if (static_cast<int64_t>(matches.size()) >= request.max_results) {
      more = true;
      break;
    }
    const Json& number = data.value("line_number", Json());
    matches.push_back({{"path", std::move(path)},
                       {"line", number.is_number_integer() ? number.get<int64_t>() : 0},
                       {"text", CutLine(ArbitraryData(data.value("lines", Json::object())))}});
  }
  if (!any_json && !r.timed_out) {
    // Nothing searched: rg refused its arguments (with --no-messages it
    // says nothing about unreadable files), or could not run at all.
    if (r.output.find("error parsing glob") != std::string::npos) return RipgrepFailure(r, "rg");
    if (r.exit_code == 2 && !messages.empty()) return InvalidArguments("invalid pattern: " + Quote(messages));
    return RipgrepFailure(r, "rg");
  }
  Json answer = {{"matches", std::move(matches)}, {"truncated", more}};
  if (r.timed_out) answer["timed_out"] = true;
  return answer;
}

}  // namespace dsh::workspace
