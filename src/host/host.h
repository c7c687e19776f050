#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/tool_registry.h"
#include "base/clock.h"
#include "host/config.h"
#include "host/profile.h"
#include "session/session_store.h"
#include "store/database.h"

namespace dsh::host {

struct HostOptions {
  std::optional<std::string> home;   // --home
  std::vector<std::string> patches;  // --patch files, in order
  const Clock* clock = nullptr;      // RealClock() when null
};

// One host's services over one profile: configuration, the profile
// database, the session store and the tool registry (plugins register their
// tools here at startup). The server and CLI layers reach everything through
// it. Not copyable; thread-safe once opened (its members say how).
class Host {
 public:
  // Loads the profile's dsh.yml and the patches (`invalid_config` stops the
  // host), opens the database and applies migrations.
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

  // Finishes queued commits and closes the database. Idempotent.
  void Close();

  // Every schema migration of the compiled-in modules.
  static std::vector<store::Migration> AllMigrations();

 private:
  Host(Profile profile, Config config, const Clock* clock) : profile_(std::move(profile)), config_(std::move(config)), clock_(clock) {}

  Profile profile_;
  Config config_;
  const Clock* clock_;
  std::unique_ptr<store::Database> db_;
  session::EventHub events_;
  std::unique_ptr<session::SessionStore> sessions_;
  agent::ToolRegistry tools_;
};

}  // namespace dsh::host
