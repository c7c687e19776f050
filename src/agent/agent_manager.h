#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/agent_store.h"
#include "agent/model.h"
#include "agent/tool_registry.h"
#include "base/clock.h"
#include "base/metrics.h"
#include "base/status.h"
#include "session/session_store.h"
#include "store/database.h"

namespace dsh::agent {

class Agent;

enum class AgentStatus { kRunning, kIdle, kCold, kMissing };
std::string_view AgentStatusName(AgentStatus status);

// What a preset gives an agent: its system prompt, which tools it may use,
// and what it may do with them without asking (docs/TOOLS.md).
struct PresetView {
  std::string system_prompt;
  bool all_tools = true;
  std::vector<std::string> tool_groups;  // when !all_tools
  // Per tool name; a tool not named gets its Tool::default_permission().
  std::map<std::string, Permission, std::less<>> permissions;
};

// What the host supplies to agents. Every function must be thread-safe.
struct AgentEnvironment {
  // The preset of a session (nullopt = the default preset). An unknown id
  // (the profile changed since the session was created) gets the default.
  std::function<PresetView(const std::optional<std::string>& preset)> preset;
  // Context plugins contribute to every request, appended to the system
  // prompt in order ("Current time: ..."). May return "" to add nothing.
  // `client_time_zone` is the zone of the person whose message started the
  // turn (see ToolContext::client_time_zone), when known.
  using ContextFn =
      std::function<std::string(const session::SessionHeader&, const std::optional<std::string>& client_time_zone)>;
  std::vector<ContextFn> context;
};

// Plugins that keep state per live agent (the schedule plugin's reminder
// owner) observe agents of this host going live and stopping. Callbacks run
// on io threads, outside the manager's lock, and must not block.
struct AgentObserver {
  // The session's agent went live here (it has started; the header as stored).
  std::function<void(const session::SessionHeader& header)> live;
  // That agent stopped for good (evicted, lease lost, host stopping); it is
  // no longer in the live map when this runs.
  std::function<void(const std::string& session_id)> stopped;
  // True while the session must stay live although idle (it has a pending
  // reminder): the idle eviction skips it. Called from the sweep, outside
  // the manager's lock; must be quick.
  std::function<bool(const std::string& session_id)> keep_live;
};

struct AgentManagerOptions {
  std::chrono::milliseconds idle_eviction{std::chrono::minutes(10)};
  int max_steps = 50;  // model calls per turn
  // Ownership: leases last `lease_ttl` and are renewed every third of it. A
  // host that cannot renew a lease stops that session's agent.
  std::chrono::milliseconds lease_ttl{std::chrono::seconds(15)};
  // How often pending inbox messages written by other hosts (or left by a
  // crashed one) are looked for, and idle agents checked for eviction.
  std::chrono::milliseconds sweep_interval{std::chrono::seconds(1)};
  // Titles generated with a real model after the first completed turn.
  bool generate_titles = true;
  // Deliveries' activity items and their turns' outcomes (activity_store.h)
  // are recorded. Off only to measure what recording costs (loop_bench
  // --no-outcomes).
  bool record_activity = true;
  // How long a tool call the preset asks about waits for a person's answer
  // (`tools.approval_timeout`); then it is answered `approval_timeout`.
  std::chrono::milliseconds approval_timeout{std::chrono::minutes(15)};
  // Where the turn and model-call metrics go (docs/DEPLOY.md, "Metrics"):
  // dsh_turns_total, dsh_turn_seconds, dsh_model_calls_total,
  // dsh_model_call_seconds, dsh_model_tokens_total. Borrowed, must outlive
  // the manager; none when null.
  metrics::Registry* metrics = nullptr;
};

struct Delivery {
  std::string session_id;
  std::string text;  // must not be blank
  DeliveryMode mode = DeliveryMode::kSteer;
  bool wakeup = true;  // false: waits for a turn that starts for another reason
  std::optional<std::string> key;  // idempotency key, unique per session
  Json meta = Json::object();      // copied into the user message event (`origin`, `loop_id`, ...)
  // The route a cold session runs with when this delivery resumes it here
  // (session_send from an agent: the caller's route). Not persisted; ignored
  // when the session is live or already being resumed.
  std::optional<session::ModelRoute> resume_route;
  // What the activity list records of it (a delivery the person did not
  // make: a loop run, a reminder, another agent's message); none = nothing.
  std::optional<activity::Source> activity;
};

struct Delivered {
  std::string message_id;
  bool duplicate = false;  // the key was seen before; nothing was delivered
};

struct Created {
  session::SessionHeader header;
  std::string message_id;  // the first message's
};

// The live agents of one host and the way to reach any session's agent.
//
// Sessions are live in at most one host of a profile: a host holds a lease
// per live session in the store and never runs a session whose lease another
// live host holds. Messages go through the durable inbox: Deliver answers
// only after the message committed, and an accepted message is processed
// when its session is next live (a cold session is resumed for it, here or
// by another host's sweep; a crashed host's messages are picked up after a
// restart).
//
// Thread-safe. Callbacks run on database or io threads; they must not
// block. Call Start() once before use and Stop() before destroying; the
// io_context must be running while Stop() waits.
class AgentManager {
 public:
  AgentManager(boost::asio::io_context& ioc, store::Database& db, session::SessionStore& sessions, ModelRouter& models,
               const ToolRegistry& tools, const Clock& clock, AgentEnvironment environment,
               AgentManagerOptions options);
  ~AgentManager();

