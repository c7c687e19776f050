#include "app/doctor_command.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <sstream>

#include "base/json.h"
#include "host/config.h"
#include "host/host.h"
#include "host/model_routes.h"
#include "host/provider_settings.h"
#include "host/profile.h"
#include "plugins/loop/loop_plugin.h"
#include "plugins/workspace/sandbox.h"
#include "server/http_client.h"
#include "store/connection.h"
#include "time/time_zone.h"

namespace dsh::app {
namespace {

namespace fs = std::filesystem;
using Level = DoctorLine::Level;

constexpr std::chrono::seconds kNetworkTimeout{5};

DoctorLine Line(Level level, std::string check, std::string found, std::string action = "") {
  return DoctorLine{level, std::move(check), std::move(found), std::move(action)};
}

// ---- config ----

Result<host::Config> CheckConfig(const host::Profile& profile, std::vector<DoctorLine>& out) {
  const std::string path = profile.config_path();
  Result<host::Config> config = host::LoadConfig({{path, /*optional=*/true}});
  if (!config.ok()) {
    out.push_back(Line(Level::kFail, "config", config.status().code() + ": " + config.status().message(),
                       "fix that key in " + path + " (docs/CONFIG.md)"));
    return config;
  }
  std::error_code ec;
  out.push_back(Line(Level::kOk, "config",
                     fs::exists(path, ec) ? path + " is valid" : "no " + path + "; the defaults apply"));
  return config;
}

// ---- database ----

// The newest version of each schema module this binary knows: the host's
// and the plugins' that `dsh web` composes.
std::map<std::string, int64_t> KnownSchema() {
  std::vector<store::Migration> all = host::Host::AllMigrations();
  for (auto& m : plugins::loop::PluginMigrations()) all.push_back(std::move(m));
  std::map<std::string, int64_t> known;
  for (const auto& m : all) known[m.module] = std::max<int64_t>(known[m.module], m.version);
  return known;
}

DoctorLine SchemaLine(const std::map<std::string, int64_t>& have) {
  std::map<std::string, int64_t> known = KnownSchema();
  std::string newer;
  bool older = false;
  for (const auto& [module, version] : have) {
    int64_t k = known.count(module) ? known[module] : 0;
    if (version > k) {
      newer += (newer.empty() ? "" : ", ") + module + " v" + std::to_string(version) + " (this dsh knows v" +
               std::to_string(k) + ")";
    }
  }
  for (const auto& [module, version] : known) {
    auto it = have.find(module);
    older = older || it == have.end() || it->second < version;
  }
  if (!newer.empty()) {
    return Line(Level::kFail, "schema", "schema_too_new: the database was written by a newer dsh: " + newer,
                "upgrade dsh");
  }
  if (older) return Line(Level::kOk, "schema", "older than this dsh; `dsh web` migrates it when it starts");
  return Line(Level::kOk, "schema", "at this dsh's version");
}

// Runs `sql` on a raw SQLite handle, calling `on_row` per row.
Status SqliteQuery(sqlite3* db, const char* sql, const std::function<void(sqlite3_stmt*)>& on_row) {
  sqlite3_stmt* raw = nullptr;
  if (sqlite3_prepare_v2(db, sql, -1, &raw, nullptr) != SQLITE_OK) {
    return Status(codes::kStorage, sqlite3_errmsg(db));
  }
  std::unique_ptr<sqlite3_stmt, decltype(&sqlite3_finalize)> stmt(raw, &sqlite3_finalize);
  while (true) {
    int rc = sqlite3_step(raw);
    if (rc == SQLITE_DONE) return Status::Ok();
    if (rc != SQLITE_ROW) return Status(codes::kStorage, sqlite3_errmsg(db));
    on_row(raw);
  }
}

std::string ColumnText(sqlite3_stmt* stmt, int column) {
  const unsigned char* text = sqlite3_column_text(stmt, column);
  return text ? reinterpret_cast<const char*>(text) : "";
}

// Read-only: a profile without a database keeps having none.
void CheckSqlite(const std::string& path, std::vector<DoctorLine>& out) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    out.push_back(Line(Level::kOk, "database", "no database yet; `dsh web` creates it (" + path + ")"));
    return;
  }
  const std::string restore = "stop the host and restore " + path + " from a backup";
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr);
  std::unique_ptr<sqlite3, decltype(&sqlite3_close)> db(raw, &sqlite3_close);
  if (rc != SQLITE_OK) {
    out.push_back(Line(Level::kFail, "database",
                       "cannot open " + path + ": " + (raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc)),
                       "check the file's owner and permissions"));
    return;
  }
  sqlite3_busy_timeout(raw, 5000);
  std::vector<std::string> problems;
  Status st = SqliteQuery(raw, "PRAGMA integrity_check",
                          [&](sqlite3_stmt* s) { problems.push_back(ColumnText(s, 0)); });
  if (!st.ok()) {
    out.push_back(
        Line(Level::kFail, "database", "integrity check of " + path + " failed: " + st.message(), restore));
    return;
  }
  if (problems.size() != 1 || problems[0] != "ok") {
    std::string first = problems.empty() ? "no answer" : problems[0];
    std::string more = problems.size() > 1 ? " (and " + std::to_string(problems.size() - 1) + " more)" : "";
    out.push_back(
        Line(Level::kFail, "database", "integrity check of " + path + " failed: " + first + more, restore));
    return;
  }
  out.push_back(Line(Level::kOk, "database", "sqlite " + path + ": integrity check passed"));
  std::map<std::string, int64_t> have;
  st = SqliteQuery(raw, "SELECT module, version FROM dsh_schema",
                   [&](sqlite3_stmt* s) { have[ColumnText(s, 0)] = sqlite3_column_int64(s, 1); });
  if (!st.ok()) {
    out.push_back(Line(Level::kFail, "schema", "cannot read the schema version: " + st.message(),
                       "is " + path + " a dsh database?"));
    return;
  }
  out.push_back(SchemaLine(have));
}

