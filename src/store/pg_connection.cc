#include "store/pg_connection.h"

#include <fmt/format.h>
#include <libpq-fe.h>
#include <poll.h>
#include <unistd.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <charconv>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace dsh::store {
namespace {

// Parameter types, so that `? IS NULL` or `SELECT ?` need no cast.
constexpr Oid kInt8 = 20;
constexpr Oid kFloat8 = 701;
constexpr Oid kText = 25;

// One "connection lost" line per outage of a database, not one per request.
std::atomic<bool> g_outage{false};

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using PgResult = std::unique_ptr<PGresult, ResultDeleter>;

class PgRow final : public Row {
 public:
  PgRow(const PGresult* r, int row) : r_(r), row_(row) {}
  int columns() const override { return PQnfields(r_); }
  bool IsNull(int c) const override { return PQgetisnull(r_, row_, c) != 0; }
  int64_t Int(int c) const override {
    std::string_view t = Text(c);
    if (t == "t") return 1;  // a boolean expression (SQLite gives 1/0)
    if (t == "f") return 0;
    int64_t v = 0;
    auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (ec == std::errc() && end == t.data() + t.size()) return v;
    return static_cast<int64_t>(std::strtod(std::string(t).c_str(), nullptr));  // NUMERIC of SUM/AVG
  }
  double Real(int c) const override { return std::strtod(std::string(Text(c)).c_str(), nullptr); }
  std::string_view Text(int c) const override {
    if (PQgetisnull(r_, row_, c)) return {};
    return std::string_view(PQgetvalue(r_, row_, c), static_cast<size_t>(PQgetlength(r_, row_, c)));
  }

 private:
  const PGresult* r_;
  int row_;
};

// Notices travel as `pg_notify('dsh_' || channel, origin || '|' || payload)`:
// the origin names the factory (the host) that sent them, so that its own
// listener drops them.
constexpr std::string_view kChannelPrefix = "dsh_";

bool ValidChannel(std::string_view channel) {
  return !channel.empty() && channel.size() < 40 &&
         std::all_of(channel.begin(), channel.end(), [](char c) { return (c >= 'a' && c <= 'z') || c == '_'; });
}

std::string Trimmed(const char* m) {
  std::string s = m ? m : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

// Sends the notices of committed transactions on a connection of its own,
// after their COMMIT, a few milliseconds' worth at a time. A NOTIFY inside a
// transaction makes its COMMIT take PostgreSQL's notify-queue lock, which is
// cluster-wide: every host's notifying commits would queue behind each
// other. Sent afterwards, a notice can be lost with the host (a crash
// between the commit and the send); they are hints, and the hosts' sweeps
// find what a lost one announced.
//
// Thread-safe. Its thread starts with the first Post and ends with the
// notifier, after sending what is pending.
class PgNotifier {
 public:
  using Notices = std::vector<std::pair<std::string, std::string>>;  // (channel, payload)
  PgNotifier(std::function<Result<PGconn*>()> connect, std::chrono::milliseconds gather)
      : connect_(std::move(connect)), gather_(gather) {}
  ~PgNotifier() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    if (conn_ != nullptr) PQfinish(conn_);
  }
  PgNotifier(const PgNotifier&) = delete;
  PgNotifier& operator=(const PgNotifier&) = delete;

  void Post(Notices notices) {
    if (notices.empty()) return;
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      pending_.insert(pending_.end(), std::make_move_iterator(notices.begin()), std::make_move_iterator(notices.end()));
      if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
    }
    cv_.notify_one();
  }

 private:
  void Run() {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
      if (pending_.empty()) return;  // stopping, nothing left
      // What other commits notify in the next moments goes in the same call.
      if (!stopping_) cv_.wait_for(lock, gather_, [&] { return stopping_; });
      Notices batch;
      batch.swap(pending_);
      lock.unlock();
      Send(std::move(batch));
      lock.lock();
    }
  }

  void Send(Notices batch) {
    std::sort(batch.begin(), batch.end());
    batch.erase(std::unique(batch.begin(), batch.end()), batch.end());
    if (conn_ == nullptr) {
      auto conn = connect_();
      if (!conn.ok()) {
        spdlog::debug("postgres: notices not sent (the other hosts' sweeps find the news): {}", conn.status().ToString());
        return;
      }
      conn_ = *conn;
    }
    std::string sql = "SELECT ";
    for (size_t i = 0; i < batch.size(); ++i) {
      if (i > 0) sql += ", ";
      sql += "pg_notify(" + Literal(batch[i].first) + ", " + Literal(batch[i].second) + ")";
    }
    PGresult* r = PQexec(conn_, sql.c_str());
    bool ok = PQresultStatus(r) == PGRES_TUPLES_OK;
    PQclear(r);
    if (!ok) {
      spdlog::debug("postgres: notices not sent (the other hosts' sweeps find the news): {}",
                    Trimmed(PQerrorMessage(conn_)));
      PQfinish(conn_);
      conn_ = nullptr;  // a new connection for the next batch
    }
  }

  std::string Literal(const std::string& text) {
    char* quoted = PQescapeLiteral(conn_, text.data(), text.size());
    if (quoted == nullptr) return "''";
    std::string out = quoted;
    PQfreemem(quoted);
    return out;
  }

  const std::function<Result<PGconn*>()> connect_;
  const std::chrono::milliseconds gather_;
  std::mutex mu_;
  std::condition_variable cv_;
  Notices pending_;        // GUARDED_BY(mu_)
  bool stopping_ = false;  // GUARDED_BY(mu_)
  std::thread thread_;     // started under mu_
  PGconn* conn_ = nullptr;  // the thread's
};

