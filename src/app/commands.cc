#include "app/commands.h"

#include "app/backup_command.h"
#include "app/cron_command.h"
#include "app/doctor_command.h"
#include "app/loop_command.h"
#include "app/mcp_command.h"
#include "app/service_command.h"
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
  AddDoctorCommand(root, ctx);
  AddMcpCommand(root, ctx);
  AddServiceCommand(root, ctx);
  AddBackupCommand(root, ctx);
}

}  // namespace dsh::app
