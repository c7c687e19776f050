#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>
#include <string>
#include <vector>

#include "agent/agent_manager.h"
#include "agent/agent_store.h"
#include "agent/model.h"
#include "session/event.h"
#include "session/session_header.h"

namespace dsh::agent {

// Turn bookkeeping events an agent appends (docs/AGENTS.md):
//   turn/start {}                                 before the turn's first user message
//   turn/end   {status: "completed"|"error", error?: {code, message},
//               usage?: {input_tokens, output_tokens}}
// A turn/start without a turn/end is a turn a crash or shutdown interrupted;
// the agent continues it when the session is next live.
//
// A tool call the preset asks about (Permission::kAsk):
//   tool/approval_requested {call_id, name, summary, detail?, timeout_seconds}
//   tool/approval           {call_id, name, decision: "allow_once"|"allow_session"|
//                            "deny"|"timeout", by: "person"|"timeout"}
// then the call's tool/result as usual. An allow_session decision is the
// session's grant: that tool is not asked about again in this session.
namespace event_types {
using session::event_types::kTurnEnd;
using session::event_types::kTurnStart;
inline constexpr std::string_view kApprovalRequested = "tool/approval_requested";
inline constexpr std::string_view kApproval = "tool/approval";
}  // namespace event_types

// The live agent of one session. All of its state lives on its strand;
// the public methods post there and may be called from any thread.
//
// Shared ownership (enable_shared_from_this) because database, model and tool
// callbacks that complete on other threads must keep it alive until they ran.
//
// A message delivered to the agent stays pending in the inbox until the turn
// that took it ends: the turn's end event and the inbox update commit
// together, so a crash in the middle of a turn leaves the message pending
// and the interrupted turn is continued (not repeated) on resume.
class Agent : public std::enable_shared_from_this<Agent> {
 public:
  Agent(AgentManager& manager, session::SessionHeader header, std::vector<session::Event> events);

  // Continues an interrupted turn, then takes pending messages.
  void Start(std::vector<InboxMessage> pending);
  // A message not yet accepted: an idle agent with nothing pending accepts it
  // and starts its turn in one transaction (the inbox insert, turn/start and
  // the user event commit together); otherwise it goes through
  // AgentManager::Accept like any other.
  void Deliver(InboxMessage message, std::optional<std::string> key, std::function<void(Result<Delivered>)> done);
  // New durable messages (deduplicated by message_id).
  void Enqueue(std::vector<InboxMessage> messages);
  void RunMaintenance(AgentManager::MaintenanceTask task, std::function<void(Status)> done);
  void WhenIdle(std::function<void(Status)> done);
  void Cancel();
  // See AgentManager::AnswerApproval (the decision is already checked).
  void AnswerApproval(const std::string& call_id, const std::string& decision, std::function<void(Status)> done);
  // No new work; cancels a running model call; tells the manager once no
  // callback of its is outstanding. `only_if_idle`: do nothing unless idle
  // with nothing pending (eviction); returns through `done(true)` if stopping.
  void Stop(bool only_if_idle, std::function<void(bool stopping)> done);
  // Another host holds the session's lease now (found by a renewal or by a
  // fenced write, whichever comes first): stops, saying so once.
  void LoseLease();

  const std::string& session_id() const { return header_.id; }
  AgentStatus status() const { return running_flag_.load() ? AgentStatus::kRunning : AgentStatus::kIdle; }
  // A tool call of the running turn waits for a person's decision.
  bool waiting_for_approval() const { return waiting_flag_.load(); }
  // Monotonic milliseconds since it last became idle; 0 while busy.
  int64_t idle_since_ms() const { return idle_since_ms_.load(); }
  // Every pending message of the session numbered up to this was loaded
  // from a full read of its inbox (NoteLoaded); the inbox sweep reloads only
  // for pending messages past it. Messages handed over one by one (this
  // host's own deliveries) do not count: another host's message with a
  // lower number may be unknown to it.
  int64_t loaded_num() const { return loaded_num_.load(); }
  // A full read of the inbox found pending messages up to `num` (inbox
  // numbers follow commit order: writes are serialized).
  void NoteLoaded(int64_t num) {
    int64_t seen = loaded_num_.load();
    while (num > seen && !loaded_num_.compare_exchange_weak(seen, num)) {
    }
  }

 private:
  using Events = std::vector<session::Event>;

  void MaybeStartTurn();
  void BeginTurn(std::vector<InboxMessage> taken, std::vector<session::EventDraft> drafts);
  void ContinueInterruptedTurn();
  void Step();
  void OnModel(Result<ModelResponse> response);
  void RunTools(std::vector<ModelToolCall> calls, size_t index, std::vector<session::EventDraft> results);
  // Logs the call's result and goes on with the next call.
  void ToolDone(std::vector<ModelToolCall> calls, size_t index, std::vector<session::EventDraft> results,
                Result<Json> result);
  void InvokeTool(std::vector<ModelToolCall> calls, size_t index, std::vector<session::EventDraft> results, Json args);
  // Logs an approval request for calls[index] (after `results`) and waits.
  void AskApproval(std::vector<ModelToolCall> calls, size_t index, std::vector<session::EventDraft> results, Json args);
  // Ends the wait with `decision` ("allow_once", "allow_session", "deny",
  // "timeout"), logged; `done` (may be empty) learns when it committed.
  void Decide(const std::string& decision, std::function<void(Status)> done);
  Permission PermissionOf(const std::string& tool) const;
  void EndTurn(Status error, std::vector<session::EventDraft> drafts = {});
  void BecomeIdle();
  void MaybeGenerateTitle();
  // Steers waiting for the next step boundary, as user-message drafts.
  std::vector<session::EventDraft> TakeSteers();
  static session::EventDraft UserDraft(const InboxMessage& m);
  ModelRequest BuildRequest();  // extends conversation_ first
  ToolContext MakeToolContext() const;
  // The client_time_zone in the meta of the running turn's first user
  // message (from the log, so a continued turn keeps it); nullopt if none.
  std::optional<std::string> TurnClientZone() const;
  bool ToolAllowed(const std::string& name) const;
  // "provider/model", the `route` label of the agent's metrics.
  std::string RouteName() const { return header_.route.provider + "/" + header_.route.model; }

