#include "app/loop_command.h"

#include <algorithm>
#include <cctype>
#include <memory>
#include <ostream>
#include <vector>

#include "app/host_client.h"
#include "time/rfc3339.h"

namespace dsh::app {
namespace {

constexpr size_t kPromptPreview = 50;  // characters (code points)

// Column width in characters: UTF-8 continuation bytes do not count.
size_t Width(const std::string& s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

// The prompt on one line, cut to kPromptPreview characters with "…".
std::string Preview(const std::string& prompt) {
  std::string flat;
  for (char c : prompt) flat += (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
  if (Width(flat) <= kPromptPreview) return flat;
  std::string out;
  size_t chars = 0;
  for (char c : flat) {
    if ((c & 0xC0) != 0x80 && ++chars > kPromptPreview - 1) break;
    out += c;
  }
  return out + "…";
}

std::string Instant(const Json& v) {
  return v.is_number_integer() ? FormatRfc3339Utc(FromUnixMillis(v.get<int64_t>())) : "-";
}

std::string Text(const Json& j, const char* key, const char* fallback = "-") {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

// Rows of cells, each column padded to its widest cell (the last one not).
std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], Width(row[i]));
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - Width(row[i]) + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::optional<std::string> Home(const std::string& home) {
  return home.empty() ? std::nullopt : std::optional(home);
}

int Fail(const Status& st, CommandContext& ctx) {
  ctx.err << "error: " << st.ToString() << "\n";
  return ExitCodeFor(st);
}

// Percent-encodes one path segment.
std::string EncodeSegment(const std::string& s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

struct CommonFlags {
  std::string home;
  std::string as;
};

int RunCreate(const LoopCreateFlags& flags, const std::string& home, CommandContext& ctx) {
  auto body = LoopCreateBody(flags);
  if (!body.ok()) return Fail(body.status(), ctx);
  auto client = HostClient::ForProfile(Home(home));
  if (!client.ok()) return Fail(client.status(), ctx);
  auto res = client->Post("/api/tools/loop_create", *body);
  if (!res.ok()) return Fail(res.status(), ctx);
  ctx.out << (*res)["result"].dump(2) << "\n";
  return kExitOk;
}

int RunList(const std::string& selector, const CommonFlags& flags, CommandContext& ctx) {
  auto client = HostClient::ForProfile(Home(flags.home));
  if (!client.ok()) return Fail(client.status(), ctx);
  Json body = {{"args", {{"session_id", selector}}}};
  if (!flags.as.empty()) body["session_id"] = flags.as;
  auto res = client->Post("/api/tools/loop_list", body);
  if (!res.ok()) return Fail(res.status(), ctx);
  ctx.out << FormatLoopList((*res)["result"]);
  return kExitOk;
}

int RunDelete(const std::string& loop_id, const CommonFlags& flags, CommandContext& ctx) {
  auto client = HostClient::ForProfile(Home(flags.home));
  if (!client.ok()) return Fail(client.status(), ctx);
  // Any loop can be deleted from anywhere: the call needs no calling session.
  auto res = client->Post("/api/tools/loop_delete", Json{{"args", {{"loop_id", loop_id}}}});
  if (!res.ok()) return Fail(res.status(), ctx);
  ctx.out << "deleted " << loop_id << "\n";
  return kExitOk;
}

int RunRuns(const std::string& loop_id, std::optional<int64_t> limit, const CommonFlags& flags,
            CommandContext& ctx) {
  auto client = HostClient::ForProfile(Home(flags.home));
  if (!client.ok()) return Fail(client.status(), ctx);
  std::string path = "/api/loops/" + EncodeSegment(loop_id) + "/runs";
  if (limit) path += "?limit=" + std::to_string(*limit);
  auto res = client->Get(path);
  if (!res.ok()) return Fail(res.status(), ctx);
  ctx.out << FormatLoopRuns((*res)["runs"]);
  return kExitOk;
}

}  // namespace

Result<Json> LoopCreateBody(const LoopCreateFlags& flags) {
  int kinds = int(flags.every.has_value()) + int(flags.after.has_value()) + int(flags.cron.has_value());
  if (kinds != 1) return InvalidArguments("give exactly one of --every SECONDS, --after SECONDS, --cron EXPR");
  if (flags.tz && !flags.cron) return InvalidArguments("--tz only goes with --cron");
  Json schedule;
  if (flags.every) {
    schedule = {{"kind", "every"}, {"every_seconds", *flags.every}};
  } else if (flags.after) {
    schedule = {{"kind", "after"}, {"after_seconds", *flags.after}};
  } else {
    schedule = {{"kind", "cron"}, {"expr", *flags.cron}};
    if (flags.tz) schedule["tz"] = *flags.tz;
  }
  Json args = {{"prompt", flags.prompt}, {"schedule", std::move(schedule)}};
  if (flags.session) args["session_id"] = *flags.session;
  if (flags.preset) args["preset"] = *flags.preset;
  Json body = {{"args", std::move(args)}};
  if (flags.as) body["session_id"] = *flags.as;
  return body;
}

std::string DescribeSchedule(const Json& s) {
  std::string kind = Text(s, "kind", "?");
  auto seconds = [&](const char* key) {
    auto it = s.find(key);
    return it != s.end() && it->is_number_integer() ? std::to_string(it->get<int64_t>()) : "?";
  };
  if (kind == "every") return "every " + seconds("every_seconds") + " s";
  if (kind == "after") return "after " + seconds("after_seconds") + " s";
  if (kind == "cron") {
    std::string out = "cron " + Text(s, "expr", "?");
    if (s.contains("tz") && s["tz"].is_string()) out += " (" + s["tz"].get<std::string>() + ")";
    return out;
  }
  return s.dump();
}

std::string FormatLoopList(const Json& views) {
  if (!views.is_array() || views.empty()) return "no active loops\n";
  std::vector<std::vector<std::string>> rows;
  for (const Json& v : views) {
    rows.push_back({Text(v, "loop_id"), Text(v, "state"),
                    DescribeSchedule(v.contains("schedule") ? v["schedule"] : Json::object()), Text(v, "session_id"),
                    Instant(v.contains("next_at") ? v["next_at"] : Json()), Preview(Text(v, "prompt", ""))});
  }
  return Table(rows);
}

std::string FormatLoopRuns(const Json& runs) {
  if (!runs.is_array() || runs.empty()) return "no runs\n";
  std::vector<std::vector<std::string>> rows;
  for (const Json& r : runs) {
    std::vector<std::string> row = {Instant(r.contains("nominal_at") ? r["nominal_at"] : Json()),
                                    Text(r, "result"), Text(r, "target_session_id"),
                                    "attempts " + std::to_string(r.value("attempts", int64_t{0}))};
    std::string extra;
    if (int64_t skipped = r.value("skipped", int64_t{0}); skipped > 0) {
      extra += "skipped " + std::to_string(skipped) + (r.value("skipped_capped", false) ? "+" : "");
    }
    for (const char* key : {"error", "note"}) {
      if (r.contains(key) && r[key].is_string()) {
        extra += (extra.empty() ? "" : "; ") + std::string(key) + ": " + r[key].get<std::string>();
      }
    }
    if (!extra.empty()) row.push_back(extra);
    rows.push_back(std::move(row));
  }
  return Table(rows);
}

void AddLoopCommand(CLI::App& root, CommandContext& ctx) {
  CLI::App* loop = root.add_subcommand("loop", "Create, list and delete loops (scheduled prompts) on the running host");
  loop->require_subcommand(1);

  auto create_flags = std::make_shared<LoopCreateFlags>();
  auto create_common = std::make_shared<CommonFlags>();
  CLI::App* create = loop->add_subcommand("create", "Create a loop: deliver PROMPT to a session on a schedule");
  create->add_option("prompt", create_flags->prompt, "What to deliver at each occurrence")->required();
  create->add_option("--every", create_flags->every, "Every SECONDS");
  create->add_option("--after", create_flags->after, "Once, after SECONDS");
  create->add_option("--cron", create_flags->cron, "A five-field cron rule, e.g. \"0 9 * * *\"");
  create->add_option("--tz", create_flags->tz, "IANA time zone of --cron (default: the host's)");
  create->add_option("--session", create_flags->session,
                     "Target: a session id, \"self\" (the global interface session) or \"new\" (default: --as)");
  create->add_option("--preset", create_flags->preset, "Preset of the fresh sessions of --session new");
  create->add_option("--as", create_common->as, "Calling session id (default: a root call)");
  create->add_option("--home", create_common->home, "Profile directory (default $DSH_HOME, else ~/.dsh)");
  create->callback([create_flags, create_common, &ctx] {
    LoopCreateFlags flags = *create_flags;
    if (!create_common->as.empty()) flags.as = create_common->as;
    ctx.exit_code = RunCreate(flags, create_common->home, ctx);
  });

  auto list_selector = std::make_shared<std::string>("global");
  auto list_common = std::make_shared<CommonFlags>();
  CLI::App* list = loop->add_subcommand("list", "List active loops");
  list->add_option("--session", *list_selector, "\"global\" (default: every loop) or a target session id");
  list->add_option("--as", list_common->as, "Calling session id (default: a root call)");
  list->add_option("--home", list_common->home, "Profile directory (default $DSH_HOME, else ~/.dsh)");
  list->callback([list_selector, list_common, &ctx] { ctx.exit_code = RunList(*list_selector, *list_common, ctx); });

  auto delete_id = std::make_shared<std::string>();
  auto delete_common = std::make_shared<CommonFlags>();
  CLI::App* del = loop->add_subcommand("delete", "Delete a loop by id");
  del->add_option("loop_id", *delete_id, "The loop")->required();
  del->add_option("--home", delete_common->home, "Profile directory (default $DSH_HOME, else ~/.dsh)");
  del->callback([delete_id, delete_common, &ctx] { ctx.exit_code = RunDelete(*delete_id, *delete_common, ctx); });

  auto runs_id = std::make_shared<std::string>();
  auto runs_limit = std::make_shared<std::optional<int64_t>>();
  auto runs_common = std::make_shared<CommonFlags>();
  CLI::App* runs = loop->add_subcommand("runs", "A loop's run history, newest first");
  runs->add_option("loop_id", *runs_id, "The loop")->required();
  runs->add_option("--limit", *runs_limit, "At most N runs (default 50, at most 1000)");
  runs->add_option("--home", runs_common->home, "Profile directory (default $DSH_HOME, else ~/.dsh)");
  runs->callback(
      [runs_id, runs_limit, runs_common, &ctx] { ctx.exit_code = RunRuns(*runs_id, *runs_limit, *runs_common, ctx); });
}

}  // namespace dsh::app