  // The agent layer's tables: the inbox, the leases, the activity list and
  // the webhook outbox.
  static std::vector<store::Migration> Migrations() {
    auto all = agent_store::Migrations();
    for (auto& m : activity::Migrations()) all.push_back(std::move(m));
    for (auto& m : outbox::Migrations()) all.push_back(std::move(m));
    return all;
  }

  // Registration, before Start(): a context contributor for every model
  // request, and an observer of agents going live and stopping.
  void AddContext(AgentEnvironment::ContextFn context) { environment_.context.push_back(std::move(context)); }
  void AddObserver(AgentObserver observer) { observers_.push_back(std::move(observer)); }

  // Starts the sweep timer (lease renewal, eviction, pending messages). The
  // first sweep runs at once, so pending messages of a previous run resume.
  void Start();
  // Stops new work, cancels turns in flight (they end with a `turn/end`
  // error event only if the database still takes writes), waits for every
  // agent to settle and releases the leases. Idempotent.
  void Stop();

  // running / idle from the live map; cold or missing need the store.
  void GetStatus(const std::string& session_id, std::function<void(AgentStatus)> done);
  // The live status only: nullopt when the session is not live here.
  std::optional<AgentStatus> LiveStatus(const std::string& session_id) const;
  // True while the session's running turn here waits for a person's
  // decision on a tool call (from just before the request is logged).
  bool AwaitingApproval(const std::string& session_id) const;
  // Live session ids with their status (running or idle).
  std::vector<std::pair<std::string, AgentStatus>> LiveSessions() const;

  // Makes a cold session live with its persisted preset and route. Errors:
  // `not_found`, `session_busy` (live in another host), `shutting_down`.
  void Resume(const std::string& session_id, std::function<void(Status)> done);
  // Creates a session and makes it live.
  void Create(session::NewSession session, std::function<void(Result<session::SessionHeader>)> done);
  // Creates a session and accepts its first message (with its key, if any)
  // in the same transaction (`first.session_id` is ignored; give the session
  // an id in `session.id` to know it in advance), then makes it live,
  // which starts the first turn. Answers once both committed: when the
  // session cannot go live at once (the host is stopping), the message stays
  // pending and runs when the session is next live. Errors:
  // `invalid_arguments` (blank text), `already_exists` (that id is taken),
  // `shutting_down`, storage errors; nothing is created on error.
  void CreateWith(session::NewSession session, Delivery first, std::function<void(Result<Created>)> done);

  // Accepts a message durably (see Delivery). Errors: `invalid_arguments`
  // (blank text), `not_found` (no such session; nothing is created),
  // storage errors.
  void Deliver(Delivery delivery, std::function<void(Result<Delivered>)> done);

  // Runs `task` on the agent while it is idle, keeping turns from starting
  // until the task calls its `finished` argument. Fails with `agent_busy`
  // when a turn is running, `not_live` when the session is not live here.
  using MaintenanceTask = std::function<void(std::function<void()> finished)>;
  void RunMaintenance(const std::string& session_id, MaintenanceTask task, std::function<void(Status)> done);
  // Completes when the agent is next idle (at once when it is idle now);
  // `not_live` when it is not live here.
  void WhenIdle(const std::string& session_id, std::function<void(Status)> done);
  // Cancels the running turn, if any.
  void Cancel(const std::string& session_id);
  // A person's answer to the tool call `call_id` waiting for approval in
  // the session's running turn: `allow_once`, `allow_session` (the tool
  // runs without asking for the rest of the session: the grant is an event)
  // or `deny`. Answers once the decision is logged. Errors:
  // `invalid_arguments` (another decision), `conflict` (no such call waits:
  // answered, timed out or its turn ended), `not_live` (the session is not
  // live on this host).
  void AnswerApproval(const std::string& session_id, const std::string& call_id, const std::string& decision,
                      std::function<void(Status)> done);

  const std::string& holder() const { return holder_; }

  // Blocks until `session_id` is not live here (evicted, stopped, lease lost)
  // or `timeout` passed; true when it is not live. Not on an io thread.
  bool WaitUntilNotLive(const std::string& session_id, std::chrono::milliseconds timeout);

