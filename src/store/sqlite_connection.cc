#include "store/sqlite_connection.h"

#include <spdlog/spdlog.h>
#include <sqlite3.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>

#include "store/sqlite_wal_vfs.h"

namespace dsh::store {
namespace {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

class SqliteRow final : public Row {
 public:
  explicit SqliteRow(sqlite3_stmt* stmt) : stmt_(stmt) {}
  int columns() const override { return sqlite3_column_count(stmt_); }
  bool IsNull(int c) const override { return sqlite3_column_type(stmt_, c) == SQLITE_NULL; }
  int64_t Int(int c) const override { return sqlite3_column_int64(stmt_, c); }
  double Real(int c) const override { return sqlite3_column_double(stmt_, c); }
  std::string_view Text(int c) const override {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, c));
    if (p == nullptr) return {};
    return std::string_view(p, static_cast<size_t>(sqlite3_column_bytes(stmt_, c)));
  }

 private:
  sqlite3_stmt* stmt_;
};

Result<sqlite3*> OpenDatabase(const SqliteOptions& o) {
  // Without memory statistics, SQLite's allocations skip a process-wide mutex
  // (about 7% of the writer's instructions per append). dsh reads no
  // sqlite3_memory_used() figures. Must precede SQLite's initialization, so
  // it is done once before the first connection; refused (and harmless) if
  // something else initialized SQLite earlier.
  static const bool configured = [] { return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0) == SQLITE_OK; }();
  (void)configured;
  // Gathering WAL writes in memory is safe only where each commit syncs the
  // WAL before publishing its frames (see CoalescingWalVfs).
  const char* vfs =
      o.synchronous == SqliteOptions::Synchronous::kFull && o.gather_wal_writes ? CoalescingWalVfs() : nullptr;
  sqlite3* db = nullptr;
  int rc =
      sqlite3_open_v2(o.path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, vfs);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close_v2(db);
    return Status(codes::kStorage, "cannot open " + o.path + ": " + msg);
  }
  return db;
}

class Checkpointer;

