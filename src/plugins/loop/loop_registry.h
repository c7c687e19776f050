#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agent/activity_store.h"
#include "base/json.h"
#include "base/status.h"
#include "plugins/loop/schedule.h"
#include "store/connection.h"
#include "store/database.h"
#include "store/pruner.h"

namespace dsh::plugins::loop {

// The durable loop registry (module "loop"): definitions, scheduling state
// and run history, in the profile database — never in a session log.
//
//   loops(loop_id, prompt, schedule, target, preset, created_by, created_at,
//         due_at, retry_at, retry_nominal, failures, state, last_run_at,
//         last_result, last_error, version)
//   loop_runs(num, loop_id, nominal_at, claimed_at, claimed_by,
//             claim_expires, attempts, skipped, skipped_capped,
//             target_session_id, message_id, delivered_at, result, error,
//             note)  -- unique (loop_id, nominal_at); finished runs
//                          pruned by RunsPruneTask
//   loop_v1_imports(session_id, v1_id, loop_id)  -- v1 loops imported once
//   loop_settings(key, value)                    -- markers ("v1_import")
//
// Functions taking a Tx run inside a store::Database job.
std::vector<store::Migration> Migrations();

// Reserved target / selector values (exact, case-sensitive).
inline constexpr const char* kTargetSelf = "self";
inline constexpr const char* kTargetNew = "new";
inline constexpr const char* kListGlobal = "global";

struct LoopRecord {
  std::string loop_id;
  std::string prompt;  // trimmed, non-empty
  Schedule schedule;
  std::string target;                 // "self", "new" or a session id
  std::optional<std::string> preset;  // only with "new"
  std::optional<std::string> created_by;  // the creating session; nullopt for a root call
  int64_t created_at = 0;
  // The schedule's next occurrence; nullopt once an `after` loop's one
  // occurrence was claimed.
  std::optional<int64_t> due_at;
  // While `failed`: when the failed occurrence `retry_nominal` is tried again.
  std::optional<int64_t> retry_at;
  std::optional<int64_t> retry_nominal;
  int64_t failures = 0;  // consecutive failed attempts
  std::string state = "scheduled";  // stored: scheduled | failed | completed
  std::optional<int64_t> last_run_at;
  std::optional<std::string> last_result;  // delivered | failed
  std::optional<std::string> last_error;
  int64_t version = 0;  // bumped by every scheduler update (compare-and-set)

  // Derived from the run history: the earliest occurrence that a host
  // claimed and whose outcome is not recorded yet.
  struct OpenClaim {
    int64_t nominal = 0;
    std::string holder;   // the claiming host's lease holder name
    int64_t expires = 0;  // when any host may take it over regardless
  };
  std::optional<OpenClaim> open_claim;

  // Derived: the newest recorded run and the outcome of the turn its
  // delivery started (nullopt when that is not known: no activity row).
  struct LastRun {
    int64_t nominal = 0;
    std::string result;  // delivered | failed
    std::optional<std::string> error;
    std::optional<std::string> target_session_id;
    std::optional<agent::activity::Outcome> outcome;
  };
  std::optional<LastRun> last_run;

