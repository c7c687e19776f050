#include "plugins/loop/loop_plugin.h"

#include <memory>

#include "host/host.h"
#include "plugins/loop/loop_registry.h"
#include "plugins/loop/loop_routes.h"
#include "plugins/loop/loop_scheduler.h"
#include "plugins/loop/loop_service.h"
#include "plugins/loop/loop_tools.h"
#include "plugins/loop/v1_import.h"

namespace dsh::plugins::loop {

std::vector<store::Migration> PluginMigrations() { return Migrations(); }

Status RegisterLoopPlugin(host::Host& host) {
  LoopEnvironment env;
  env.global_session_id = [&host] { return host.global_session_id(); };
  env.defaults = [&host] { return host.DefaultNewSession(); };
  env.preset_exists = [&host](const std::string& id) { return host.config().FindPreset(id) != nullptr; };
  env.host_zone = HostTimeZone();
  auto scheduler = std::make_shared<LoopScheduler>(host.io(), host.database(), host.sessions(), host.agents(),
                                                   host.clock(), std::move(env));
  auto service = std::make_shared<LoopService>(host.database(), host.sessions(), *scheduler, host.clock());
  DSH_RETURN_IF_ERROR(RegisterLoopTools(host.tools(), service));
  for (host::HttpRoute& route : LoopRoutes(service)) host.AddHttpRoute(std::move(route));
  host.OnStart([scheduler, &host] {
    // v1 loops found in session logs join the registry (once per profile)
    // before the first tick.
    auto imported = ImportV1Loops(host.database(), host.sessions(), host.clock());
    if (!imported.ok()) return imported.status().WithContext("importing v1 loops");
    scheduler->Start();
    return Status::Ok();
  });
  host.OnStop([scheduler] { scheduler->Stop(); });
  host.Own(scheduler);
  host.Own(service);
  return Status::Ok();
}

}  // namespace dsh::plugins::loop
