#include "app/sessions_command.h"

#include <memory>
#include <optional>
#include <ostream>

#include "app/host_client.h"
#include "host/command_line.h"

namespace dsh::app {
namespace {

constexpr const char* kUsage =
    "usage: dsh sessions status [SESSION_ID] [--recent N]\n"
    "       dsh sessions read SESSION_ID [--offset N] [--limit N]\n"
    "       dsh sessions create PROMPT [--preset ID] [--provider PROVIDER --model MODEL] [--effort LEVEL] "
    "[--cwd PATH]\n"
    "       dsh sessions create '{\"prompt\": \"...\", ...}'\n"
    "       dsh sessions send SESSION_ID MESSAGE [--mode steer|followup]\n"
    "options: --home DIR (profile, default $DSH_HOME, else ~/.dsh), --session ID (the calling session)";

struct SessionsFlags {
  std::string home;
  std::string session;
};

// Takes `--home`/`--session` (as `--x V` or `--x=V`) out of `args`, up to a
// `--`. Returns false (with the error printed) when one lacks its value.
bool TakeOwnFlags(std::vector<std::string>& args, SessionsFlags& flags, bool& help, CommandContext& ctx) {
  std::vector<std::string> rest;
  bool passthrough = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (passthrough || a == "--") {
      passthrough = true;
      rest.push_back(a);
      continue;
    }
    if (a == "--help" || a == "-h") {
      help = true;
      continue;
    }
    std::string* target = nullptr;
    std::string name;
    for (auto [flag, field] : {std::pair<const char*, std::string*>{"--home", &flags.home},
                               std::pair<const char*, std::string*>{"--session", &flags.session}}) {
      std::string f = flag;
      if (a == f || a.rfind(f + "=", 0) == 0) {
        target = field;
        name = f;
      }
    }
    if (target == nullptr) {
      rest.push_back(a);
      continue;
    }
    if (a.size() > name.size()) {
      *target = a.substr(name.size() + 1);
    } else if (i + 1 < args.size()) {
      *target = args[++i];
    } else {
      ctx.err << "error: invalid_arguments: " << name << " needs a value\n" << kUsage << "\n";
      return false;
    }
  }
  args = std::move(rest);
  return true;
}

int RunSessions(std::vector<std::string> args, SessionsFlags flags, CommandContext& ctx) {
  bool help = false;
  if (!TakeOwnFlags(args, flags, help, ctx)) return kExitUsage;
  if (help) {
    ctx.out << kUsage << "\n";
    return kExitOk;
  }
  if (args.empty()) {
    ctx.err << "error: invalid_arguments: missing subcommand\n" << kUsage << "\n";
    return kExitUsage;
  }
  auto client = HostClient::ForProfile(flags.home.empty() ? std::nullopt : std::optional(flags.home));
  if (!client.ok()) {
    ctx.err << "error: " << client.status().ToString() << "\n";
    return kExitFailure;
  }
  Json body = {{"text", SessionsCommandText(args)}};
  if (!flags.session.empty()) body["session_id"] = flags.session;
  auto res = client->Post("/api/commands", body);
  if (!res.ok()) {
    ctx.err << "error: " << res.status().ToString() << "\n";
    return ExitCodeFor(res.status());
  }
  const Json& result = (*res)["result"];
  ctx.out << (result.contains("text") && result["text"].is_string() ? result["text"].get<std::string>()
                                                                    : result.dump(2))
          << "\n";
  return kExitOk;
}

}  // namespace

std::string SessionsCommandText(const std::vector<std::string>& args) {
  std::string text = "/sessions";
  for (const auto& a : args) text += " " + host::QuoteCommandArgument(a);
  return text;
}

void AddSessionsCommand(CLI::App& root, CommandContext& ctx) {
  auto flags = std::make_shared<SessionsFlags>();
  CLI::App* sessions = root.add_subcommand(
      "sessions", "Inspect sessions, read them, create them and send them messages (the /sessions command)");
  sessions->add_option("--home", flags->home, "Profile directory (default $DSH_HOME, else ~/.dsh)");
  sessions->add_option("--session", flags->session, "Calling session id (default: a root call)");
  // Everything from the subcommand on is the /sessions command line, passed
  // through untouched (its flags are the host's to parse).
  sessions->prefix_command();
  sessions->footer(std::string(kUsage) + "\n");
  sessions->callback(
      [flags, sessions, &ctx] { ctx.exit_code = RunSessions(sessions->remaining(), *flags, ctx); });
}

}  // namespace dsh::app
