#include "plugins/sessions/session_actions.h"

#include <filesystem>
#include <system_error>
#include <utility>

#include "base/strings.h"

namespace dsh::plugins::sessions {
namespace {

namespace fs = std::filesystem;

// The registered workspace holding `cwd` (the deepest one when they nest).
std::optional<std::string> WorkspaceOf(const std::vector<CreateEnvironment::Workspace>& workspaces,
                                       const std::string& cwd) {
  std::optional<std::string> best;
  size_t best_len = 0;
  for (const auto& ws : workspaces) {
    std::error_code ec;
    std::string root = fs::weakly_canonical(fs::path(ws.path), ec).string();
    if (ec) root = fs::path(ws.path).lexically_normal().string();
    while (root.size() > 1 && root.back() == '/') root.pop_back();
    bool inside = cwd == root || (cwd.size() > root.size() && cwd.compare(0, root.size(), root) == 0 &&
                                  (root == "/" || cwd[root.size()] == '/'));
    if (inside && (!best || root.size() > best_len)) {
      best = ws.id;
      best_len = root.size();
    }
  }
  return best;
}

Json SenderMeta(const agent::ToolContext& caller, const char* origin) {
  Json meta = {{"origin", origin}};
  if (caller.session_id) meta["from_session"] = *caller.session_id;
  return meta;
}

}  // namespace

Json CreateResultToJson(const CreateResult& r) {
  Json j = {{"session_id", r.session_id}, {"accepted", true}, {"status", "queued"}};
  if (r.workspace_id) j["workspace_id"] = *r.workspace_id;
  if (r.cwd) j["cwd"] = *r.cwd;
  return j;
}

void SessionActions::Send(const agent::ToolContext& caller, SendRequest request,
                          std::function<void(Result<std::string>)> done) {
  if (IsBlank(request.message)) return done(InvalidArguments("`message` must not be blank"));
  agent::Delivery d;
  d.session_id = std::move(request.session_id);
  d.text = std::move(request.message);
  d.mode = request.mode;
  d.wakeup = true;
  d.meta = SenderMeta(caller, "session_send");
  if (caller.agent_call) d.activity = agent::activity::Source{"agent_message", {}, {}, {}};
  if (caller.agent_call && caller.provider && caller.model) {
    d.resume_route = session::ModelRoute{*caller.provider, *caller.model, caller.reasoning_effort};
  }
  agents_.Deliver(std::move(d), [done = std::move(done)](Result<agent::Delivered> r) {
    if (!r.ok()) return done(r.status());
    done(r->message_id);
  });
}

void SessionActions::Create(const agent::ToolContext& caller, CreateRequest request,
                            std::function<void(Result<CreateResult>)> done) {
  if (IsBlank(request.prompt)) return done(InvalidArguments("`prompt` must not be blank"));
  Resolve(caller, [this, zone = caller.client_time_zone, request = std::move(request),
                   done = std::move(done)](Result<Source> source) mutable {
    if (!source.ok()) return done(source.status());
    source->client_time_zone = zone;  // the person's zone becomes the new session's
    CreateFrom(*source, std::move(request), std::move(done));
  });
}

void SessionActions::Resolve(const agent::ToolContext& caller, std::function<void(Result<Source>)> done) {
  if (caller.agent_call) {
    Source s;
    if (caller.provider && caller.model) s.route = session::ModelRoute{*caller.provider, *caller.model, caller.reasoning_effort};
    s.preset = caller.preset;
    s.cwd = caller.cwd;
    s.delegation_depth = caller.delegation_depth;
    s.session_id = caller.session_id;
    s.agent_call = true;
    return done(s);
  }
  if (!caller.session_id) return done(Source{});
  // A command or HTTP call from a session: that session is the source.
  store_.GetAsync(*caller.session_id, [id = *caller.session_id, done = std::move(done)](Result<session::SessionHeader> h) {
    if (!h.ok()) {
      if (h.status().code() == codes::kNotFound) {
        return done(Status(codes::kNotFound, "the calling session " + id + " does not exist"));
      }
      return done(h.status());
    }
    Source s;
    s.route = h->route;
    s.preset = h->preset;
    s.cwd = h->cwd;
    s.delegation_depth = h->delegation_depth;
    s.session_id = h->id;
    done(s);
  });
}

void SessionActions::CreateFrom(const Source& source, CreateRequest request,
                                std::function<void(Result<CreateResult>)> done) {
  session::NewSession s = env_.defaults();
  if (source.client_time_zone) s.time_zone = *source.client_time_zone;
  // Model: explicit, else the caller's effective route, else the default.
  if (request.model) {
    s.route = {request.model->provider, request.model->model, request.model->reasoning_effort};
  } else if (source.route) {
    s.route = *source.route;
  }
  if (s.route.provider.empty() || s.route.model.empty()) {
    return done(Status("no_default_model", "no default model is configured; pass `model` {provider, model}"));
  }
  if (Status st = env_.validate_route(s.route); !st.ok()) return done(st);
  // Preset: explicit, else the caller's, else the default (which may be none).
  if (request.preset) {
    if (!env_.preset_exists(*request.preset)) {
      return done(InvalidArguments("`preset` names no configured preset: \"" + *request.preset + "\""));
    }
    s.preset = request.preset;
  } else if (source.preset && env_.preset_exists(*source.preset)) {
    s.preset = source.preset;
  }
  // Location: explicit (canonical), else the caller's.
  if (request.cwd) {
    auto cwd = session::CanonicalCwd(*request.cwd);
    if (!cwd.ok()) return done(cwd.status());
    s.cwd = *cwd;
  } else {
    s.cwd = source.cwd;
  }
  s.delegation_depth = source.delegation_depth + 1;
  s.origin = "session_create";
  CreateResult result;
  result.cwd = s.cwd;
  if (s.cwd) result.workspace_id = WorkspaceOf(env_.workspaces, *s.cwd);
  agent::Delivery first;
  first.text = std::move(request.prompt);
  first.mode = agent::DeliveryMode::kSteer;
  first.meta = {{"origin", "session_create"}};
  if (source.session_id) first.meta["from_session"] = *source.session_id;
  // A session another agent made works without the person: its turn is activity.
  if (source.agent_call) first.activity = agent::activity::Source{"agent_message", {}, {}, {}};
  // The workspace is derived from the persisted cwd, which commits with the
  // session and its first message: there is no separate attach to undo.
  agents_.CreateWith(std::move(s), std::move(first),
                     [result = std::move(result), done = std::move(done)](Result<agent::Created> created) mutable {
                       if (!created.ok()) return done(created.status());
                       result.session_id = created->header.id;
                       result.message_id = created->message_id;
                       done(std::move(result));
                     });
}

}  // namespace dsh::plugins::sessions