  // For tests and benchmarks: evicts idle agents now, as if their idle time
  // had passed — also those an observer keeps live (keep_live).
  void EvictIdleForTesting();

  // The webhook endpoints the facts this manager records go out to
  // (outbox.h; set by the webhooks plugin, none by default). Thread-safe.
  outbox::SubscriptionSource& webhooks() { return webhooks_; }

 private:
  friend class Agent;

  void Sweep();
  void PollInbox();
  void ReloadPending(std::shared_ptr<Agent> agent);
  // Writes a message to the inbox, then routes it.
  void Accept(InboxMessage message, std::optional<std::string> key, std::function<void(Result<Delivered>)> done,
              std::optional<session::ModelRoute> resume_route = std::nullopt);
  // Tells the change feed the activity list changed (a delivery with an
  // activity source committed).
  void NoteActivity(const std::string& session_id) const;
  // Hands a committed message to its live agent, or resumes its session.
  void Route(const InboxMessage& message, std::optional<session::ModelRoute> resume_route);
  void ResumeForPending(const std::string& session_id, std::optional<session::ModelRoute> route = std::nullopt);
  // `route` replaces the persisted route for this run of the session.
  void ResumeWith(const std::string& session_id, std::vector<InboxMessage> extra, std::function<void(Status)> done,
                  std::optional<session::ModelRoute> route = std::nullopt);
  void Activate(session::SessionHeader header, std::vector<session::Event> events, std::vector<InboxMessage> pending);
  void FinishResume(const std::string& session_id, const Status& status);
  void StopAgents(std::vector<std::shared_ptr<Agent>> agents, bool only_if_idle);
  // Called by an agent (on its strand) once it stopped for good.
  void AgentStopped(const std::string& session_id, Agent* agent);
  std::shared_ptr<Agent> Find(const std::string& session_id) const;
  // Metrics (thread-safe; nothing without AgentManagerOptions::metrics).
  // `route` is "provider/model".
  void CountTurn(const std::string& route, bool completed, std::chrono::duration<double> took);
  void CountToolCall(const std::string& tool, const std::string& result);
  void CountModelCall(const std::string& route, const Result<ModelResponse>& result, std::chrono::duration<double> took);

  boost::asio::io_context& ioc_;
  store::Database& db_;
  session::SessionStore& sessions_;
  ModelRouter& models_;
  const ToolRegistry& tools_;
  const Clock& clock_;
  AgentEnvironment environment_;
  std::vector<AgentObserver> observers_;  // filled before Start, read-only after
  AgentManagerOptions options_;
  outbox::SubscriptionSource webhooks_;
  std::string holder_;

  mutable std::mutex mu_;
  std::condition_variable settled_cv_;  // live_, sweeping_, timer_armed_ or stopping_observed_ changed
  struct Slot {
    std::shared_ptr<Agent> agent;                      // null while resuming
    std::vector<std::function<void(Status)>> waiters;  // resume callbacks
    std::vector<InboxMessage> early;                   // delivered while resuming
    // The route to run with instead of the header's, from the first resume
    // request that had one (a delivery's resume_route), even when another
    // request (an inbox sweep) started the resume.
    std::optional<session::ModelRoute> route;
  };
  std::map<std::string, Slot> live_;  // GUARDED_BY(mu_)
  bool stopped_ = false;              // GUARDED_BY(mu_)
  bool sweeping_ = false;             // GUARDED_BY(mu_)
  // Agents that left live_ whose observers are still being told; Stop() and
  // WaitUntilNotLive() wait for them so no "stopped" arrives after they return.
  int stopping_observed_ = 0;  // GUARDED_BY(mu_)
  bool timer_armed_ = false;          // GUARDED_BY(mu_); the timer (or the first, posted sweep) is pending; the timer is only touched under mu_
  // Touched only by the sweep chain, one step at a time.
  bool renewed_once_ = false;
  int64_t last_renewal_ms_ = 0;
  int64_t last_renewed_ok_ms_ = 0;  // when a renewal last committed

  boost::asio::steady_timer sweep_timer_;
  store::Subscription inbox_notices_;  // set by Start, ended by Stop
  // From options_.metrics; all null without.
  metrics::Family<metrics::Counter>* turns_ = nullptr;                 // route, result
  metrics::Family<metrics::Histogram>* turn_seconds_ = nullptr;        // route
  metrics::Family<metrics::Counter>* model_calls_ = nullptr;           // route, result
  metrics::Family<metrics::Counter>* tool_calls_ = nullptr;            // tool, result
  metrics::Family<metrics::Histogram>* model_call_seconds_ = nullptr;  // route
  metrics::Family<metrics::Counter>* model_tokens_ = nullptr;          // route, direction
};

}  // namespace dsh::agent
