#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/agent_manager.h"
#include "agent/tool_registry.h"
#include "base/json.h"
#include "base/clock.h"
#include "base/metrics.h"
#include "host/command_registry.h"
#include "host/config.h"
#include "host/http_route.h"
#include "host/model_routes.h"
#include "host/profile.h"
#include "host/provider_settings.h"
#include "mcp/mcp_tools.h"
#include "session/event_hub.h"
#include "session/search_index.h"
#include "session/session_store.h"
#include "store/database.h"
#include "store/pruner.h"

namespace dsh::host {

// The profile's database (docs/STORAGE.md): PostgreSQL when
// DSH_DATABASE_URL is set (its URL) or `storage.backend` is postgres (with
// `storage.url`), else SQLite in the profile's home. `invalid_config` for a
// postgres backend without a URL, or a URL with the sqlite backend.
Result<std::unique_ptr<store::ConnectionFactory>> DatabaseFactory(const Config& config, const Profile& profile,
                                                                  const EnvLookup& env);

struct HostOptions {
  std::optional<std::string> home;   // --home
  std::vector<std::string> patches;  // --patch files, in order
  // RealClock() when null. The real clock is kept in step with a shared
  // database's server (store::DatabaseClock); another (a test's) is used as it is.
  const Clock* clock = nullptr;
  EnvLookup env;                     // ProcessEnv() when null
  // Overrides for tests (sweep interval, lease time); the idle eviction and
  // step cap come from the config unless set here.
  std::optional<agent::AgentManagerOptions> agent_options;
  // Schema migrations of the plugins the app composes (their tables live in
  // the profile database too), applied with the host's own on open.
  std::vector<store::Migration> plugin_migrations;
  // How the retention pruner paces itself (store::PrunerOptions' defaults
  // when unset); what it keeps is `retention.*` in the config.
  std::optional<store::PrunerOptions> pruner_options;
  // How the Settings page's Test contacts a provider (tests inject a fake);
  // agent::ProbeOpenAiProvider when null.
  ProviderSettings::Probe provider_probe;
};

// One host's services over one profile: configuration, the profile
// database, the session store, model routes, the tool and slash-command
// registries (plugins register theirs before Start) and the live agents, all on one
// io_context run by the host's thread pool. The server and CLI layers reach
// everything through it.
//
// Lifecycle: Open → register tools and commands → Start → (serve) → Stop → Close.
// Not copyable; thread-safe once started (its members say how).
class Host {
 public:
  // Loads the profile's dsh.yml and the patches (`invalid_config` stops the
  // host, as does a bad DSH_MODEL), opens the database and applies
  // migrations.
  static Result<std::unique_ptr<Host>> Open(const HostOptions& options);
  ~Host();

  const Profile& profile() const { return profile_; }
  const Config& config() const { return config_; }
  const Clock& clock() const { return *clock_; }
  store::Database& database() { return *db_; }
  session::SessionStore& sessions() { return *sessions_; }
  // Every event committed by this host's session store, as it commits.
  session::EventHub& events() { return events_; }
  agent::ToolRegistry& tools() { return tools_; }
  // The slash commands (`POST /api/commands`); like tools(), registered
  // before Start and only read afterwards.
  CommandRegistry& commands() { return commands_; }
  ModelRoutes& models() { return *models_; }
  // The providers and default route saved from the Settings page (its
  // routes are among http_routes()); changes reach models() at once.
  ProviderSettings& provider_settings() { return *provider_settings_; }
  agent::AgentManager& agents() { return *agents_; }
  // The MCP servers of `mcp.servers` (docs/MCP.md); started by Start, their
  // tools are the groups `mcp:NAME`. A change of a server's state or tools
  // is published on events() as the Change {"mcp", ""}.
  mcp::McpServers& mcp_servers() { return *mcp_; }
  boost::asio::io_context& io() { return ioc_; }

  // The host's metrics (docs/DEPLOY.md, "Metrics"): the store's commits,
  // the agents' turns and model calls, the live agents and the inbox depth
  // are added by Open; plugins and the server add theirs before serving.
  // Lives as long as the host.
  metrics::Registry& metrics() { return metrics_; }
  // A gauge read from the store at scrape time: `refresh` runs in the read
  // snapshot of every ScrapeMetrics, on a database reader thread, and sets
  // gauges of metrics(). Register before Start; it must stay callable while
  // the host lives.
  void AddMetricsRefresh(std::function<Status(store::Tx&)> refresh) { metrics_refreshes_.push_back(std::move(refresh)); }
  // Runs every refresh in one read snapshot, then renders metrics() in the
  // text exposition format. `done` runs once, on a reader thread (or at
  // once when the database is closed). A failed read still renders (those
  // gauges keep their previous values) and counts
  // dsh_metrics_refresh_failures_total. Thread-safe after Start.
  void ScrapeMetrics(std::function<void(std::string text)> done);