class SqliteConnection final : public Connection {
 public:
  SqliteConnection(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  ~SqliteConnection() override;
  sqlite3* handle() const { return db_; }

  Result<int64_t> Exec(std::string_view sql, std::span<const Value> params) override {
    DSH_ASSIGN_OR_RETURN(sqlite3_stmt * stmt, Prepare(sql, params));
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    }
    Status st = rc == SQLITE_DONE ? Status::Ok() : Error(rc, sql);
    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);
    if (!st.ok()) return st;
    return static_cast<int64_t>(sqlite3_changes64(db_));
  }

  Result<int64_t> Insert(std::string_view sql, std::span<const Value> params) override {
    DSH_RETURN_IF_ERROR(Exec(sql, params).status());
    return static_cast<int64_t>(sqlite3_last_insert_rowid(db_));
  }

  Status Query(std::string_view sql, std::span<const Value> params, const RowFn& on_row) override {
    DSH_ASSIGN_OR_RETURN(sqlite3_stmt * stmt, Prepare(sql, params));
    SqliteRow row(stmt);
    Status st;
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      st = on_row(row);
      if (!st.ok()) break;
    }
    if (st.ok() && rc != SQLITE_DONE) st = Error(rc, sql);
    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);
    return st;
  }

  // Transaction control goes through the statement cache too: with group
  // commit these run for every job, and re-parsing them would dominate.
  Dialect dialect() const override { return Dialect::kSqlite; }
  Status BeginWrite() override { return Control("BEGIN IMMEDIATE"); }
  Status BeginRead() override { return Control("BEGIN DEFERRED"); }
  Status Commit() override { return Control("COMMIT"); }
  Status Rollback() override {
    if (sqlite3_get_autocommit(db_)) return Status::Ok();  // no transaction open
    return Control("ROLLBACK");
  }
  Status Savepoint(std::string_view name) override { return Control("SAVEPOINT " + std::string(name)); }
  Status RollbackToSavepoint(std::string_view name) override {
    return Control("ROLLBACK TO SAVEPOINT " + std::string(name));
  }
  Status ReleaseSavepoint(std::string_view name) override { return Control("RELEASE SAVEPOINT " + std::string(name)); }
  int64_t TotalChanges() override { return sqlite3_total_changes64(db_); }
  bool InTransaction() override { return sqlite3_get_autocommit(db_) == 0; }

  Status Configure(const SqliteOptions& o) {
    sqlite3_busy_timeout(db_, static_cast<int>(o.busy_timeout.count()));
    DSH_RETURN_IF_ERROR(Simple("PRAGMA journal_mode=WAL"));
    DSH_RETURN_IF_ERROR(Simple(o.synchronous == SqliteOptions::Synchronous::kFull ? "PRAGMA synchronous=FULL"
                                                                                  : "PRAGMA synchronous=NORMAL"));
    DSH_RETURN_IF_ERROR(Simple("PRAGMA foreign_keys=OFF"));
    // 16 MiB of page cache (SQLite's default is 2 MiB): event compaction
    // inserts across every session's part of the `events` B-tree.
    DSH_RETURN_IF_ERROR(Simple("PRAGMA cache_size=-16384"));
    return Simple("PRAGMA temp_store=MEMORY");
  }

  // Makes this the connection whose commits drive the WAL's checkpoints
  // (SqliteOptions::checkpoints).
  Status DriveCheckpoints(const SqliteOptions& o);

 private:
  Status Control(const std::string& sql) { return Exec(sql, std::span<const Value>()).status(); }

  Status Simple(const std::string& sql) {
    char* err = nullptr;
    int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
    if (rc == SQLITE_OK) return Status::Ok();
    std::string msg = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    return Classify(rc, sql + ": " + msg);
  }

  Result<sqlite3_stmt*> Prepare(std::string_view sql, std::span<const Value> params) {
    auto it = cache_.find(sql);
    sqlite3_stmt* stmt = nullptr;
    if (it != cache_.end()) {
      stmt = it->second;
    } else {
      std::string expanded = ExpandSqliteComments(sql);
      int rc = sqlite3_prepare_v3(db_, expanded.c_str(), static_cast<int>(expanded.size()), SQLITE_PREPARE_PERSISTENT,
                                  &stmt, nullptr);
      if (rc != SQLITE_OK) return Error(rc, sql);
      cache_.emplace(std::string(sql), stmt);
    }
    if (static_cast<int>(params.size()) != sqlite3_bind_parameter_count(stmt)) {
      return Internal("statement expects " + std::to_string(sqlite3_bind_parameter_count(stmt)) +
                      " parameters, got " + std::to_string(params.size()) + ": " + std::string(sql));
    }
    for (size_t i = 0; i < params.size(); ++i) {
      int idx = static_cast<int>(i) + 1;
      int rc = std::visit(
          [&](const auto& v) -> int {
            using V = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<V, std::nullptr_t>) return sqlite3_bind_null(stmt, idx);
            else if constexpr (std::is_same_v<V, int64_t>) return sqlite3_bind_int64(stmt, idx, v);
            else if constexpr (std::is_same_v<V, double>) return sqlite3_bind_double(stmt, idx, v);
            else return sqlite3_bind_text64(stmt, idx, v.data(), v.size(), SQLITE_STATIC, SQLITE_UTF8);
          },
          params[i]);
      if (rc != SQLITE_OK) {
        sqlite3_clear_bindings(stmt);
        return Error(rc, sql);
      }
    }
    return stmt;
  }

  Status Error(int rc, std::string_view sql) {
    std::string msg = sqlite3_errmsg(db_);
    std::string s(sql.substr(0, 120));
    return Classify(rc, msg + " (in: " + s + ")");
  }

  static Status Classify(int rc, std::string msg) {
    switch (rc & 0xff) {
      case SQLITE_CONSTRAINT: return Status(codes::kConflict, std::move(msg));
      case SQLITE_BUSY:
      case SQLITE_LOCKED: return Status(codes::kUnavailable, "database is busy: " + msg);
      default: return Status(codes::kStorage, std::move(msg));
    }
  }

  sqlite3* db_;
  std::string path_;
  std::unordered_map<std::string, sqlite3_stmt*, StringHash, std::equal_to<>> cache_;
  std::unique_ptr<Checkpointer> checkpointer_;
};

// The writer's WAL checkpoints (SqliteOptions::checkpoints). The writer's
// WAL hook calls OnCommit after every COMMIT and decides; the thread only
// runs passive checkpoints on its own connection, which copy the WAL's
// committed pages into the database file (and fsync it) while the writer
// goes on appending to the WAL. Only a checkpoint the writer runs between
// two of its transactions can leave nothing behind, which is what lets the
// next transaction restart the WAL from its beginning; the background passes
// keep that remainder small.
class Checkpointer {
 public:
  // `conn`: the thread's own connection, configured as the writer's (the
  // checkpoint's fsyncs follow its `synchronous`).
  Checkpointer(std::unique_ptr<SqliteConnection> conn, SqliteOptions::Checkpoints limits, std::string path)
      : conn_(std::move(conn)), limits_(limits), path_(std::move(path)), thread_([this] { Loop(); }) {}
  ~Checkpointer() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

  // On the writer thread; `frames` is the WAL's size after its COMMIT.
  void OnCommit(sqlite3* writer, int frames) {
    std::unique_lock lock(mu_);
    if (requested_ || running_) return;
    // Frames the last background pass left checkpointed; from this WAL
    // unless it restarted since, and then most likely above `frames` (if
    // not, the choice below costs time, never correctness).
    const int done = std::exchange(checkpointed_, -1);
    const bool pass_ended = done >= 0 && done <= frames;
    if ((pass_ended && frames - done <= limits_.finish_frames) || frames >= limits_.max_frames) {
      lock.unlock();
      Run(writer, frames >= limits_.max_frames ? frames : 0);
      return;
    }
    if (pass_ended || frames >= limits_.start_frames) {
      requested_ = true;
      cv_.notify_one();
    }
  }