void CheckPostgres(store::ConnectionFactory& factory, std::vector<DoctorLine>& out) {
  const std::string what = factory.Describe();
  const std::string action = "check that PostgreSQL runs and the URL (DSH_DATABASE_URL or `storage.url`)";
  auto conn = factory.Open();
  if (!conn.ok()) {
    out.push_back(Line(Level::kFail, "database",
                       what + ": " + conn.status().code() + ": " + conn.status().message(), action));
    return;
  }
  store::Connection& c = **conn;
  std::map<std::string, int64_t> have;
  Status st = c.BeginRead();
  if (st.ok()) st = c.Query("SELECT 1", {}, [](const store::Row&) { return Status::Ok(); });
  if (!st.ok()) {
    out.push_back(Line(Level::kFail, "database", what + ": " + st.code() + ": " + st.message(), action));
    return;
  }
  out.push_back(Line(Level::kOk, "database", what + " answers"));
  st = c.Query("SELECT module, version FROM dsh_schema", {}, [&](const store::Row& row) {
    have[row.String(0)] = row.Int(1);
    return Status::Ok();
  });
  if (c.InTransaction()) (void)c.Rollback();
  if (!st.ok()) {
    out.push_back(Line(Level::kOk, "schema", "no dsh tables yet; `dsh web` creates them"));
    return;
  }
  out.push_back(SchemaLine(have));
}

void CheckDatabase(const host::Config& config, const host::Profile& profile, const host::EnvLookup& env,
                   std::vector<DoctorLine>& out) {
  // The backend is chosen as the host chooses it (host::DatabaseFactory),
  // but SQLite is opened here read-only rather than through its factory,
  // which would create the file and switch it to WAL.
  auto factory = host::DatabaseFactory(config, profile, env);
  if (!factory.ok()) {
    out.push_back(Line(Level::kFail, "database", factory.status().code() + ": " + factory.status().message(),
                       "fix `storage` in dsh.yml or DSH_DATABASE_URL"));
    return;
  }
  std::optional<std::string> env_url = env("DSH_DATABASE_URL");
  if ((env_url && !env_url->empty()) || config.storage.postgres) return CheckPostgres(**factory, out);
  CheckSqlite(profile.database_path(), out);
}

// ---- token ----

DoctorLine CheckToken(const host::Profile& profile) {
  const std::string path = profile.token_path();
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Line(Level::kOk, "token", "no token file yet; created on first `dsh web`");
    return Line(Level::kFail, "token", "cannot read " + path + ": " + std::strerror(errno),
                "check the profile directory's permissions");
  }
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  if ((st.st_mode & 077) != 0) {
    return Line(Level::kWarn, "token", path + " has mode " + mode + ": group or others can read it",
                "chmod 600 " + path);
  }
  return Line(Level::kOk, "token", path + " (mode " + mode + ")");
}