  // Runs the io_context on `threads` threads, makes sure the global
  // interface session exists (when enabled) and starts the agents, which
  // pick up messages a previous run left pending.
  Status Start(unsigned threads);
  // Stops the agents (turns in flight continue when their session is next
  // live) and, once nothing else uses the io_context (stop the HTTP server
  // first), joins its threads. Idempotent; never call it on an io thread.
  void Stop();
  // Stop(), then finishes queued commits and closes the database. Idempotent.
  void Close();

  // The stable id of the global interface session; nullopt when
  // `interface.global_session` is off. Set by Start.
  const std::optional<std::string>& global_session_id() const { return global_session_id_; }

  // The session a fresh root session gets: default preset and model route.
  session::NewSession DefaultNewSession() const;

  // Plugin lifecycle. `start` hooks run at the end of Start (after the
  // agents started), in order; a failing one fails Start. `stop` hooks run
  // first in Stop (before the agents stop, while the io_context still
  // runs), in reverse order. Register them before Start.
  void OnStart(std::function<Status()> start) { start_hooks_.push_back(std::move(start)); }
  void OnStop(std::function<void()> stop) { stop_hooks_.push_back(std::move(stop)); }
  // Keeps a plugin's objects alive until the host is destroyed (after its
  // threads were joined and before its services go).
  void Own(std::shared_ptr<void> object) { owned_.push_back(std::move(object)); }
  // HTTP routes a plugin adds to the JSON API (the server serves them after
  // its own). Register them before the server is built; read-only after.
  void AddHttpRoute(HttpRoute route) { http_routes_.push_back(std::move(route)); }
  // A member of `GET /api/host` a plugin adds (the workspace plugin's
  // `sandbox`). Before Start; read-only after.
  void AddHostInfo(std::string key, Json value) { host_info_[std::move(key)] = std::move(value); }
  const Json& host_info() const { return host_info_; }

  // Retention (docs/CONFIG.md, "Retention"). Start runs a store::Pruner with
  // the inbox's task (`retention.inbox_days`, keeping the keys every
  // RetainedKeys lists) and the plugins' tasks, in small slices on its own
  // thread; Stop ends it first. Register before Start.
  void AddPruneTask(store::PruneTask task) { prune_tasks_.push_back(std::move(task)); }
  void AddRetainedInboxKeys(agent::agent_store::RetainedKeys keys) { retained_keys_.push_back(std::move(keys)); }
  // Null before Start and when nothing is to be pruned (every limit 0).
  store::Pruner* pruner() { return pruner_.get(); }
  // Full-text search over the sessions (GET /api/search); its thread runs
  // from Start to Stop.
  session::SearchIndex& search() { return *search_; }
  const std::vector<HttpRoute>& http_routes() const { return http_routes_; }

  // Every schema migration of the compiled-in modules.
  static std::vector<store::Migration> AllMigrations();

 private:
  Host(Profile profile, Config config, const Clock* clock) : profile_(std::move(profile)), config_(std::move(config)), clock_(clock) {}
  Status EnsureGlobalSession();
  // The host's own metrics (host_metrics.cc): live agents, inbox depth, build info.
  void AddHostMetrics();
  // Builds and starts pruner_ from `retention.*` and the registered tasks.
  void StartPruner();

  Profile profile_;
  Config config_;
  const Clock* clock_;
  metrics::Registry metrics_;  // before everything that counts into it: destroyed after
  boost::asio::io_context ioc_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
  std::unique_ptr<store::Database> db_;
  std::unique_ptr<store::DatabaseClock> db_clock_;  // clock_ when the host keeps the database's time
  session::EventHub events_;
  std::unique_ptr<session::SessionStore> sessions_;
  agent::ToolRegistry tools_;
  CommandRegistry commands_;
  std::unique_ptr<ModelRoutes> models_;
  std::unique_ptr<ProviderSettings> provider_settings_;  // after models_, which it changes
  std::unique_ptr<agent::AgentManager> agents_;
  std::unique_ptr<mcp::McpServers> mcp_;  // after events_, to which it publishes "mcp" changes
  std::optional<std::string> global_session_id_;
  bool stopped_ = false;
  Json host_info_ = Json::object();
  std::vector<std::function<Status()>> start_hooks_;
  std::vector<std::function<void()>> stop_hooks_;
  std::vector<HttpRoute> http_routes_;
  std::vector<std::function<Status(store::Tx&)>> metrics_refreshes_;  // filled before Start, read-only after
  metrics::Counter* metrics_refresh_failures_ = nullptr;            // set by AddHostMetrics
  std::vector<store::PruneTask> prune_tasks_;
  std::vector<agent::agent_store::RetainedKeys> retained_keys_;
  std::optional<store::PrunerOptions> pruner_options_;
  std::unique_ptr<store::Pruner> pruner_;  // after db_: stopped and destroyed before it
  std::unique_ptr<session::SearchIndex> search_;  // after db_ and events_: destroyed before them
  std::vector<std::shared_ptr<void>> owned_;  // last: destroyed first
};

}  // namespace dsh::host
