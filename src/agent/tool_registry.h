#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "agent/tool.h"

namespace dsh::agent {

// The tools of a host, by name. Tools are registered during startup, before
// the host serves requests or runs turns; afterwards the registry is only
// read, from any thread, without locking.
class ToolRegistry {
 public:
  // Errors: `already_exists` when the name is taken; `invalid_arguments` for
  // a name that is not [a-z0-9_]+.
  // `group` is what presets select tools by ("sessions", "loop", ...).
  Status Register(std::unique_ptr<Tool> tool, std::string group = "core");

  // nullptr when unknown.
  Tool* Find(std::string_view name) const;
  std::vector<const Tool*> List() const;
  // The group a registered tool was registered with ("" when unknown).
  const std::string& GroupOf(std::string_view name) const;

  // Looks `name` up and invokes it; an unknown name, or a root-only tool
  // called from a delegated session, completes with `unknown_tool`.
  void Invoke(std::string_view name, const ToolContext& ctx, const Json& args, Tool::Done done) const;

 private:
  struct Entry {
    std::unique_ptr<Tool> tool;
    std::string group;
  };
  std::map<std::string, Entry, std::less<>> tools_;
};

}  // namespace dsh::agent
