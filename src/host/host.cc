#include "host/host.h"

#include <spdlog/spdlog.h>

#include "base/ids.h"
#include "host/activity_routes.h"
#include "host/search_routes.h"
#include "host/settings_routes.h"
#include "base/version.h"
#include "store/pg_connection.h"
#include "store/sqlite_connection.h"
#include "time/time_zone.h"

namespace dsh::host {

std::vector<store::Migration> Host::AllMigrations() {
  std::vector<store::Migration> all;
  for (auto& m : session::SessionStore::Migrations()) all.push_back(std::move(m));
  for (auto& m : agent::AgentManager::Migrations()) all.push_back(std::move(m));
  for (auto& m : session::SearchIndex::Migrations()) all.push_back(std::move(m));
  // Profile-wide settings ("global_session": the global interface session's id).
  all.push_back({"host", 1, {"CREATE TABLE profile_settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)"}});
  return all;
}

Result<std::unique_ptr<store::ConnectionFactory>> DatabaseFactory(const Config& config, const Profile& profile,
                                                                  const EnvLookup& env) {
  std::optional<std::string> env_url = env("DSH_DATABASE_URL");
  if (env_url && env_url->empty()) env_url.reset();
  if (env_url || config.storage.postgres) {
    std::string url = env_url ? *env_url : config.storage.url;
    if (url.empty()) {
      return Status(codes::kInvalidConfig,
                    "`storage.backend` is postgres but there is no `storage.url` and DSH_DATABASE_URL is unset");
    }
    return std::unique_ptr<store::ConnectionFactory>(std::make_unique<store::PgConnectionFactory>(store::PgOptions{url}));
  }
  if (!config.storage.url.empty()) {
    return Status(codes::kInvalidConfig, "`storage.url` is for `storage.backend: postgres`; the backend is sqlite");
  }
  return std::unique_ptr<store::ConnectionFactory>(
      std::make_unique<store::SqliteConnectionFactory>(SqliteOptionsOf(config, profile.database_path())));
}

Result<std::unique_ptr<Host>> Host::Open(const HostOptions& options) {
  DSH_ASSIGN_OR_RETURN(Profile profile, Profile::Open(options.home));
  std::vector<ConfigFile> files = {{profile.config_path(), /*optional=*/true}};
  for (const auto& p : options.patches) files.push_back({p, false});
  DSH_ASSIGN_OR_RETURN(Config config, LoadConfig(files));
  std::unique_ptr<Host> host(new Host(std::move(profile), std::move(config), options.clock ? options.clock : &RealClock()));
  DSH_ASSIGN_OR_RETURN(SavedProviders saved, ProviderSettings::Load(host->profile_.home()));
  DSH_ASSIGN_OR_RETURN(host->models_, ModelRoutes::Build(host->config_, options.env ? options.env : ProcessEnv(),
                                                         ModelRoutes::DefaultFactories(), saved));
  host->provider_settings_ =
      std::make_unique<ProviderSettings>(host->profile_.home(), std::move(saved), *host->models_, options.provider_probe);
  DSH_ASSIGN_OR_RETURN(std::unique_ptr<store::ConnectionFactory> factory,
                       DatabaseFactory(host->config_, host->profile_, options.env ? options.env : ProcessEnv()));
  std::vector<store::Migration> migrations = AllMigrations();
  for (const auto& m : options.plugin_migrations) migrations.push_back(m);
  host->pruner_options_ = options.pruner_options;
  store::DatabaseOptions db_options = DatabaseOptionsOf(host->config_);
  db_options.clock = host->clock_;
  db_options.metrics = &host->metrics_;
  DSH_ASSIGN_OR_RETURN(host->db_, store::Database::Open(std::move(factory), std::move(migrations), db_options));
  // On a database several machines share, every host keeps the server's
  // time, so that they agree on what is due and when a lease ends. A test's
  // fake clock stays as it is.
  if (options.clock == nullptr || options.clock == &RealClock()) {
    host->db_clock_ = std::make_unique<store::DatabaseClock>(*host->clock_, *host->db_);
    host->clock_ = host->db_clock_.get();
  }
  host->sessions_ = std::make_unique<session::SessionStore>(*host->db_, *host->clock_, &host->events_);

  agent::AgentManagerOptions agent_options;
  agent_options.idle_eviction = std::chrono::seconds(host->config_.agents.idle_eviction_seconds);
  agent_options.lease_ttl = std::chrono::seconds(host->config_.agents.lease_seconds);
  agent_options.max_steps = static_cast<int>(host->config_.agents.max_steps);
  agent_options.approval_timeout = std::chrono::seconds(host->config_.tools.approval_timeout_seconds);
  if (options.agent_options) agent_options = *options.agent_options;
  agent_options.metrics = &host->metrics_;
  agent::AgentEnvironment env;
  const Config* cfg = &host->config_;
  env.preset = [cfg](const std::optional<std::string>& id) {
    const Config::Preset* p = cfg->FindPreset(id.value_or(cfg->default_preset));
    if (p == nullptr) p = cfg->FindPreset(cfg->default_preset);
    agent::PresetView view;
    if (p != nullptr) {
      view.system_prompt = p->system_prompt;
      view.all_tools = p->all_tools;
      view.tool_groups = p->tool_groups;
      for (const auto& [tool, name] : p->permissions) {
        if (auto permission = agent::ParsePermission(name)) view.permissions[tool] = *permission;  // checked on load
      }
    }
    return view;
  };
  host->agents_ = std::make_unique<agent::AgentManager>(host->ioc_, *host->db_, *host->sessions_, *host->models_,
                                                        host->tools_, *host->clock_, std::move(env), agent_options);
  // A server's state or tools changing is announced on the change feed
  // (`"mcp": true`), from the server's client thread: PublishChange is
  // thread-safe, and events_ outlives mcp_.
  session::EventHub* hub = &host->events_;
  host->mcp_ = std::make_unique<mcp::McpServers>(host->tools_, host->config_.mcp_servers, kVersion, [hub] {
    hub->PublishChange({"mcp", ""});
  });
  host->AddHostMetrics();
  for (auto& route : ActivityRoutes(*host->db_, *host->sessions_, hub)) host->AddHttpRoute(std::move(route));
  host->search_ = std::make_unique<session::SearchIndex>(*host->db_, *host->clock_, hub);
  for (auto& route : SearchRoutes(*host->search_)) host->AddHttpRoute(std::move(route));
  for (auto& route : SettingsRoutes(*host->provider_settings_, *host->models_)) host->AddHttpRoute(std::move(route));
  return host;
}

Host::~Host() { Close(); }

session::NewSession Host::DefaultNewSession() const {
  session::NewSession s;
  s.route = models_->default_route();
  s.preset = config_.default_preset;
  s.time_zone = HostTimeZone().name();
  return s;
}

Status Host::Start(unsigned threads) {
  work_.emplace(ioc_.get_executor());
  for (unsigned i = 0; i < std::max(1u, threads); ++i) threads_.emplace_back([this] { ioc_.run(); });
  if (config_.interface.global_session) DSH_RETURN_IF_ERROR(EnsureGlobalSession());
  mcp_->Start();  // waits for each server's first attempt: the first turn sees their tools
  agents_->Start();
  for (auto& hook : start_hooks_) DSH_RETURN_IF_ERROR(hook());
  StartPruner();
  search_->Start();
  return Status::Ok();
}

void Host::StartPruner() {
  std::vector<store::PruneTask> tasks;
  if (config_.retention.inbox_days > 0) {
    tasks.push_back(agent::agent_store::InboxPruneTask(config_.retention.inbox_days, retained_keys_));
  }
  // The activity list keeps what the loop runs keep (by age).
  if (config_.retention.loop_run_days > 0) {
    tasks.push_back(agent::activity::PruneTask(config_.retention.loop_run_days * 86'400'000));
  }
  for (auto& task : prune_tasks_) tasks.push_back(std::move(task));
  prune_tasks_.clear();
  if (tasks.empty()) return;
  pruner_ = std::make_unique<store::Pruner>(*db_, *clock_, std::move(tasks),
                                            pruner_options_.value_or(store::PrunerOptions{}));
  pruner_->Start();
}

// The id is chosen once per profile: the first host to insert it wins, and
// whoever finds the session missing creates it (a duplicate create is fine).
Status Host::EnsureGlobalSession() {
  std::string candidate = NewId("ses_", *clock_);
  DSH_ASSIGN_OR_RETURN(std::string id, db_->WriteValue<std::string>([&](store::Tx& tx) -> Result<std::string> {
    DSH_RETURN_IF_ERROR(tx.Exec("INSERT INTO profile_settings (key, value) VALUES ('global_session', ?) "
                                "ON CONFLICT (key) DO NOTHING",
                                {std::string_view(candidate)})
                            .status());
    std::string value;
    DSH_RETURN_IF_ERROR(tx.Query("SELECT value FROM profile_settings WHERE key = 'global_session'", {},
                                 [&](const store::Row& row) {
                                   value = row.String(0);
                                   return Status::Ok();
                                 }));
    return value;
  }));
  auto existing = sessions_->Get(id);
  if (!existing.ok() && existing.status().code() == codes::kNotFound) {
    session::NewSession s = DefaultNewSession();
    s.id = id;
    s.origin = "global";
    auto created = sessions_->Create(s);
    if (!created.ok() && created.status().code() != codes::kAlreadyExists) return created.status();
    if (created.ok()) spdlog::info("created the global interface session {}", id);  // else another host did
  } else if (!existing.ok()) {
    return existing.status();
  }
  global_session_id_ = id;
  return Status::Ok();
}

void Host::Stop() {
  if (stopped_) return;
  stopped_ = true;
  if (pruner_) pruner_->Stop();
  if (search_) search_->Stop();
  for (auto it = stop_hooks_.rbegin(); it != stop_hooks_.rend(); ++it) (*it)();
  if (agents_) agents_->Stop();
  if (mcp_) mcp_->Stop();
  if (provider_settings_) provider_settings_->Stop();
  work_.reset();
  for (auto& t : threads_) t.join();
  threads_.clear();
  if (models_) models_->Shutdown();
}

void Host::Close() {
  Stop();
  if (db_) db_->Close();
}

}  // namespace dsh::host
