#include "app/commands.h"

#include "app/cron_command.h"
#include "app/loop_command.h"
#include "app/mcp_command.h"
#include "app/sessions_command.h"
#include "app/tool_command.h"
#include "app/web_command.h"

namespace dsh::app {

void AddAllCommands(CLI::App& root, CommandContext& ctx) {
  AddWebCommand(root, ctx);
  AddToolCommand(root, ctx);
  AddSessionsCommand(root, ctx);
  AddLoopCommand(root, ctx);
  AddCronCommand(root, ctx);
  AddMcpCommand(root, ctx);
}

}  // namespace dsh::app