namespace {

class PgConnection final : public Connection {
 public:
  PgConnection(PGconn* conn, std::string describe, std::string origin, const PgOptions& options,
               std::shared_ptr<PgNotifier> notifier)
      : conn_(conn),
        describe_(std::move(describe)),
        origin_(std::move(origin)),
        idle_in_transaction_(options.idle_in_transaction_timeout),
        lock_timeout_(options.lock_timeout),
        notifier_(std::move(notifier)) {}
  ~PgConnection() override { PQfinish(conn_); }
  Dialect dialect() const override { return Dialect::kPostgres; }

  // Kept until COMMIT, then handed to the notifier (a job's savepoint rolled
  // back drops its own).
  Status Notify(std::string_view channel, std::string_view payload) override {
    if (!ValidChannel(channel)) return InvalidArguments("bad notification channel \"" + std::string(channel) + "\"");
    if (payload.size() > 4000) return InvalidArguments("a notification payload is at most 4000 bytes");
    notices_.emplace_back(std::string(kChannelPrefix) + std::string(channel), origin_ + "|" + std::string(payload));
    return Status::Ok();
  }

  Result<int64_t> Exec(std::string_view sql, std::span<const Value> params) override {
    DSH_ASSIGN_OR_RETURN(PgResult r, Run(sql, params));
    return Changed(r.get());
  }

  // Queued, and sent in the round trip of whatever comes next (a statement,
  // a savepoint's rollback, COMMIT). If it fails, the transaction is lost
  // (Tx::ExecLater): no later savepoint rollback can save it.
  Status ExecLater(std::string_view sql, std::span<const Value> params, std::optional<int64_t> rows) override {
    if (!writing_) return Connection::ExecLater(sql, params, rows);  // no COMMIT to carry it
    DSH_ASSIGN_OR_RETURN(const Statement* st, Prepared(sql, params));
    deferred_.push_back(Deferred{{}, st, Texts(params), std::string(sql), rows});
    return Status::Ok();
  }

  // The key in the same round trip: RETURNING runs after the row's default
  // (nextval) was taken.
  Result<int64_t> Insert(std::string_view sql, std::span<const Value> params) override {
    int64_t key = 0;
    DSH_RETURN_IF_ERROR(Query(std::string(sql) + " RETURNING lastval()", params, [&](const Row& row) {
      key = row.Int(0);
      return Status::Ok();
    }));
    return key;
  }

  Status Query(std::string_view sql, std::span<const Value> params, const RowFn& on_row) override {
    DSH_ASSIGN_OR_RETURN(PgResult r, Run(sql, params));
    (void)Changed(r.get());  // INSERT ... RETURNING changes rows too
    const int rows = PQntuples(r.get());
    for (int i = 0; i < rows; ++i) {
      PgRow row(r.get(), i);
      DSH_RETURN_IF_ERROR(on_row(row));
    }
    return Status::Ok();
  }

