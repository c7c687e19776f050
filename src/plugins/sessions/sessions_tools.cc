#include "plugins/sessions/sessions_tools.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "agent/tool.h"
#include "base/schema.h"
#include "host/host.h"
#include "plugins/sessions/session_service.h"
#include "plugins/sessions/sessions_command.h"

namespace dsh::plugins::sessions {
namespace {

Json RowsToJson(const std::vector<SessionStatusRow>& rows) {
  Json list = Json::array();
  for (const auto& row : rows) list.push_back(StatusRowToJson(row));
  return Json{{"sessions", std::move(list)}};
}

IntRule SafePositive() { return IntRule{.positive = true, .min = std::nullopt, .max = kMaxSafeInteger}; }

struct StatusArgs {
  std::optional<std::string> session_id;
  std::optional<int64_t> recent_n;
};

class SessionStatusTool final : public agent::TypedTool<StatusArgs> {
 public:
  explicit SessionStatusTool(SessionService service)
      : TypedTool("session_status",
                  ObjectSchema<StatusArgs>(
                      "Status of sessions: with session_id, exactly one row for that session (running, idle, "
                      "cold or missing); otherwise the most recently updated sessions, newest first. Read-only: "
                      "never resumes a session.")
                      .Optional("session_id", &StatusArgs::session_id, "One exact session to report.")
                      .Optional("recent_n", &StatusArgs::recent_n, "How many recent sessions to list (default 50).",
                                SafePositive())),
        service_(service) {}

 protected:
  void Run(const agent::ToolContext&, StatusArgs args, Done done) override {
    if (args.session_id) {
      return service_.Exact(*args.session_id, [done = std::move(done)](Result<SessionStatusRow> row) {
        if (!row.ok()) return done(row.status());
        done(Json{{"sessions", Json::array({StatusRowToJson(*row)})}});
      });
    }
    service_.Recent(args.recent_n.value_or(SessionService::kDefaultRecent),
                    [done = std::move(done)](Result<std::vector<SessionStatusRow>> rows) {
                      if (!rows.ok()) return done(rows.status());
                      done(RowsToJson(*rows));
                    });
  }

 private:
  SessionService service_;
};

struct ReadArgs {
  std::string session_id;
  std::optional<int64_t> offset;
  std::optional<int64_t> limit;
};

class SessionReadTool final : public agent::TypedTool<ReadArgs> {
 public:
  explicit SessionReadTool(SessionService service)
      : TypedTool("session_read",
                  ObjectSchema<ReadArgs>(
                      "Reads a window of a session's conversation (user, assistant and tool messages) without "
                      "resuming it.")
                      .Field("session_id", &ReadArgs::session_id, "The session to read.")
                      .Optional("offset", &ReadArgs::offset, "1-based first message to return (default 1).",
                                SafePositive())
                      .Optional("limit", &ReadArgs::limit, "At most this many messages (default and maximum 200).",
                                IntRule{.positive = true, .min = std::nullopt, .max = SessionService::kMaxReadLimit})),
        service_(service) {}

 protected:
  void Run(const agent::ToolContext&, ReadArgs args, Done done) override {
    service_.Read(args.session_id, args.offset.value_or(1), args.limit.value_or(SessionService::kMaxReadLimit),
                  [done = std::move(done)](Result<ReadWindow> w) {
                    if (!w.ok()) return done(w.status());
                    done(Json{{"session_id", w->session_id},
                              {"offset", w->offset},
                              {"messages", w->messages},
                              {"total_messages", w->total_messages},
                              {"footer", ReadFooter(*w)}});
                  });
  }

 private:
  SessionService service_;
};

struct SendArgs {
  std::string session_id;
  std::string message;
  std::optional<std::string> mode;
};

class SessionSendTool final : public agent::TypedTool<SendArgs> {
 public:
  explicit SessionSendTool(std::shared_ptr<SessionActions> actions)
      : TypedTool("session_send",
                  ObjectSchema<SendArgs>(
                      "Sends a message to an existing session. `steer` (default) wakes an idle agent or joins a "
                      "running one at its next step; `followup` queues it as the next turn. A cold session is "
                      "resumed for it; a missing one is an error. Returns the accepted message_id, not the reply.")
                      .Field("session_id", &SendArgs::session_id, "The session to send to.")
                      .Field("message", &SendArgs::message, "The message text.")
                      .Optional("mode", &SendArgs::mode, "steer (default) or followup.",
                                StringRule{.one_of = {"steer", "followup"}})),
        actions_(std::move(actions)) {}

 protected:
  void Run(const agent::ToolContext& ctx, SendArgs args, Done done) override {
    SendRequest req{std::move(args.session_id), std::move(args.message),
                    agent::ParseDeliveryMode(args.mode.value_or("steer")).value_or(agent::DeliveryMode::kSteer)};
    actions_->Send(ctx, std::move(req), [done = std::move(done)](Result<std::string> id) {
      if (!id.ok()) return done(id.status().WithContext("session_send"));
      done(Json{{"message_id", *id}});
    });
  }

