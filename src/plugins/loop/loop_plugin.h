#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "store/database.h"

namespace dsh::host {
class Host;
}

namespace dsh::plugins::loop {

// The loop plugin's tables; pass them in HostOptions::plugin_migrations.
std::vector<store::Migration> PluginMigrations();

// The inbox keys (OccurrenceKey) of the occurrences that may still be
// delivered again — open runs and failed ones waiting for a retry — which
// inbox retention must keep however old (agent_store::RetainedKeys).
Result<std::vector<std::string>> OccurrenceKeysToRetain(store::Tx& tx);

// The plugin over a host (call after Host::Open, before Host::Start): the
// scheduler (started with the host, stopped before its agents) and the tools
// loop_create / loop_list / loop_delete in group "loop", and the HTTP routes
// of LoopRoutes (host.http_routes()).
Status RegisterLoopPlugin(host::Host& host);

}  // namespace dsh::plugins::loop