  Status BeginWrite() override {
    ForgetPending();
    DSH_RETURN_IF_ERROR(Reconnect());
    // Sent with the first statement, in its round trip (Run).
    deferred_.push_back(Deferred{"BEGIN"});
    writing_ = true;
    return Status::Ok();
  }
  Status BeginRead() override {
    ForgetPending();
    DSH_RETURN_IF_ERROR(Reconnect());
    deferred_.push_back(Deferred{"BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"});
    return Status::Ok();
  }
  Status Commit() override {
    if (unusable_) {
      ForgetPending();
      return Status(codes::kStorage, "the connection failed mid-transaction; nothing of it was saved");
    }
    if (PQtransactionStatus(conn_) == PQTRANS_INERROR) {
      ForgetPending();
      (void)Simple("ROLLBACK");
      return Status(codes::kStorage, "the transaction was aborted by an earlier error; nothing of it was saved");
    }
    // Deferred writes go first (a round trip of their own, once per
    // transaction).
    if (HasDeferredWrite()) {
      Status sent = SendDeferred();
      if (!sent.ok()) {
        ForgetPending();
        return sent;
      }
    }
    // COMMIT releases every savepoint: a deferred RELEASE is not sent (nor
    // a deferred BEGIN: COMMIT outside a transaction only warns). The
    // notices go out only once it committed, after it (PgNotifier).
    PgNotifier::Notices notices;
    notices.swap(notices_);
    ForgetPending();
    PgResult r(PQexec(conn_, "COMMIT"));
    if (PQresultStatus(r.get()) == PGRES_COMMAND_OK) {
      // PostgreSQL answers a COMMIT of a failed transaction with ROLLBACK.
      if (std::strcmp(PQcmdStatus(r.get()), "ROLLBACK") == 0) {
        return Status(codes::kStorage, "the transaction was rolled back; nothing of it was saved");
      }
      notifier_->Post(std::move(notices));
      return Status::Ok();
    }
    if (PQstatus(conn_) == CONNECTION_BAD) {
      NoteOutage();
      return Status(codes::kPersistenceUncertain,
                    "the connection to " + describe_ + " was lost during COMMIT: the write may or may not be saved");
    }
    return Error(r.get(), "COMMIT");
  }
  Status Rollback() override {
    ForgetPending();
    if (unusable_ || PQstatus(conn_) == CONNECTION_BAD || PQtransactionStatus(conn_) == PQTRANS_IDLE) {
      return Status::Ok();  // an unusable connection is reset before the next transaction
    }
    return Simple("ROLLBACK");
  }
  // A job's SAVEPOINT and the previous job's RELEASE wait for the job's
  // first statement and go in its round trip (Run); a job that ran no
  // statement sends neither.
  Status Savepoint(std::string_view name) override {
    deferred_.push_back(Deferred{"SAVEPOINT " + std::string(name)});
    marks_.push_back(notices_.size());
    return Status::Ok();
  }
  Status RollbackToSavepoint(std::string_view name) override {
    if (!marks_.empty()) notices_.resize(marks_.back());
    if (lost_) return lost_->WithContext("cannot roll back to a savepoint");
    // Not sent yet: nothing since it reached the server, so nothing to undo
    // there; what was queued after it goes unsent, and the SAVEPOINT stays
    // for its RELEASE to take back.
    const std::string savepoint = "SAVEPOINT " + std::string(name);
    for (size_t i = deferred_.size(); i-- > 0;) {
      if (deferred_[i].command == savepoint) {
        deferred_.resize(i + 1);
        return Status::Ok();
      }
    }
    DSH_RETURN_IF_ERROR(SendDeferred());
    return Simple("ROLLBACK TO SAVEPOINT " + std::string(name));
  }
  Status ReleaseSavepoint(std::string_view name) override {
    if (!marks_.empty()) marks_.pop_back();
    if (!deferred_.empty() && deferred_.back().command == "SAVEPOINT " + std::string(name)) {
      deferred_.pop_back();
    } else {
      deferred_.push_back(Deferred{"RELEASE SAVEPOINT " + std::string(name)});
    }
    return Status::Ok();
  }
  int64_t TotalChanges() override { return total_changes_; }
  bool InTransaction() override {
    PGTransactionStatusType s = PQtransactionStatus(conn_);
    return s == PQTRANS_INTRANS || s == PQTRANS_ACTIVE;
  }

  // Times as UTC, text as UTF-8, no notices in the logs, the server's own
  // choice of plans, the idle-in-transaction limit and the lock wait limit
  // (PgOptions).
  Status Configure() {
    std::string sql = "SET TIME ZONE 'UTC'; SET client_encoding = 'UTF8'; SET client_min_messages = warning";
    // A prepared statement (HasOnePlan) runs its generic plan once `auto`
    // has compared it with custom plans on its first five calls; the others
    // run unnamed, each a new statement, which `auto` always plans for its
    // values (see Run). `force_generic_plan` would give those a generic plan
    // as well: the claim of due loops then scanned and sorted every loop.
    sql += "; SET plan_cache_mode = auto";
    if (idle_in_transaction_.count() > 0) {
      sql += "; SET idle_in_transaction_session_timeout = " + std::to_string(idle_in_transaction_.count());
    }
    sql += "; SET lock_timeout = " + std::to_string(std::max<int64_t>(lock_timeout_.count(), 0));
    return Simple(sql);
  }

 private:

  struct Statement {
    std::string name;        // prepared on this connection
    std::string text;        // PostgreSQL's form
    std::vector<Oid> types;  // of its parameters, as prepared
    bool planned_once;       // HasOnePlan: runs prepared, its generic plan
    int64_t runs = 0;        // calls since it was prepared
    int64_t replan_at = kFirstReplan;
  };

  // PostgreSQL makes a generic plan for the tables as they are then and
  // keeps it until their statistics change (autovacuum, ANALYZE): a key
  // lookup planned while its table was empty scans the table for as long,
  // which on a young database can be minutes of it growing. A statement
  // planned once is prepared again after 64 calls, then 512, 4,096, … (eight
  // times as many each time), so that its plan follows the tables' growth
  // at a cost that stays negligible.
  static constexpr int64_t kFirstReplan = 64;

  // What waits for the next round trip: a transaction command (BEGIN,
  // SAVEPOINT, RELEASE SAVEPOINT), or a write (ExecLater) with its
  // parameters.
  struct Deferred {
    std::string command;            // empty for a write
    const Statement* st = nullptr;  // the write's; prepared_ never moves its elements
    std::vector<std::optional<std::string>> params;
    std::string sql;  // the write as its caller wrote it, for errors
    std::optional<int64_t> rows;  // the rows it must change, if its caller said
  };

