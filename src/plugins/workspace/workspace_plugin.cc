#include "plugins/workspace/workspace_plugin.h"

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <spdlog/spdlog.h>

#include <chrono>
#include <utility>

#include "base/schema.h"
#include "host/host.h"
#include "plugins/workspace/file_tools.h"
#include "plugins/workspace/sandbox.h"
#include "plugins/workspace/search_tools.h"
#include "plugins/workspace/web_fetch.h"
#include "plugins/workspace/workspace_paths.h"

namespace dsh::plugins::workspace {
namespace {

using agent::Permission;
using agent::ToolContext;
namespace ws = dsh::workspace;

// What the summary of a call for a person quotes at most.
constexpr size_t kSummaryChars = 300;
constexpr size_t kDetailChars = 4000;

std::string Cut(std::string text, size_t max) {
  if (text.size() <= max) return text;
  size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return text.substr(0, cut) + "…";
}

// `text` with every line prefixed (a diff's side); a final newline ends the
// last line rather than starting an empty one.
std::string Prefixed(const std::string& text, const char* prefix) {
  std::string out;
  size_t start = 0;
  while (start < text.size() || (start == 0 && text.empty())) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    out += prefix + text.substr(start, end - start) + "\n";
    start = end + 1;
  }
  return out;
}

// The pool the tools' blocking work runs on; joined when the last tool goes.
struct Pool {
  explicit Pool(size_t threads) : pool(threads) {}
  ~Pool() { pool.join(); }
  boost::asio::thread_pool pool;
};

struct Shared {
  WorkspaceOptions options;
};

// A tool whose work runs on the pool, after its call's scope is known.
template <typename Args>
class WorkspaceTool : public agent::TypedTool<Args> {
 public:
  using Work = std::function<Result<Json>(const ToolContext&, const CallScope&, const Args&, const Shared&)>;
  using Describe = std::function<Json(const Json& args)>;

  WorkspaceTool(std::string name, ObjectSchema<Args> schema, Permission permission, bool needs_cwd,
                std::shared_ptr<Pool> pool, std::shared_ptr<const Shared> shared, Work work, Describe describe)
      : agent::TypedTool<Args>(std::move(name), std::move(schema)),
        permission_(permission),
        needs_cwd_(needs_cwd),
        pool_(std::move(pool)),
        shared_(std::move(shared)),
        work_(std::move(work)),
        describe_(std::move(describe)) {}

  bool needs_cwd() const override { return needs_cwd_; }
  Permission default_permission() const override { return permission_; }
  Json DescribeCall(const Json& args) const override {
    return args.is_object() ? describe_(args) : agent::Tool::DescribeCall(args);
  }

 protected:
  void Run(const ToolContext& ctx, Args args, agent::Tool::Done done) override {
    // The job holds what it reads, not the pool (whose last owner joins it).
    boost::asio::post(pool_->pool, [ctx, args = std::move(args), done = std::move(done), shared = shared_,
                                    work = work_, needs = needs_cwd_, name = this->name()]() mutable {
      Result<CallScope> scope = shared->options.scope ? shared->options.scope(ctx) : Result<CallScope>(CallScope{});
      if (!scope.ok()) return done(scope.status().WithContext(name));
      if (needs && !scope->cwd) {
        return done(InvalidArguments(
            name + " works in a session's directory, and " +
            (ctx.session_id ? "session " + *ctx.session_id + " has none (create it with a cwd)"
                            : std::string("this call names no session (give session_id)"))));
      }
      Result<Json> r = work(ctx, *scope, args, *shared);
      done(r.ok() ? std::move(r) : Result<Json>(r.status().WithContext(name)));
    });
  }

