#include "store/database.h"

#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <random>
#include <set>

namespace dsh::store {
namespace {

Status RunJob(const Database::Job& job, Tx& tx) {
  try {
    return job(tx);
  } catch (const std::exception& e) {
    return Internal(std::string("unexpected exception in a database job: ") + e.what());
  }
}

void Finish(const Database::Done& done, const Status& st) {
  if (done) done(st);
}

// The advisory lock migrations on PostgreSQL hold ("dsh\1").
constexpr int64_t kMigrationLock = 0x64736801;

}  // namespace

Result<std::unique_ptr<Database>> Database::Open(std::unique_ptr<ConnectionFactory> factory,
                                                 std::vector<Migration> migrations, DatabaseOptions options) {
  std::unique_ptr<Database> db(new Database(std::move(factory), options));
  DSH_RETURN_IF_ERROR(db->Start(std::move(migrations)));
  return db;
}

Database::Database(std::unique_ptr<ConnectionFactory> factory, DatabaseOptions options)
    : factory_(std::move(factory)), options_(options), description_(factory_->Describe()) {
  options_.readers = std::max(options_.readers, 1);
  options_.max_batch = std::max<size_t>(options_.max_batch, 1);
  if (metrics::Registry* m = options_.metrics) {
    auto& commits = m->AddCounterFamily("dsh_store_commits_total",
                                        "Write transactions that reached COMMIT, by outcome (committed or failed).",
                                        {"result"});
    commits_ok_ = &commits.WithLabels({"committed"});
    commits_failed_ = &commits.WithLabels({"failed"});
    commit_jobs_ = &m->AddHistogram("dsh_store_commit_jobs", "Write jobs per committed transaction (group commit).",
                                    metrics::ExponentialBuckets(1, 2, 11));
    commit_seconds_ = &m->AddHistogram("dsh_store_commit_seconds",
                                       "Time from BEGIN until COMMIT returned, per write transaction.",
                                       metrics::LatencyBuckets());
  }
}

Status Database::Start(std::vector<Migration> migrations) {
  DSH_ASSIGN_OR_RETURN(auto writer_conn, factory_->OpenWriter());
  DSH_RETURN_IF_ERROR(ApplyMigrations(*writer_conn, migrations));
  std::vector<std::unique_ptr<Connection>> reader_conns;
  for (int i = 0; i < options_.readers; ++i) {
    DSH_ASSIGN_OR_RETURN(auto conn, factory_->Open());
    reader_conns.push_back(std::move(conn));
  }
  DSH_ASSIGN_OR_RETURN(std::unique_ptr<Listener> listener, factory_->OpenListener());
  if (listener) {
    // Measured before the first write, so that the host's DatabaseClock is
    // right from the start.
    DSH_RETURN_IF_ERROR(MeasureClock(*listener));
    if (pipe2(wake_fds_, O_CLOEXEC | O_NONBLOCK) != 0) return Internal("pipe2 failed");
  }
  writer_ = std::thread([this, conn = std::move(writer_conn)]() mutable { WriterLoop(std::move(conn)); });
  for (auto& conn : reader_conns) {
    readers_.emplace_back([this, c = std::move(conn)]() mutable { ReaderLoop(std::move(c)); });
  }
  if (listener) listener_ = std::thread([this, l = std::move(listener)]() mutable { ListenerLoop(std::move(l)); });
  return Status::Ok();
}

Status Database::MeasureClock(Listener& listener) {
  const Clock& clock = options_.clock ? *options_.clock : RealClock();
  int64_t before = ToUnixMillis(clock.Now());
  DSH_ASSIGN_OR_RETURN(int64_t server, listener.ServerTimeMillis());
  int64_t after = ToUnixMillis(clock.Now());
  if (after - before > 1000) return Status::Ok();  // too slow an answer to tell
  // Within 10 ms counts as agreeing: the clock of a host next to its
  // database does not wobble by the round trip.
  int64_t offset = server - (before + after) / 2;
  if (std::abs(offset - clock_offset_ms_.load()) >= 10) {
    if (std::abs(offset) >= 1000) {
      spdlog::warn("this machine's clock is {} ms {} the database server's; dsh uses the server's time", std::abs(offset),
                   offset > 0 ? "behind" : "ahead of");
    }
    clock_offset_ms_.store(std::abs(offset) < 10 ? 0 : offset);
  }
  return Status::Ok();
}

Subscription Database::Subscribe(std::string channel, std::function<void(std::string_view)> fn) {
  uint64_t id;
  {
    std::lock_guard lock(sub_mu_);
    id = next_subscriber_++;
    subscribers_[id] = Subscriber{std::move(channel), std::move(fn)};
  }
  if (listener_.joinable()) {
    // Returns once the listener listens on the channel, so that a notice
    // sent after this returns is heard (unless the listener is down).
    WakeListener();
    std::unique_lock lock(listen_mu_);
    listen_cv_.wait_for(lock, std::chrono::seconds(2), [&] { return listening_up_to_ >= id; });
  }
  return Subscription(this, id);
}

void Database::Unsubscribe(uint64_t id) {
  std::lock_guard lock(sub_mu_);
  subscribers_.erase(id);
}

void Subscription::reset() {
  if (db_ != nullptr) std::exchange(db_, nullptr)->Unsubscribe(id_);
}

Subscription& Subscription::operator=(Subscription&& o) noexcept {
  if (this != &o) {
    reset();
    db_ = std::exchange(o.db_, nullptr);
    id_ = o.id_;
  }
  return *this;
}

void Database::WakeListener() {
  if (wake_fds_[1] >= 0) {
    char byte = 1;
    (void)!write(wake_fds_[1], &byte, 1);
  }
}

// Listens on every subscribed channel, hands each notice to its
// subscribers, re-measures the server's clock, and reopens a lost listener
// with backoff (logging once per outage).
void Database::ListenerLoop(std::unique_ptr<Listener> listener) {
  std::set<std::string> listening;
  auto next_measure = std::chrono::steady_clock::now() + options_.clock_every;
  std::chrono::milliseconds backoff{100};
  bool outage = false;
  auto lost = [&](const Status& st) {
    if (!outage) {
      spdlog::warn("lost the listening connection to {}: {} (other hosts' notices are missed until it is back; "
                   "polling goes on)",
                   description_, st.message());
    }
    outage = true;
    listener.reset();
  };
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (closing_) return;
    }
    if (!listener) {
      auto opened = factory_->OpenListener();
      if (!opened.ok() || !*opened) {
        pollfd p{wake_fds_[0], POLLIN, 0};
        poll(&p, 1, static_cast<int>(backoff.count()));
        backoff = std::min<std::chrono::milliseconds>(backoff * 2, std::chrono::seconds(5));
        continue;
      }
      listener = std::move(opened).value();
      listening.clear();
      backoff = std::chrono::milliseconds(100);
      if (outage) spdlog::info("the listening connection to {} is back", description_);
      outage = false;
    }
    std::vector<std::string> wanted;
    uint64_t up_to = 0;
    {
      std::lock_guard lock(sub_mu_);
      for (const auto& [id, sub] : subscribers_) wanted.push_back(sub.channel);
      up_to = next_subscriber_ - 1;
    }
    Status st = Status::Ok();
    for (const std::string& channel : wanted) {
      if (listening.count(channel)) continue;
      st = listener->Listen(channel);
      if (!st.ok()) break;
      listening.insert(channel);
    }
    if (!st.ok()) {
      lost(st);
      continue;
    }
    {
      std::lock_guard lock(listen_mu_);
      listening_up_to_ = up_to;
    }
    listen_cv_.notify_all();
    auto now = std::chrono::steady_clock::now();
    if (now >= next_measure) {
      if (Status m = MeasureClock(*listener); !m.ok()) {
        lost(m);
        continue;
      }
      next_measure = now + options_.clock_every;
    }
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_measure - now);
    auto got = listener->Wait(wake_fds_[0], std::max(wait, std::chrono::milliseconds(1)));
    char drain[64];
    while (read(wake_fds_[0], drain, sizeof drain) > 0) {
    }
    if (!got.ok()) {
      lost(got.status());
      continue;
    }
    for (const Notification& n : *got) {
      std::lock_guard lock(sub_mu_);
      for (const auto& [id, sub] : subscribers_) {
        if (sub.channel == n.channel) sub.fn(n.payload);
      }
    }
  }
}