  bool HasDeferredWrite() const {
    return std::any_of(deferred_.begin(), deferred_.end(), [](const Deferred& d) { return d.st != nullptr; });
  }

  // The deferred commands and writes in one round trip of their own.
  Status SendDeferred() {
    if (deferred_.empty()) return Status::Ok();
    if (HasDeferredWrite()) return Pipelined(nullptr, {}, {}).status();
    std::string sql;
    for (const Deferred& d : deferred_) sql += (sql.empty() ? "" : "; ") + d.command;
    deferred_.clear();
    return Simple(sql);
  }

  void ForgetPending() {
    deferred_.clear();
    notices_.clear();
    marks_.clear();
    lost_.reset();
    writing_ = false;
  }

  // Parameters as libpq takes them: text, or null.
  static std::vector<std::optional<std::string>> Texts(std::span<const Value> params) {
    std::vector<std::optional<std::string>> texts(params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      std::visit(
          [&](const auto& v) {
            using V = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<V, std::nullptr_t>) return;
            else if constexpr (std::is_same_v<V, int64_t>) texts[i] = std::to_string(v);
            else if constexpr (std::is_same_v<V, double>) texts[i] = fmt::format("{:.17g}", v);
            else texts[i] = std::string(v);
          },
          params[i]);
    }
    return texts;
  }
  static std::vector<const char*> Values(const std::vector<std::optional<std::string>>& texts) {
    std::vector<const char*> values(texts.size(), nullptr);
    for (size_t i = 0; i < texts.size(); ++i) {
      if (texts[i]) values[i] = texts[i]->c_str();
    }
    return values;
  }

  // Sends `st` in pipeline mode (prepared, or unnamed for its values).
  bool Send(const Statement& st, const std::vector<const char*>& values) {
    const int n = static_cast<int>(values.size());
    return (st.planned_once ? PQsendQueryPrepared(conn_, st.name.c_str(), n, values.data(), nullptr, nullptr, 0)
                            : PQsendQueryParams(conn_, st.text.c_str(), n, st.types.data(), values.data(), nullptr,
                                                nullptr, 0)) == 1;
  }

  int64_t Changed(PGresult* r) {
    const char* n = PQcmdTuples(r);
    int64_t v = (n && *n) ? std::strtoll(n, nullptr, 10) : 0;
    total_changes_ += v;
    return v;
  }

  // A lost connection is re-established before a transaction starts, never
  // in the middle of one.
  Status Reconnect() {
    if (PQstatus(conn_) != CONNECTION_BAD && !unusable_) return Status::Ok();
    unusable_ = false;
    PQreset(conn_);
    if (PQstatus(conn_) != CONNECTION_OK) {
      NoteOutage();
      return Status(codes::kUnavailable, "cannot reach " + describe_ + ": " + Trimmed(PQerrorMessage(conn_)));
    }
    prepared_.clear();  // the server forgot them with the old session
    if (g_outage.exchange(false)) spdlog::info("the connection to {} is back", describe_);
    return Configure();
  }

  void NoteOutage() {
    if (!g_outage.exchange(true)) {
      spdlog::error("lost the connection to {}: {} (writes fail with `unavailable` until it is back; reconnecting)",
                    describe_, Trimmed(PQerrorMessage(conn_)));
    }
  }

