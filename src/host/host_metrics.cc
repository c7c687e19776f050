// The host's own metrics and the scrape (docs/DEPLOY.md, "Metrics").
#include <spdlog/spdlog.h>

#include "base/version.h"
#include "host/host.h"

namespace dsh::host {

void Host::AddHostMetrics() {
  metrics_
      .AddGaugeFamily("dsh_build_info", "Always 1; the version of this dsh binary as a label.", {"version"})
      .WithLabels({kVersion})
      .Set(1);
  agent::AgentManager* agents = agents_.get();
  metrics_.AddCallback("dsh_agents_live", "Sessions live on this host, by status (running a turn or idle).",
                       metrics::Type::kGauge, {"status"}, [agents] {
                         double running = 0, idle = 0;
                         for (const auto& [id, status] : agents->LiveSessions()) {
                           (status == agent::AgentStatus::kRunning ? running : idle) += 1;
                         }
                         return std::vector<metrics::Sample>{{{"running"}, running}, {{"idle"}, idle}};
                       });
  metrics::Gauge* pending = &metrics_.AddGauge(
      "dsh_inbox_pending_messages",
      "Inbox messages accepted but not yet consumed by a turn, in the whole profile database (every host "
      "sharing it); read at scrape time.");
  AddMetricsRefresh([pending](store::Tx& tx) -> Status {
    return tx.Query("SELECT COUNT(*) FROM inbox WHERE consumed_at IS NULL", {}, [&](const store::Row& row) {
      pending->Set(static_cast<double>(row.Int(0)));
      return Status::Ok();
    });
  });
  metrics_refresh_failures_ = &metrics_.AddCounter(
      "dsh_metrics_refresh_failures_total",
      "Scrapes whose store read failed; the gauges read from the store then kept their previous values.");
}

void Host::ScrapeMetrics(std::function<void(std::string text)> done) {
  db_->Read(
      [this](store::Tx& tx) -> Status {
        for (const auto& refresh : metrics_refreshes_) DSH_RETURN_IF_ERROR(refresh(tx));
        return Status::Ok();
      },
      [this, done = std::move(done)](Status st) {
        if (!st.ok()) {
          metrics_refresh_failures_->Inc();
          spdlog::warn("metrics: the store's gauges were not refreshed: {}", st.ToString());
        }
        done(metrics_.Render());
      });
}

}  // namespace dsh::host
