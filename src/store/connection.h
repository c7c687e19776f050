#pragma once

#include <cstdint>
#include <chrono>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/status.h"

namespace dsh::store {

// SQL parameter: NULL, 64-bit integer, double or text. Text is borrowed for
// the duration of the call only.
using Value = std::variant<std::nullptr_t, int64_t, double, std::string_view>;

// One result row, valid only inside the row callback that received it.
class Row {
 public:
  virtual ~Row() = default;
  virtual int columns() const = 0;
  virtual bool IsNull(int column) const = 0;
  virtual int64_t Int(int column) const = 0;
  virtual double Real(int column) const = 0;
  // The text of a column; empty for NULL. Borrowed until the callback returns.
  virtual std::string_view Text(int column) const = 0;

  std::string String(int column) const { return std::string(Text(column)); }
  // nullopt for NULL.
  std::optional<std::string> OptString(int column) const {
    if (IsNull(column)) return std::nullopt;
    return String(column);
  }
  std::optional<int64_t> OptInt(int column) const {
    if (IsNull(column)) return std::nullopt;
    return Int(column);
  }
};

// A parameter that is NULL for nullopt.
inline Value OptValue(const std::optional<std::string>& s) {
  return s ? Value(std::string_view(*s)) : Value(nullptr);
}
inline Value OptValue(const std::optional<int64_t>& v) { return v ? Value(*v) : Value(nullptr); }

using RowFn = std::function<Status(const Row&)>;

// What SQL code above the store layer may do inside a transaction. The SQL is
// the portable subset both backends accept (see docs/STORAGE.md): `?`
// placeholders, BIGINT/TEXT/DOUBLE PRECISION columns, `INSERT ... ON CONFLICT
// DO NOTHING`, `RETURNING`, `CASE` instead of MAX()/GREATEST(). Dialect-only
// DDL goes in a comment the other dialect ignores: `/*sqlite: WITHOUT ROWID*/`
// is expanded by SQLite and ignored by PostgreSQL. A migration statement that
// is nothing but such a comment runs on its dialect only.
//
// Errors: constraint violations are `conflict`; a busy/locked database that
// stayed busy past the timeout is `unavailable`; anything else is
// `storage_error` with the backend's message.
// Thread-affine: used only by the thread that runs the job it was given to.
enum class Dialect { kSqlite, kPostgres };

class Tx {
 public:
  virtual ~Tx() = default;

  // Which SQL the backend speaks, for the few features that have no portable
  // form (full-text search: SQLite FTS5, PostgreSQL tsvector).
  virtual Dialect dialect() const = 0;

  // Runs one statement; returns the number of rows it changed.
  virtual Result<int64_t> Exec(std::string_view sql, std::span<const Value> params) = 0;
  // Runs one statement and calls `on_row` for each row; stops at the first
  // error `on_row` returns and returns it.
  virtual Status Query(std::string_view sql, std::span<const Value> params, const RowFn& on_row) = 0;
  // Runs an INSERT of one row into a table whose integer key the database
  // generates (`/*sqlite: INTEGER PRIMARY KEY*/ /*postgres: BIGSERIAL ...*/`)
  // and returns that key. Cheaper than `INSERT ... RETURNING`, which SQLite
  // runs through a temporary table.
  virtual Result<int64_t> Insert(std::string_view sql, std::span<const Value> params) = 0;

  // A write whose answer the caller does not need, and which fails only
  // when the storage does (no constraint it could break, no row another
  // writer holds). On PostgreSQL it waits and goes to the server with
  // whatever comes next — the job's next statement, a later job's, the
  // COMMIT — in that round trip; if it fails there, the whole transaction
  // fails, every job in it. Elsewhere it runs at once.
  //
  // With `rows`, the write must change exactly that many rows — a
  // compare-and-set of a row this transaction has locked, which cannot
  // lose — else it fails with kConflict (on PostgreSQL: the transaction
  // is lost, as above). The check stays, so a broken lock shows up as an
  // error rather than a write that silently did nothing.
  virtual Status ExecLater(std::string_view sql, std::span<const Value> params, std::optional<int64_t> rows) {
    DSH_ASSIGN_OR_RETURN(int64_t changed, Exec(sql, params));
    return !rows || changed == *rows ? Status::Ok() : UnexpectedRows(sql, *rows, changed);
  }

