#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "store/database.h"

namespace dsh::store {

// What one slice of a prune task did.
struct PruneSlice {
  int64_t deleted = 0;
  // More rows are due now: the next slice follows after a pause. False ends
  // the task's round (it is asked again at the next round).
  bool more = false;
};

// One kind of row that retention removes (inbox rows, loop runs, ...).
// `slice` runs inside one write job of its own: it deletes at most
// `max_rows` rows that are due as of `now_ms` (wall clock, Unix ms) and must
// be idempotent — two hosts on one database may prune the same rows at the
// same time, so "already gone" is not an error. It may keep state between
// slices (a cursor): it is only ever called from one thread at a time.
struct PruneTask {
  std::string name;
  std::function<Result<PruneSlice>(Tx& tx, int64_t now_ms, int64_t max_rows)> slice;
};

struct PrunerOptions {
  // Most rows one slice (one write job) deletes, and the pause after it.
  // Measured on SQLite (docs/PERFORMANCE.md, "Retention"): 100 rows take
  // about 2 ms and leave deliveries' p50 as it was; 1,000 rows take 15-20 ms
  // (each row dirties pages of every index, and the WAL grows fast enough
  // to force checkpoints), which raised delivery p50 from 0.4 to 7.7 ms.
  int64_t slice_rows = 100;
  std::chrono::milliseconds pause{5};
  std::chrono::milliseconds interval{std::chrono::minutes(10)};  // between two rounds
  // A slice waits (another pause, at most `max_deferrals` times in a row)
  // while the writer has more than this many write jobs queued or in its
  // last transaction: deliveries go first.
  size_t busy_writes = 32;
  int max_deferrals = 50;
};

// Deletes what retention no longer keeps, in small slices, off the commit
// path of everything else: each slice is its own write job (its own
// savepoint; group commit may give it a transaction with other jobs, whose
// commit it then delays by the slice's cost only — bounded by slice_rows),
// with a pause between slices so queued deliveries run in between.
//
// Background use: Start() runs rounds on a thread of its own — every task
// slice by slice until it says no more, then the next task — every
// `interval`; Stop() ends it (a slice in progress finishes first). Tests and
// benchmarks call RunRound() instead.
//
// Thread-safe. Destroy (or Stop) it before the Database.
class Pruner {
 public:
  struct Stats {
    int64_t slices = 0;     // slices that ran (committed or not)
    int64_t deleted = 0;    // rows deleted by committed slices
    int64_t max_slice = 0;  // most rows one slice deleted
    int64_t failures = 0;   // slices that failed (retried next round)
  };

  Pruner(Database& db, const Clock& clock, std::vector<PruneTask> tasks, PrunerOptions options = {});
  ~Pruner();
  Pruner(const Pruner&) = delete;
  Pruner& operator=(const Pruner&) = delete;

  void Start();
  // Idempotent; joins the thread.
  void Stop();

  // Runs one round on the calling thread, with no pauses: every task until
  // it has no more due rows. The first failing slice ends the round with its
  // error. Not while Start()ed.
  Result<Stats> RunRound();

  Stats stats() const;
  // Waits until `done(stats())` holds (checked after every slice) or
  // `timeout` passed; returns whether it holds. For tests and benches.
  bool WaitFor(const std::function<bool(const Stats&)>& done, std::chrono::milliseconds timeout) const;

 private:
  // Runs one slice of `task`; false when the round of this task is over.
  Result<bool> RunSlice(PruneTask& task);
  void Loop();
  // Waits `d` or until Stop(); false when stopping.
  bool Wait(std::chrono::milliseconds d);

  Database& db_;
  const Clock& clock_;
  std::vector<PruneTask> tasks_;
  const PrunerOptions options_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  mutable std::condition_variable progress_;  // a slice ended (WaitFor)
  bool stopping_ = false;  // GUARDED_BY(mu_)
  Stats stats_;            // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace dsh::store