Database::~Database() { Close(); }

void Database::Close() {
  {
    std::lock_guard lock(mu_);
    closing_ = true;
  }
  write_cv_.notify_all();
  read_cv_.notify_all();
  WakeListener();
  if (writer_.joinable()) writer_.join();
  for (auto& t : readers_) {
    if (t.joinable()) t.join();
  }
  if (listener_.joinable()) listener_.join();
  for (int& fd : wake_fds_) {
    if (fd >= 0) close(std::exchange(fd, -1));
  }
}

void Database::Enqueue(std::deque<Pending>& queue, std::condition_variable& cv, const char* what, Pending p) {
  {
    std::lock_guard lock(mu_);
    if (!closing_) {
      queue.push_back(std::move(p));
      if (&queue == &write_queue_) queued_writes_.store(queue.size(), std::memory_order_relaxed);
      cv.notify_one();
      return;
    }
  }
  Finish(p.done, Status(codes::kShuttingDown, std::string("the database is closing; the ") + what +
                                                  " was not attempted"));
}

void Database::Write(Job job, Done done, JobIsolation isolation, JobRerun rerun) {
  Enqueue(write_queue_, write_cv_, "write", Pending{std::move(job), std::move(done), isolation, rerun});
}

void Database::Read(Job job, Done done) {
  Enqueue(read_queue_, read_cv_, "read", Pending{std::move(job), std::move(done)});
}

