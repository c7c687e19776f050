#include "host/host.h"

#include "store/sqlite_connection.h"

namespace dsh::host {

std::vector<store::Migration> Host::AllMigrations() {
  std::vector<store::Migration> all;
  for (auto& m : session::SessionStore::Migrations()) all.push_back(std::move(m));
  return all;
}

Result<std::unique_ptr<Host>> Host::Open(const HostOptions& options) {
  DSH_ASSIGN_OR_RETURN(Profile profile, Profile::Open(options.home));
  std::vector<ConfigFile> files = {{profile.config_path(), /*optional=*/true}};
  for (const auto& p : options.patches) files.push_back({p, false});
  DSH_ASSIGN_OR_RETURN(Config config, LoadConfig(files));
  std::unique_ptr<Host> host(new Host(std::move(profile), std::move(config), options.clock ? options.clock : &RealClock()));
  store::SqliteOptions sqlite{.path = host->profile_.database_path()};
  sqlite.synchronous =
      host->config_.storage.synchronous_full ? store::SqliteOptions::Synchronous::kFull : store::SqliteOptions::Synchronous::kNormal;
  DSH_ASSIGN_OR_RETURN(host->db_, store::Database::Open(std::make_unique<store::SqliteConnectionFactory>(sqlite),
                                                         AllMigrations()));
  host->sessions_ = std::make_unique<session::SessionStore>(*host->db_, *host->clock_, &host->events_);
  return host;
}

Host::~Host() { Close(); }

void Host::Close() {
  if (db_) db_->Close();
}

}  // namespace dsh::host