  // When the scheduler next has to act: the earlier of due_at and retry_at.
  std::optional<int64_t> next_at() const;
};

// LoopView (spec 000 section 4) as of `now`. While an occurrence is claimed
// and unrecorded, next_at is that occurrence's nominal instant and the state
// is running when its claimer is alive and its claim unexpired, else overdue
// (the claimer died: a host of the profile takes it over on its next tick).
// Otherwise overdue when next_at <= now, else the stored state.
// Beyond spec 000's fields: `last_outcome` ({status, error?, session_id,
// seq}: the last run's turn, `none` with the delivery's error when it
// failed) and `health` (`failing` when the last run's delivery failed or
// its turn ended in error, `unknown` before any run, else `ok`).
Json LoopViewJson(const LoopRecord& loop, int64_t now);

// The outcome of a run: its turn's, or `none` with the delivery error for
// a failed delivery; nullopt while in flight or when unknown.
std::optional<agent::activity::Outcome> RunOutcome(const std::optional<std::string>& result,
                                                    const std::optional<std::string>& error,
                                                    const std::optional<std::string>& target_session_id,
                                                    const std::optional<agent::activity::Outcome>& turn);

// The inbox key (and activity key) of one occurrence: "loop:ID:NOMINAL".
// A retried claim cannot deliver twice.
std::string OccurrenceKey(const std::string& loop_id, int64_t nominal);

// True when a claim by `holder` that expires at `expires` still has a live
// owner as of `now`: unexpired, and not a dead process of this machine.
bool ClaimIsLive(const std::string& holder, int64_t expires, int64_t now);

// The notice channel of loop changes (store::Tx::Notify), heard by the
// other hosts' schedulers: the payload is the Unix ms a new loop next acts
// at, or empty for any other change (a delete, a claim, a record), which
// only views need to hear of.
inline constexpr std::string_view kLoopsChannel = "loops";

// The `created_by_session_id` of a loop a root call made (the HTTP API, the
// CLI, the automation panel without a session): no session made it.
inline constexpr std::string_view kCreatedByRoot = "root";

namespace registry {

// Insert and Delete send the kLoopsChannel notice.
Status Insert(store::Tx& tx, const LoopRecord& loop);
// False when there is no such loop.
Result<bool> Delete(store::Tx& tx, const std::string& loop_id);
Result<std::optional<LoopRecord>> Get(store::Tx& tx, const std::string& loop_id);

// Active loops (not completed), by created_at then loop_id. `targets`
// empty = every loop of the profile; else loops whose target is one of them.
Result<std::vector<LoopRecord>> ListActive(store::Tx& tx, const std::vector<std::string>& targets);

// Completed loops (finished `after` loops), newest run first: those whose
// last_run_at is before `before` (all when nullopt), at most `limit`.
Result<std::vector<LoopRecord>> ListFinished(store::Tx& tx, const std::vector<std::string>& targets, int64_t limit,
                                             std::optional<int64_t> before);

// The earliest next_at over all loops; nullopt when nothing is scheduled.
Result<std::optional<int64_t>> NextWake(store::Tx& tx);

// An occurrence a host claimed and must now deliver.
struct Claim {
  LoopRecord loop;  // as it was when claimed; without `last_run` (a claim only schedules)
  int64_t nominal = 0;
  int64_t skipped = 0;
  bool skipped_capped = false;
  int64_t attempts = 1;
  // For target "new": the id the fresh session gets, chosen at the first
  // claim so a retried delivery finds the session it may already have made.
  std::optional<std::string> new_session_id;
  // When to deliver (Unix ms): the claim time for an occurrence already
  // due, else the occurrence's (or retry's) own time within the horizon.
  int64_t deliver_at = 0;
};

// Claims, in this transaction, up to `limit` occurrences due by `horizon`
// (claimed ahead, so the claim's commit is off the delivery's path): for
// each due loop a compare-and-set of its scheduling state together with the
// insert (or, for a retry, the reopening) of the occurrence's run row. Also
// takes over unfinished runs whose claimer died between claim and record:
// at once when the claimer is a process of this machine that is gone (see
// agent_store::LeaseHolderIsDead), else when the claim expires. A taken-over
// occurrence is delivered at once (never before its nominal time).
// `timetable` computes catch-up; `new_session_id` makes ids.
struct ClaimOptions {
  int64_t now = 0;
  int64_t horizon = 0;  // claim what is due by here; at most `now` + a little (<= now: `now`)
  std::string holder;
  int64_t claim_ttl_ms = 30'000;
  int limit = 256;
};
Result<std::vector<Claim>> ClaimDue(store::Tx& tx, const ClaimOptions& options,
                                    const std::function<Result<Timetable>(const Schedule&)>& timetable,
                                    const std::function<std::string()>& new_session_id);

// The outcome of one claimed occurrence.
struct Outcome {
  bool delivered = false;
  std::optional<std::string> target_session_id;
  std::optional<std::string> message_id;
  std::optional<std::string> error;  // plain words, when not delivered
  std::optional<std::string> note;   // e.g. an inheritance fallback
};

// Records an outcome: the run row, and the loop's last_* fields and state
// (an `after` loop completes on delivery; a failure schedules a retry of the
// same occurrence after Backoff(failures), while a recurring loop keeps its
// schedule). A loop deleted meanwhile only gets its run row finished. A
// failed delivery is also recorded in the activity list (and sent to the
// webhooks that take it, when `webhooks` is given).
Status Record(store::Tx& tx, const Claim& claim, const Outcome& outcome, int64_t now,
              agent::outbox::SubscriptionSource* webhooks = nullptr);

// Retry delay after `failures` consecutive failures: 30 s, 1 min, 5 min,
// 15 min, then hourly.
int64_t BackoffMs(int64_t failures);

// One row of a loop's run history, newest first.
struct Run {
  int64_t nominal_at = 0;
  int64_t claimed_at = 0;
  std::optional<int64_t> delivered_at;
  std::optional<std::string> target_session_id;
  std::optional<std::string> message_id;
  std::optional<std::string> result;  // nullopt while in flight
  std::optional<std::string> error;
  std::optional<std::string> note;
  int64_t attempts = 0;
  int64_t skipped = 0;
  bool skipped_capped = false;
  std::optional<agent::activity::Outcome> outcome;  // RunOutcome
  Json notifications;  // outbox::Receipts of the run; null when none
};
// Spec 000's run fields, `outcome` (activity::OutcomeJson) when known and
// `notifications` when any went out.
Json RunJson(const Run& run);
// A loop's runs, newest first, at most `limit`; with `before`, only those with
// nominal_at < before (the next page after a run whose nominal_at it is:
// nominal_at is unique per loop, so pages neither overlap nor leave gaps).
Result<std::vector<Run>> Runs(store::Tx& tx, const std::string& loop_id, int64_t limit,
                              std::optional<int64_t> before = std::nullopt);

// Retention of the run history (retention.loop_runs, retention.loop_run_days;
// docs/LOOPS.md, "Run history"). 0 = no limit of that kind.
struct RunRetention {
  int64_t max_runs = 1000;                  // runs kept per loop (the newest by nominal_at)
  int64_t max_age_ms = 90LL * 86'400'000;   // finished runs with an older nominal_at go
};

// The retention task of loop_runs, for store::Pruner. A round first deletes
// finished runs older than max_age_ms (oldest first), then, loop by loop,
// finished runs beyond the max_runs newest. It never deletes:
//  - an open run (result IS NULL: claimed and not recorded, in flight or
//    waiting to be taken over) — Record, the take-over in ClaimDue and the
//    views' `running`/`overdue` state read it;
//  - the run of an occurrence waiting for its retry (loops.retry_nominal):
//    the retry reopens that very row and does nothing if it is gone;
//  - the newest run of a loop that still exists (so a quiet loop keeps its
//    last run, and the unique (loop_id, nominal_at) row of its latest
//    occurrence stays). Older rows are not needed against a second
//    delivery: a claim moves the loop's due_at past its occurrence in the
//    same transaction, so a new claim's nominal_at is always later than
//    every run of that loop.
// Each slice reads and deletes in one transaction, and every write
// transaction (claims, records) is serialized with it, so it cannot race a
// claim or a retry. Deleting a row another host deleted first is a no-op.
store::PruneTask RunsPruneTask(RunRetention keep);

// The occurrences that may still be delivered again: open runs and the
// failed occurrences waiting for a retry. Their inbox keys must outlive
// inbox retention (agent_store::RetainedKeys).
struct Occurrence {
  std::string loop_id;
  int64_t nominal = 0;
};
Result<std::vector<Occurrence>> RetryableOccurrences(store::Tx& tx);

}  // namespace registry
}  // namespace dsh::plugins::loop