  // Appends (and, with `consume`, marks those messages consumed in the same
  // transaction, recording `end` as their activity outcome), then runs
  // `next` on the strand with the stored events. User messages among the
  // drafts start their activity rows' turn in the same transaction.
  void Append(std::vector<session::EventDraft> drafts, std::vector<MessageRef> consume,
              std::function<void(Result<Events>)> next, std::optional<activity::TurnEnd> end = std::nullopt);
  void AppendWith(std::vector<session::EventDraft> drafts, session::SessionStore::AlsoFn also,
                  std::function<void(Result<Events>)> next);
  // Tells the change feed the activity list changed (after a commit that
  // changed `rows` of it; nothing when 0).
  void NoteActivity(int64_t rows) const;
  // The activity outcome of the running turn ending with `error` and
  // `drafts` as its last events.
  activity::TurnEnd TurnOutcome(const Status& error, const std::vector<session::EventDraft>& drafts) const;
  // The drafts that open a turn taking `taken`.
  std::vector<session::EventDraft> TurnStartDrafts(const std::vector<InboxMessage>& taken) const;
  // Posts `fn` to the strand, counting it as outstanding work.
  template <typename Arg, typename Fn>
  std::function<void(Arg)> OnStrand(Fn fn);
  void OpDone();
  bool Halted();
  // On the strand: stops at once (Stop's work without its checks).
  void StopNow();
  // What every append of the agent checks first: that this host still holds
  // the session's lease (agent_store::CheckLease).
  session::SessionStore::FenceFn LeaseFence() const;
  // LoseLease on the strand: another host runs the session now and carries
  // on from its log.
  void LeaseLost();
  // Logs a failed write of the turn's (`what`: "start a turn"), except a
  // lost lease, which LeaseLost has said.
  void LogFailedWrite(std::string_view what, const Status& status) const;

  AgentManager& manager_;
  boost::asio::strand<boost::asio::io_context::executor_type> strand_;
  session::SessionHeader header_;
  PresetView preset_;
  Events events_;  // the whole log, as committed
  // events_[0, conversation_upto_) as model messages, kept so a model call
  // converts only the events logged since the previous one.
  std::vector<ModelMessage> conversation_;
  size_t conversation_upto_ = 0;

  std::deque<InboxMessage> pending_;  // not yet taken by a turn, in num order
  std::set<std::string> known_;       // message ids pending or taken
  std::vector<MessageRef> taken_;  // the messages the running turn took
  bool started_ = false;  // Start() ran; until then no turn starts (a cut turn is continued first)
  bool running_ = false;
  bool maintenance_ = false;
  bool stopping_ = false;
  bool stopped_ = false;
  int steps_ = 0;
  MonoTime turn_started_{};  // when the running turn started (or was continued)
  // The running turn's token usage as the provider reported it (this
  // process's model calls of the turn), for its turn/end.
  std::optional<int64_t> turn_input_tokens_;
  std::optional<int64_t> turn_output_tokens_;
  int outstanding_ = 0;  // callbacks of ours still to run
  std::shared_ptr<CancelToken> cancel_;
  // What the model call in progress has streamed (its deltas come on the
  // model's thread): a stopped turn keeps it as a partial answer.
  struct Streamed {
    std::mutex mu;
    std::string text;       // GUARDED_BY(mu)
    std::string reasoning;  // GUARDED_BY(mu)
  };
  std::shared_ptr<Streamed> streamed_;
  // The partial answer of a call the person stopped, as drafts (none when
  // nothing was streamed).
  static std::vector<session::EventDraft> PartialAnswer(Streamed& streamed);
  std::vector<std::function<void(Status)>> idle_waiters_;
  // The tool call waiting for a person's decision, if any.
  struct Waiting {
    std::vector<ModelToolCall> calls;
    size_t index = 0;
    Json args;
    std::unique_ptr<boost::asio::steady_timer> timer;  // approval_timeout
  };
  std::optional<Waiting> waiting_;
  std::optional<std::string> asking_;  // the call whose approval request is being logged
  struct EarlyAnswer {
    std::string decision;
    std::function<void(Status)> done;
  };
  std::optional<EarlyAnswer> early_answer_;  // an answer to asking_ that came before it committed
  std::optional<Status> turn_refusal_;  // the running turn's last call denied or not approved in time
  std::set<std::string, std::less<>> granted_;  // tools allowed for the session (allow_session)
  bool title_requested_ = false;
  std::shared_ptr<CancelToken> title_cancel_;  // the generated-title call, if one was made

  std::atomic<bool> running_flag_{false};
  std::atomic<bool> waiting_flag_{false};  // waiting_ is set
  std::atomic<int64_t> idle_since_ms_{0};
  std::atomic<int64_t> loaded_num_{0};
};

}  // namespace dsh::agent