  Status Simple(const std::string& sql) {
    PgResult r(PQexec(conn_, sql.c_str()));
    ExecStatusType s = PQresultStatus(r.get());
    if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK) return Status::Ok();
    return Error(r.get(), sql);
  }

  // The statement prepared on this connection for `sql` with the types of
  // `params` (prepared now, the first time).
  Result<const Statement*> Prepared(std::string_view sql, std::span<const Value> params) {
    // The types of this call's parameters are part of the statement's key.
    std::string key(sql);
    key.push_back('\0');
    std::vector<Oid> types(params.size(), 0);
    for (size_t i = 0; i < params.size(); ++i) {
      types[i] = std::visit(
          [](const auto& v) -> Oid {
            using V = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<V, std::nullptr_t>) return 0;
            else if constexpr (std::is_same_v<V, int64_t>) return kInt8;
            else if constexpr (std::is_same_v<V, double>) return kFloat8;
            else return kText;
          },
          params[i]);
      key.push_back(types[i] == kInt8 ? 'i' : types[i] == kFloat8 ? 'd' : types[i] == kText ? 't' : 'n');
    }
    auto it = prepared_.find(key);
    if (it != prepared_.end() && it->second.planned_once && ++it->second.runs >= it->second.replan_at &&
        PQtransactionStatus(conn_) != PQTRANS_INERROR) {
      DSH_RETURN_IF_ERROR(PrepareAgain(it));
    }
    if (it == prepared_.end()) {
      DSH_RETURN_IF_ERROR(SendDeferred());  // the transaction as it stands, for the guard below
      std::string name = "s" + std::to_string(++statements_named_);
      std::string text = TranslateForPostgres(sql);
      // NULLs are untyped, so that a column gives them its type; where
      // nothing does (`? IS NULL`) the statement is prepared again with
      // them as text. In a transaction, a savepoint keeps that first failure
      // from aborting it (once per statement and connection).
      const bool untyped = std::find(types.begin(), types.end(), Oid{0}) != types.end();
      const bool guard = untyped && InTransaction();
      if (guard) DSH_RETURN_IF_ERROR(Simple("SAVEPOINT dsh_prepare"));
      PgResult p(PQprepare(conn_, name.c_str(), text.c_str(), static_cast<int>(types.size()), types.data()));
      if (untyped && PQresultStatus(p.get()) != PGRES_COMMAND_OK && IsState(p.get(), "42P18")) {
        if (guard) DSH_RETURN_IF_ERROR(Simple("ROLLBACK TO SAVEPOINT dsh_prepare"));
        for (Oid& t : types) t = t == 0 ? kText : t;
        p.reset(PQprepare(conn_, name.c_str(), text.c_str(), static_cast<int>(types.size()), types.data()));
      }
      if (PQresultStatus(p.get()) != PGRES_COMMAND_OK) return Error(p.get(), sql);
      if (guard) DSH_RETURN_IF_ERROR(Simple("RELEASE SAVEPOINT dsh_prepare"));
      const bool once = HasOnePlan(text);
      it = prepared_.emplace(std::move(key), Statement{std::move(name), std::move(text), std::move(types), once})
               .first;
    }
    return &it->second;
  }

  // The statement at `it` prepared anew under its name, for a generic plan
  // of the tables as they are now (forgotten if that fails).
  Status PrepareAgain(std::unordered_map<std::string, Statement>::iterator it) {
    Statement& st = it->second;
    DSH_RETURN_IF_ERROR(SendDeferred());  // they may run the old one
    DSH_RETURN_IF_ERROR(Simple("DEALLOCATE " + st.name));
    PgResult p(PQprepare(conn_, st.name.c_str(), st.text.c_str(), static_cast<int>(st.types.size()), st.types.data()));
    if (PQresultStatus(p.get()) != PGRES_COMMAND_OK) {
      Status error = Error(p.get(), st.text);
      prepared_.erase(it);
      return error;
    }
    st.runs = 0;
    st.replan_at *= 8;
    return Status::Ok();
  }

  Result<PgResult> Run(std::string_view sql, std::span<const Value> params) {
    if (lost_) return *lost_;
    DSH_ASSIGN_OR_RETURN(const Statement* prepared, Prepared(sql, params));
    const std::vector<std::optional<std::string>> texts = Texts(params);
    const std::vector<const char*> values = Values(texts);
    // A statement whose best plan depends on its parameters (a range, a
    // join, a limit) runs unnamed: the server plans it for these values,
    // as a custom plan would, with the types its preparation settled. A
    // generic plan of the loop view cost 0.5-1.1 ms a call instead of
    // 0.03 ms (docs/PERFORMANCE.md).
    const Statement& st = *prepared;
    if (!deferred_.empty()) return Pipelined(&st, values, sql);
    const int n = static_cast<int>(values.size());
    PgResult r(st.planned_once
                   ? PQexecPrepared(conn_, st.name.c_str(), n, values.data(), nullptr, nullptr, 0)
                   : PQexecParams(conn_, st.text.c_str(), n, st.types.data(), values.data(), nullptr, nullptr, 0));
    ExecStatusType s = PQresultStatus(r.get());
    if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK) return r;
    return Error(r.get(), sql);
  }

  // The deferred commands and writes and then the statement `st` (when
  // given), in one round trip (libpq's pipeline mode): each job's SAVEPOINT
  // and each transaction's BEGIN cost the writer a round trip of its own
  // before, 3-4 per loop occurrence, and so did each write whose answer
  // nobody needs (ExecLater). The first failure is the answer; the server
  // skips what follows it up to the sync. A failed deferred write loses
  // the transaction (lost_): it belonged to a job that already ended.
  Result<PgResult> Pipelined(const Statement* st, const std::vector<const char*>& values, std::string_view sql) {
    std::vector<Deferred> items = std::exchange(deferred_, {});
    if (PQenterPipelineMode(conn_) != 1) {
      unusable_ = true;  // what was deferred is gone: this transaction cannot commit
      return Error(nullptr, "entering pipeline mode");
    }
    bool sent = true;
    for (const Deferred& d : items) {
      sent = sent && (d.st != nullptr
                          ? Send(*d.st, Values(d.params))
                          : PQsendQueryParams(conn_, d.command.c_str(), 0, nullptr, nullptr, nullptr, nullptr, 0) == 1);
    }
    if (st != nullptr) sent = sent && Send(*st, values);
    sent = sent && PQpipelineSync(conn_) == 1;
    // Every result up to the sync, whatever happened: the first failure
    // (its command named), else the statement's result.
    std::optional<Status> failed;
    PgResult answer;
    const size_t count = items.size() + (st != nullptr ? 1 : 0);
    for (size_t i = 0; sent && i < count; ++i) {
      PgResult r(PQgetResult(conn_));
      if (r == nullptr) {  // the connection broke
        sent = false;
        break;
      }
      while (PGresult* rest = PQgetResult(conn_)) PQclear(rest);  // a command's results end with a null
      ExecStatusType s = PQresultStatus(r.get());
      const bool mine = i == items.size();
      const bool ok = s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK;
      // A deferred write that failed, or was skipped after a failure: its
      // job has ended, reported done; only losing the transaction is safe.
      if (!ok && !mine && items[i].st != nullptr && !lost_) {
        lost_ = Status(codes::kStorage, "an earlier write of this transaction failed (" +
                                            (failed ? failed->message() : Error(r.get(), items[i].sql).message()) +
                                            "); nothing of the transaction is saved");
      }
      if (failed) continue;
      if (!ok) {
        failed = Error(r.get(), mine ? sql : items[i].st != nullptr ? std::string_view(items[i].sql)
                                                                    : std::string_view(items[i].command));
      } else if (mine) {
        answer = std::move(r);
      } else if (items[i].st != nullptr) {
        int64_t changed = Changed(r.get());
        if (items[i].rows && changed != *items[i].rows && !lost_) {
          lost_ = UnexpectedRows(items[i].sql, *items[i].rows, changed)
                      .WithContext("nothing of the transaction is saved");
        }
      }
    }
    if (sent) {
      PgResult sync(PQgetResult(conn_));
      if (PQresultStatus(sync.get()) != PGRES_PIPELINE_SYNC) sent = false;
    }
    if (!sent || PQexitPipelineMode(conn_) != 1) {
      // Results left unread (a broken connection, if anything): this
      // transaction cannot commit, and the next one starts on a new
      // connection (Reconnect).
      Status broken = Error(nullptr, st != nullptr ? sql : std::string_view("deferred writes"));
      if (PQstatus(conn_) != CONNECTION_BAD) spdlog::error("postgres: a pipelined statement failed: {}", broken.message());
      unusable_ = true;
      return failed ? *failed : broken;
    }
    if (lost_) return *lost_;
    if (failed) return *failed;
    return answer;
  }

  static bool IsState(const PGresult* r, std::string_view state) {
    const char* s = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    return s != nullptr && state == s;
  }

  Status Error(const PGresult* r, std::string_view sql) {
    std::string msg = Trimmed(r ? PQresultErrorMessage(r) : PQerrorMessage(conn_));
    if (msg.empty()) msg = Trimmed(PQerrorMessage(conn_));
    msg += " (in: " + std::string(sql.substr(0, 120)) + ")";
    if (PQstatus(conn_) == CONNECTION_BAD) {
      NoteOutage();
      return Status(codes::kUnavailable, "the connection to " + describe_ + " was lost: " + msg);
    }
    const char* state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
    std::string_view code = state ? state : "";
    if (code.starts_with("23")) return Status(codes::kConflict, std::move(msg));
    // lock_not_available (lock_timeout), deadlock_detected,
    // serialization_failure: another transaction holds what this one needs.
    if (code == "55P03" || code == "40P01" || code == "40001") return Status(codes::kContended, std::move(msg));
    // Connection exceptions, insufficient resources, operator intervention.
    if (code.starts_with("08") || code.starts_with("53") || code.starts_with("57")) {
      return Status(codes::kUnavailable, std::move(msg));
    }
    return Status(codes::kStorage, std::move(msg));
  }

  PGconn* conn_;
  const std::string describe_;
  const std::string origin_;
  const std::chrono::milliseconds idle_in_transaction_;  // PgOptions; zero: the server's
  const std::chrono::milliseconds lock_timeout_;         // PgOptions; zero: no limit
  // Write transaction state kept client-side until a command carries it:
  // BEGIN, SAVEPOINT, RELEASE SAVEPOINT and writes not yet sent, in order.
  std::vector<Deferred> deferred_;
  std::optional<Status> lost_;  // a deferred write failed: the transaction cannot commit
  bool writing_ = false;        // in a write transaction (BeginWrite until it ends)
  PgNotifier::Notices notices_;  // (channel, payload) for after COMMIT
  std::shared_ptr<PgNotifier> notifier_;
  std::vector<size_t> marks_;  // notices_.size() at each open savepoint
  std::unordered_map<std::string, Statement> prepared_;  // key (text and parameter types) -> statement
  int64_t statements_named_ = 0;                         // names prepared_ has used: s1, s2, …
  int64_t total_changes_ = 0;
  bool unusable_ = false;  // a pipeline left results unread: reset before the next transaction
};

