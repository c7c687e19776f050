#include "app/commands.h"

namespace dsh::app {

void AddAllCommands(CLI::App& root, CommandContext& ctx) {
  (void)root;
  (void)ctx;
}

}  // namespace dsh::app
