#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "agent/model.h"
#include "base/json.h"
#include "base/schema.h"
#include "base/status.h"

namespace dsh::agent {

// What a preset lets an agent do with a tool (docs/TOOLS.md): run it, ask a
// person first, or refuse. Only a model's calls inside a turn are asked
// about; a person's own calls (`POST /api/tools/{name}`, `dsh tool`) run.
enum class Permission { kAllow, kAsk, kDeny };
std::string_view PermissionName(Permission permission);  // "allow" | "ask" | "deny"
std::optional<Permission> ParsePermission(std::string_view name);

// Who is calling a tool. The same for a model's tool call inside a turn and
// for `POST /api/tools/{name}`.
struct ToolContext {
  // The calling ("current local") session; empty for a root call.
  std::optional<std::string> session_id;
  // How many session_create hops separate the caller from a root session.
  int64_t delegation_depth = 0;
  // The calling agent's model route and preset, when an agent calls (absent
  // for HTTP and CLI calls): session_create inherits them.
  std::optional<std::string> provider;
  std::optional<std::string> model;
  std::optional<std::string> reasoning_effort;
  std::optional<std::string> preset;
  std::optional<std::string> cwd;  // the calling agent's session cwd
  bool agent_call = false;  // true for a model's tool call inside a turn
  // The zone of the person behind this call (canonical IANA name): the
  // `client_time_zone` of an HTTP tool call or command, or, inside a turn,
  // that of the message that started the turn. Absent when unknown.
  std::optional<std::string> client_time_zone;
  // The running turn's token, inside a turn (null otherwise): a tool that
  // waits on something outside (an MCP server) stops waiting when it is
  // cancelled.
  std::shared_ptr<CancelToken> cancel;
};

// One tool. Implementations are thread-safe: Invoke may be called from any
// thread, concurrently.
class Tool {
 public:
  using Done = std::function<void(Result<Json>)>;
  virtual ~Tool() = default;

  virtual const std::string& name() const = 0;
  virtual const std::string& description() const = 0;
  // The JSON Schema of the arguments, as sent to models.
  virtual const Json& parameters() const = 0;
  // True for a tool offered only to root sessions (delegation depth 0): a
  // child session's agent does not see it, and the registry answers a call
  // whose context is deeper with `unknown_tool`.
  virtual bool root_only() const { return false; }
  // True for a tool that works in the session's directory: an agent whose
  // session has no `cwd` is not offered it.
  virtual bool needs_cwd() const { return false; }
  // What a preset that says nothing about this tool lets an agent do.
  virtual Permission default_permission() const { return Permission::kAllow; }
  // What a person deciding whether to allow a call sees: {"summary": one
  // line (the command, the path), "detail"?: more (a diff)}. `args` may not
  // have been validated yet.
  virtual Json DescribeCall(const Json& args) const;
  // Validates `args` and runs the tool. `done` is called exactly once, on any
  // thread, with the result or an error (`invalid_arguments` for bad args,
  // before anything runs).
  virtual void Invoke(const ToolContext& ctx, const Json& args, Done done) = 0;
};

// A tool whose arguments are decoded by an ObjectSchema<Args> before Run, so
// the schema models see and the validation that runs are one declaration.
template <typename Args>
class TypedTool : public Tool {
 public:
  TypedTool(std::string name, ObjectSchema<Args> schema)
      : name_(std::move(name)), schema_(std::move(schema)), parameters_(schema_.ToJsonSchema()) {}

  const std::string& name() const final { return name_; }
  const std::string& description() const final { return schema_.description(); }
  const Json& parameters() const final { return parameters_; }
  void Invoke(const ToolContext& ctx, const Json& args, Done done) final {
    auto decoded = schema_.Decode(args);
    if (!decoded.ok()) return done(decoded.status().WithContext(name_));
    Run(ctx, std::move(decoded).value(), std::move(done));
  }

 protected:
  virtual void Run(const ToolContext& ctx, Args args, Done done) = 0;

 private:
  std::string name_;
  ObjectSchema<Args> schema_;
  Json parameters_;
};

}  // namespace dsh::agent
