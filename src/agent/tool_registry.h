#pragma once

#include <map>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "agent/tool.h"

namespace dsh::agent {

// The tools of a host, by name, in groups that presets select ("sessions",
// "loop", "mcp:fs", ...). Built-in tools are registered during startup; an
// MCP server's group is replaced whenever its tool list changes. Thread-safe:
// every member may be called from any thread; a tool found or listed stays
// valid for as long as the caller holds it, even if it is replaced.
class ToolRegistry {
 public:
  // Errors: `already_exists` when the name is taken; `invalid_arguments` for
  // a name that is not [A-Za-z0-9_-]{1,64} (what model APIs accept).
  Status Register(std::shared_ptr<Tool> tool, std::string group = "core");
  // Makes `tools` the whole of `group`: the group's other tools are removed.
  // Errors as Register (nothing changes then), also when a name belongs to
  // another group.
  Status ReplaceGroup(const std::string& group, std::vector<std::shared_ptr<Tool>> tools);

  // nullptr when unknown.
  std::shared_ptr<Tool> Find(std::string_view name) const;
  // In name order.
  std::vector<std::shared_ptr<const Tool>> List() const;
  // The group a registered tool was registered with ("" when unknown).
  std::string GroupOf(std::string_view name) const;

  // Looks `name` up and invokes it; an unknown name, or a root-only tool
  // called from a delegated session, completes with `unknown_tool`.
  void Invoke(std::string_view name, const ToolContext& ctx, const Json& args, Tool::Done done) const;

  static Status CheckName(const std::string& name);

 private:
  struct Entry {
    std::shared_ptr<Tool> tool;
    std::string group;
  };
  mutable std::shared_mutex mu_;
  std::map<std::string, Entry, std::less<>> tools_;
};

}  // namespace dsh::agent
