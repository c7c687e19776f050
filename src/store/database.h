#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/metrics.h"
#include "base/status.h"
#include "store/connection.h"

namespace dsh::store {

// A versioned schema change of one module ("session", "loop", ...). Versions
// of a module start at 1 and increase by one. Statements use the portable SQL
// of Tx.
struct Migration {
  std::string module;
  int version = 0;
  std::vector<std::string> statements;
};

struct DatabaseOptions {
  int readers = 2;             // reader threads, each with its own connection
  size_t max_batch = 1024;     // most write jobs committed in one transaction
  // How long after a transaction began it may wait for a burst of writes
  // (Database::TakeMore); zero: it takes only what is queued when it begins.
  std::chrono::microseconds max_gather{300};
  // The clock whose distance to the database server's clock
  // clock_offset_ms() measures (RealClock() when null), on a backend that
  // several machines share; re-measured every `clock_every`.
  const Clock* clock = nullptr;
  std::chrono::milliseconds clock_every{std::chrono::seconds(60)};
  // Where the commit metrics go (docs/DEPLOY.md, "Metrics"):
  // dsh_store_commits_total, dsh_store_commit_jobs,
  // dsh_store_commit_seconds. Borrowed, must outlive the Database; none
  // when null.
  metrics::Registry* metrics = nullptr;
  // How long a contended write job (see Database) is run again before it
  // fails: longer than a frozen host holds rows (PgOptions'
  // idle-in-transaction limit, 15 s).
  std::chrono::milliseconds contended_for{std::chrono::seconds(30)};
  // PostgreSQL: how long a write transaction runs jobs before it commits
  // and the rest go to the next one. Its rows stay locked until COMMIT, and
  // other hosts' writers wait for them (at most PgOptions::lock_timeout
  // each time): a batch of a thousand deliveries would hold a hot row
  // (a session's unread count, a loop) for a second.
  std::chrono::microseconds max_hold{std::chrono::milliseconds(20)};
};

class Database;

// A subscription to other hosts' notices (Database::Subscribe); ends when
// destroyed or reset, waiting for a call in progress. Destroy it before the
// Database.
class Subscription {
 public:
  Subscription() = default;
  Subscription(Database* db, uint64_t id) : db_(db), id_(id) {}
  Subscription(Subscription&& o) noexcept : db_(std::exchange(o.db_, nullptr)), id_(o.id_) {}
  Subscription& operator=(Subscription&& o) noexcept;
  ~Subscription() { reset(); }
  void reset();

 private:
  Database* db_ = nullptr;
  uint64_t id_ = 0;
};

// The profile database: one writer thread that commits write jobs in groups,
// and a pool of reader threads. Blocking calls happen only on these threads,
// never on the caller's (so never on an I/O thread) unless the caller uses a
// *Sync method, which blocks the calling thread until the job finished.
//
// Group commit: write jobs submitted while a transaction is committing queue
// up and share the next transaction, which also takes the jobs submitted
// while it runs (and may wait a little for a burst of them, see
// DatabaseOptions::max_gather). Each job runs inside its own savepoint,
// so a job that returns an error rolls back alone and gets its error; the
// others in the batch are unaffected (see JobIsolation for the exceptions;
// the transaction's first job needs none: if it fails, the transaction rolls
// back and the jobs after it run in a new one). A failed COMMIT fails every
// job of the batch with `commit_failed` and nothing of the batch is visible. A job's
// completion callback runs only after COMMIT returned (on the writer thread:
// callbacks must be quick and must not block; post to your own strand).
//
// Contention (PostgreSQL, where hosts write at once): a job whose statement
// waited too long for a row another transaction holds, or lost a deadlock,
// fails with `contended`. It rolls back to its savepoint and runs again in a
// later transaction, after a backoff (25 ms doubling up to 1 s, jittered),
// while the rest of its batch commits; after DatabaseOptions::contended_for
// it fails with `unavailable`. So a job may run more than once: it must not depend on
// state an earlier, rolled-back run of it changed (fill results by
// assignment; move out of captured state only after the last statement).
//
// On PostgreSQL a savepoint is a subtransaction, which costs the server more
// than a small job's own statements (a transaction ID and a lock of its own
// once it writes). So there a job runs without one while every job before it
// in its transaction is JobRerun::kAlsoAfterSuccess; the first job after
// one that is not runs in a savepoint, and so do those after it. When a job
// without a savepoint fails, the whole transaction rolls back and its jobs
// run again in a new one, each in its own savepoint, so that each ends as
// described above; the jobs before the failed one run a second time.
// Jobs submitted one after the other are committed in that order unless
// one of them is contended.
//
// Thread-safe. Destruction (or Close) drains queued jobs first.
//
// How a write job's failure is kept from the rest of its batch on SQLite
// (on PostgreSQL, where a failed statement aborts the transaction, JobRerun
// decides whether a job goes without a savepoint).
enum class JobIsolation {
  // The default: the job runs in its own savepoint; an error rolls back its
  // changes and nothing else.
  kSavepoint,
  // For small, frequent jobs (one append): the job promises to return an
  // error only before its first change (it checks, then writes). It runs
  // without a savepoint, which spares copying every page it touches into the
  // statement journal — about a quarter of the writer's CPU per append. A job
  // that fails without having changed a row leaves its batch as it was. One
  // that breaks the promise (an error after a change, such as a storage
  // failure) cannot be undone alone: the whole transaction rolls back, the
  // jobs before it in the batch fail with `commit_failed` (nothing of theirs
  // was saved), it gets its own error, and the jobs after it run in a new
  // transaction. Nothing partial is ever committed either way.
  kFailsBeforeWriting,
};

// Whether a write job may run again after it returned OK.
enum class JobRerun {
  // The default: a job runs again only after a run of it failed and was
  // rolled back (contended, see Database).
  kOnlyAfterFailure,
  // It may also run again after it returned OK, when its transaction rolled
  // back for a job after it (PostgreSQL, see Database): it leaves what it
  // captured as it found it (results by assignment, nothing moved out).
  // That spares it a savepoint.
  kAlsoAfterSuccess,
};

class Database {
 public:
  using Job = std::function<Status(Tx&)>;
  using Done = std::function<void(Status)>;