 private:
  Permission permission_;
  bool needs_cwd_;
  std::shared_ptr<Pool> pool_;
  std::shared_ptr<const Shared> shared_;
  Work work_;
  Describe describe_;
};

ws::Roots RootsOf(const CallScope& scope) { return ws::Roots{*scope.cwd, scope.roots}; }

// The profile directory is never a tool's, even inside a session's cwd
// (its database, token and keys): refused like any path outside.
Status CheckNotHidden(const std::filesystem::path& path, const Shared& shared, const std::string& shown) {
  for (const auto& hidden : shared.options.hidden) {
    std::error_code ec;
    std::filesystem::path h = std::filesystem::weakly_canonical(hidden, ec);
    if (ec) h = hidden;
    auto rel = path.lexically_relative(h);
    if (!rel.empty() && *rel.begin() != "..") {
      return Status(ws::kPathOutsideWorkspace,
                    "`" + shown + "` is inside dsh's profile directory, which no tool may touch");
    }
  }
  return Status::Ok();
}

// The checks of a file a tool reads or writes, before it does.
Status CheckFile(const CallScope& scope, const std::string& path, ws::Access access, const Shared& shared) {
  DSH_ASSIGN_OR_RETURN(ws::Location loc, ws::Locate(RootsOf(scope), path, access));
  return CheckNotHidden(loc.path, shared, path);
}

// A directory argument resolved for list and grep: the directory, and the
// root its answers' paths are relative to (the cwd, or another root).
struct Place {
  std::filesystem::path path;
  std::filesystem::path display_root;
};
Result<Place> PlaceOf(const CallScope& scope, const std::optional<std::string>& path, const Shared& shared) {
  DSH_ASSIGN_OR_RETURN(ws::Location loc, ws::Locate(RootsOf(scope), path.value_or("."), ws::Access::kRead));
  DSH_RETURN_IF_ERROR(CheckNotHidden(loc.path, shared, path.value_or(".")));
  std::error_code ec;
  std::filesystem::path cwd = std::filesystem::canonical(*scope.cwd, ec);
  bool in_cwd = !ec && loc.root == cwd;
  return Place{loc.path, in_cwd ? cwd : loc.root};
}

struct ReadArgs {
  std::string path;
  std::optional<int64_t> offset;
  std::optional<int64_t> limit;
};
struct WriteArgs {
  std::string path;
  std::string content;
};
struct EditArgs {
  std::string path;
  std::string old_string;
  std::string new_string;
  std::optional<bool> replace_all;
};
struct ListArgs {
  std::optional<std::string> path;
  std::optional<std::string> pattern;
};
struct GrepArgs {
  std::string pattern;
  std::optional<std::string> path;
  std::optional<std::string> glob;
  std::optional<bool> ignore_case;
  std::optional<int64_t> max_results;
};
struct BashArgs {
  std::string command;
  std::optional<int64_t> timeout_seconds;
};
struct FetchArgs {
  std::string url;
  std::optional<int64_t> max_bytes;
};

constexpr int64_t kDefaultBashSeconds = 120;
constexpr int64_t kMaxBashSeconds = 600;
constexpr int64_t kBashOutputCap = 64 << 10;
constexpr int64_t kMaxFetchBytes = 10 << 20;

std::string PathOf(const Json& args) { return args.value("path", std::string(".")); }

}  // namespace

