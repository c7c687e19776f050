#include "plugins/loop/loop_plugin.h"

#include <csignal>
#include <cstdlib>
#include <memory>
#include <string_view>

#include "host/host.h"
#include "plugins/loop/loop_registry.h"
#include "plugins/loop/loop_routes.h"
#include "plugins/loop/loop_scheduler.h"
#include "plugins/loop/loop_service.h"
#include "plugins/loop/loop_tools.h"
#include "plugins/loop/v1_import.h"

namespace dsh::plugins::loop {

std::vector<store::Migration> PluginMigrations() { return Migrations(); }

namespace {

// Fault injection for the end-to-end crash tests of the real binary:
// `DSH_FAULT=loop_kill_after_claim` makes the host SIGKILL itself as soon
// as its first claim has committed (before anything is delivered). Unset,
// nothing is hooked.
SchedulerOptions OptionsFromEnvironment() {
  SchedulerOptions options;
  const char* fault = std::getenv("DSH_FAULT");
  if (fault && std::string_view(fault) == "loop_kill_after_claim") {
    options.on_step = [](SchedulerStep step, const registry::Claim&) {
      if (step == SchedulerStep::kClaimCommitted) std::raise(SIGKILL);
    };
  }
  return options;
}

}  // namespace

Status RegisterLoopPlugin(host::Host& host) {
  LoopEnvironment env;
  env.global_session_id = [&host] { return host.global_session_id(); };
  env.defaults = [&host] { return host.DefaultNewSession(); };
  env.preset_exists = [&host](const std::string& id) { return host.config().FindPreset(id) != nullptr; };
  env.host_zone = HostTimeZone();
  auto scheduler = std::make_shared<LoopScheduler>(host.io(), host.database(), host.sessions(), host.agents(),
                                                   host.clock(), std::move(env),
                                                   OptionsFromEnvironment());
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
