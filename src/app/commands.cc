#include "app/commands.h"

#include "app/cron_command.h"

namespace dsh::app {

void AddAllCommands(CLI::App& root, CommandContext& ctx) {
  AddCronCommand(root, ctx);
}

}  // namespace dsh::app
