#include "app/tool_command.h"

#include <ostream>

#include "app/host_client.h"

namespace dsh::app {
namespace {

struct ToolFlags {
  std::string name;
  std::string json = "{}";
  std::string session;
  std::string home;
};

int RunTool(const ToolFlags& flags, CommandContext& ctx) {
  auto args = ParseJson(flags.json);
  if (!args.ok() || !args->is_object()) {
    ctx.err << "error: invalid_json: the arguments must be a JSON object"
            << (args.ok() ? "" : " (" + args.status().message() + ")") << "\n";
    return kExitUsage;
  }
  auto client = HostClient::ForProfile(flags.home.empty() ? std::nullopt : std::optional(flags.home));
  if (!client.ok()) {
    ctx.err << "error: " << client.status().ToString() << "\n";
    return kExitFailure;
  }
  Json body = {{"args", *args}};
  if (!flags.session.empty()) body["session_id"] = flags.session;
  auto res = client->Post("/api/tools/" + flags.name, body);
  if (!res.ok()) {
    ctx.err << "error: " << res.status().ToString() << "\n";
    return ExitCodeFor(res.status());
  }
  ctx.out << (*res)["result"].dump(2) << "\n";
  return kExitOk;
}

}  // namespace

void AddToolCommand(CLI::App& root, CommandContext& ctx) {
  auto flags = std::make_shared<ToolFlags>();
  CLI::App* tool = root.add_subcommand("tool", "Call a tool on the running host, as an agent would");
  tool->add_option("name", flags->name, "Tool name")->required();
  tool->add_option("json", flags->json, "Arguments as a JSON object (default {})");
  tool->add_option("--session", flags->session, "Calling session id (default: a root call)");
  tool->add_option("--home", flags->home, "Profile directory (default $DSH_HOME, else ~/.dsh)");
  tool->callback([flags, &ctx] { ctx.exit_code = RunTool(*flags, ctx); });
}

}  // namespace dsh::app
