#include "plugins/sessions/sessions_command.h"

#include <algorithm>
#include <charconv>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/schema.h"

namespace dsh::plugins::sessions {
namespace {

using host::CommandResult;
using host::CommandToken;
using Done = host::CommandRegistry::Done;

constexpr std::string_view kStatusUsage = "/sessions status [SESSION_ID] [--recent N]";
constexpr std::string_view kReadUsage = "/sessions read SESSION_ID [--offset N] [--limit N]";
constexpr std::string_view kCreateUsage =
    "/sessions create PROMPT [--preset ID] [--provider PROVIDER --model MODEL] [--effort LEVEL] [--cwd "
    "PATH]\n"
    "       /sessions create {JSON object: prompt, preset?, model?: {provider, model, reasoningEffort?}, "
    "cwd?}";
constexpr std::string_view kSendUsage = "/sessions send SESSION_ID MESSAGE [--mode steer|followup]";

// A status line is cut to this many characters of title.
constexpr size_t kMaxLabelWidth = 60;

std::string AllUsage() {
  return "usage: " + std::string(kStatusUsage) + "\n       " + std::string(kReadUsage) + "\n       " +
         std::string(kCreateUsage) + "\n       " + std::string(kSendUsage);
}

// A mistake in the shape of the command line: says what is wrong and how the
// subcommand is written.
Status Usage(std::string_view sub, const std::string& problem, std::string_view usage) {
  return InvalidArguments("/sessions " + std::string(sub) + ": " + problem +
                          "\nusage: " + std::string(usage));
}

// A subcommand's arguments: positionals in order and flag values by name
// (without the dashes). Every flag takes a value, as `--flag VALUE` or
// `--flag=VALUE`; flags and positionals may come in any order; after `--`
// everything is positional (for a MESSAGE or PROMPT starting with "--").
struct Parsed {
  std::vector<std::string> positionals;
  std::map<std::string, std::string, std::less<>> flags;

  const std::string* Flag(std::string_view name) const {
    auto it = flags.find(name);
    return it == flags.end() ? nullptr : &it->second;
  }
};

Result<Parsed> ParseArgs(const std::vector<CommandToken>& args, std::string_view sub, std::string_view usage,
                         std::initializer_list<std::string_view> known_flags, size_t max_positionals) {
  Parsed parsed;
  bool only_positionals = false;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i].value;
    if (only_positionals || arg.size() <= 2 || arg.compare(0, 2, "--") != 0) {
      if (!only_positionals && arg == "--") {
        only_positionals = true;
        continue;
      }
      if (parsed.positionals.size() == max_positionals) {
        return Usage(sub, "unexpected argument `" + arg + "` (quote an argument that contains spaces)",
                     usage);
      }
      parsed.positionals.push_back(arg);
      continue;
    }
    size_t eq = arg.find('=');
    std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    if (std::find(known_flags.begin(), known_flags.end(), name) == known_flags.end()) {
      return Usage(sub, "unknown flag `--" + name + "`", usage);
    }
    std::string value;
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i].value;
    } else {
      return Usage(sub, "`--" + name + "` needs a value", usage);
    }
    if (!parsed.flags.emplace(name, std::move(value)).second) {
      return Usage(sub, "`--" + name + "` is given more than once", usage);
    }
  }
  return parsed;
}

// A flag's value as a positive safe integer (what the tools accept), or
// `invalid_arguments` naming the flag.
Result<int64_t> PositiveInt(std::string_view sub, std::string_view flag, const std::string& text) {
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value <= 0 ||
      value > kMaxSafeInteger) {
    return InvalidArguments("/sessions " + std::string(sub) + ": `--" + std::string(flag) +
                            "` must be a positive integer (got \"" + text + "\")");
  }
  return value;
}

// Calls tool `name` as the command's caller and renders its result.
void CallTool(const agent::ToolRegistry& tools, std::string_view name, const host::CommandCall& call,
              const Json& args, std::string (*render)(const Json&), Done done) {
  agent::ToolContext ctx;
  ctx.session_id = call.session_id;
  ctx.client_time_zone = call.client_time_zone;
  ctx.agent_call = false;
  tools.Invoke(name, ctx, args, [render, done = std::move(done)](Result<Json> result) {
    if (!result.ok()) return done(result.status());
    std::string text = render(*result);
    done(CommandResult{std::move(text), std::move(result).value()});
  });
}

std::string AsText(const Json& value) {
  return value.is_string() ? value.get<std::string>() : DumpJson(value);
}

