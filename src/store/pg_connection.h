#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "store/connection.h"

struct pg_conn;  // libpq's PGconn

namespace dsh::store {

struct PgOptions {
  // A libpq connection URI (`postgresql://user@host:port/db?...`) or
  // key=value string. Without a password in it, libpq reads PGPASSFILE or
  // ~/.pgpass. Never logged: Describe() leaves the password out.
  std::string url;
  // The server ends a session of ours that sits inside a transaction this
  // long without a statement (`idle_in_transaction_session_timeout`), which
  // rolls it back and releases its locks: a host frozen or cut off
  // mid-transaction holds them seconds, not until the server notices the
  // dead connection. Our transactions never wait between statements for
  // anything but the host's own CPU. Zero: the server's setting.
  std::chrono::milliseconds idle_in_transaction_timeout{std::chrono::seconds(15)};
  // The longest a statement of ours waits for a row another transaction
  // holds (`lock_timeout`); then it fails with `contended` and
  // store::Database runs its job again later. Short, because a host's one
  // writer waits with it: rows held by a healthy host are released within
  // milliseconds, rows held by a frozen one only after the idle limit above.
  // Zero: wait as long as it takes.
  std::chrono::milliseconds lock_timeout{std::chrono::milliseconds(200)};
};

// TCP keepalives and a send timeout on every connection, unless the URL sets
// its own (docs/STORAGE.md, "PostgreSQL"): a dead peer is noticed in about
// 25 s while idle (keepalives after 10 s, every 5 s, 3 lost) and 30 s while
// sending (`tcp_user_timeout`). Unix-socket connections ignore them.
inline constexpr const char* kPgKeepaliveDefaults[][2] = {{"keepalives", "1"},
                                                            {"keepalives_idle", "10"},
                                                            {"keepalives_interval", "5"},
                                                            {"keepalives_count", "3"},
                                                            {"tcp_user_timeout", "30000"}};

// PostgreSQL over libpq (docs/STORAGE.md, "PostgreSQL"). libpq rather than
// libpqxx: the Connection seam is already thin, and libpq gives the SQLSTATE
// of every error and the connection state directly, without exceptions.
//
// The portable SQL of Tx is translated once per statement text: `?` become
// `$1`, `$2`, ... (outside literals and comments) and `/*postgres: X*/`
// comments become X. Statements are prepared per connection and cached by
// their text and parameter types.
//
// Write transactions are READ COMMITTED and take no lock of their own: the
// writes of several hosts run at once, and only writes to the same rows wait
// for each other (docs/STORAGE.md, "Locking"). What must not race takes the
// row that guards it: an append or an inbox message locks its session's row
// (`FOR NO KEY UPDATE`), loop claims skip the loops another host holds
// (`SKIP LOCKED`) and compare-and-set the loop's version, leases are
// compare-and-set on their row, migrations take a transaction-scoped
// advisory lock (ApplyMigrations). A statement waits for a row at most
// PgOptions::lock_timeout, then fails with `contended`. Reads are
// REPEATABLE READ snapshots and never wait for writers.
//
// Errors: integrity violations (SQLSTATE class 23) are `conflict`; a lock
// not had in time, a deadlock or a serialization failure is `contended`
// (the transaction is aborted; Database runs the job again); a lost or
// refused connection is `unavailable` (reconnected at the next transaction);
// a COMMIT whose answer was lost is `persistence_uncertain`; anything else
// is `storage_error`. A statement that fails inside a transaction aborts it
// (InTransaction() is false then), unlike SQLite.
//
// Notices (Tx::Notify) are `pg_notify` calls sent after the transaction
// committed, on a connection of the factory's own, a few milliseconds of
// commits at a time (PgNotifier: a NOTIFY inside a transaction would make
// every host's commits queue for PostgreSQL's cluster-wide notify lock);
// they are heard by the other factories' listeners (LISTEN), which also
// read the server's clock (clock_timestamp()).
class PgNotifier;

class PgConnectionFactory final : public ConnectionFactory {
 public:
  explicit PgConnectionFactory(PgOptions options);
  ~PgConnectionFactory() override;
  Result<std::unique_ptr<Connection>> Open() override;
  Result<std::unique_ptr<Listener>> OpenListener() override;
  // "postgres host:port/dbname as user", without the password.
  std::string Describe() const override;

 private:
  Result<::pg_conn*> Connect() const;
  static Result<::pg_conn*> ConnectPg(const std::string& url, const std::string& describe);

  PgOptions options_;
  const std::string origin_;  // names this factory's notices
  // Sends the notices of its connections' commits after them; shared with
  // the connections, which may outlive the factory.
  std::shared_ptr<PgNotifier> notifier_;
};

// The portable SQL in PostgreSQL's form (see PgConnectionFactory).
std::string TranslateForPostgres(std::string_view sql);

// Whether `sql` (PostgreSQL's form) has one best plan whatever its
// parameters: a query without parameters, an INSERT of VALUES, or a
// statement without joins, limits, groups or subqueries whose conditions
// are equalities and null tests only (no ranges, no IN, OR, NOT, LIKE, ANY
// or full-text match), perhaps with an order. Such a statement is prepared
// once per connection and keeps its generic plan (prepared again as it
// keeps running, for the tables' growth); any other is planned for each
// call's parameters. Conservative by design: a statement it wrongly calls
// "one plan" could keep a plan that suits some values badly, while one it
// wrongly refuses only pays its planning again.
bool HasOnePlan(std::string_view sql);

}  // namespace dsh::store
