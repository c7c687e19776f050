#include "agent/tool_registry.h"

namespace dsh::agent {

Status ToolRegistry::Register(std::unique_ptr<Tool> tool, std::string group) {
  const std::string& name = tool->name();
  if (name.empty() || name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos) {
    return InvalidArguments("tool name '" + name + "' must be lowercase letters, digits and _");
  }
  if (tools_.count(name)) return Status(codes::kAlreadyExists, "tool '" + name + "' is already registered");
  tools_.emplace(name, Entry{std::move(tool), std::move(group)});
  return Status::Ok();
}

Tool* ToolRegistry::Find(std::string_view name) const {
  auto it = tools_.find(name);
  return it == tools_.end() ? nullptr : it->second.tool.get();
}

const std::string& ToolRegistry::GroupOf(std::string_view name) const {
  static const std::string kNone;
  auto it = tools_.find(name);
  return it == tools_.end() ? kNone : it->second.group;
}

std::vector<const Tool*> ToolRegistry::List() const {
  std::vector<const Tool*> out;
  for (const auto& [_, e] : tools_) out.push_back(e.tool.get());
  return out;
}

void ToolRegistry::Invoke(std::string_view name, const ToolContext& ctx, const Json& args, Tool::Done done) const {
  Tool* tool = Find(name);
  if (tool == nullptr || (tool->root_only() && ctx.delegation_depth > 0)) {
    return done(Status(codes::kUnknownTool, "no tool named '" + std::string(name) + "'"));
  }
  tool->Invoke(ctx, args, std::move(done));
}

}  // namespace dsh::agent