Status Database::WriteSync(Job job) {
  std::promise<Status> promise;
  auto future = promise.get_future();
  Write(std::move(job), [&promise](Status st) { promise.set_value(std::move(st)); });
  return future.get();
}

Status Database::ReadSync(Job job) {
  std::promise<Status> promise;
  auto future = promise.get_future();
  Read(std::move(job), [&promise](Status st) { promise.set_value(std::move(st)); });
  return future.get();
}

Database::Stats Database::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

size_t Database::write_load() const {
  return std::max(queued_writes_.load(std::memory_order_relaxed), last_batch_.load(std::memory_order_relaxed));
}

void Database::WriterLoop(std::unique_ptr<Connection> conn) {
  std::vector<Pending> batch;
  for (;;) {
    batch.clear();
    {
      std::unique_lock lock(mu_);
      for (;;) {
        const auto next = NextDelayed();
        if (closing_ || !write_queue_.empty() || next <= std::chrono::steady_clock::now()) break;
        if (next == std::chrono::steady_clock::time_point::max()) {
          write_cv_.wait(lock);
        } else {
          write_cv_.wait_until(lock, next);
        }
      }
      TakeQueued(batch);
      if (batch.empty()) return;  // closing and drained
    }
    gather_until_ = std::chrono::steady_clock::now() + options_.max_gather;
    target_ = last_batch_.load(std::memory_order_relaxed);
    bool savepoint_each = false;
    for (size_t next = 0; next < batch.size();) {
      const size_t end = CommitBatch(*conn, batch, next, savepoint_each);
      // Nothing done: it rolled back to isolate a failed job (PostgreSQL).
      savepoint_each = end == next;
      next = end;
    }
  }
}

std::chrono::steady_clock::time_point Database::NextDelayed() const {
  auto next = std::chrono::steady_clock::time_point::max();
  for (const Pending& p : delayed_) next = std::min(next, p.not_before);
  return next;
}

void Database::TakeQueued(std::vector<Pending>& batch) {
  // Contended jobs whose backoff is over first (all of them when closing).
  const auto now = std::chrono::steady_clock::now();
  for (auto it = delayed_.begin(); it != delayed_.end() && batch.size() < options_.max_batch;) {
    if (closing_ || it->not_before <= now) {
      batch.push_back(std::move(*it));
      it = delayed_.erase(it);
    } else {
      ++it;
    }
  }
  while (!write_queue_.empty() && batch.size() < options_.max_batch) {
    batch.push_back(std::move(write_queue_.front()));
    write_queue_.pop_front();
  }
  queued_writes_.store(write_queue_.size(), std::memory_order_relaxed);
}

