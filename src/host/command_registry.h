#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/json.h"
#include "base/status.h"
#include "host/command_line.h"

namespace dsh::host {

// Who runs a slash command.
struct CommandCall {
  // The calling ("current local") session; empty for a root call. Commands
  // that call tools pass it on as the tool's calling session.
  std::optional<std::string> session_id;
  // The zone of the person's browser for this request (`client_time_zone`,
  // canonical IANA name), when it sent one; passed on to the tools it calls.
  std::optional<std::string> client_time_zone;
};

// What a command answers: text for a person, data for programs.
struct CommandResult {
  std::string text;
  Json data;  // null when the command has nothing structured to return
};

// A parsed command line: "/name ARGS...".
struct CommandInput {
  std::string name;                // without the slash
  std::string args_text;           // the text after the name, as typed
  std::vector<CommandToken> args;  // args_text split by SplitCommandLine; offsets index args_text
};

// The slash commands of a host, by name (`/sessions`, ...). Commands are
// registered during startup, before the host serves requests; afterwards
// the registry is only read, from any thread, without locking (like
// agent::ToolRegistry).
//
// Every registry starts with `/help`, which lists the commands registered
// at the time it runs (itself included), one line each: `/NAME — DESCRIPTION`.
// Its data is {"commands": [{name, description}]}, names without the slash.
// It takes no arguments. Not copyable or movable: `/help` reads this registry.
class CommandRegistry {
 public:
  CommandRegistry();
  CommandRegistry(const CommandRegistry&) = delete;
  CommandRegistry& operator=(const CommandRegistry&) = delete;

  using Done = std::function<void(Result<CommandResult>)>;
  // Runs one command. Must be thread-safe (it may run on any thread,
  // concurrently) and call `done` exactly once, on any thread. Bad arguments
  // are `invalid_arguments` with the command's usage in the message.
  using Handler = std::function<void(const CommandInput& input, const CommandCall& call, Done done)>;

  struct Entry {
    std::string name;
    std::string description;
  };

  // `name` is without the slash. Errors: `invalid_arguments` when it is not
  // [a-z0-9_-]+ or the handler is empty; `already_exists` when it is taken.
  Status Register(std::string name, std::string description, Handler handler);

  // The registered commands, by name (`help` among them).
  std::vector<Entry> List() const;

  // Runs `text` ("/name args...", surrounding whitespace ignored). `done` is
  // called exactly once: with the handler's result, or with
  // `invalid_arguments` (no leading "/name", an unterminated quote),
  // `unknown_command` (no command by that name) before any handler runs.
  void Run(std::string_view text, const CommandCall& call, Done done) const;

 private:
  struct Command {
    std::string description;
    Handler handler;
  };
  std::map<std::string, Command, std::less<>> commands_;
};

}  // namespace dsh::host