  // Opens connections from `factory`, applies pending `migrations` in one
  // write transaction and starts the threads. Fails with `schema_too_new`
  // when the database holds a module version newer than `migrations` know.
  static Result<std::unique_ptr<Database>> Open(std::unique_ptr<ConnectionFactory> factory,
                                                std::vector<Migration> migrations, DatabaseOptions options = {});
  ~Database();

  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // Queues `job` for the next group commit; `done` gets its outcome.
  // After Close(): `done` gets `shutting_down` at once.
  void Write(Job job, Done done, JobIsolation isolation = JobIsolation::kSavepoint,
             JobRerun rerun = JobRerun::kOnlyAfterFailure);
  // Runs `job` in a read snapshot on a reader thread.
  void Read(Job job, Done done);

  // Blocking forms: wait for the outcome on the calling thread.
  Status WriteSync(Job job);
  Status ReadSync(Job job);

  // Typed convenience: the job fills a value that is returned once committed.
  template <typename T>
  Result<T> WriteValue(std::function<Result<T>(Tx&)> job) {
    return RunValue<T>(&Database::WriteSync, std::move(job));
  }
  template <typename T>
  Result<T> ReadValue(std::function<Result<T>(Tx&)> job) {
    return RunValue<T>(&Database::ReadSync, std::move(job));
  }

  // Calls `fn` with the payload of each notice another host sent on
  // `channel` with Tx::Notify, after its transaction committed. Calls come
  // on the database's listener thread, one at a time: be quick, post real
  // work elsewhere, and never end a Subscription inside one. Returns once
  // the listener listens on `channel` (or after 2 s when it is down).
  // Notices are hints: one sent while this host's listener reconnects is
  // lost, and a backend on one machine (SQLite) has none, so subscribers
  // keep a slower poll as well.
  [[nodiscard]] Subscription Subscribe(std::string channel, std::function<void(std::string_view payload)> fn);

  // How far the database server's wall clock is ahead of
  // DatabaseOptions::clock, in milliseconds: 0 on a backend on this machine
  // and until the first measurement. See DatabaseClock.
  int64_t clock_offset_ms() const { return clock_offset_ms_.load(std::memory_order_relaxed); }

  // Stops accepting jobs, finishes every queued job (commits included) and
  // joins the threads. Idempotent.
  void Close();

  // Counters for tests and benchmarks.
  struct Stats {
    uint64_t commits = 0;
    uint64_t jobs = 0;
    uint64_t failed_commits = 0;
    // Runs of jobs that were contended and rolled back to run again, and
    // jobs that gave up after DatabaseOptions::contended_for.
    uint64_t contended = 0;
    uint64_t contended_failed = 0;
    // PostgreSQL: write transactions rolled back because a job that ran
    // without a savepoint failed; their jobs ran again, each in its own.
    uint64_t rolled_back_to_isolate = 0;
    // Where the writer's time went, summed over the write transactions that
    // reached their COMMIT (failed ones included), in microseconds: from
    // BEGIN until COMMIT was issued (running the jobs, and waiting for more,
    // see TakeMore); the COMMIT (its WAL write and sync); running the
    // completion callbacks after it. The rest of the wall time the writer
    // waited for work.
    uint64_t run_us = 0;
    uint64_t commit_us = 0;
    uint64_t callbacks_us = 0;
  };
  Stats stats() const;
  // How busy the writer is: the larger of the write jobs queued now and of
  // those in the transaction it took last. Cheap (no lock).
  size_t write_load() const;

  const std::string& description() const { return description_; }

 private:
  struct Pending {
    Job job;
    Done done;
    JobIsolation isolation = JobIsolation::kSavepoint;
    JobRerun rerun = JobRerun::kOnlyAfterFailure;
    // Its outcome, when it failed `contended` without a savepoint and its
    // batch runs again (see CommitBatch): it is not run again with them.
    std::optional<Status> settled;
    // A contended job's: how often it was, since when, and when it may run
    // again.
    int contended = 0;
    std::chrono::steady_clock::time_point contended_since{};
    std::chrono::steady_clock::time_point not_before{};
  };

