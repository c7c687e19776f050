#include "plugins/schedule/schedule_plugin.h"

#include <memory>
#include <utility>

#include "agent/tool.h"
#include "host/host.h"
#include "plugins/schedule/schedule_request.h"
#include "plugins/schedule/schedule_service.h"
#include "time/time_zone.h"

namespace dsh::plugins::schedule {
namespace {

// One of the three tools: arguments are decoded by the service (they need
// the session's zone and log), so this is a plain root-only Tool.
class ScheduleTool final : public agent::Tool {
 public:
  using Run = std::function<void(const agent::ToolContext&, const Json&, Done)>;
  ScheduleTool(std::string name, std::string description, Json parameters, Run run)
      : name_(std::move(name)), description_(std::move(description)), parameters_(std::move(parameters)),
        run_(std::move(run)) {}

  const std::string& name() const override { return name_; }
  const std::string& description() const override { return description_; }
  const Json& parameters() const override { return parameters_; }
  bool root_only() const override { return true; }
  void Invoke(const agent::ToolContext& ctx, const Json& args, Done done) override { run_(ctx, args, std::move(done)); }

 private:
  std::string name_;
  std::string description_;
  Json parameters_;
  Run run_;
};

}  // namespace

Status RegisterScheduleTools(agent::ToolRegistry& tools, const std::shared_ptr<ScheduleService>& service) {
  using Ctx = agent::ToolContext;
  DSH_RETURN_IF_ERROR(tools.Register(
      std::make_unique<ScheduleTool>("schedule_create", ScheduleCreateDescription(), ScheduleCreateParameters(),
                                     [service](const Ctx& c, const Json& a, agent::Tool::Done d) { service->Create(c, a, std::move(d)); }),
      "schedule"));
  DSH_RETURN_IF_ERROR(tools.Register(
      std::make_unique<ScheduleTool>("schedule_list", ScheduleListDescription(), ScheduleListParameters(),
                                     [service](const Ctx& c, const Json& a, agent::Tool::Done d) { service->List(c, a, std::move(d)); }),
      "schedule"));
  return tools.Register(
      std::make_unique<ScheduleTool>("schedule_delete", ScheduleDeleteDescription(), ScheduleDeleteParameters(),
                                     [service](const Ctx& c, const Json& a, agent::Tool::Done d) { service->Delete(c, a, std::move(d)); }),
      "schedule");
}

Status RegisterSchedulePlugin(host::Host& host) {
  auto service = std::make_shared<ScheduleService>(host.io(), host.sessions(), host.agents(), host.clock(),
                                                   HostTimeZone().name(), ScheduleOptions{.metrics = &host.metrics()});
  // A raw pointer: the host owns the service (Own below) until it is
  // destroyed, and nothing renders the metrics after the server stopped.
  ScheduleService* counted = service.get();
  host.metrics().AddCallback("dsh_reminders_active",
                             "Active reminders of the sessions live on this host (cold sessions' are not counted).",
                             metrics::Type::kGauge, {}, [counted] {
                               return std::vector<metrics::Sample>{{{}, static_cast<double>(counted->ActiveReminders())}};
                             });
  DSH_RETURN_IF_ERROR(RegisterScheduleTools(host.tools(), service));
  agent::AgentObserver observer;
  observer.live = [service](const session::SessionHeader& h) { service->OnLive(h); };
  observer.stopped = [service](const std::string& id) { service->OnStopped(id); };
  observer.keep_live = [service](const std::string& id) { return service->HasActiveReminders(id); };
  host.agents().AddObserver(std::move(observer));
  host.OnStop([service] { service->Stop(); });
  host.Own(service);
  return Status::Ok();
}

}  // namespace dsh::plugins::schedule
