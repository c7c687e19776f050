#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "agent/agent_manager.h"
#include "agent/tool.h"
#include "base/json.h"
#include "base/status.h"
#include "session/session_store.h"

namespace dsh::plugins::sessions {

// What session_create needs from the deployment (the host supplies it from
// its config and model routes). Every function must be thread-safe.
struct CreateEnvironment {
  // A fresh root session: the default preset (nullopt when none is
  // configured), the default model route (empty provider when none) and the
  // host's time zone.
  std::function<session::NewSession()> defaults;
  // Whether a preset id is configured.
  std::function<bool(const std::string& preset)> preset_exists;
  // `unknown_provider` / `unknown_model` / `invalid_reasoning_effort` for a
  // route the deployment cannot run.
  std::function<Status(const session::ModelRoute& route)> validate_route;
  struct Workspace {
    std::string id;
    std::string path;  // absolute
  };
  std::vector<Workspace> workspaces;
};

// session_send's arguments, decoded.
struct SendRequest {
  std::string session_id;
  std::string message;
  agent::DeliveryMode mode = agent::DeliveryMode::kSteer;
};

// session_create's arguments, decoded.
struct CreateRequest {
  std::string prompt;
  std::optional<std::string> preset;
  struct Model {
    std::string provider;
    std::string model;
    std::optional<std::string> reasoning_effort;
  };
  std::optional<Model> model;
  std::optional<std::string> cwd;
};

struct CreateResult {
  std::string session_id;
  std::string message_id;  // the initial prompt's inbox message
  std::optional<std::string> cwd;
  std::optional<std::string> workspace_id;
};
// {session_id, accepted: true, status: "queued", cwd?, workspace_id?}
Json CreateResultToJson(const CreateResult& result);

// The writing half of the sessions plugin (spec 003): delivering a message
// to an existing session and creating a fresh one with its first prompt.
// Holds references; `store` and `agents` must outlive it. Thread-safe;
// callbacks run on database or io threads, exactly once each.
class SessionActions {
 public:
  SessionActions(session::SessionStore& store, agent::AgentManager& agents, CreateEnvironment env)
      : store_(store), agents_(agents), env_(std::move(env)) {}

  // Accepts `message` into the session's inbox with wakeup: an idle agent
  // starts a turn, a running one takes a steer at its next step boundary and
  // a followup as its next turn; a cold session is resumed here with its
  // persisted preset, running with the calling agent's route when an agent
  // calls. Answers the accepted message id. Errors: `invalid_arguments`
  // (blank message), `not_found` (nothing is created), storage errors.
  void Send(const agent::ToolContext& caller, SendRequest request, std::function<void(Result<std::string>)> done);

  // Creates a session and queues `prompt` as its first message; answers once
  // both committed and the session is live (it does not wait for the
  // model). Model and preset resolve independently (spec 003 section 2):
  // explicit, else the caller's (an agent, or the calling session of a
  // command or HTTP call), else the deployment default. `cwd` must be an
  // existing absolute directory and is stored canonical; without it a
  // session caller's cwd is inherited. Everything is validated before
  // anything is written. Errors: `invalid_arguments` naming the field
  // (blank prompt, unknown preset, bad cwd), `unknown_provider`,
  // `unknown_model`, `invalid_reasoning_effort`, `no_default_model`,
  // `not_found` (the calling session does not exist), storage errors.
  void Create(const agent::ToolContext& caller, CreateRequest request,
              std::function<void(Result<CreateResult>)> done);

 private:
  // The inheritance source of a create: the calling agent, the calling
  // session's persisted header, or none for a root call.
  struct Source {
    std::optional<session::ModelRoute> route;
    std::optional<std::string> preset;
    std::optional<std::string> cwd;
    int64_t delegation_depth = -1;  // -1: a root call
    std::optional<std::string> session_id;
    std::optional<std::string> client_time_zone;  // of the request; the new session's time_zone when given
    bool agent_call = false;  // an agent made the call: the new session's first turn is activity
  };
  void Resolve(const agent::ToolContext& caller, std::function<void(Result<Source>)> done);
  void CreateFrom(const Source& source, CreateRequest request, std::function<void(Result<CreateResult>)> done);

  session::SessionStore& store_;
  agent::AgentManager& agents_;
  CreateEnvironment env_;
};

}  // namespace dsh::plugins::sessions
