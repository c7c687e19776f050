#include "host/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <utility>

#include "store/database.h"
#include "store/sqlite_connection.h"

namespace dsh::host {
namespace {

// A tiny schema for YAML: what keys exist and what their values must be.
struct Spec {
  enum class Kind { kMap, kMapOf, kList, kString, kInt, kBool } kind = Kind::kString;
  std::map<std::string, Spec> keys;   // kMap: the fixed keys
  std::shared_ptr<const Spec> item;   // kMapOf: every value; kList: every element
  std::optional<std::regex> pattern;  // kMapOf: every key; kString: the value
  std::string key_hint;               // kMapOf: "a preset id: use ..."
  std::vector<std::string> one_of;    // kString
  bool allow_empty = false;           // kString
  bool unique = false;                // kList: no element twice
  bool non_empty = false;             // kList: at least one element
  int64_t min = 0, max = 0;           // kInt
  std::string hint;                   // what a good value looks like
};

Spec Map(std::map<std::string, Spec> keys) {
  Spec s;
  s.kind = Spec::Kind::kMap;
  s.keys = std::move(keys);
  s.hint = "a mapping";
  return s;
}
// A mapping whose keys are names chosen by the user (`presets.ID`), each
// matching `key_pattern` (described by `key_hint`), with every value checked
// against `value`.
Spec MapOf(const char* key_pattern, std::string key_hint, Spec value, std::string hint) {
  Spec s;
  s.kind = Spec::Kind::kMapOf;
  s.item = std::make_shared<const Spec>(std::move(value));
  s.pattern = std::regex(key_pattern);
  s.key_hint = std::move(key_hint);
  s.hint = std::move(hint);
  return s;
}
// A list whose elements are all distinct and each checked against `item`.
Spec SetOf(Spec item, std::string hint) {
  Spec s;
  s.kind = Spec::Kind::kList;
  s.item = std::make_shared<const Spec>(std::move(item));
  s.unique = true;
  s.hint = std::move(hint);
  return s;
}
// A non-empty list of elements each checked against `item`.
Spec List(Spec item, std::string hint) {
  Spec s;
  s.kind = Spec::Kind::kList;
  s.item = std::make_shared<const Spec>(std::move(item));
  s.non_empty = true;
  s.hint = std::move(hint);
  return s;
}
Spec Str(std::vector<std::string> one_of = {}, std::string hint = "a non-empty string") {
  Spec s;
  s.one_of = std::move(one_of);
  s.hint = std::move(hint);
  return s;
}
Spec Matching(const char* pattern, std::string hint) {
  Spec s;
  s.pattern = std::regex(pattern);
  s.hint = std::move(hint);
  return s;
}
Spec Text() {
  Spec s;
  s.allow_empty = true;
  s.hint = "a string";
  return s;
}
Spec Int(int64_t min, int64_t max) {
  Spec s;
  s.kind = Spec::Kind::kInt;
  s.min = min;
  s.max = max;
  s.hint = "an integer from " + std::to_string(min) + " to " + std::to_string(max);
  return s;
}
Spec Bool() {
  Spec s;
  s.kind = Spec::Kind::kBool;
  s.hint = "true or false";
  return s;
}

// MCP server names are tool name prefixes (`NAME__TOOL`, at most 64 characters).
constexpr size_t kMaxMcpServerName = 32;

// Provider names, preset ids, workspace ids and tool groups.
constexpr const char* kIdPattern = "[a-z0-9_-]+";
constexpr const char* kIdHint = "lowercase letters, digits, `_` and `-`";
std::string IdHint(const char* what) { return std::string(what) + ": use " + kIdHint; }

const Spec& RootSpec() {
  static const Spec* spec = new Spec(Map({
      {"server", Map({{"host", Str({}, "a host name or IP address")},
                      {"port", Int(0, 65535)},
                      {"metrics_listen", Matching("(\\[[0-9a-fA-F:.]+\\]|[^:\\[\\]\\s]+):[0-9]{1,5}",
                                                  "HOST:PORT (say 127.0.0.1:9464)")},
                      {"public_url", Matching("https?://[^\\s#?]+", "an http:// or https:// URL without query or fragment")}})},
      {"storage", Map({{"synchronous", Str({"full", "normal"}, "full or normal")},
                       {"backend", Str({"sqlite", "postgres"}, "sqlite or postgres")},
                       {"url", Matching("(postgres|postgresql)://.*|.*=.*",
                                        "a PostgreSQL URL (postgresql://user@host:port/db) or libpq key=value string")},
                       {"max_gather_us", Int(0, 100'000)},
                       {"checkpoint", Map({{"background", Bool()},
                                           {"start_frames", Int(1, 1'000'000)},
                                           {"finish_frames", Int(0, 1'000'000)},
                                           {"max_frames", Int(1, 1'000'000)}})}})},
      {"retention", Map({{"inbox_days", Int(0, 36'500)},
                         {"loop_runs", Int(0, 1'000'000)},
                         {"loop_run_days", Int(0, 36'500)}})},
      {"log", Map({{"level", Str({"trace", "debug", "info", "warn", "error", "off"},
                                 "one of trace, debug, info, warn, error, off")}})},
      {"model", Matching("[a-z0-9_-]+/.+", "provider/model (say deepseek/deepseek-chat)")},
      {"providers",
       MapOf(kIdPattern, IdHint("provider name"),
             Map({
                 {"type", Str({"openai", "echo"}, "openai or echo")},
                 {"base_url", Matching("https?://.+", "a URL starting with http:// or https://")},
                 {"api_key_env",
                  Matching("[A-Z_][A-Z0-9_]*", "an environment variable name ([A-Z_][A-Z0-9_]*)")},
                 {"models", MapOf(".+", "model name: use a non-empty string",
                                  Map({{"reasoning_efforts", SetOf(Str(), "a list of distinct strings")}}),
                                  "a mapping of model names to their settings")},
             }),
             "a mapping of provider names to providers")},
      {"presets",
       MapOf(kIdPattern, IdHint("preset id"),
             Map({
                 {"system_prompt", Text()},
                 {"tools", SetOf(Matching("(mcp:)?[a-z0-9_-]+", std::string("a tool group name (") + kIdHint +
                                                                      ", or mcp:SERVER)"),
                                 "a list of distinct tool group names")},
                 {"permissions", MapOf("[A-Za-z0-9_-]{1,64}", "tool name: use letters, digits, `_` and `-`",
                                       Str({"allow", "ask", "deny"}, "allow, ask or deny"),
                                       "a mapping of tool names to allow, ask or deny")},
                 {"network", Bool()},
                 {"fetch_private", Bool()},
                 {"roots", SetOf(Matching("/.*", "an absolute path"), "a list of distinct absolute paths")},
             }),
             "a mapping of preset ids to presets")},
      {"default_preset", Matching(kIdPattern, std::string("a preset id (") + kIdHint + ")")},
      {"workspaces", MapOf(kIdPattern, IdHint("workspace id"), Matching("/.*", "an absolute path"),
                           "a mapping of workspace ids to absolute paths")},
      {"interface", Map({{"global_session", Bool()}})},
      {"notifications",
       Map({{"retry_for", Int(60, 30 * 86'400)},
            {"timeout", Int(1, 60)},
            {"webhooks", List(Map({{"name", Matching(kIdPattern, IdHint("an endpoint name"))},
                                   {"url", Matching("https?://.+", "a URL starting with http:// or https://")},
                                   {"format", Str({"standard", "slack", "discord", "ntfy"},
                                                  "standard, slack, discord or ntfy")},
                                   {"events", SetOf(Matching("[a-z*][a-z._*]*", "an event name"),
                                                    "a list of distinct event names")},
                                   {"secret", Str()},
                                   {"secret_file", Matching("/.*", "an absolute path")},
                                   {"allow_private", Bool()}}),
                              "a list of endpoints")}})},
      {"mcp",
       Map({{"servers",
             MapOf(kIdPattern, IdHint("MCP server name"),
                   Map({
                       {"command", List(Text(), "a list of strings: the program and its arguments")},
                       {"env", MapOf("[A-Za-z_][A-Za-z0-9_]*", "environment variable name", Text(),
                                     "a mapping of environment variable names to values")},
                       {"cwd", Matching("/.*", "an absolute path")},
                       {"url", Matching("https?://.+", "a URL starting with http:// or https://")},
                       {"headers", MapOf("[A-Za-z0-9-]+", "HTTP header name", Text(),
                                         "a mapping of HTTP header names to values")},
                       {"timeout", Int(1, 86'400)},
                       {"start_timeout", Int(1, 3'600)},
                   }),
                   "a mapping of MCP server names to servers")}})},
      {"agents", Map({{"idle_eviction", Int(1, 31'536'000)}, {"lease", Int(3, 3'600)}, {"max_steps", Int(1, 10'000)}})},
      {"tools", Map({{"approval_timeout", Int(1, 86'400)}, {"sandbox", Bool()}})},
      {"plugins", Map({{"loop", Map({{"enabled", Bool()}})},
                       {"sessions", Map({{"enabled", Bool()}})},
                       {"schedule", Map({{"enabled", Bool()}})},
                       {"time_context", Map({{"enabled", Bool()}})},
                       {"workspace", Map({{"enabled", Bool()}})}})},
  }));
  return *spec;
}

std::string Join(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }

Status Bad(const std::string& file, const std::string& path, const std::string& why) {
  return Status(codes::kInvalidConfig, file + ": `" + path + "` " + why);
}

std::string Shown(const YAML::Node& n) {
  if (n.IsScalar()) return "\"" + n.Scalar() + "\"";
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a mapping";
  return "nothing";
}

Status Check(const std::string& file, const std::string& path, const YAML::Node& node, const Spec& spec) {
  auto must_be = [&] {
    return Bad(file, path.empty() ? "(top level)" : path,
               "must be " + spec.hint + " (got " + Shown(node) + ")");
  };
  switch (spec.kind) {
    case Spec::Kind::kMap: {
      if (node.IsNull()) return Status::Ok();  // an empty section
      if (!node.IsMap()) return must_be();
      for (const auto& kv : node) {
        std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "?";
        auto it = spec.keys.find(key);
        if (it == spec.keys.end()) {
          std::string known;
          for (const auto& [k, _] : spec.keys) known += (known.empty() ? "" : ", ") + k;
          return Status(codes::kInvalidConfig,
                        file + ": unknown key `" + Join(path, key) + "` (known here: " + known + ")");
        }
        DSH_RETURN_IF_ERROR(Check(file, Join(path, key), kv.second, it->second));
      }
      return Status::Ok();
    }
    case Spec::Kind::kMapOf: {
      if (node.IsNull()) return Status::Ok();
      if (!node.IsMap()) return must_be();
      for (const auto& kv : node) {
        if (!kv.first.IsScalar() || !std::regex_match(kv.first.Scalar(), *spec.pattern)) {
          return Bad(file, Join(path, kv.first.IsScalar() ? kv.first.Scalar() : "?"),
                     "is not a valid " + spec.key_hint);
        }
        DSH_RETURN_IF_ERROR(Check(file, Join(path, kv.first.Scalar()), kv.second, *spec.item));
      }
      return Status::Ok();
    }
    case Spec::Kind::kList: {
      if (!node.IsSequence() || (spec.non_empty && node.size() == 0)) return must_be();
      std::set<std::string> seen;
      for (size_t i = 0; i < node.size(); ++i) {
        std::string item_path = path + "[" + std::to_string(i) + "]";
        DSH_RETURN_IF_ERROR(Check(file, item_path, node[i], *spec.item));
        if (spec.unique && node[i].IsScalar() && !seen.insert(node[i].Scalar()).second) {
          return Bad(file, path, "lists \"" + node[i].Scalar() + "\" twice");
        }
      }
      return Status::Ok();
    }
    case Spec::Kind::kString: {
      if (!node.IsScalar() || (node.Scalar().empty() && !spec.allow_empty)) return must_be();
      if (spec.pattern && !std::regex_match(node.Scalar(), *spec.pattern)) return must_be();
      if (!spec.one_of.empty() &&
          std::find(spec.one_of.begin(), spec.one_of.end(), node.Scalar()) == spec.one_of.end()) {
        return must_be();
      }
      return Status::Ok();
    }
    case Spec::Kind::kInt: {
      int64_t v = 0;
      if (!node.IsScalar() || !YAML::convert<int64_t>::decode(node, v) || v < spec.min || v > spec.max)
        return must_be();
      return Status::Ok();
    }
    case Spec::Kind::kBool: {
      bool b = false;
      if (!node.IsScalar() || !YAML::convert<bool>::decode(node, b)) return must_be();
      return Status::Ok();
    }
  }
  return Status::Ok();
}

// Later wins; mappings merge key by key.
YAML::Node Merge(const YAML::Node& base, const YAML::Node& over) {
  if (!base.IsMap() || !over.IsMap()) return YAML::Clone(over.IsNull() ? base : over);
  YAML::Node out = YAML::Clone(base);
  for (const auto& kv : over) {
    std::string key = kv.first.Scalar();
    out[key] = out[key] ? Merge(out[key], kv.second) : YAML::Clone(kv.second);
  }
  return out;
}

Result<YAML::Node> Parse(const std::string& name, const std::string& text) {
  YAML::Node node;
  try {
    node = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Status(codes::kInvalidConfig, name + ": not valid YAML: " + e.what());
  }
  DSH_RETURN_IF_ERROR(Check(name, "", node, RootSpec()));
  return node;
}

// The files merged so far, to name the one a cross-field error comes from.
struct Origins {
  std::vector<std::pair<std::string, YAML::Node>> files;

  // The last file that sets the key path `keys`; the last file when none does.
  std::string Of(const std::vector<std::string>& keys) const {
    for (auto it = files.rbegin(); it != files.rend(); ++it) {
      if (Sets(it->second, keys, 0)) return it->first;
    }
    return files.empty() ? std::string("(configuration)") : files.back().first;
  }

 private:
  // Recursive rather than a loop: assigning one YAML::Node to another would
  // rewrite the document.
  static bool Sets(const YAML::Node& node, const std::vector<std::string>& keys, size_t i) {
    if (i == keys.size()) return true;
    return node.IsMap() && node[keys[i]] && Sets(node[keys[i]], keys, i + 1);
  }
};

std::string StrOr(const YAML::Node& map, const char* key, std::string fallback) {
  return map.IsMap() && map[key] ? map[key].as<std::string>() : std::move(fallback);
}

// `/a/b/../c/` -> `/a/c`.
std::string NormalizePath(const std::string& path) {
  std::string out = std::filesystem::path(path).lexically_normal().string();
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

// Decodes a merged document that passed Check for every file it came from.
Config Decode(const YAML::Node& root) {
  Config c;
  c.presets.push_back(Config::Preset{"default", "", {}, true});
  if (!root || !root.IsMap()) return c;
  if (auto s = root["server"]; s && s.IsMap()) {
    if (s["host"]) c.server.host = s["host"].as<std::string>();
    if (s["port"]) c.server.port = s["port"].as<int>();
    if (s["metrics_listen"]) c.server.metrics_listen = s["metrics_listen"].as<std::string>();
    if (s["public_url"]) {
      c.server.public_url = s["public_url"].as<std::string>();
      while (!c.server.public_url.empty() && c.server.public_url.back() == '/') c.server.public_url.pop_back();
    }
  }
  if (auto s = root["notifications"]; s && s.IsMap()) {
    if (s["retry_for"]) c.notifications.retry_for_seconds = s["retry_for"].as<int64_t>();
    if (s["timeout"]) c.notifications.timeout_seconds = s["timeout"].as<int64_t>();
    if (auto list = s["webhooks"]; list && list.IsSequence()) {
      for (const auto& n : list) {
        Config::Webhook w;
        w.name = StrOr(n, "name", "");
        w.url = StrOr(n, "url", "");
        w.format = StrOr(n, "format", "standard");
        if (n["events"]) w.events = n["events"].as<std::vector<std::string>>();
        w.secret = StrOr(n, "secret", "");
        w.secret_file = StrOr(n, "secret_file", "");
        if (n["allow_private"]) w.allow_private = n["allow_private"].as<bool>();
        c.notifications.webhooks.push_back(std::move(w));
      }
    }
  }
  if (auto s = root["storage"]; s && s.IsMap()) {
    if (s["synchronous"]) c.storage.synchronous_full = s["synchronous"].as<std::string>() == "full";
    if (s["backend"]) c.storage.postgres = s["backend"].as<std::string>() == "postgres";
    if (s["url"]) c.storage.url = s["url"].as<std::string>();
    if (s["max_gather_us"]) c.storage.max_gather_us = s["max_gather_us"].as<int64_t>();
    if (auto k = s["checkpoint"]; k && k.IsMap()) {
      auto& cp = c.storage.checkpoint;
      if (k["background"]) cp.background = k["background"].as<bool>();
      if (k["start_frames"]) cp.start_frames = k["start_frames"].as<int>();
      if (k["finish_frames"]) cp.finish_frames = k["finish_frames"].as<int>();
      if (k["max_frames"]) cp.max_frames = k["max_frames"].as<int>();
    }
  }
  if (auto s = root["retention"]; s && s.IsMap()) {
    if (s["inbox_days"]) c.retention.inbox_days = s["inbox_days"].as<int64_t>();
    if (s["loop_runs"]) c.retention.loop_runs = s["loop_runs"].as<int64_t>();
    if (s["loop_run_days"]) c.retention.loop_run_days = s["loop_run_days"].as<int64_t>();
  }
  if (auto s = root["log"]; s && s.IsMap()) {
    if (s["level"]) c.log.level = s["level"].as<std::string>();
  }
  c.model = StrOr(root, "model", "");
  if (auto s = root["providers"]; s && s.IsMap()) {
    std::map<std::string, Config::Provider> by_name;
    for (const auto& kv : s) {
      Config::Provider p;
      p.name = kv.first.Scalar();
      p.type = StrOr(kv.second, "type", p.type);
      p.base_url = StrOr(kv.second, "base_url", "");
      p.api_key_env = StrOr(kv.second, "api_key_env", "");
      if (kv.second.IsMap() && kv.second["models"] && kv.second["models"].IsMap()) {
        std::map<std::string, Config::ProviderModel> by_model;
        for (const auto& m : kv.second["models"]) {
          Config::ProviderModel pm;
          pm.name = m.first.Scalar();
          if (m.second.IsMap() && m.second["reasoning_efforts"]) {
            pm.reasoning_efforts = m.second["reasoning_efforts"].as<std::vector<std::string>>();
          }
          by_model[pm.name] = std::move(pm);
        }
        for (auto& [_, pm] : by_model) p.models.push_back(std::move(pm));
      }
      by_name[p.name] = std::move(p);
    }
    for (auto& [_, p] : by_name) c.providers.push_back(std::move(p));
  }
  if (auto s = root["presets"]; s && s.IsMap()) {
    std::map<std::string, Config::Preset> by_id;
    for (auto& p : c.presets) by_id[p.id] = std::move(p);  // the built-in default
    for (const auto& kv : s) {
      Config::Preset p;
      p.id = kv.first.Scalar();
      p.system_prompt = StrOr(kv.second, "system_prompt", "");
      if (kv.second.IsMap() && kv.second["tools"]) {
        p.tool_groups = kv.second["tools"].as<std::vector<std::string>>();
        p.all_tools = false;
      }
      if (kv.second.IsMap()) {
        if (auto perms = kv.second["permissions"]; perms && perms.IsMap()) {
          for (const auto& t : perms) p.permissions[t.first.Scalar()] = t.second.as<std::string>();
        }
        if (kv.second["network"]) p.network = kv.second["network"].as<bool>();
        if (kv.second["fetch_private"]) p.fetch_private = kv.second["fetch_private"].as<bool>();
        if (kv.second["roots"]) {
          for (const auto& r : kv.second["roots"].as<std::vector<std::string>>()) p.roots.push_back(NormalizePath(r));
        }
      }
      by_id[p.id] = std::move(p);
    }
    c.presets.clear();
    for (auto& [_, p] : by_id) c.presets.push_back(std::move(p));
  }
  c.default_preset = StrOr(root, "default_preset", c.default_preset);
  if (auto s = root["workspaces"]; s && s.IsMap()) {
    std::map<std::string, std::string> by_id;
    for (const auto& kv : s) by_id[kv.first.Scalar()] = NormalizePath(kv.second.as<std::string>());
    for (auto& [id, path] : by_id) c.workspaces.push_back(Config::Workspace{id, std::move(path)});
  }
  if (auto s = root["tools"]; s && s.IsMap()) {
    if (s["approval_timeout"]) c.tools.approval_timeout_seconds = s["approval_timeout"].as<int64_t>();
    if (s["sandbox"]) c.tools.sandbox = s["sandbox"].as<bool>();
  }
  if (auto s = root["interface"]; s && s.IsMap()) {
    if (s["global_session"]) c.interface.global_session = s["global_session"].as<bool>();
  }
  if (auto s = root["mcp"]; s && s.IsMap() && s["servers"] && s["servers"].IsMap()) {
    std::map<std::string, mcp::ServerSpec> by_name;
    for (const auto& kv : s["servers"]) {
      mcp::ServerSpec spec;
      spec.name = kv.first.Scalar();
      const YAML::Node& n = kv.second;
      if (!n.IsMap()) {  // `fs:` with nothing: kept, so that CheckMerged says what it lacks
        by_name[spec.name] = std::move(spec);
        continue;
      }
      if (n["command"]) spec.command = n["command"].as<std::vector<std::string>>();
      if (n["env"] && n["env"].IsMap()) spec.env = n["env"].as<std::map<std::string, std::string>>();
      spec.cwd = StrOr(n, "cwd", "");
      spec.url = StrOr(n, "url", "");
      if (n["headers"] && n["headers"].IsMap()) spec.headers = n["headers"].as<std::map<std::string, std::string>>();
      if (n["timeout"]) spec.call_timeout = std::chrono::seconds(n["timeout"].as<int64_t>());
      if (n["start_timeout"]) spec.start_timeout = std::chrono::seconds(n["start_timeout"].as<int64_t>());
      by_name[spec.name] = std::move(spec);
    }
    for (auto& [_, spec] : by_name) c.mcp_servers.push_back(std::move(spec));
  }
  if (auto s = root["agents"]; s && s.IsMap()) {
    if (s["idle_eviction"]) c.agents.idle_eviction_seconds = s["idle_eviction"].as<int64_t>();
    if (s["lease"]) c.agents.lease_seconds = s["lease"].as<int64_t>();
    if (s["max_steps"]) c.agents.max_steps = s["max_steps"].as<int64_t>();
  }
  if (auto s = root["plugins"]; s && s.IsMap()) {
    for (auto [name, enabled] : {std::pair<const char*, bool*>{"loop", &c.plugins.loop},
                                 {"sessions", &c.plugins.sessions},
                                 {"schedule", &c.plugins.schedule},
                                 {"time_context", &c.plugins.time_context},
                                 {"workspace", &c.plugins.workspace}}) {
      if (auto p = s[name]; p && p.IsMap() && p["enabled"]) *enabled = p["enabled"].as<bool>();
    }
  }
  return c;
}

// The checks that need the merged result: a key may be set in one file and
// what it depends on in another.
Status CheckMerged(const Config& c, const Origins& origins) {
  for (const auto& p : c.providers) {
    if (p.type == "openai" && p.base_url.empty()) {
      return Bad(origins.Of({"providers", p.name}), "providers." + p.name + ".base_url",
                 "is required for a provider of type openai");
    }
  }
  std::string declared;
  for (const auto& m : c.mcp_servers) declared += (declared.empty() ? "" : ", ") + m.name;
  for (const auto& m : c.mcp_servers) {
    // Tool names are `NAME__TOOL`, cut to the 64 characters model APIs take.
    if (m.name.size() > kMaxMcpServerName) {
      return Bad(origins.Of({"mcp", "servers", m.name}), "mcp.servers." + m.name,
                 "is a name of " + std::to_string(m.name.size()) + " characters: at most " +
                     std::to_string(kMaxMcpServerName) + ", to leave room for its tools' names");
    }
    if (!m.command.empty() && m.command[0].empty()) {
      return Bad(origins.Of({"mcp", "servers", m.name, "command"}), "mcp.servers." + m.name + ".command",
                 "must start with the program to run (got an empty string)");
    }
    if (m.command.empty() == m.url.empty()) {
      return Bad(origins.Of({"mcp", "servers", m.name}), "mcp.servers." + m.name,
                 "needs either `command` (a stdio server) or `url` (a Streamable HTTP server), not both");
    }
    if (!m.command.empty() && (!m.headers.empty())) {
      return Bad(origins.Of({"mcp", "servers", m.name}), "mcp.servers." + m.name + ".headers",
                 "is for `url` servers; a `command` server takes `env`");
    }
    if (!m.url.empty() && (!m.env.empty() || !m.cwd.empty())) {
      return Bad(origins.Of({"mcp", "servers", m.name}), "mcp.servers." + m.name,
                 "`env` and `cwd` are for `command` servers; a `url` server takes `headers`");
    }
  }
  for (const auto& p : c.presets) {
    for (const auto& group : p.tool_groups) {
      if (group.rfind("mcp:", 0) != 0) continue;
      const std::string server = group.substr(4);
      if (std::none_of(c.mcp_servers.begin(), c.mcp_servers.end(),
                       [&](const mcp::ServerSpec& m) { return m.name == server; })) {
        return Bad(origins.Of({"presets", p.id, "tools"}), "presets." + p.id + ".tools",
                   "names the MCP server `" + server + "`, which `mcp.servers` does not declare (declared: " +
                       (declared.empty() ? "none" : declared) + ")");
      }
    }
  }
  // The writer finishes a checkpoint inline below finish_frames, asks the
  // background from start_frames and takes over at max_frames: out of this
  // order the background would never run.
  const auto& cp = c.storage.checkpoint;
  if (cp.finish_frames >= cp.start_frames) {
    return Bad(origins.Of({"storage", "checkpoint", "finish_frames"}), "storage.checkpoint.finish_frames",
               "must be less than `storage.checkpoint.start_frames` (" + std::to_string(cp.start_frames) +
                   "; got " + std::to_string(cp.finish_frames) + ")");
  }
  if (cp.max_frames < cp.start_frames) {
    return Bad(origins.Of({"storage", "checkpoint", "max_frames"}), "storage.checkpoint.max_frames",
               "must be at least `storage.checkpoint.start_frames` (" + std::to_string(cp.start_frames) +
                   "; got " + std::to_string(cp.max_frames) + ")");
  }
  std::set<std::string> webhook_names;
  for (size_t i = 0; i < c.notifications.webhooks.size(); ++i) {
    const auto& w = c.notifications.webhooks[i];
    std::string what = "notifications.webhooks[" + std::to_string(i) + "]";
    if (Status st = CheckWebhook(w, what); !st.ok()) {
      return Status(codes::kInvalidConfig, origins.Of({"notifications", "webhooks"}) + ": " + st.message());
    }
    if (!webhook_names.insert(w.name).second) {
      return Bad(origins.Of({"notifications", "webhooks"}), what + ".name",
                 "names the endpoint `" + w.name + "` a second time: names must be unique");
    }
  }
  if (!c.FindPreset(c.default_preset)) {
    std::string ids;
    for (const auto& p : c.presets) ids += (ids.empty() ? "" : ", ") + p.id;
    return Bad(origins.Of({"default_preset"}), "default_preset",
               "names no preset: \"" + c.default_preset + "\" (presets: " + ids + ")");
  }
  return Status::Ok();
}

Result<Config> DecodeAndCheck(const YAML::Node& merged, const Origins& origins) {
  Config c = Decode(merged);
  DSH_RETURN_IF_ERROR(CheckMerged(c, origins));
  return c;
}

}  // namespace

const std::vector<std::string>& WebhookEvents() {
  static const std::vector<std::string> events = {"loop.run.completed", "loop.run.failed", "reminder.dispatched",
                                                  "activity.created", "approval.requested"};
  return events;
}

Status CheckWebhook(const Config::Webhook& w, const std::string& what) {
  auto bad = [&](const std::string& key, const std::string& why) {
    return Status(codes::kInvalidArguments, "`" + what + (key.empty() ? "" : "." + key) + "` " + why);
  };
  if (!std::regex_match(w.name, std::regex(kIdPattern))) return bad("name", "must use " + std::string(kIdHint));
  if (w.name.size() > 64) return bad("name", "is longer than 64 characters");
  if (!std::regex_match(w.url, std::regex("https?://[^\\s/?#]+([/?#]\\S*)?"))) {
    return bad("url", "must be an http:// or https:// URL (got \"" + w.url + "\")");
  }
  static const std::vector<std::string> formats = {"standard", "slack", "discord", "ntfy"};
  if (std::find(formats.begin(), formats.end(), w.format) == formats.end()) {
    return bad("format", "must be standard, slack, discord or ntfy (got \"" + w.format + "\")");
  }
  if (w.events.empty()) return bad("events", "must name at least one event (or \"*\" for all)");
  for (const auto& e : w.events) {
    if (e != "*" && std::find(WebhookEvents().begin(), WebhookEvents().end(), e) == WebhookEvents().end()) {
      std::string known;
      for (const auto& k : WebhookEvents()) known += (known.empty() ? "" : ", ") + k;
      return bad("events", "names no event: \"" + e + "\" (events: " + known + ", or \"*\")");
    }
  }
  if (!w.secret.empty() && !w.secret_file.empty()) return bad("", "has both `secret` and `secret_file`: give one");
  if (!w.secret_file.empty() && w.secret_file[0] != '/') return bad("secret_file", "must be an absolute path");
  if (w.format == "standard" && w.secret.empty() && w.secret_file.empty()) {
    return bad("", "is a `standard` endpoint without `secret` or `secret_file`: its messages are signed with it");
  }
  return Status::Ok();
}

const Config::Preset* Config::FindPreset(const std::string& id) const {
  for (const auto& p : presets) {
    if (p.id == id) return &p;
  }
  return nullptr;
}

const Config::Provider* Config::FindProvider(const std::string& name) const {
  for (const auto& p : providers) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

store::DatabaseOptions DatabaseOptionsOf(const Config& config) {
  store::DatabaseOptions o;
  o.max_gather = std::chrono::microseconds(config.storage.max_gather_us);
  return o;
}

store::SqliteOptions SqliteOptionsOf(const Config& config, std::string path) {
  store::SqliteOptions o{.path = std::move(path)};
  o.synchronous =
      config.storage.synchronous_full ? store::SqliteOptions::Synchronous::kFull : store::SqliteOptions::Synchronous::kNormal;
  const auto& cp = config.storage.checkpoint;
  o.checkpoints.background = cp.background;
  o.checkpoints.start_frames = cp.start_frames;
  o.checkpoints.finish_frames = cp.finish_frames;
  o.checkpoints.max_frames = cp.max_frames;
  return o;
}

Result<Config> ParseConfigText(const std::string& name, const std::string& text) {
  DSH_ASSIGN_OR_RETURN(YAML::Node node, Parse(name, text));
  return DecodeAndCheck(node, Origins{{{name, node}}});
}

Result<Config> LoadConfig(const std::vector<ConfigFile>& files) {
  YAML::Node merged(YAML::NodeType::Map);
  Origins origins;
  for (const auto& f : files) {
    std::error_code ec;
    if (!std::filesystem::exists(f.path, ec)) {
      if (f.optional) continue;
      return Status(codes::kInvalidConfig, f.path + ": no such file");
    }
    YAML::Node node;
    try {
      node = YAML::LoadFile(f.path);
    } catch (const YAML::BadFile& e) {
      return Status(codes::kInvalidConfig, f.path + ": cannot read the file");
    } catch (const YAML::Exception& e) {
      return Status(codes::kInvalidConfig, f.path + ": not valid YAML: " + e.what());
    }
    DSH_RETURN_IF_ERROR(Check(f.path, "", node, RootSpec()));
    merged = Merge(merged, node);
    origins.files.emplace_back(f.path, node);
  }
  return DecodeAndCheck(merged, origins);
}

}  // namespace dsh::host