 private:
  void Loop() {
    std::unique_lock lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return requested_ || stop_; });
      if (stop_) return;
      requested_ = false;
      running_ = true;
      lock.unlock();
      int done = Run(conn_->handle(), 0);
      lock.lock();
      running_ = false;
      checkpointed_ = done;
    }
  }

  // The frames now checkpointed, or -1 if the checkpoint failed (the next
  // commit asks again; the WAL keeps everything meanwhile). `overdue`: the
  // WAL's frames when it has passed max_frames, else 0.
  int Run(sqlite3* db, int overdue) {
    int log = 0, done = 0;
    int rc = sqlite3_wal_checkpoint_v2(db, nullptr, SQLITE_CHECKPOINT_PASSIVE, &log, &done);
    if (rc == SQLITE_OK) {
      if (warned_.exchange(false)) spdlog::info("WAL checkpoints of {} succeed again", path_);
      return done;
    }
    // Busy: another connection holds the checkpoint lock (another host's
    // writer on this profile checkpointing, say), which a passive
    // checkpoint does not wait for. Routine, until the WAL grows past
    // max_frames because of it.
    if ((rc & 0xff) == SQLITE_BUSY && overdue == 0) {
      spdlog::debug("WAL checkpoint of {} deferred: another connection holds the checkpoint lock", path_);
      return -1;
    }
    if (!warned_.exchange(true)) {  // once until checkpoints succeed again
      if ((rc & 0xff) == SQLITE_BUSY) {
        spdlog::warn("the WAL of {} has {} frames and cannot be checkpointed: another connection holds the "
                     "checkpoint lock (retried after later commits; the WAL grows meanwhile)",
                     path_, overdue);
      } else {
        spdlog::warn("WAL checkpoint of {} failed (retried after later commits): {}", path_, sqlite3_errmsg(db));
      }
    }
    return -1;
  }

  std::unique_ptr<SqliteConnection> conn_;
  const SqliteOptions::Checkpoints limits_;
  const std::string path_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool requested_ = false;
  bool running_ = false;
  bool stop_ = false;
  int checkpointed_ = -1;
  std::atomic<bool> warned_{false};  // of a failure since the last checkpoint that succeeded
  std::thread thread_;  // last: starts once the members above exist
};

SqliteConnection::~SqliteConnection() {
  checkpointer_.reset();  // its connection closes first
  for (auto& [sql, stmt] : cache_) sqlite3_finalize(stmt);
  sqlite3_close_v2(db_);
}

Status SqliteConnection::DriveCheckpoints(const SqliteOptions& o) {
  if (!o.checkpoints.background) return Status::Ok();  // SQLite's own, in the COMMIT
  DSH_ASSIGN_OR_RETURN(sqlite3 * db, OpenDatabase(o));
  auto conn = std::make_unique<SqliteConnection>(db, path_);
  DSH_RETURN_IF_ERROR(conn->Configure(o));
  checkpointer_ = std::make_unique<Checkpointer>(std::move(conn), o.checkpoints, path_);
  // Replaces SQLite's automatic checkpoint, which is itself a WAL hook.
  sqlite3_wal_hook(
      db_,
      [](void* self, sqlite3* db, const char*, int frames) {
        static_cast<Checkpointer*>(self)->OnCommit(db, frames);
        return SQLITE_OK;
      },
      checkpointer_.get());
  return Status::Ok();
}

}  // namespace

std::string ExpandSqliteComments(std::string_view sql) {
  static constexpr std::string_view kOpen = "/*sqlite:";
  std::string out;
  out.reserve(sql.size());
  size_t pos = 0;
  while (true) {
    size_t start = sql.find(kOpen, pos);
    if (start == std::string_view::npos) break;
    size_t end = sql.find("*/", start);
    if (end == std::string_view::npos) break;
    out.append(sql.substr(pos, start - pos));
    out.append(sql.substr(start + kOpen.size(), end - start - kOpen.size()));
    pos = end + 2;
  }
  out.append(sql.substr(pos));
  return out;
}

Result<std::unique_ptr<Connection>> SqliteConnectionFactory::Open() { return OpenConnection(false); }

Result<std::unique_ptr<Connection>> SqliteConnectionFactory::OpenWriter() { return OpenConnection(true); }

Result<std::unique_ptr<Connection>> SqliteConnectionFactory::OpenConnection(bool writer) {
  DSH_ASSIGN_OR_RETURN(sqlite3 * db, OpenDatabase(options_));
  auto conn = std::make_unique<SqliteConnection>(db, options_.path);
  Status st = conn->Configure(options_);
  if (st.ok() && writer) st = conn->DriveCheckpoints(options_);
  if (!st.ok()) return st.WithContext("cannot configure " + options_.path);
  return std::unique_ptr<Connection>(std::move(conn));
}

}  // namespace dsh::store