  // Once this transaction commits, tells the other hosts on this database
  // (their Database::Subscribe) that `channel` has news, with a short
  // `payload` (a session id, a time). Nothing is sent if the transaction, or
  // the job's savepoint, rolls back; identical notices of one transaction
  // may arrive as one. A backend that only one machine uses (SQLite) sends
  // nothing: notices are a hint that spares other hosts a poll, never the
  // only way news travels.
  virtual Status Notify(std::string_view channel, std::string_view payload) {
    (void)channel;
    (void)payload;
    return Status::Ok();
  }

  Result<int64_t> Exec(std::string_view sql, std::initializer_list<Value> params = {}) {
    return Exec(sql, std::span<const Value>(params.begin(), params.size()));
  }
  Status Query(std::string_view sql, std::initializer_list<Value> params, const RowFn& on_row) {
    return Query(sql, std::span<const Value>(params.begin(), params.size()), on_row);
  }
  Status ExecLater(std::string_view sql, std::span<const Value> params) { return ExecLater(sql, params, std::nullopt); }
  Status ExecLater(std::string_view sql, std::initializer_list<Value> params = {},
                   std::optional<int64_t> rows = std::nullopt) {
    return ExecLater(sql, std::span<const Value>(params.begin(), params.size()), rows);
  }

  // The error of a write that changed `changed` rows, not `expected`.
  static Status UnexpectedRows(std::string_view sql, int64_t expected, int64_t changed) {
    return Status(codes::kConflict, "a write changed " + std::to_string(changed) + " rows, not " +
                                        std::to_string(expected) + " (in: " + std::string(sql.substr(0, 120)) + ")");
  }
  Result<int64_t> Insert(std::string_view sql, std::initializer_list<Value> params) {
    return Insert(sql, std::span<const Value>(params.begin(), params.size()));
  }
};

// A backend connection: a Tx plus transaction control, used only by the store
// layer (the writer and the reader pool). Thread-affine.
class Connection : public Tx {
 public:
  // Starts a write transaction that holds the database's write lock until it
  // ends (SQLite: BEGIN IMMEDIATE).
  virtual Status BeginWrite() = 0;
  // Starts a read-only snapshot.
  virtual Status BeginRead() = 0;
  virtual Status Commit() = 0;
  // Ends the open transaction without effect; a no-op when none is open.
  virtual Status Rollback() = 0;
  virtual Status Savepoint(std::string_view name) = 0;
  virtual Status RollbackToSavepoint(std::string_view name) = 0;
  virtual Status ReleaseSavepoint(std::string_view name) = 0;
  // A count of rows changed through this connection that only grows: two
  // readings differ when rows were inserted, updated or deleted in between.
  virtual int64_t TotalChanges() = 0;
  // Whether a transaction is open and usable; false once the backend has
  // rolled one back by itself after an error (SQLite does so on a full disk
  // or an I/O error) or a failed statement has aborted it (PostgreSQL, where
  // only a savepoint lets a transaction go on after an error; SQLite undoes
  // the failed statement only).
  virtual bool InTransaction() = 0;
};

// A notice another host sent with Tx::Notify.
struct Notification {
  std::string channel;
  std::string payload;
};

// A connection that waits for other hosts' notices and reads the database
// server's clock (PostgreSQL: LISTEN). Thread-affine.
class Listener {
 public:
  virtual ~Listener() = default;
  // Subscribes to `channel` ([a-z_]+).
  virtual Status Listen(std::string_view channel) = 0;
  // Waits up to `timeout` for notices, or until `wake_fd` is readable (it
  // is not read); returns the notices that arrived, except those sent
  // through this listener's own factory (a host does not hear itself).
  // `unavailable` once the connection is lost: open a new listener.
  virtual Result<std::vector<Notification>> Wait(int wake_fd, std::chrono::milliseconds timeout) = 0;
  // The database server's wall clock, in Unix milliseconds.
  virtual Result<int64_t> ServerTimeMillis() = 0;
};

// Opens connections to one database. Thread-safe.
class ConnectionFactory {
 public:
  virtual ~ConnectionFactory() = default;
  virtual Result<std::unique_ptr<Connection>> Open() = 0;
  // The connection that will run every write transaction (Database opens
  // one); a backend may attach work to it that follows commits, such as
  // SQLite's WAL checkpoints.
  virtual Result<std::unique_ptr<Connection>> OpenWriter() { return Open(); }
  // A listener, for a database that hosts on several machines share; null
  // (and no error) when the backend has none: SQLite, on this machine only.
  virtual Result<std::unique_ptr<Listener>> OpenListener() { return std::unique_ptr<Listener>(); }
  // For messages: "sqlite /path/dsh.db".
  virtual std::string Describe() const = 0;
};

}  // namespace dsh::store