  template <typename T>
  Result<T> RunValue(Status (Database::*run)(Job), std::function<Result<T>(Tx&)> job) {
    std::optional<T> out;
    Status st = (this->*run)([&](Tx& tx) -> Status {
      auto r = job(tx);
      if (!r.ok()) return r.status();
      out = std::move(r).value();
      return Status::Ok();
    });
    if (!st.ok()) return st;
    return std::move(*out);
  }

  Database(std::unique_ptr<ConnectionFactory> factory, DatabaseOptions options);
  Status Start(std::vector<Migration> migrations);
  // Queues a job unless closing; then `done` gets `shutting_down` at once.
  void Enqueue(std::deque<Pending>& queue, std::condition_variable& cv, const char* what, Pending p);
  void WriterLoop(std::unique_ptr<Connection> conn);
  void TakeQueued(std::vector<Pending>& batch);  // mu_ held
  // Puts a contended job back to run after its backoff, or fails it once
  // it has been contended for options_.contended_for (or the database
  // closes).
  void RunLater(Pending p);
  // The earliest time a delayed job may run (max() when none). mu_ held.
  std::chrono::steady_clock::time_point NextDelayed() const;
  bool TakeMore(std::vector<Pending>& batch, size_t in_transaction);
  void ReaderLoop(std::unique_ptr<Connection> conn);
  // Runs batch[first], batch[first + 1], ... in one transaction, taking more
  // from the queue (TakeMore), commits it and finishes its jobs; returns the
  // index of the first job left for a new transaction. When a job without
  // savepoint (kFailsBeforeWriting, or the transaction's first) fails after a
  // change, the transaction rolls back, the jobs up to it are finished as
  // failed, and the jobs after it are left, not attempted.
  size_t CommitBatch(Connection& conn, std::vector<Pending>& batch, size_t first, bool savepoint_each);

  std::unique_ptr<ConnectionFactory> factory_;
  DatabaseOptions options_;
  std::string description_;

  mutable std::mutex mu_;
  std::condition_variable write_cv_;
  std::condition_variable read_cv_;
  std::deque<Pending> write_queue_;  // GUARDED_BY(mu_)
  std::deque<Pending> read_queue_;   // GUARDED_BY(mu_)
  std::vector<Pending> delayed_;     // GUARDED_BY(mu_): contended jobs waiting for not_before
  bool closing_ = false;             // GUARDED_BY(mu_)
  Stats stats_;                      // GUARDED_BY(mu_)
  std::atomic<size_t> queued_writes_{0};  // write_queue_.size(), readable without mu_
  std::atomic<size_t> last_batch_{0};     // jobs in the writer's latest transaction
  // From options_.metrics (all null without): counted once per transaction.
  metrics::Counter* commits_ok_ = nullptr;
  metrics::Counter* commits_failed_ = nullptr;
  metrics::Histogram* commit_jobs_ = nullptr;
  metrics::Histogram* commit_seconds_ = nullptr;
  // The writer thread's own: how long and for how many jobs TakeMore waits.
  std::chrono::steady_clock::time_point gather_until_;
  size_t target_ = 0;

  std::thread writer_;
  std::vector<std::thread> readers_;

  // Notices and the server clock (a backend with a Listener only).
  friend class Subscription;
  void Unsubscribe(uint64_t id);
  void ListenerLoop(std::unique_ptr<Listener> listener);
  Status MeasureClock(Listener& listener);
  void WakeListener();
  struct Subscriber {
    std::string channel;
    std::function<void(std::string_view)> fn;
  };
  std::mutex sub_mu_;                        // held while a subscriber is called
  std::map<uint64_t, Subscriber> subscribers_;  // GUARDED_BY(sub_mu_)
  uint64_t next_subscriber_ = 1;             // GUARDED_BY(sub_mu_)
  std::mutex listen_mu_;
  std::condition_variable listen_cv_;
  uint64_t listening_up_to_ = 0;  // GUARDED_BY(listen_mu_): subscribers up to this id are listened for
  std::atomic<int64_t> clock_offset_ms_{0};
  int wake_fds_[2] = {-1, -1};  // a pipe that interrupts the listener's wait
  std::thread listener_;
};

// The wall clock every host on one database agrees on: `base` moved by the
// database server's offset (Database::clock_offset_ms), so hosts on
// machines whose clocks disagree still agree on what is due and when a
// lease expires. Monotonic time is base's. Thread-safe.
class DatabaseClock final : public Clock {
 public:
  DatabaseClock(const Clock& base, const Database& db) : base_(base), db_(db) {}
  WallTime Now() const override { return base_.Now() + std::chrono::milliseconds(db_.clock_offset_ms()); }
  MonoTime MonotonicNow() const override { return base_.MonotonicNow(); }

 private:
  const Clock& base_;
  const Database& db_;
};

// Applies `migrations` through `conn` inside one write transaction. Exposed
// for tests; Database::Open calls it.
Status ApplyMigrations(Connection& conn, const std::vector<Migration>& migrations);

}  // namespace dsh::store