class PgListener final : public Listener {
 public:
  PgListener(PGconn* conn, std::string origin) : conn_(conn), origin_(std::move(origin)) {}
  ~PgListener() override { PQfinish(conn_); }

  Status Listen(std::string_view channel) override {
    if (!ValidChannel(channel)) return InvalidArguments("bad notification channel \"" + std::string(channel) + "\"");
    return Simple("LISTEN " + std::string(kChannelPrefix) + std::string(channel));
  }

  Result<std::vector<Notification>> Wait(int wake_fd, std::chrono::milliseconds timeout) override {
    std::vector<Notification> out;
    Take(out);  // those that came with the answer to an earlier command
    if (out.empty()) {
      pollfd fds[2] = {{PQsocket(conn_), POLLIN, 0}, {wake_fd, POLLIN, 0}};
      int n = poll(fds, wake_fd >= 0 ? 2 : 1, static_cast<int>(timeout.count()));
      if (n < 0 && errno != EINTR) return Status(codes::kUnavailable, std::string("poll: ") + std::strerror(errno));
      if (n > 0 && fds[0].revents != 0) {
        if (PQconsumeInput(conn_) == 0 || PQstatus(conn_) == CONNECTION_BAD) {
          return Status(codes::kUnavailable, "the listening connection was lost: " + Trimmed(PQerrorMessage(conn_)));
        }
        Take(out);
      }
    }
    return out;
  }