// ---- model ----

struct UrlParts {
  bool https = false;
  std::string host;  // without brackets
  std::string port;
  std::string path;  // "" or "/..."
};

std::optional<UrlParts> SplitUrl(const std::string& url) {
  UrlParts parts;
  std::string rest;
  if (url.rfind("http://", 0) == 0) {
    rest = url.substr(7);
  } else if (url.rfind("https://", 0) == 0) {
    parts.https = true;
    rest = url.substr(8);
  } else {
    return std::nullopt;
  }
  size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  parts.path = slash == std::string::npos ? "" : rest.substr(slash);
  while (!parts.path.empty() && parts.path.back() == '/') parts.path.pop_back();
  size_t bracket = authority.rfind(']');
  size_t colon = authority.rfind(':');
  if (colon != std::string::npos && (bracket == std::string::npos || colon > bracket)) {
    parts.host = authority.substr(0, colon);
    parts.port = authority.substr(colon + 1);
  } else {
    parts.host = authority;
    parts.port = parts.https ? "443" : "80";
  }
  if (parts.host.size() > 2 && parts.host.front() == '[' && parts.host.back() == ']') {
    parts.host = parts.host.substr(1, parts.host.size() - 2);
  }
  if (parts.host.empty()) return std::nullopt;
  return parts;
}

Status TcpConnect(const std::string& host, const std::string& port) {
  boost::asio::io_context ioc;
  boost::beast::tcp_stream stream(ioc);
  boost::beast::error_code ec;
  boost::asio::ip::tcp::resolver resolver(ioc);
  auto endpoints = resolver.resolve(host, port, ec);
  if (ec) return Status(codes::kUnavailable, "cannot resolve " + host + ": " + ec.message());
  stream.expires_after(kNetworkTimeout);
  stream.connect(endpoints, ec);
  if (ec) return Status(codes::kUnavailable, "cannot connect to " + host + ":" + port + ": " + ec.message());
  return Status::Ok();
}

DoctorLine CheckReachable(const host::ModelRoutes::Endpoint& info, const std::optional<std::string>& key) {
  const std::string& base = info.base_url;
  std::optional<UrlParts> url = SplitUrl(base);
  if (!url)
    return Line(Level::kFail, "model", "cannot use the base URL " + base, "give an http:// or https:// URL");
  const std::string fix = "start the model server, or fix the provider's `base_url`";
  if (url->https) {
    // No TLS client here: a TCP connect shows the address is reachable; the
    // key is checked by the first turn.
    Status st = TcpConnect(url->host, url->port);
    if (!st.ok()) return Line(Level::kFail, "model", base + " is unreachable: " + st.message(), fix);
    return Line(Level::kOk, "model", base + " is reachable (TCP; the key is checked on the first turn)");
  }
  std::string host = url->host.find(':') != std::string::npos ? "[" + url->host + "]" : url->host;
  std::vector<std::pair<std::string, std::string>> headers;
  if (key) headers.emplace_back("Authorization", "Bearer " + *key);
  auto r = server::HttpRequestSync("GET", "http://" + host + ":" + url->port + url->path + "/models", "",
                                   headers, kNetworkTimeout);
  if (!r.ok()) return Line(Level::kFail, "model", base + " is unreachable: " + r.status().message(), fix);
  if (r->status == 401 || r->status == 403) {
    return Line(Level::kFail, "model",
                base + " answered HTTP " + std::to_string(r->status) + ": the key is refused",
                info.key_source == "profile" ? "check the key saved in Settings"
                : info.api_key_env.empty()   ? "set `api_key_env` for the provider, or save a key in Settings"
                                             : "check $" + info.api_key_env);
  }
  return Line(Level::kOk, "model", base + " answers (GET /models: HTTP " + std::to_string(r->status) + ")");
}