Status RegisterWorkspaceTools(agent::ToolRegistry& tools, WorkspaceOptions options) {
  auto pool = std::make_shared<Pool>(std::max<size_t>(1, options.threads));
  auto shared = std::make_shared<const Shared>(Shared{std::move(options)});
  std::vector<std::shared_ptr<agent::Tool>> made;

  made.push_back(std::make_shared<WorkspaceTool<ReadArgs>>(
      "read",
      ObjectSchema<ReadArgs>("Read a text file of the session's directory: numbered lines, a window of them "
                             "(offset/limit), and the total.")
          .Field("path", &ReadArgs::path, "the file, relative to the session's directory (or absolute inside it)")
          .Optional("offset", &ReadArgs::offset, "the first line to show, from 1")
          .Optional("limit", &ReadArgs::limit, "how many lines (default 2000)", IntRule{.max = 100'000}),
      Permission::kAllow, true, pool, shared,
      [](const ToolContext&, const CallScope& scope, const ReadArgs& a, const Shared& s) -> Result<Json> {
        DSH_RETURN_IF_ERROR(CheckFile(scope, a.path, ws::Access::kRead, s));
        return ws::ReadFile(RootsOf(scope), a.path, a.offset, a.limit);
      },
      [](const Json& args) { return Json{{"summary", Cut("read " + PathOf(args), kSummaryChars)}}; }));

  made.push_back(std::make_shared<WorkspaceTool<WriteArgs>>(
      "write",
      ObjectSchema<WriteArgs>("Create or replace a file of the session's directory with `content` (parent "
                              "directories are created).")
          .Field("path", &WriteArgs::path, "the file, relative to the session's directory")
          .Field("content", &WriteArgs::content, "the whole new content", StringRule{.non_empty = false}),
      Permission::kAsk, true, pool, shared,
      [](const ToolContext&, const CallScope& scope, const WriteArgs& a, const Shared& s) -> Result<Json> {
        DSH_RETURN_IF_ERROR(CheckFile(scope, a.path, ws::Access::kWrite, s));
        return ws::WriteFile(RootsOf(scope), a.path, a.content);
      },
      [](const Json& args) {
        std::string content = args.value("content", std::string());
        return Json{{"summary", Cut("write " + PathOf(args) + " (" + std::to_string(content.size()) + " bytes)",
                                    kSummaryChars)},
                    {"detail", Cut(Prefixed(content, "+"), kDetailChars)}};
      }));

  made.push_back(std::make_shared<WorkspaceTool<EditArgs>>(
      "edit",
      ObjectSchema<EditArgs>("Replace exact text in a file of the session's directory. `old_string` must occur "
                             "exactly once unless replace_all is true.")
          .Field("path", &EditArgs::path, "the file, relative to the session's directory")
          .Field("old_string", &EditArgs::old_string, "the exact text to replace (with enough context to be unique)")
          .Field("new_string", &EditArgs::new_string, "its replacement", StringRule{.non_empty = false})
          .Optional("replace_all", &EditArgs::replace_all, "replace every occurrence (default false)"),
      Permission::kAsk, true, pool, shared,
      [](const ToolContext&, const CallScope& scope, const EditArgs& a, const Shared& s) -> Result<Json> {
        DSH_RETURN_IF_ERROR(CheckFile(scope, a.path, ws::Access::kWrite, s));
        return ws::EditFile(RootsOf(scope), a.path, a.old_string, a.new_string, a.replace_all.value_or(false));
      },
      [](const Json& args) {
        return Json{{"summary", Cut("edit " + PathOf(args) + (args.value("replace_all", false) ? " (every occurrence)" : ""),
                                    kSummaryChars)},
                    {"detail", Cut(Prefixed(args.value("old_string", std::string()), "-") +
                                       Prefixed(args.value("new_string", std::string()), "+"),
                                   kDetailChars)}};
      }));

  made.push_back(std::make_shared<WorkspaceTool<ListArgs>>(
      "list",
      ObjectSchema<ListArgs>("List the files under a directory of the session's directory (.gitignore respected).")
          .Optional("path", &ListArgs::path, "the directory (default: the session's directory)")
          .Optional("pattern", &ListArgs::pattern, "a glob the paths must match, such as **/*.cc"),
      Permission::kAllow, true, pool, shared,
      [](const ToolContext&, const CallScope& scope, const ListArgs& a, const Shared& s) -> Result<Json> {
        DSH_ASSIGN_OR_RETURN(Place place, PlaceOf(scope, a.path, s));
        ws::ListRequest request;
        request.dir = place.path;
        request.display_root = place.display_root;
        request.pattern = a.pattern;
        request.hidden = s.options.hidden;
        return ws::ListFiles(request);
      },
      [](const Json& args) { return Json{{"summary", Cut("list " + PathOf(args), kSummaryChars)}}; }));

  made.push_back(std::make_shared<WorkspaceTool<GrepArgs>>(
      "grep",
      ObjectSchema<GrepArgs>("Search files of the session's directory for a regular expression (ripgrep syntax): "
                             "matching lines with file and line number.")
          .Field("pattern", &GrepArgs::pattern, "the regular expression", StringRule{.non_empty = true})
          .Optional("path", &GrepArgs::path, "a file or directory to search (default: the session's directory)")
          .Optional("glob", &GrepArgs::glob, "only files matching this glob, such as *.py")
          .Optional("ignore_case", &GrepArgs::ignore_case, "case-insensitive (default false)")
          .Optional("max_results", &GrepArgs::max_results, "at most this many matches (default 200)",
                    IntRule{.max = 10'000}),
      Permission::kAllow, true, pool, shared,
      [](const ToolContext&, const CallScope& scope, const GrepArgs& a, const Shared& s) -> Result<Json> {
        DSH_ASSIGN_OR_RETURN(Place place, PlaceOf(scope, a.path, s));
        ws::GrepRequest request;
        request.pattern = a.pattern;
        request.path = place.path;
        request.display_root = place.display_root;
        request.glob = a.glob;
        request.ignore_case = a.ignore_case.value_or(false);
        if (a.max_results) request.max_results = *a.max_results;
        request.hidden = s.options.hidden;
        return ws::Grep(request);
      },
      [](const Json& args) {
        return Json{{"summary", Cut("grep " + args.value("pattern", std::string()) + " in " + PathOf(args),
                                    kSummaryChars)}};
      }));

  made.push_back(std::make_shared<WorkspaceTool<BashArgs>>(
      "bash",
      ObjectSchema<BashArgs>("Run a bash command in the session's directory, in a sandbox (no network unless the "
                             "preset allows it): exit code, combined output (long output keeps its head and tail), "
                             "duration.")
          .Field("command", &BashArgs::command, "the command line", StringRule{.non_empty = true})
          .Optional("timeout_seconds", &BashArgs::timeout_seconds, "kill it after this many seconds (default 120)",
                    IntRule{.max = kMaxBashSeconds}),
      Permission::kAsk, true, pool, shared,
      [](const ToolContext& ctx, const CallScope& scope, const BashArgs& a, const Shared& s) -> Result<Json> {
        ws::BashRequest request;
        request.command = a.command;
        request.cwd = *scope.cwd;
        request.timeout = std::chrono::seconds(a.timeout_seconds.value_or(kDefaultBashSeconds));
        request.output_cap = kBashOutputCap;
        request.cancel = ctx.cancel;
        ws::SandboxOptions sandbox;
        sandbox.enabled = s.options.sandbox;
        sandbox.network = scope.network;
        sandbox.extra_roots = scope.roots;
        sandbox.hidden = s.options.hidden;
        DSH_ASSIGN_OR_RETURN(ws::ProcessResult r, ws::RunBash(request, sandbox));
        Json out = {{"exit_code", r.exit_code ? Json(*r.exit_code) : Json(nullptr)},
                    {"output", r.output},
                    {"output_bytes", r.output_bytes},
                    {"truncated", r.truncated},
                    {"duration_ms", r.duration.count()}};
        if (r.signal) out["signal"] = *r.signal;
        if (r.timed_out) out["timed_out"] = true;
        if (r.cancelled) out["cancelled"] = true;
        return out;
      },
      [](const Json& args) { return Json{{"summary", Cut(args.value("command", std::string()), kSummaryChars)}}; }));

  made.push_back(std::make_shared<WorkspaceTool<FetchArgs>>(
      "fetch",
      ObjectSchema<FetchArgs>("Fetch an http(s) URL: status, content type and the body as text (HTML reduced to "
                              "readable text).")
          .Field("url", &FetchArgs::url, "the URL (http or https)")
          .Optional("max_bytes", &FetchArgs::max_bytes, "read at most this many bytes (default 2 MiB)",
                    IntRule{.max = kMaxFetchBytes}),
      Permission::kAsk, false, pool, shared,
      [](const ToolContext& ctx, const CallScope& scope, const FetchArgs& a, const Shared&) {
        ws::FetchOptions options;
        if (a.max_bytes) options.max_bytes = *a.max_bytes;
        options.allow_private = scope.fetch_private;
        options.cancel = ctx.cancel;
        return ws::Fetch(a.url, options);
      },
      [](const Json& args) { return Json{{"summary", Cut("GET " + args.value("url", std::string()), kSummaryChars)}}; }));

  for (auto& tool : made) DSH_RETURN_IF_ERROR(tools.Register(std::move(tool), kToolGroup));
  return Status::Ok();
}

Status RegisterWorkspacePlugin(host::Host& host) {
  WorkspaceOptions options;
  options.sandbox = host.config().tools.sandbox;
  options.hidden.push_back(host.profile().home());
  host::Host* h = &host;
  options.scope = [h](const ToolContext& ctx) -> Result<CallScope> {
    std::optional<std::string> cwd = ctx.cwd;
    std::optional<std::string> preset = ctx.preset;
    if (!ctx.agent_call && ctx.session_id) {  // a person's call naming a session: its header says
      DSH_ASSIGN_OR_RETURN(session::SessionHeader header, h->sessions().Get(*ctx.session_id));
      cwd = header.cwd;
      preset = header.preset;
    }
    CallScope scope;
    if (cwd && !cwd->empty()) scope.cwd = *cwd;
    const host::Config& config = h->config();
    const host::Config::Preset* p = config.FindPreset(preset.value_or(config.default_preset));
    if (p == nullptr) p = config.FindPreset(config.default_preset);
    if (p != nullptr) {
      for (const auto& root : p->roots) scope.roots.emplace_back(root);
      scope.network = p->network;
      scope.fetch_private = p->fetch_private;
    }
    return scope;
  };
  // Said at start, in the log and in GET /api/host (`sandbox`).
  Json sandbox = {{"state", "on"}};
  if (!options.sandbox) {
    sandbox = {{"state", "off"}, {"reason", "tools.sandbox is false in dsh.yml"}};
    spdlog::warn("tools.sandbox is false: the bash tool runs commands without bubblewrap, with the host's view of "
                 "the files (docs/TOOLS.md)");
  } else if (Status st = dsh::workspace::CheckSandbox(); !st.ok()) {
    sandbox = {{"state", "unavailable"}, {"reason", st.message()}};
    spdlog::warn("the bash tool cannot run here: {} (docs/TOOLS.md)", st.message());
  }
  host.AddHostInfo("sandbox", std::move(sandbox));
  return RegisterWorkspaceTools(host.tools(), std::move(options));
}

}  // namespace dsh::plugins::workspace