// After a commit, the callers it acknowledged often write again at once (an
// agent's next step, each on its own strand): their writes arrive over the
// next few hundred microseconds. Committing the first few alone would split
// them over two commits, each paying a WAL sync. So once a transaction has
// run every job in hand, it takes the jobs queued meanwhile, and while it
// holds fewer than the last transaction did, it waits for more as long as
// they arrive in a burst (the next within kBurstGap on average), up to
// max_gather after the transaction began. The jobs run as they arrive, so
// the wait overlaps with their work. A steady stream arrives slower than a
// burst and costs at most one kBurstWait.
bool Database::TakeMore(std::vector<Pending>& batch, size_t in_transaction) {
  constexpr auto kBurstWait = std::chrono::microseconds(50);
  constexpr auto kBurstGap = std::chrono::microseconds(15);
  std::unique_lock lock(mu_);
  size_t before = batch.size();
  if (write_queue_.empty() && !closing_ && in_transaction < target_ && batch.size() < options_.max_batch) {
    auto now = std::chrono::steady_clock::now();
    if (now < gather_until_) {
      write_cv_.wait_until(lock, std::min(now + kBurstWait, gather_until_),
                           [&] { return closing_ || !write_queue_.empty(); });
      auto waited = std::chrono::steady_clock::now() - now;
      if (write_queue_.empty() || waited > kBurstGap * write_queue_.size()) gather_until_ = now;  // the burst ended
    }
  }
  TakeQueued(batch);
  return batch.size() > before;
}

void Database::RunLater(Pending p) {
  using namespace std::chrono;
  const auto now = steady_clock::now();
  if (p.contended++ == 0) p.contended_since = now;
  Status give_up;
  {
    std::lock_guard lock(mu_);
    ++stats_.contended;
    if (closing_) {
      give_up = Status(codes::kUnavailable, "the database is closing and this write was still waiting for rows "
                                            "another writer holds; it was not saved");
    } else if (now - p.contended_since >= options_.contended_for) {
      give_up = Status(codes::kUnavailable,
                       "this write waited " + std::to_string(options_.contended_for.count()) +
                           " ms for rows another writer holds (a host frozen or cut off mid-transaction holds them "
                           "until the server ends its transaction); it was not saved");
    }
    if (give_up.ok()) {
      // 25 ms doubling up to 1 s, with jitter so that two hosts that
      // collided do not collide again.
      thread_local std::minstd_rand rng{std::random_device{}()};
      const auto base = milliseconds(std::min<int64_t>(1000, int64_t{25} << std::min(p.contended - 1, 6)));
      const auto jitter = milliseconds(std::uniform_int_distribution<int64_t>(0, base.count() / 2)(rng));
      p.not_before = now + base / 2 + jitter;
      delayed_.push_back(std::move(p));
      write_cv_.notify_one();
      return;
    }
    ++stats_.contended_failed;
  }
  spdlog::warn("a write gave up after waiting for rows another writer holds: {}", give_up.message());
  Finish(p.done, give_up);
}