void CheckModel(const host::Config& config, const host::Profile& profile, const host::EnvLookup& env,
                std::vector<DoctorLine>& out) {
  auto saved = host::ProviderSettings::Load(profile.home());
  if (!saved.ok()) {
    out.push_back(Line(Level::kFail, "model", saved.status().code() + ": " + saved.status().message(),
                       "fix the file, or delete it and save the providers again from Settings"));
    return;
  }
  auto routes = host::ModelRoutes::Build(config, env, host::ModelRoutes::DefaultFactories(), *saved);
  if (!routes.ok()) {
    out.push_back(Line(Level::kFail, "model", routes.status().code() + ": " + routes.status().message(),
                       "fix `model` in dsh.yml or DSH_MODEL, or the default route in Settings"));
    return;
  }
  const session::ModelRoute route = (*routes)->default_route();
  const std::string name = route.provider + "/" + route.model;
  // Build resolved the default route, so its provider is known.
  host::ModelRoutes::Endpoint info = (*routes)->EndpointOf(route.provider).value_or(host::ModelRoutes::Endpoint{});
  if (info.echo) {
    out.push_back(Line(Level::kOk, "model", "default route " + name + " (the offline echo model)"));
  } else if (!info.api_key && !info.api_key_env.empty() && !info.key_optional) {
    out.push_back(Line(Level::kFail, "model", "default route " + name + ": $" + info.api_key_env + " is not set",
                       "export " + info.api_key_env + "=<the provider's API key>, or save a key in Settings"));
  } else {
    std::string key_from = info.key_source == "environment" ? " (key from $" + info.api_key_env + ")"
                           : info.key_source == "profile"   ? " (key saved in the profile)"
                                                            : " (no key)";
    out.push_back(Line(Level::kOk, "model", "default route " + name + key_from));
    out.push_back(CheckReachable(info, info.api_key));
  }
  // Every provider saved from the Settings page, but the default's (just checked).
  for (const auto& p : saved->providers) {
    if (p.name == route.provider) continue;
    auto endpoint = (*routes)->EndpointOf(p.name);
    if (!endpoint) continue;
    DoctorLine line = CheckReachable(*endpoint, endpoint->api_key);
    line.check = "provider " + p.name;
    // Not the default: new sessions work without it, so a warning.
    if (line.level == Level::kFail) line.level = Level::kWarn;
    out.push_back(std::move(line));
  }
}

// ---- time zones ----

DoctorLine CheckTimeZones() {
  auto paris = ResolveTimeZone("Europe/Paris");
  if (!paris.ok()) {
    return Line(Level::kFail, "tz", "the tz database is missing: " + paris.status().message(),
                "install the tzdata package");
  }
  return Line(Level::kOk, "tz", "tz database present; the local zone is " + HostTimeZone().name());
}

// ---- workspace sandbox ----

// bash's sandbox (docs/TOOLS.md): a warning, not a failure, since the host
// runs without it (bash then answers sandbox_unavailable).
DoctorLine CheckSandboxLine(const host::Config& config) {
  if (!config.plugins.workspace) return Line(Level::kInfo, "sandbox", "the workspace plugin is off");
  if (!config.tools.sandbox) {
    return Line(Level::kWarn, "sandbox", "tools.sandbox is false: bash runs commands without bubblewrap",
                "set tools.sandbox: true once bubblewrap can run here");
  }
  Status st = dsh::workspace::CheckSandbox();
  if (!st.ok()) {
    return Line(Level::kWarn, "sandbox", "bash cannot run: " + st.message(),
                "install bubblewrap (apt-get install bubblewrap) and allow unprivileged user namespaces");
  }
  return Line(Level::kOk, "sandbox", "bubblewrap runs: bash is sandboxed");
}

// ---- running host ----

DoctorLine CheckRunningHost(const host::Profile& profile) {
  auto running = profile.FindRunningHost();
  if (!running.ok()) return Line(Level::kInfo, "host", "no host is running on this profile");
  std::string url = running->url;
  if (!url.empty() && url.back() == '/') url.pop_back();
  const std::string who = "pid " + std::to_string(running->pid) + " at " + url;
  auto health = server::HttpRequestSync("GET", url + "/healthz", "", {}, kNetworkTimeout);
  if (!health.ok() || health->status != 200) {
    std::string why = health.ok() ? "HTTP " + std::to_string(health->status) : health.status().message();
    return Line(Level::kWarn, "host", who + " does not answer /healthz: " + why,
                "stop it (kill " + std::to_string(running->pid) + ") and start `dsh web` again");
  }
  Json body = Json::parse(health->body, nullptr, false);
  std::string version = body.is_object() ? body.value("version", "") : "";
  return Line(Level::kInfo, "host",
              who + " answers /healthz" + (version.empty() ? "" : " (dsh " + version + ")"));
}

// ---- MCP servers ----