size_t CodePoints(std::string_view s) {
  return static_cast<size_t>(std::count_if(
      s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

// `s` cut to at most `max` code points, ending in "…" when cut.
std::string Truncate(const std::string& s, size_t max) {
  if (CodePoints(s) <= max) return s;
  size_t kept = 0;
  size_t i = 0;
  for (; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80 && kept++ == max - 1) break;
  }
  return s.substr(0, i) + "…";
}

std::string PadRight(const std::string& s, size_t width) {
  size_t n = CodePoints(s);
  return n >= width ? s : s + std::string(width - n, ' ');
}

// One aligned line per session: LABEL  STATUS  UPDATED_AT  [SESSION_ID], where
// LABEL is the title, or the session id when there is none (then the id is
// not repeated).
std::string RenderStatus(const Json& result) {
  const Json& sessions = result.contains("sessions") ? result["sessions"] : Json();
  if (!sessions.is_array()) return result.dump(2);
  if (sessions.empty()) return "No sessions.";
  struct Row {
    std::string label, status, updated_at, id;
  };
  std::vector<Row> rows;
  size_t label_w = 0, status_w = 0, updated_w = 0;
  for (const Json& s : sessions) {
    Row row;
    std::string id = s.value("session_id", "");
    std::string title = s.contains("title") && s["title"].is_string() ? s["title"].get<std::string>() : "";
    row.label = title.empty() ? id : Truncate(title, kMaxLabelWidth);
    row.id = title.empty() ? "" : id;
    row.status = s.value("status", "");
    row.updated_at = s.value("updated_at", "");
    label_w = std::max(label_w, CodePoints(row.label));
    status_w = std::max(status_w, row.status.size());
    updated_w = std::max(updated_w, row.updated_at.size());
    rows.push_back(std::move(row));
  }
  std::string out;
  for (const Row& row : rows) {
    std::string line = PadRight(row.label, label_w) + "  " + PadRight(row.status, status_w);
    if (updated_w > 0) line += "  " + PadRight(row.updated_at, updated_w);
    if (!row.id.empty()) line += "  " + row.id;
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += (out.empty() ? "" : "\n") + line;
  }
  return out;
}

// Message blocks as "role: text", a tool call as "assistant → tool
// NAME(ARGS)", a tool result as "tool NAME: RESULT", blank lines between,
// then the window footer. No line numbers.
std::string RenderRead(const Json& result) {
  const Json& messages = result.contains("messages") ? result["messages"] : Json();
  if (!messages.is_array()) return result.dump(2);
  std::vector<std::string> blocks;
  for (const Json& m : messages) {
    std::string role = m.value("role", "message");
    std::string content = m.contains("content") ? AsText(m["content"]) : "";
    if (role == "tool") {
      blocks.push_back("tool " + m.value("name", "?") + ": " + content);
      continue;
    }
    std::string block;
    if (!content.empty() || !m.contains("tool_calls")) block = role + ": " + content;
    if (m.contains("tool_calls") && m["tool_calls"].is_array()) {
      for (const Json& c : m["tool_calls"]) {
        std::string args = c.contains("arguments") ? AsText(c["arguments"]) : "";
        block += (block.empty() ? "" : "\n") + role + " → tool " + c.value("name", "?") + "(" + args + ")";
      }
    }
    blocks.push_back(std::move(block));
  }
  if (result.contains("footer") && result["footer"].is_string())
    blocks.push_back(result["footer"].get<std::string>());
  std::string out;
  for (const auto& b : blocks) out += (out.empty() ? "" : "\n\n") + b;
  return out;
}

std::string RenderJson(const Json& result) { return result.dump(2); }

void RunStatus(const agent::ToolRegistry& tools, const host::CommandInput& input,
               const host::CommandCall& call, Done done) {
  auto parsed = ParseArgs(input.args, "status", kStatusUsage, {"recent"}, 1);
  if (!parsed.ok()) return done(parsed.status());
  Json args = Json::object();
  if (!parsed->positionals.empty()) args["session_id"] = parsed->positionals[0];
  if (const std::string* recent = parsed->Flag("recent")) {
    if (args.contains("session_id")) {
      return done(Usage("status", "give SESSION_ID or `--recent`, not both", kStatusUsage));
    }
    auto n = PositiveInt("status", "recent", *recent);
    if (!n.ok()) return done(n.status());
    args["recent_n"] = *n;
  }
  CallTool(tools, "session_status", call, args, RenderStatus, std::move(done));
}

void RunRead(const agent::ToolRegistry& tools, const host::CommandInput& input, const host::CommandCall& call,
             Done done) {
  auto parsed = ParseArgs(input.args, "read", kReadUsage, {"offset", "limit"}, 1);
  if (!parsed.ok()) return done(parsed.status());
  if (parsed->positionals.empty()) return done(Usage("read", "missing SESSION_ID", kReadUsage));
  Json args = {{"session_id", parsed->positionals[0]}};
  for (const char* flag : {"offset", "limit"}) {
    if (const std::string* text = parsed->Flag(flag)) {
      auto n = PositiveInt("read", flag, *text);
      if (!n.ok()) return done(n.status());
      args[flag] = *n;
    }
  }
  CallTool(tools, "session_read", call, args, RenderRead, std::move(done));
}

// `create {JSON}`: the rest of the line is one JSON object, passed to
// session_create as its arguments (the tool rejects unknown fields). The
// object may be typed unquoted (`create {"prompt": "x"}`, taken verbatim from
// the line) or as one quoted argument (`create '{"prompt": "x"}'`, as the CLI
// sends it).
Result<Json> CreateJsonArgs(const host::CommandInput& input) {
  const CommandToken& first = input.args[1];
  std::string_view text;
  char lead = input.args_text[first.offset];
  if (lead == '{' || lead == '[') {
    text = std::string_view(input.args_text).substr(first.offset);
  } else if (input.args.size() == 2) {
    text = first.value;
  } else {
    return Usage("create", "the JSON form takes exactly one JSON object", kCreateUsage);
  }
  auto parsed = ParseJson(text);
  if (!parsed.ok()) {
    return Usage("create", "the JSON form must be one JSON object (" + parsed.status().message() + ")",
                 kCreateUsage);
  }
  if (!parsed->is_object()) return Usage("create", "the JSON form must be a JSON object", kCreateUsage);
  return std::move(parsed).value();
}

void RunCreate(const agent::ToolRegistry& tools, const host::CommandInput& input,
               const host::CommandCall& call, Done done) {
  if (input.args.size() > 1) {
    const std::string& first = input.args[1].value;
    if (!first.empty() && (first[0] == '{' || first[0] == '[')) {
      auto args = CreateJsonArgs(input);
      if (!args.ok()) return done(args.status());
      return CallTool(tools, "session_create", call, *args, RenderJson, std::move(done));
    }
  }
  auto parsed =
      ParseArgs(input.args, "create", kCreateUsage, {"preset", "provider", "model", "effort", "cwd"}, 1);
  if (!parsed.ok()) return done(parsed.status());
  if (parsed->positionals.empty()) return done(Usage("create", "missing PROMPT", kCreateUsage));
  Json args = {{"prompt", parsed->positionals[0]}};
  if (const std::string* preset = parsed->Flag("preset")) args["preset"] = *preset;
  const std::string* provider = parsed->Flag("provider");
  const std::string* model = parsed->Flag("model");
  const std::string* effort = parsed->Flag("effort");
  if ((provider == nullptr) != (model == nullptr)) {
    return done(
        Usage("create", "malformed model arguments: `--provider` and `--model` go together", kCreateUsage));
  }
  if (effort != nullptr && provider == nullptr) {
    return done(Usage("create", "malformed model arguments: `--effort` needs `--provider` and `--model`",
                      kCreateUsage));
  }
  if (provider != nullptr) {
    args["model"] = {{"provider", *provider}, {"model", *model}};
    if (effort != nullptr) args["model"]["reasoningEffort"] = *effort;
  }
  if (const std::string* cwd = parsed->Flag("cwd")) args["cwd"] = *cwd;
  CallTool(tools, "session_create", call, args, RenderJson, std::move(done));
}

void RunSend(const agent::ToolRegistry& tools, const host::CommandInput& input, const host::CommandCall& call,
             Done done) {
  auto parsed = ParseArgs(input.args, "send", kSendUsage, {"mode"}, 2);
  if (!parsed.ok()) return done(parsed.status());
  if (parsed->positionals.size() < 2) {
    return done(Usage("send",
                      parsed->positionals.empty() ? "missing SESSION_ID and MESSAGE" : "missing MESSAGE",
                      kSendUsage));
  }
  Json args = {{"session_id", parsed->positionals[0]}, {"message", parsed->positionals[1]}};
  if (const std::string* mode = parsed->Flag("mode")) args["mode"] = *mode;
  CallTool(tools, "session_send", call, args, RenderJson, std::move(done));
}

}  // namespace

Status RegisterSessionsCommand(host::CommandRegistry& commands, agent::ToolRegistry& tools) {
  return commands.Register(
      "sessions", "Inspect sessions, read their conversations, create sessions and send them messages.",
      [&tools](const host::CommandInput& input, const host::CommandCall& call, Done done) {
        if (input.args.empty()) return done(InvalidArguments("/sessions: missing subcommand\n" + AllUsage()));
        const std::string& sub = input.args[0].value;
        if (sub == "status") return RunStatus(tools, input, call, std::move(done));
        if (sub == "read") return RunRead(tools, input, call, std::move(done));
        if (sub == "create") return RunCreate(tools, input, call, std::move(done));
        if (sub == "send") return RunSend(tools, input, call, std::move(done));
        done(InvalidArguments("/sessions: unknown subcommand `" + sub + "`\n" + AllUsage()));
      });
}

}  // namespace dsh::plugins::sessions