size_t Database::CommitBatch(Connection& conn, std::vector<Pending>& batch, size_t first, bool savepoint_each) {
  auto fail = [&](size_t from, size_t to, const Status& st) {
    for (size_t i = from; i < to; ++i) Finish(batch[i].done, st);
  };
  using Clock = std::chrono::steady_clock;
  const auto began = Clock::now();
  Status begin = conn.BeginWrite();
  if (!begin.ok()) {
    fail(first, batch.size(), begin.WithContext("cannot start a write transaction"));
    return batch.size();
  }
  std::vector<Status> results;
  // PostgreSQL: a job that waited too long for a row (`contended`) must roll
  // back alone and run again later, so every job is either in a savepoint
  // or may run again with the jobs before it (see Database).
  const bool postgres = conn.dialect() == Dialect::kPostgres;
  bool bare = postgres && !savepoint_each;  // PostgreSQL: no savepoint for the next job
  size_t end = first;  // batch[first, end) ran in this transaction
  for (;; ++end) {
    if (postgres && end > first && Clock::now() - began >= options_.max_hold) break;
    if (end == batch.size() && (options_.max_gather.count() <= 0 || !TakeMore(batch, end - first))) break;
    Pending& job = batch[end];
    if (job.settled) {
      results.push_back(*std::exchange(job.settled, std::nullopt));
      continue;
    }
    if (bare) {
      results.push_back(RunJob(job.job, conn));
      if (results.back().ok()) {
        bare = job.rerun == JobRerun::kAlsoAfterSuccess;
        continue;
      }
      // Only the whole transaction can undo it: the batch runs again from
      // `first`, each job in a savepoint. A contended job is not run again
      // at once (it would wait for the same row): it runs later.
      if (results.back().code() == codes::kContended) job.settled = results.back();
      (void)conn.Rollback();
      std::lock_guard lock(mu_);
      ++stats_.rolled_back_to_isolate;
      return first;
    }
    // SQLite: the transaction's first job needs no savepoint (if it fails,
    // rolling the transaction back undoes nothing else), nor does a job that
    // fails only before writing (its checks leave the transaction usable).
    if (!postgres && (end == first || job.isolation == JobIsolation::kFailsBeforeWriting)) {
      int64_t changes = conn.TotalChanges();
      results.push_back(RunJob(job.job, conn));
      const Status& st = results.back();
      bool nothing_written = conn.TotalChanges() == changes && conn.InTransaction();
      if (st.ok() || (job.isolation == JobIsolation::kFailsBeforeWriting && nothing_written)) continue;
      // It failed after a change: only the whole transaction can undo that.
      (void)conn.Rollback();
      fail(first, end, Status(codes::kCommitFailed,
                              "the write transaction failed; nothing of this write was saved: " + st.message()));
      Finish(job.done, st);
      return end + 1;
    }
    Status sp = conn.Savepoint("job");
    if (sp.ok()) {
      results.push_back(RunJob(job.job, conn));
      if (!results.back().ok()) sp = conn.RollbackToSavepoint("job");
      if (sp.ok()) sp = conn.ReleaseSavepoint("job");
    }
    if (!sp.ok()) {
      (void)conn.Rollback();
      fail(first, end + 1,
           Status(codes::kCommitFailed, "the write transaction failed; nothing of it was saved: " + sp.message()));
      return end + 1;
    }
  }
  last_batch_.store(end - first, std::memory_order_relaxed);
  const auto committing = Clock::now();
  Status commit = conn.Commit();
  const auto committed = Clock::now();
  auto us = [](Clock::duration d) {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(d).count());
  };
  {
    std::lock_guard lock(mu_);  // counted before the callbacks, which may read stats()
    (commit.ok() ? stats_.commits : stats_.failed_commits)++;
    if (commit.ok()) stats_.jobs += end - first;
    stats_.run_us += us(committing - began);
    stats_.commit_us += us(committed - committing);
  }
  if (commits_ok_ != nullptr) {
    (commit.ok() ? commits_ok_ : commits_failed_)->Inc();
    if (commit.ok()) commit_jobs_->Observe(static_cast<double>(end - first));
    commit_seconds_->Observe(std::chrono::duration<double>(committed - began).count());
  }
  if (!commit.ok()) {
    Status rollback = conn.Rollback();
    if (!rollback.ok()) spdlog::error("rollback after failed commit also failed: {}", rollback.ToString());
    spdlog::error("commit of {} write job(s) failed: {}", end - first, commit.ToString());
    fail(first, end, Status(codes::kCommitFailed, "commit failed; nothing of this write was saved: " + commit.message()));
  } else {
    for (size_t i = first; i < end; ++i) {
      if (results[i - first].code() == codes::kContended) {
        RunLater(std::move(batch[i]));  // rolled back to its savepoint: nothing of it was committed
      } else {
        Finish(batch[i].done, results[i - first]);
      }
    }
  }
  const uint64_t callbacks = us(Clock::now() - committed);
  std::lock_guard lock(mu_);
  stats_.callbacks_us += callbacks;
  return end;
}

void Database::ReaderLoop(std::unique_ptr<Connection> conn) {
  for (;;) {
    Pending p;
    {
      std::unique_lock lock(mu_);
      read_cv_.wait(lock, [&] { return closing_ || !read_queue_.empty(); });
      if (read_queue_.empty()) return;
      p = std::move(read_queue_.front());
      read_queue_.pop_front();
    }
    Status st = conn->BeginRead();
    if (st.ok()) {
      st = RunJob(p.job, *conn);
      Status end = conn->Rollback();  // a read snapshot has nothing to commit
      if (st.ok() && !end.ok()) st = end;
    }
    Finish(p.done, st);
  }
}

