#include "host/command_registry.h"

#include <utility>

namespace dsh::host {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

bool ValidName(std::string_view name) {
  return !name.empty() &&
         name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_-") == std::string_view::npos;
}

}  // namespace

CommandRegistry::CommandRegistry() {
  Handler help = [this](const CommandInput& input, const CommandCall&, Done done) {
    if (!input.args.empty()) return done(InvalidArguments("/help takes no arguments (usage: /help)"));
    CommandResult result;
    result.text = "Slash commands (run by dsh, never sent to the model):";
    result.data = Json{{"commands", Json::array()}};
    for (const Entry& e : List()) {
      result.text += "\n/" + e.name + (e.description.empty() ? "" : " — " + e.description);
      result.data["commands"].push_back(Json{{"name", e.name}, {"description", e.description}});
    }
    done(std::move(result));
  };
  commands_.emplace("help", Command{"List the slash commands, one line each.", std::move(help)});
}

Status CommandRegistry::Register(std::string name, std::string description, Handler handler) {
  if (!ValidName(name)) {
    return InvalidArguments("command name '" + name + "' must be lowercase letters, digits, _ and -");
  }
  if (!handler) return InvalidArguments("command /" + name + " needs a handler");
  if (commands_.count(name))
    return Status(codes::kAlreadyExists, "command /" + name + " is already registered");
  commands_.emplace(std::move(name), Command{std::move(description), std::move(handler)});
  return Status::Ok();
}

std::vector<CommandRegistry::Entry> CommandRegistry::List() const {
  std::vector<Entry> out;
  for (const auto& [name, command] : commands_) out.push_back({name, command.description});
  return out;
}

void CommandRegistry::Run(std::string_view text, const CommandCall& call, Done done) const {
  size_t begin = 0;
  while (begin < text.size() && IsSpace(text[begin])) ++begin;
  if (begin == text.size() || text[begin] != '/') {
    return done(InvalidArguments("a command starts with /NAME, e.g. /sessions status"));
  }
  size_t name_end = begin + 1;
  while (name_end < text.size() && !IsSpace(text[name_end])) ++name_end;
  std::string_view name = text.substr(begin + 1, name_end - begin - 1);
  if (name.empty()) return done(InvalidArguments("a command needs a name after /"));
  auto it = commands_.find(name);
  if (it == commands_.end()) {
    std::string known;
    for (const auto& [n, _] : commands_) known += (known.empty() ? "/" : ", /") + n;
    return done(Status(codes::kUnknownCommand, "no command /" + std::string(name) +
                                                   (known.empty() ? "" : " (commands: " + known + ")")));
  }
  CommandInput input;
  input.name = std::string(name);
  input.args_text = std::string(text.substr(name_end));
  auto args = SplitCommandLine(input.args_text);
  if (!args.ok()) return done(args.status().WithContext("/" + input.name));
  input.args = std::move(args).value();
  it->second.handler(input, call, std::move(done));
}

}  // namespace dsh::host