  Result<int64_t> ServerTimeMillis() override {
    PgResult r(PQexec(conn_, "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint"));
    if (PQresultStatus(r.get()) != PGRES_TUPLES_OK || PQntuples(r.get()) != 1) {
      return Status(PQstatus(conn_) == CONNECTION_BAD ? codes::kUnavailable : codes::kStorage,
                    "reading the server's clock: " + Trimmed(PQerrorMessage(conn_)));
    }
    return static_cast<int64_t>(std::strtoll(PQgetvalue(r.get(), 0, 0), nullptr, 10));
  }

 private:
  void Take(std::vector<Notification>& out) {
    while (PGnotify* n = PQnotifies(conn_)) {
      std::string_view channel = n->relname;
      std::string_view extra = n->extra;
      size_t bar = extra.find('|');
      if (channel.starts_with(kChannelPrefix) && bar != std::string_view::npos && extra.substr(0, bar) != origin_) {
        out.push_back({std::string(channel.substr(kChannelPrefix.size())), std::string(extra.substr(bar + 1))});
      }
      PQfreemem(n);
    }
  }

  Status Simple(const std::string& sql) {
    PgResult r(PQexec(conn_, sql.c_str()));
    if (PQresultStatus(r.get()) == PGRES_COMMAND_OK) return Status::Ok();
    return Status(PQstatus(conn_) == CONNECTION_BAD ? codes::kUnavailable : codes::kStorage,
                  Trimmed(PQerrorMessage(conn_)) + " (in: " + sql + ")");
  }

  PGconn* conn_;
  const std::string origin_;
};

// A random name for the notices of one factory.
std::string NewOrigin() {
  static std::atomic<uint64_t> counter{0};
  uint64_t seed = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
                  (static_cast<uint64_t>(getpid()) << 40) ^ (counter.fetch_add(1) * 0x9E3779B97F4A7C15ull);
  return fmt::format("{:016x}", seed);
}

}  // namespace

// How long the notifier waits for more notices before it sends a batch.
constexpr std::chrono::milliseconds kNotifyGather{2};

PgConnectionFactory::PgConnectionFactory(PgOptions options)
    : options_(std::move(options)),
      origin_(NewOrigin()),
      notifier_(std::make_shared<PgNotifier>(
          [url = options_.url, describe = Describe()] { return ConnectPg(url, describe); }, kNotifyGather)) {}

PgConnectionFactory::~PgConnectionFactory() = default;

bool HasOnePlan(std::string_view statement) {
  std::string sql(statement);
  std::transform(sql.begin(), sql.end(), sql.begin(), [](unsigned char c) { return std::toupper(c); });
  auto has = [&](std::string_view part, size_t from = 0) { return sql.find(part, from) != std::string::npos; };
  // An insert of values, or of a SELECT of no table (values computed on
  // the server).
  if (sql.starts_with("INSERT") && (!has("SELECT") || (!has(" FROM ") && !has("(SELECT")))) return true;
  // A query without parameters: the same plan for every call (PostgreSQL
  // runs a prepared one's generic plan always).
  const bool parameters = std::adjacent_find(sql.begin(), sql.end(), [](char a, char b) {
                            return a == '$' && std::isdigit(static_cast<unsigned char>(b));
                          }) != sql.end();
  if (!parameters) {
    for (std::string_view dml : {"SELECT", "INSERT", "UPDATE", "DELETE", "WITH"}) {
      if (sql.starts_with(dml)) return true;
    }
  }
  for (std::string_view shape : {"JOIN", "LIMIT", "GROUP BY", "(SELECT", "UNION"}) {
    if (has(shape)) return false;
  }
  size_t where = sql.find(" WHERE ");
  if (where == std::string::npos) return false;
  // Whether a column is null does not depend on a parameter: its
  // selectivity is the same for every call.
  for (std::string_view null_test : {" IS NOT NULL", " IS NULL"}) {
    for (size_t at = sql.find(null_test, where); at != std::string::npos; at = sql.find(null_test, at)) {
      sql.erase(at, null_test.size());
    }
  }
  for (std::string_view test : {"<", ">", "!=", " IN ", " OR ", " NOT ", "BETWEEN", "LIKE", "EXISTS", "ANY", "@@"}) {
    if (has(test, where)) return false;
  }
  return true;
}