 private:
  std::shared_ptr<SessionActions> actions_;
};

class SessionCreateTool final : public agent::TypedTool<CreateRequest> {
 public:
  explicit SessionCreateTool(std::shared_ptr<SessionActions> actions)
      : TypedTool(
            "session_create",
            ObjectSchema<CreateRequest>(
                "Creates a fresh session and queues `prompt` as its first message; returns once it is accepted, "
                "without waiting for the reply. Omitted model and preset are inherited from the caller, else the "
                "deployment defaults.")
                .Field("prompt", &CreateRequest::prompt, "The first message of the new session.")
                .Optional("preset", &CreateRequest::preset, "Preset id (default: the caller's, else the default).")
                .Optional("model", &CreateRequest::model,
                          ObjectSchema<CreateRequest::Model>("Model route (default: the caller's, else the default).")
                              .Field("provider", &CreateRequest::Model::provider, "Provider name.")
                              .Field("model", &CreateRequest::Model::model, "Model name.")
                              .Optional("reasoningEffort", &CreateRequest::Model::reasoning_effort,
                                        "Reasoning effort the provider supports for this model."))
                .Optional("cwd", &CreateRequest::cwd, "An existing absolute directory the session works in.")),
        actions_(std::move(actions)) {}

 protected:
  void Run(const agent::ToolContext& ctx, CreateRequest req, Done done) override {
    actions_->Create(ctx, std::move(req), [done = std::move(done)](Result<CreateResult> r) {
      if (!r.ok()) return done(r.status().WithContext("session_create"));
      done(CreateResultToJson(*r));
    });
  }

 private:
  std::shared_ptr<SessionActions> actions_;
};

struct ListArgs {
  std::optional<int64_t> limit;
};

class ListSessionsTool final : public agent::TypedTool<ListArgs> {
 public:
  explicit ListSessionsTool(SessionService service)
      : TypedTool("list_sessions",
                  ObjectSchema<ListArgs>(
                      "Lists live and cold sessions, most recently updated first, with their durable titles. "
                      "Read-only.")
                      .Optional("limit", &ListArgs::limit, "How many sessions to list (default 50).", SafePositive())),
        service_(service) {}

 protected:
  void Run(const agent::ToolContext&, ListArgs args, Done done) override {
    service_.Recent(args.limit.value_or(SessionService::kDefaultRecent),
                    [done = std::move(done)](Result<std::vector<SessionStatusRow>> rows) {
                      if (!rows.ok()) return done(rows.status());
                      done(RowsToJson(*rows));
                    });
  }

 private:
  SessionService service_;
};

struct CheckArgs {
  std::string session_id;
};

class CheckSessionStatusTool final : public agent::TypedTool<CheckArgs> {
 public:
  explicit CheckSessionStatusTool(SessionService service)
      : TypedTool("check_session_status",
                  ObjectSchema<CheckArgs>(
                      "The status of one exact session: running, idle, cold or missing. Never resumes it.")
                      .Field("session_id", &CheckArgs::session_id, "The session to check.")),
        service_(service) {}

 protected:
  void Run(const agent::ToolContext&, CheckArgs args, Done done) override {
    service_.Exact(args.session_id, [done = std::move(done)](Result<SessionStatusRow> row) {
      if (!row.ok()) return done(row.status());
      done(StatusRowToJson(*row));
    });
  }

 private:
  SessionService service_;
};

}  // namespace

Status RegisterSessionsTools(agent::ToolRegistry& tools, session::SessionStore& store, agent::AgentManager& agents,
                             CreateEnvironment env) {
  SessionService service(store, agents);
  auto actions = std::make_shared<SessionActions>(store, agents, std::move(env));
  DSH_RETURN_IF_ERROR(tools.Register(std::make_unique<SessionStatusTool>(service), kToolGroup));
  DSH_RETURN_IF_ERROR(tools.Register(std::make_unique<SessionReadTool>(service), kToolGroup));
  DSH_RETURN_IF_ERROR(tools.Register(std::make_unique<SessionSendTool>(actions), kToolGroup));
  DSH_RETURN_IF_ERROR(tools.Register(std::make_unique<SessionCreateTool>(actions), kToolGroup));
  DSH_RETURN_IF_ERROR(tools.Register(std::make_unique<ListSessionsTool>(service), kToolGroup));
  DSH_RETURN_IF_ERROR(tools.Register(std::make_unique<CheckSessionStatusTool>(service), kToolGroup));
  return Status::Ok();
}

CreateEnvironment HostCreateEnvironment(host::Host& host) {
  CreateEnvironment env;
  env.defaults = [&host] { return host.DefaultNewSession(); };
  env.preset_exists = [&host](const std::string& id) { return host.config().FindPreset(id) != nullptr; };
  env.validate_route = [&host](const session::ModelRoute& route) { return host.models().Validate(route); };
  for (const auto& ws : host.config().workspaces) env.workspaces.push_back({ws.id, ws.path});
  return env;
}

Status RegisterSessionsPlugin(host::Host& host) {
  DSH_RETURN_IF_ERROR(RegisterSessionsTools(host.tools(), host.sessions(), host.agents(), HostCreateEnvironment(host)));
  return RegisterSessionsCommand(host.commands(), host.tools());
}

}  // namespace dsh::plugins::sessions
