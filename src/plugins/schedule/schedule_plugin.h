#pragma once

#include <memory>

#include "agent/tool_registry.h"
#include "base/status.h"

namespace dsh::host {
class Host;
}

namespace dsh::plugins::schedule {

// The schedule plugin over a host (after Host::Open, before Host::Start;
// opt-in with `plugins.schedule.enabled`): the root-only tools
// schedule_create / schedule_list / schedule_delete in group "schedule", and
// the reminder owners of this host's live root agents (AgentObserver). It
// has no tables: a session's reminders live in its own event log.
Status RegisterSchedulePlugin(host::Host& host);

class ScheduleService;
// The three tools over `service` (RegisterSchedulePlugin's; tests use it alone).
Status RegisterScheduleTools(agent::ToolRegistry& tools, const std::shared_ptr<ScheduleService>& service);

}  // namespace dsh::plugins::schedule
