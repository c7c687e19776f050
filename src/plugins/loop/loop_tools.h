#pragma once

#include <memory>

#include "agent/tool_registry.h"
#include "base/status.h"
#include "plugins/loop/loop_service.h"

namespace dsh::plugins::loop {

// The tool group presets select these tools by.
inline constexpr const char* kToolGroup = "loop";

// Registers, in group "loop" (docs/LOOPS.md):
//   loop_create({prompt, schedule?, session_id?, preset?, time_in_seconds?}) -> LoopView
//   loop_list({session_id?}) -> LoopView[]
//   loop_delete({loop_id} | {id}) -> {deleted: true, loop_id}
Status RegisterLoopTools(agent::ToolRegistry& tools, std::shared_ptr<LoopService> service);

}  // namespace dsh::plugins::loop