std::string TranslateForPostgres(std::string_view sql) {
  static constexpr std::string_view kPostgres = "/*postgres:";
  std::string out;
  out.reserve(sql.size() + 16);
  int n = 0;
  for (size_t i = 0; i < sql.size();) {
    char c = sql[i];
    if (sql.substr(i, kPostgres.size()) == kPostgres) {
      size_t end = sql.find("*/", i);
      if (end == std::string_view::npos) end = sql.size();
      out.append(TranslateForPostgres(sql.substr(i + kPostgres.size(), end - i - kPostgres.size())));
      i = std::min(sql.size(), end + 2);
    } else if (c == '/' && i + 1 < sql.size() && sql[i + 1] == '*') {  // other comments, kept as they are
      size_t end = sql.find("*/", i + 2);
      end = end == std::string_view::npos ? sql.size() : end + 2;
      out.append(sql.substr(i, end - i));
      i = end;
    } else if (c == '-' && i + 1 < sql.size() && sql[i + 1] == '-') {
      size_t end = sql.find('\n', i);
      end = end == std::string_view::npos ? sql.size() : end;
      out.append(sql.substr(i, end - i));
      i = end;
    } else if (c == '\'' || c == '"') {  // a literal or quoted name, with doubled quotes inside
      size_t j = i + 1;
      while (j < sql.size()) {
        if (sql[j] == c) {
          if (j + 1 < sql.size() && sql[j + 1] == c) {
            j += 2;
            continue;
          }
          break;
        }
        ++j;
      }
      j = std::min(sql.size(), j + 1);
      out.append(sql.substr(i, j - i));
      i = j;
    } else if (c == '?') {
      out += "$" + std::to_string(++n);
      ++i;
    } else {
      out.push_back(c);
      ++i;
    }
  }
  return out;
}

std::string PgConnectionFactory::Describe() const {
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(options_.url.c_str(), &err);
  if (opts == nullptr) {
    PQfreemem(err);
    return "postgres (an unreadable connection string)";
  }
  std::string host, port, db, user;
  for (PQconninfoOption* o = opts; o->keyword != nullptr; ++o) {
    if (o->val == nullptr) continue;
    std::string_view k = o->keyword;
    if (k == "host") host = o->val;
    if (k == "port") port = o->val;
    if (k == "dbname") db = o->val;
    if (k == "user") user = o->val;
  }
  PQconninfoFree(opts);
  std::string out = "postgres " + (host.empty() ? std::string("localhost") : host);
  if (!port.empty()) out += ":" + port;
  out += "/" + (db.empty() ? user : db);
  if (!user.empty()) out += " as " + user;
  return out;
}

Result<PGconn*> PgConnectionFactory::Connect() const { return ConnectPg(options_.url, Describe()); }

Result<PGconn*> PgConnectionFactory::ConnectPg(const std::string& url, const std::string& describe) {
  // Our defaults first, then the URL (expanded in place): what the URL says wins.
  std::vector<const char*> keys, values;
  for (const auto& [key, value] : kPgKeepaliveDefaults) {
    keys.push_back(key);
    values.push_back(value);
  }
  keys.push_back("dbname");
  values.push_back(url.c_str());
  keys.push_back(nullptr);
  values.push_back(nullptr);
  PGconn* conn = PQconnectdbParams(keys.data(), values.data(), /*expand_dbname=*/1);
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string msg = Trimmed(PQerrorMessage(conn));
    PQfinish(conn);
    return Status(codes::kUnavailable, "cannot connect to " + describe + ": " + msg);
  }
  // The server's notices (and libpq's own) go to the debug log, not stderr.
  PQsetNoticeProcessor(
      conn, [](void*, const char* message) { spdlog::debug("postgres: {}", message); }, nullptr);
  return conn;
}

Result<std::unique_ptr<Connection>> PgConnectionFactory::Open() {
  DSH_ASSIGN_OR_RETURN(PGconn * conn, Connect());
  auto c = std::make_unique<PgConnection>(conn, Describe(), origin_, options_, notifier_);
  if (Status st = c->Configure(); !st.ok()) {
    return st.WithContext("cannot configure " + Describe());
  }
  return std::unique_ptr<Connection>(std::move(c));
}

Result<std::unique_ptr<Listener>> PgConnectionFactory::OpenListener() {
  DSH_ASSIGN_OR_RETURN(PGconn * conn, Connect());
  return std::unique_ptr<Listener>(std::make_unique<PgListener>(conn, origin_));
}

}  // namespace dsh::store