// Where exec would find `command`: a path with a slash as it is (relative to
// `cwd` when set), else the first executable file of that name on `path`.
std::optional<std::string> FindExecutable(const std::string& command, const std::string& cwd,
                                          const std::string& path) {
  auto executable = [](const fs::path& p) {
    std::error_code ec;
    return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
  };
  if (command.find('/') != std::string::npos) {
    fs::path p = command;
    if (p.is_relative() && !cwd.empty()) p = fs::path(cwd) / p;
    return executable(p) ? std::optional<std::string>(p.string()) : std::nullopt;
  }
  std::stringstream dirs(path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    fs::path p = fs::path(dir.empty() ? "." : dir) / command;
    if (executable(p)) return p.string();
  }
  return std::nullopt;
}

DoctorLine CheckMcpServer(const mcp::ServerSpec& spec, const host::EnvLookup& env) {
  const std::string check = "mcp " + spec.name;
  if (!spec.stdio()) return Line(Level::kInfo, check, spec.url + " (not contacted)");
  auto path_override = spec.env.find("PATH");
  std::string path = path_override != spec.env.end() ? path_override->second : env("PATH").value_or("");
  const std::string& command = spec.command[0];
  if (auto found = FindExecutable(command, spec.cwd, path)) {
    return Line(Level::kOk, check, "command `" + command + "` is " + *found);
  }
  return Line(Level::kFail, check,
              "command `" + command + "` is not " +
                  (command.find('/') != std::string::npos ? "an executable file" : "found on PATH"),
              "install it, or give its absolute path in `mcp.servers." + spec.name + ".command`");
}

// ----

int RunDoctor(CommandContext& ctx, const std::string& home) {
  auto profile = host::Profile::Open(home.empty() ? std::nullopt : std::optional<std::string>(home));
  if (!profile.ok()) {
    ctx.err << "error: " << profile.status().code() << ": " << profile.status().message() << "\n";
    return kExitFailure;
  }
  host::EnvLookup env = host::ProcessEnv();
  std::vector<DoctorLine> lines;
  lines.push_back(Line(Level::kInfo, "profile", profile->home().string()));
  Result<host::Config> config = CheckConfig(*profile, lines);
  if (config.ok()) {
    CheckDatabase(*config, *profile, env, lines);
  } else {
    lines.push_back(Line(Level::kWarn, "database", "not checked: the config is invalid"));
  }
  lines.push_back(CheckToken(*profile));
  if (config.ok()) {
    CheckModel(*config, *profile, env, lines);
  } else {
    lines.push_back(Line(Level::kWarn, "model", "not checked: the config is invalid"));
  }
  lines.push_back(CheckTimeZones());
  if (config.ok()) lines.push_back(CheckSandboxLine(*config));
  lines.push_back(CheckRunningHost(*profile));
  if (config.ok()) {
    for (const mcp::ServerSpec& spec : config->mcp_servers) lines.push_back(CheckMcpServer(spec, env));
  }
  ctx.out << FormatDoctorReport(lines);
  bool failed =
      std::any_of(lines.begin(), lines.end(), [](const DoctorLine& l) { return l.level == Level::kFail; });
  return failed ? kExitFailure : kExitOk;
}

}  // namespace

std::string FormatDoctorReport(const std::vector<DoctorLine>& lines) {
  size_t width = 0;
  for (const DoctorLine& l : lines) width = std::max(width, l.check.size());
  std::ostringstream out;
  for (const DoctorLine& l : lines) {
    const char* level = l.level == Level::kOk     ? "ok  "
                        : l.level == Level::kInfo ? "info"
                        : l.level == Level::kWarn ? "warn"
                                                  : "FAIL";
    out << level << "  " << l.check << std::string(width - l.check.size() + 2, ' ') << l.found;
    if (!l.action.empty()) out << " — " << l.action;
    out << "\n";
  }
  return out.str();
}

void AddDoctorCommand(CLI::App& root, CommandContext& ctx) {
  // Owned by the command tree for as long as the callback can run.
  auto home = std::make_shared<std::string>();
  CLI::App* doctor =
      root.add_subcommand("doctor", "Check a profile: config, database, token, model, tz, MCP");
  doctor->add_option("--home", *home, "Profile directory (default: $DSH_HOME, else ~/.dsh)");
  doctor->callback([&ctx, home] { ctx.exit_code = RunDoctor(ctx, *home); });
}

}  // namespace dsh::app
