#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/agent_manager.h"
#include "agent/tool.h"
#include "base/clock.h"
#include "base/metrics.h"
#include "plugins/schedule/schedule_log.h"
#include "session/session_store.h"

namespace dsh::plugins::schedule {

struct ScheduleOptions {
  // An owner's wait is cut into segments of at most this, and the wall
  // clock is read again at every wake (DESIGN.md "Time": at most 60 s). It
  // is also how soon a failed dispatch is tried again.
  std::chrono::milliseconds max_wait{60'000};
  // Where dsh_reminders_dispatched_total goes (docs/DEPLOY.md, "Metrics").
  // Borrowed, must outlive the service; none when null.
  metrics::Registry* metrics = nullptr;
};

// Session-local reminders (spec 001 + 004): the three tools' operations and
// one owner per live root agent of this host.
//
// The session's own `schedule/change` stream is the only authority. Every
// operation on one session runs alone, in arrival order (a per-session
// queue), and reads the committed log before it decides, so a tool call
// never answers from an unconfirmed suffix and a dispatch never follows a
// delete that won the race. Appends are acknowledged only after their
// commit; an append of this host also checks, in its transaction, that no
// other schedule/change event was appended since this host last read the
// log (another host serving the same session), and retries when one was.
//
// An owner exists only while the session's agent is live here (it is made
// when the agent goes live and dropped when it stops; records are never
// deleted on teardown). It waits for the earliest target in segments of at
// most max_wait, reading the wall clock at every wake. When a reminder is
// due it claims the idle agent (AgentManager::RunMaintenance; when busy, it
// waits for WhenIdle and tries again), folds the log again, queues one
// followup with wakeup under the inbox key ReminderKey(session, id) — so a
// retried dispatch cannot queue twice — appends the `dispatch` event, and
// releases the agent, which then runs the reminder's turn. Cold sessions
// have no owner, no timer and no scan.
//
// Thread-safe. Owned through shared_ptr (callbacks keep it alive). Stop()
// before the agents stop, while the io_context runs.
class ScheduleService : public std::enable_shared_from_this<ScheduleService> {
 public:
  using Done = agent::Tool::Done;

  ScheduleService(boost::asio::io_context& ioc, session::SessionStore& sessions, agent::AgentManager& agents,
                  const Clock& clock, std::string host_zone, ScheduleOptions options = {});
  ~ScheduleService();

  // The tools (arguments as the model sends them). Errors: invalid_arguments
  // (bad arguments, or no calling session), not_found (unknown session),
  // unknown_tool (a delegated session: the tools are for root sessions),
  // the codes of ResolveScheduleCreate, corrupt_schedule_log, and
  // persistence_uncertain when a commit's outcome is unknown (the message
  // names the operation and the id; schedule_list then tells the truth).
  void Create(const agent::ToolContext& ctx, const Json& args, Done done);   // the new record's view
  void List(const agent::ToolContext& ctx, const Json& args, Done done);     // {"schedules": [view...]}
  // {id, deleted: true}, or the non-error {id, deleted: false, code: "schedule_not_found"}.
  void Delete(const agent::ToolContext& ctx, const Json& args, Done done);

  // AgentObserver hooks: a root session's agent went live here / stopped.
  void OnLive(const session::SessionHeader& header);
  void OnStopped(const std::string& session_id);

  // Active reminders (created, neither dispatched nor deleted) of the
  // sessions whose owner is here, as of each owner's last look at its log
  // (dsh_reminders_active). Reminders of cold sessions are not counted.
  int64_t ActiveReminders() const;
  // True while the session's owner here knows of an active reminder: its
  // agent is kept live (AgentObserver::keep_live), so a reminder is not
  // lost to idle eviction. Quick; takes only this service's lock.
  bool HasActiveReminders(const std::string& session_id) const;

  // Drops every owner, refuses new ones and waits for operations in flight.
  // Idempotent.
  void Stop();

  // For tests: asks every owner to look at the clock now (as its timer
  // would), then waits until no operation is queued or running; false on
  // timeout. With a fake clock, step it and settle instead of sleeping.
  bool SettleForTesting(std::chrono::milliseconds timeout = std::chrono::seconds(10));

 private:
  struct Entry;
  using Finished = std::function<void()>;
  using Op = std::function<void(const std::shared_ptr<Entry>&, Finished)>;

  // Queues `op` on the session's entry (made when missing); false once stopped.
  bool Enqueue(const std::string& session_id, Op op);
  void RunNext(const std::shared_ptr<Entry>& e);
  // Reads what the log gained since the last read and folds it; `done` runs
  // on a database thread.
  void Refresh(const std::shared_ptr<Entry>& e, std::function<void(Result<ScheduleState>)> done);
  // Appends one schedule/change event if no other was appended since the
  // last Refresh (else `conflict`).
  void AppendChange(const std::shared_ptr<Entry>& e, session::EventDraft draft, std::function<void(Status)> done);
  // Runs `body` as a queued operation after a Refresh, for a tool call; a
  // `conflict` from its append runs the whole call again (at most 3 times).
  using ToolBody = std::function<void(const std::shared_ptr<Entry>&, ScheduleState, Done)>;
  void RunTool(const agent::ToolContext& ctx, const std::string& tool, ToolBody body, Done done, int attempt = 1);
  // The owner: re-reads the log and dispatches what is due, or arms the timer.
  void Recheck(const std::shared_ptr<Entry>& e);
  void Dispatch(const std::shared_ptr<Entry>& e, Record record, Finished finished);
  void ArmLocked(const std::shared_ptr<Entry>& e, int64_t wake_at_ms);  // mu_ held
  void MaybeDropLocked(const std::shared_ptr<Entry>& e);                // mu_ held
  int64_t NowMs() const { return ToUnixMillis(clock_.Now()); }

  boost::asio::io_context& ioc_;
  session::SessionStore& sessions_;
  agent::AgentManager& agents_;
  const Clock& clock_;
  std::string host_zone_;
  ScheduleOptions options_;
  metrics::Counter* dispatched_ = nullptr;  // from options_.metrics

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false;                                     // GUARDED_BY(mu_)
  std::map<std::string, std::shared_ptr<Entry>> entries_;   // GUARDED_BY(mu_)
  int64_t busy_ = 0;                                         // GUARDED_BY(mu_) entries with an operation running
};

}  // namespace dsh::plugins::schedule
