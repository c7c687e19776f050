#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "agent/agent_manager.h"
#include "base/clock.h"
#include "base/metrics.h"
#include "plugins/loop/loop_registry.h"
#include "session/session_store.h"
#include "store/database.h"
#include "time/time_zone.h"

namespace dsh::plugins::loop {

// What loops need from the deployment. Every function must be thread-safe.
struct LoopEnvironment {
  // The global interface session ("self"); nullopt when it is off.
  std::function<std::optional<std::string>()> global_session_id;
  // A fresh root session: default preset, default route, the host's zone.
  std::function<session::NewSession()> defaults;
  std::function<bool(const std::string& preset)> preset_exists;
  TimeZone host_zone;  // the zone of cron rules without `tz`
};

// The points of an occurrence's life a test can stop the process at.
enum class SchedulerStep {
  kClaimCommitted,    // the claim transaction (loop CAS + run row) committed
  kDeliveryAccepted,  // the inbox accepted the `<loop>` message (or found it by key)
  kRecordCommitted,   // the outcome (run row + loop state) committed
};

struct SchedulerOptions {
  // Every wait is capped at this and re-checked on wake (DESIGN.md "Time":
  // at most 60 s). It is also how soon a loop another host created or
  // changed is noticed.
  std::chrono::milliseconds max_wait{1000};
  // A claimed occurrence not recorded within this long is taken over by any
  // host (its claimer died).
  std::chrono::milliseconds claim_ttl{30'000};
  int batch = 256;  // occurrences claimed per transaction
  // Occurrences due within this long are claimed ahead and delivered at
  // their time by a steady timer, so the claim's commit is not part of the
  // delivery's lateness. Kept well under claim_ttl.
  std::chrono::milliseconds lookahead{200};
  // Claimed occurrences whose outcome is not yet recorded, at most. The
  // next claim does not wait for the previous batch's deliveries, only for
  // room under this cap (so a slow target cannot make claims pile up past
  // their TTL).
  int max_in_flight = 1024;
  // For crash tests only: called once per claim at each step, on a database
  // or io thread, before the scheduler goes on (a test may raise SIGKILL in
  // it). Null in production; then nothing is called.
  std::function<void(SchedulerStep, const registry::Claim&)> on_step;
  // Where the occurrence counters go (docs/DEPLOY.md, "Metrics"):
  // dsh_loop_occurrences_total{event}, dsh_loop_delivery_lateness_seconds.
  // Borrowed, must outlive the scheduler; none when null.
  metrics::Registry* metrics = nullptr;
};

// The `<loop>` message of one occurrence, with the prompt XML-escaped.
std::string LoopMessage(const std::string& loop_id, const std::string& prompt);

// The profile loop scheduler of one host (spec 000 section 5). Due-ness
// comes from the wall clock; waits use a steady timer, capped and re-checked.
// Each tick claims the occurrences due by now + lookahead in one transaction (compare-and-set of
// the loop with its run row, and the next wake-up read in the same
// transaction), hands each to delivery through the agent inbox with the
// occurrence key, and arms for the next wake-up at once; each outcome is
// recorded when its delivery ends. Ticks never overlap, but a tick does not
// wait for the deliveries of the one before (at most max_in_flight). Several
// hosts may run schedulers on one profile: the compare-and-set gives each
// occurrence to one of them.
//
// Thread-safe. Start() once, Stop() before the agents stop and while the
// io_context runs.
class LoopScheduler {
 public:
  LoopScheduler(boost::asio::io_context& ioc, store::Database& db, session::SessionStore& sessions,
                agent::AgentManager& agents, const Clock& clock, LoopEnvironment env, SchedulerOptions options = {});
  ~LoopScheduler();

  void Start();
  // Stops ticking and waits for the tick in progress and for every claimed
  // occurrence's outcome to be recorded. Idempotent. The io_context must be
  // running.
  void Stop();
  // Looks for due work now.
  void Poke();
  // A loop here now next acts at `next_at` (Unix ms): due → Poke(); later →
  // only the timer is brought forward if it would wake after that.
  void Expect(int64_t next_at);
  // Tells views (the change feed, docs/API.md) that the loops changed: a
  // loop was created or deleted, or occurrences were claimed or recorded.
  void AnnounceChange();
  // For tests: pokes, then blocks until a tick that started after the poke
  // finished and no outcome is left unrecorded; false on timeout.
  bool SettleForTesting(std::chrono::milliseconds timeout = std::chrono::seconds(10));

  const LoopEnvironment& environment() const { return env_; }
  Result<Timetable> TimetableOf(const Schedule& schedule) const { return Timetable::Make(schedule, env_.host_zone); }

 private:
  void Tick();                                                // on the strand
  void FinishTick(bool again, std::optional<int64_t> next_at);  // on the strand
  void Arm(std::optional<int64_t> next_at);                   // on the strand
  void Queue(std::function<void()> fn);  // posts fn to the strand; Stop() waits for it to run
  void PostCounted(std::function<void()> fn);  // Queue() once pending_handlers_ counts it
  void DeliverAndRecord(const registry::Claim& claim);  // the claim's delivery, then its record
  void Recorded();  // one claimed occurrence's outcome is recorded (any thread)
  void Deliver(const registry::Claim& claim, std::function<void(registry::Outcome)> done);
  void DeliverNew(const registry::Claim& claim, std::function<void(registry::Outcome)> done);
  void DeliverTo(const std::string& session_id, const registry::Claim& claim, std::optional<std::string> note,
                 std::function<void(registry::Outcome)> done);
  agent::Delivery MakeDelivery(const std::string& session_id, const registry::Claim& claim) const;

  boost::asio::io_context& ioc_;
  store::Database& db_;
  session::SessionStore& sessions_;
  agent::AgentManager& agents_;
  const Clock& clock_;
  LoopEnvironment env_;
  SchedulerOptions options_;
  boost::asio::strand<boost::asio::io_context::executor_type> strand_;
  boost::asio::steady_timer timer_;
  store::Subscription notices_;  // other hosts' loop changes; set by Start, ended by Stop

  // Strand state.
  bool ticking_ = false;
  bool poked_ = false;
  bool awaiting_room_ = false;      // a tick is due once in_flight_ drops under the cap
  std::optional<int64_t> armed_at_;  // the wall time (Unix ms) the timer wakes for
  std::optional<int64_t> expected_;  // Expect() during a tick: the earliest such next_at

  std::mutex mu_;
  std::condition_variable cv_;
  bool started_ = false;     // GUARDED_BY(mu_)
  bool stopped_ = false;     // GUARDED_BY(mu_)
  bool in_tick_ = false;     // GUARDED_BY(mu_)
  int64_t in_flight_ = 0;    // GUARDED_BY(mu_) claimed, outcome not yet recorded
  // Handlers of this scheduler not yet run (timer_ waits, Queue()d work):
  // Stop() waits for them.
  int64_t pending_handlers_ = 0;  // GUARDED_BY(mu_)
  int64_t ticks_started_ = 0;   // GUARDED_BY(mu_)
  int64_t ticks_finished_ = 0;  // GUARDED_BY(mu_)
  // From options_.metrics; all null without.
  metrics::Counter* claimed_ = nullptr;
  metrics::Counter* delivered_ = nullptr;
  metrics::Counter* failed_ = nullptr;
  metrics::Counter* skipped_ = nullptr;
  metrics::Histogram* lateness_ = nullptr;
};

}  // namespace dsh::plugins::loop
