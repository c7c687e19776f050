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

Result<std::vector<std::string>> OccurrenceKeysToRetain(store::Tx& tx) {
  DSH_ASSIGN_OR_RETURN(auto occurrences, registry::RetryableOccurrences(tx));
  std::vector<std::string> keys;
  keys.reserve(occurrences.size());
  for (const auto& o : occurrences) keys.push_back(OccurrenceKey(o.loop_id, o.nominal));
  return keys;
}

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

// Gauges read from the loop tables at each scrape (docs/DEPLOY.md,
// "Metrics"); profile-wide, like the tables.
void AddLoopGauges(host::Host& host) {
  metrics::Gauge* active = &host.metrics().AddGauge(
      "dsh_loops_active", "Loops in the profile that are not completed (scheduled, or failed and retrying).");
  metrics::Gauge* due = &host.metrics().AddGauge(
      "dsh_loops_due", "Loops whose next occurrence (or retry) is due now and not yet claimed.");
  const Clock* clock = &host.clock();
  host.AddMetricsRefresh([active, due, clock](store::Tx& tx) -> Status {
    DSH_RETURN_IF_ERROR(tx.Query("SELECT COUNT(*) FROM loops WHERE state <> 'completed'", {}, [&](const store::Row& row) {
      active->Set(static_cast<double>(row.Int(0)));
      return Status::Ok();
    }));
    int64_t now = ToUnixMillis(clock->Now());
    return tx.Query("SELECT COUNT(*) FROM loops WHERE next_at IS NOT NULL AND next_at <= ?", {now},
                    [&](const store::Row& row) {
                      due->Set(static_cast<double>(row.Int(0)));
                      return Status::Ok();
                    });
  });
}

}  // namespace

Status RegisterLoopPlugin(host::Host& host) {
  LoopEnvironment env;
  env.global_session_id = [&host] { return host.global_session_id(); };
  env.defaults = [&host] { return host.DefaultNewSession(); };
  env.preset_exists = [&host](const std::string& id) { return host.config().FindPreset(id) != nullptr; };
  env.host_zone = HostTimeZone();
  SchedulerOptions options = OptionsFromEnvironment();
  options.metrics = &host.metrics();
  AddLoopGauges(host);
  auto scheduler = std::make_shared<LoopScheduler>(host.io(), host.database(), host.sessions(), host.agents(),
                                                   host.clock(), std::move(env), std::move(options));
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
  // Retention: the run history by retention.loop_runs / loop_run_days, and
  // the inbox keeps the key of every occurrence that may still be delivered
  // again (open or waiting for a retry), however old (registry.h).
  const auto& keep = host.config().retention;
  if (keep.loop_runs > 0 || keep.loop_run_days > 0) {
    host.AddPruneTask(registry::RunsPruneTask({keep.loop_runs, keep.loop_run_days * 86'400'000}));
  }
  host.AddRetainedInboxKeys(OccurrenceKeysToRetain);
  host.Own(scheduler);
  host.Own(service);
  return Status::Ok();
}

}  // namespace dsh::plugins::loop