namespace {

// Whether `sql` is one dialect-only comment (`/*sqlite: ...*/`) of a dialect
// other than `d`: a statement for the other backend only.
bool ForOtherDialect(std::string_view sql, Dialect d) {
  while (!sql.empty() && std::isspace(static_cast<unsigned char>(sql.front()))) sql.remove_prefix(1);
  while (!sql.empty() && std::isspace(static_cast<unsigned char>(sql.back()))) sql.remove_suffix(1);
  std::string_view other = d == Dialect::kSqlite ? "/*postgres:" : "/*sqlite:";
  return sql.starts_with(other) && sql.ends_with("*/") && sql.find("*/") == sql.size() - 2;
}

}  // namespace

Status ApplyMigrations(Connection& conn, const std::vector<Migration>& migrations) {
  std::map<std::string, std::vector<const Migration*>> by_module;
  for (const auto& m : migrations) by_module[m.module].push_back(&m);
  for (auto& [module, list] : by_module) {
    std::sort(list.begin(), list.end(), [](auto* a, auto* b) { return a->version < b->version; });
    for (size_t i = 0; i < list.size(); ++i) {
      if (list[i]->version != static_cast<int>(i) + 1) {
        return Internal("migrations of module '" + module + "' must be numbered 1, 2, 3, ...");
      }
    }
  }
  DSH_RETURN_IF_ERROR(conn.BeginWrite().WithContext("cannot start the migration transaction"));
  auto fail = [&](Status st) {
    (void)conn.Rollback();
    return st;
  };
  if (conn.dialect() == Dialect::kPostgres) {
    // Hosts starting at once migrate one after the other: the later one
    // waits (as long as it takes) and then finds the schema current.
    auto r = conn.Exec("SELECT set_config('lock_timeout', '0', true)");
    if (r.ok()) r = conn.Exec("SELECT pg_advisory_xact_lock(?)", {kMigrationLock});
    if (!r.ok()) return fail(r.status().WithContext("cannot lock the schema for migrations"));
  }
  auto created = conn.Exec(
      "CREATE TABLE IF NOT EXISTS dsh_schema (module TEXT PRIMARY KEY, version BIGINT NOT NULL)");
  if (!created.ok()) return fail(created.status());
  std::map<std::string, int64_t> current;
  Status st = conn.Query("SELECT module, version FROM dsh_schema", {}, [&](const Row& row) {
    current[row.String(0)] = row.Int(1);
    return Status::Ok();
  });
  if (!st.ok()) return fail(st);
  for (const auto& [module, version] : current) {
    auto it = by_module.find(module);
    int64_t known = it == by_module.end() ? 0 : static_cast<int64_t>(it->second.size());
    if (version > known) {
      return fail(Status(codes::kSchemaTooNew,
                         "the database was written by a newer dsh: schema module '" + module + "' is at version " +
                             std::to_string(version) + " but this dsh knows only up to version " +
                             std::to_string(known) + "; upgrade dsh to open it"));
    }
  }
  for (const auto& [module, list] : by_module) {
    int64_t have = current.count(module) ? current[module] : 0;
    for (const Migration* m : list) {
      if (m->version <= have) continue;
      for (const auto& sql : m->statements) {
        if (ForOtherDialect(sql, conn.dialect())) continue;
        auto r = conn.Exec(sql);
        if (!r.ok()) {
          return fail(r.status().WithContext("migration " + module + " v" + std::to_string(m->version)));
        }
      }
      auto r = conn.Exec(
          "INSERT INTO dsh_schema (module, version) VALUES (?, ?) "
          "ON CONFLICT (module) DO UPDATE SET version = excluded.version",
          {std::string_view(module), int64_t{m->version}});
      if (!r.ok()) return fail(r.status());
    }
  }
  Status commit = conn.Commit();
  if (!commit.ok()) return fail(commit.WithContext("cannot commit migrations"));
  return Status::Ok();
}

}  // namespace dsh::store
