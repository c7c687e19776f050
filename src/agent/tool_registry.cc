#include "agent/tool_registry.h"

#include <mutex>
#include <set>

namespace dsh::agent {

std::string_view PermissionName(Permission permission) {
  switch (permission) {
    case Permission::kAllow:
      return "allow";
    case Permission::kAsk:
      return "ask";
    case Permission::kDeny:
      return "deny";
  }
  return "deny";
}

std::optional<Permission> ParsePermission(std::string_view name) {
  if (name == "allow") return Permission::kAllow;
  if (name == "ask") return Permission::kAsk;
  if (name == "deny") return Permission::kDeny;
  return std::nullopt;
}

Json Tool::DescribeCall(const Json& args) const {
  constexpr size_t kMaxChars = 200;
  std::string text = DumpJson(args);
  if (text.size() > kMaxChars) {
    size_t cut = kMaxChars;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 sequence
    text = text.substr(0, cut) + "…";
  }
  return Json{{"summary", name() + " " + text}};
}

Status ToolRegistry::CheckName(const std::string& name) {
  if (name.empty() || name.size() > 64 ||
      name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != std::string::npos) {
    return InvalidArguments("tool name '" + name + "' must be 1 to 64 letters, digits, _ and -");
  }
  return Status::Ok();
}

Status ToolRegistry::Register(std::shared_ptr<Tool> tool, std::string group) {
  const std::string& name = tool->name();
  DSH_RETURN_IF_ERROR(CheckName(name));
  std::unique_lock lock(mu_);
  if (tools_.count(name)) return Status(codes::kAlreadyExists, "tool '" + name + "' is already registered");
  tools_.emplace(name, Entry{std::move(tool), std::move(group)});
  return Status::Ok();
}

Status ToolRegistry::ReplaceGroup(const std::string& group, std::vector<std::shared_ptr<Tool>> tools) {
  std::set<std::string, std::less<>> names;
  for (const auto& tool : tools) {
    DSH_RETURN_IF_ERROR(CheckName(tool->name()));
    if (!names.insert(tool->name()).second) {
      return Status(codes::kAlreadyExists, "tool '" + tool->name() + "' is listed twice");
    }
  }
  std::unique_lock lock(mu_);
  for (const auto& name : names) {
    auto it = tools_.find(name);
    if (it != tools_.end() && it->second.group != group) {
      return Status(codes::kAlreadyExists, "tool '" + name + "' is already registered by " + it->second.group);
    }
  }
  std::erase_if(tools_, [&](const auto& kv) { return kv.second.group == group; });
  for (auto& tool : tools) {
    std::string name = tool->name();
    tools_.emplace(std::move(name), Entry{std::move(tool), group});
  }
  return Status::Ok();
}

std::shared_ptr<Tool> ToolRegistry::Find(std::string_view name) const {
  std::shared_lock lock(mu_);
  auto it = tools_.find(name);
  return it == tools_.end() ? nullptr : it->second.tool;
}

std::string ToolRegistry::GroupOf(std::string_view name) const {
  std::shared_lock lock(mu_);
  auto it = tools_.find(name);
  return it == tools_.end() ? std::string() : it->second.group;
}

std::vector<std::shared_ptr<const Tool>> ToolRegistry::List() const {
  std::shared_lock lock(mu_);
  std::vector<std::shared_ptr<const Tool>> out;
  out.reserve(tools_.size());
  for (const auto& [_, e] : tools_) out.push_back(e.tool);
  return out;
}

void ToolRegistry::Invoke(std::string_view name, const ToolContext& ctx, const Json& args, Tool::Done done) const {
  std::shared_ptr<Tool> tool = Find(name);
  if (tool == nullptr || (tool->root_only() && ctx.delegation_depth > 0)) {
    return done(Status(codes::kUnknownTool, "no tool named '" + std::string(name) + "'"));
  }
  tool->Invoke(ctx, args, std::move(done));
}

}  // namespace dsh::agent
