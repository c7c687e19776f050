#include <ostream>

#include "app/command.h"
#include "app/commands.h"
#include "app/version.h"
#include "server/http_types.h"

namespace dsh::app {

int ExitCodeFor(const Status& error) {
  return server::HttpStatusFor(error.code()) == 400 ? kExitUsage : kExitFailure;
}

int RunCli(int argc, const char* const* argv, CommandContext& ctx) {
  CLI::App root("dsh — a self-hosted agent session host", "dsh");
  root.set_version_flag("--version", std::string("dsh ") + kVersion);
  root.require_subcommand(1);
  AddAllCommands(root, ctx);
  try {
    root.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    ctx.out << root.help();
    return kExitOk;
  } catch (const CLI::CallForAllHelp& e) {
    ctx.out << root.help("", CLI::AppFormatMode::All);
    return kExitOk;
  } catch (const CLI::CallForVersion& e) {
    ctx.out << e.what() << "\n";
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    ctx.err << "error: usage: " << e.what() << "\n";
    return kExitUsage;
  }
  return ctx.exit_code;
}

}  // namespace dsh::app
