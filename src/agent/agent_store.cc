#include "agent/agent_store.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include "base/ids.h"

namespace dsh::agent {

std::string_view DeliveryModeName(DeliveryMode mode) { return mode == DeliveryMode::kSteer ? "steer" : "followup"; }

std::optional<DeliveryMode> ParseDeliveryMode(std::string_view name) {
  if (name == "steer") return DeliveryMode::kSteer;
  if (name == "followup") return DeliveryMode::kFollowup;
  return std::nullopt;
}

namespace agent_store {

using store::Row;
using store::Tx;

std::vector<store::Migration> Migrations() {
  return {
      {"agent",
       1,
       {
           "CREATE TABLE inbox ("
           " num /*sqlite: INTEGER PRIMARY KEY*/ /*postgres: BIGSERIAL PRIMARY KEY*/,"
           " message_id TEXT NOT NULL UNIQUE,"
           " session_id TEXT NOT NULL,"
           " key TEXT,"
           " mode TEXT NOT NULL,"
           " wakeup BIGINT NOT NULL,"
           " text TEXT NOT NULL,"
           " meta TEXT NOT NULL,"
           " created_at BIGINT NOT NULL,"
           " consumed_at BIGINT)",
           "CREATE UNIQUE INDEX inbox_by_key ON inbox (session_id, key)",
           "CREATE INDEX inbox_pending ON inbox (session_id, num) WHERE consumed_at IS NULL",
           "CREATE TABLE session_leases ("
           " session_id TEXT PRIMARY KEY,"
           " holder TEXT NOT NULL,"
           " expires_at BIGINT NOT NULL)",
           "CREATE INDEX session_leases_by_holder ON session_leases (holder)",
       }},
      // Retention: consumed rows by consumption time, for PruneConsumed (a
      // partial index, so pending rows cost it nothing).
      {"agent",
       2,
       {
           "CREATE INDEX inbox_consumed ON inbox (consumed_at, num) WHERE consumed_at IS NOT NULL",
       }},
  };
}

Result<Inserted> Insert(Tx& tx, InboxMessage& m, const std::optional<std::string>& key,
                        std::optional<activity::Started> started, outbox::SubscriptionSource* webhooks) {
  bool exists = false;
  DSH_RETURN_IF_ERROR(tx.Query("SELECT 1 FROM sessions WHERE id = ?", {std::string_view(m.session_id)}, [&](const Row&) {
    exists = true;
    return Status::Ok();
  }));
  if (!exists) return Status(codes::kNotFound, "no session " + m.session_id);
  std::string meta = DumpJson(m.meta);
  store::Value key_value = key ? store::Value(std::string_view(*key)) : store::Value(nullptr);
  std::string_view mode = DeliveryModeName(m.mode);
  std::array<store::Value, 8> params = {std::string_view(m.message_id), std::string_view(m.session_id), key_value, mode,
                                        int64_t{m.wakeup ? 1 : 0},      std::string_view(m.text),
                                        std::string_view(meta),         m.created_at};
  // A key delivered before is not inserted again, without a failed statement
  // (which would abort a PostgreSQL transaction) and without a lock: hosts
  // delivering the same key at once wait only for each other (NULL keys
  // never conflict).
  bool inserted = false;
  DSH_RETURN_IF_ERROR(tx.Query("INSERT INTO inbox (message_id, session_id, key, mode, wakeup, text, meta, created_at) "
                               "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (session_id, key) DO NOTHING RETURNING num",
                               params, [&](const Row& row) {
                                 m.num = row.Int(0);
                                 inserted = true;
                                 return Status::Ok();
                               }));
  if (!inserted) {
    std::optional<Inserted> first;
    DSH_RETURN_IF_ERROR(tx.Query("SELECT message_id, num FROM inbox WHERE session_id = ? AND key = ?",
                                 {std::string_view(m.session_id), key_value}, [&](const Row& row) {
                                   first = Inserted{row.String(0), true, row.Int(1)};
                                   return Status::Ok();
                                 }));
    if (!first) return Status(codes::kConflict, "the message with key " + key.value_or("") + " vanished meanwhile");
    return *first;
  }
  if (m.activity) {
    DSH_RETURN_IF_ERROR(activity::Delivered(tx, *m.activity, m.session_id, m.message_id, key, m.created_at, started,
                                            webhooks));
  }
  return Inserted{m.message_id, false, m.num};
}

Result<std::vector<InboxMessage>> Pending(Tx& tx, const std::string& session_id) {
  std::vector<InboxMessage> out;
  DSH_RETURN_IF_ERROR(tx.Query(
      "SELECT num, message_id, mode, wakeup, text, meta, created_at FROM inbox "
      "WHERE session_id = ? AND consumed_at IS NULL ORDER BY num",
      {std::string_view(session_id)}, [&](const Row& row) {
        InboxMessage m;
        m.num = row.Int(0);
        m.message_id = row.String(1);
        m.session_id = session_id;
        m.mode = ParseDeliveryMode(row.Text(2)).value_or(DeliveryMode::kFollowup);
        m.wakeup = row.Int(3) != 0;
        m.text = row.String(4);
        auto meta = ParseJson(row.Text(5));
        m.meta = meta.ok() && meta->is_object() ? std::move(meta).value() : Json::object();
        m.created_at = row.Int(6);
        out.push_back(std::move(m));
        return Status::Ok();
      }));
  return out;
}

Status Consume(Tx& tx, const std::vector<std::string>& message_ids, int64_t now) {
  for (const auto& id : message_ids) {
    DSH_ASSIGN_OR_RETURN(int64_t changed,
                         tx.Exec("UPDATE inbox SET consumed_at = ? WHERE message_id = ? AND consumed_at IS NULL",
                                 {now, std::string_view(id)}));
    if (changed != 1) return Status(codes::kConflict, "message " + id + " was already taken by another turn");
  }
  return Status::Ok();
}

Result<int64_t> PruneConsumed(Tx& tx, int64_t consumed_before, int64_t max_rows,
                              const std::unordered_set<std::string>& keep_keys) {
  if (max_rows <= 0) return int64_t{0};
  // Oldest consumption first, through inbox_consumed. A kept key only costs
  // its row a place in the candidates, so ask for that many more.
  std::vector<int64_t> doomed;
  DSH_RETURN_IF_ERROR(tx.Query(
      "SELECT num, key FROM inbox WHERE consumed_at IS NOT NULL AND consumed_at < ? ORDER BY consumed_at, num LIMIT ?",
      {consumed_before, max_rows + static_cast<int64_t>(keep_keys.size())}, [&](const Row& row) {
        if (static_cast<int64_t>(doomed.size()) >= max_rows) return Status::Ok();
        if (!row.IsNull(1) && keep_keys.count(row.String(1)) > 0) return Status::Ok();
        doomed.push_back(row.Int(0));
        return Status::Ok();
      }));
  if (doomed.empty()) return int64_t{0};
  std::string sql = "DELETE FROM inbox WHERE consumed_at IS NOT NULL AND num IN (";
  std::vector<store::Value> params;
  params.reserve(doomed.size());
  for (size_t i = 0; i < doomed.size(); ++i) {
    sql += i ? ",?" : "?";
    params.emplace_back(doomed[i]);
  }
  sql += ")";
  return tx.Exec(sql, params);
}

store::PruneTask InboxPruneTask(int64_t days, std::vector<RetainedKeys> retained) {
  return {"inbox", [days, retained = std::move(retained)](Tx& tx, int64_t now,
                                                          int64_t max_rows) -> Result<store::PruneSlice> {
            std::unordered_set<std::string> keep;
            for (const auto& source : retained) {
              DSH_ASSIGN_OR_RETURN(auto keys, source(tx));
              keep.insert(keys.begin(), keys.end());
            }
            DSH_ASSIGN_OR_RETURN(int64_t n, PruneConsumed(tx, now - days * 86'400'000, max_rows, keep));
            // Fewer than asked: nothing more is due (or another host took
            // the rest); the next round looks again.
            return store::PruneSlice{n, n == max_rows};
          }};
}

Result<std::vector<PendingSession>> PendingSessions(Tx& tx, const std::string& holder, int64_t now) {
  std::vector<PendingSession> out;
  DSH_RETURN_IF_ERROR(tx.Query(
      "SELECT i.session_id, MAX(i.num), l.holder, l.expires_at FROM inbox i "
      "LEFT JOIN session_leases l ON l.session_id = i.session_id "
      "WHERE i.consumed_at IS NULL AND i.wakeup = 1 GROUP BY i.session_id, l.holder, l.expires_at",
      {}, [&](const Row& row) {
        bool free = row.IsNull(2) || row.Text(2) == holder || row.Int(3) < now || LeaseHolderIsDead(row.String(2));
        if (free) out.push_back({row.String(0), row.Int(1)});
        return Status::Ok();
      }));
  return out;
}

Result<bool> AcquireLease(Tx& tx, const std::string& session_id, const std::string& holder, int64_t now,
                          int64_t expires_at) {
  std::optional<std::pair<std::string, int64_t>> current;
  DSH_RETURN_IF_ERROR(tx.Query("SELECT holder, expires_at FROM session_leases WHERE session_id = ?",
                               {std::string_view(session_id)}, [&](const Row& row) {
                                 current.emplace(row.String(0), row.Int(1));
                                 return Status::Ok();
                               }));
  if (current && current->first != holder && current->second >= now && !LeaseHolderIsDead(current->first)) {
    return false;
  }
  // Compare-and-set on what was read: of hosts taking the same lease at once
  // (PostgreSQL), one wins and the others find the row changed.
  if (!current) {
    DSH_ASSIGN_OR_RETURN(int64_t n, tx.Exec("INSERT INTO session_leases (session_id, holder, expires_at) "
                                            "VALUES (?, ?, ?) ON CONFLICT (session_id) DO NOTHING",
                                            {std::string_view(session_id), std::string_view(holder), expires_at}));
    return n == 1;
  }
  DSH_ASSIGN_OR_RETURN(int64_t n, tx.Exec("UPDATE session_leases SET holder = ?, expires_at = ? "
                                          "WHERE session_id = ? AND holder = ? AND expires_at = ?",
                                          {std::string_view(holder), expires_at, std::string_view(session_id),
                                           std::string_view(current->first), current->second}));
  return n == 1;
}

Result<std::vector<std::string>> RenewLeases(Tx& tx, const std::string& holder, int64_t expires_at) {
  DSH_RETURN_IF_ERROR(
      tx.Exec("UPDATE session_leases SET expires_at = ? WHERE holder = ?", {expires_at, std::string_view(holder)})
          .status());
  std::vector<std::string> held;
  DSH_RETURN_IF_ERROR(tx.Query("SELECT session_id FROM session_leases WHERE holder = ?", {std::string_view(holder)},
                               [&](const Row& row) {
                                 held.push_back(row.String(0));
                                 return Status::Ok();
                               }));
  return held;
}

Status ReleaseLease(Tx& tx, const std::string& session_id, const std::string& holder) {
  return tx
      .Exec("DELETE FROM session_leases WHERE session_id = ? AND holder = ?",
            {std::string_view(session_id), std::string_view(holder)})
      .status();
}

Result<std::optional<std::string>> LeaseHolder(Tx& tx, const std::string& session_id, int64_t now) {
  std::optional<std::string> holder;
  DSH_RETURN_IF_ERROR(tx.Query("SELECT holder, expires_at FROM session_leases WHERE session_id = ?",
                               {std::string_view(session_id)}, [&](const Row& row) {
                                 if (row.Int(1) >= now && !LeaseHolderIsDead(row.String(0))) holder = row.String(0);
                                 return Status::Ok();
                               }));
  return holder;
}

namespace {
std::string ThisMachine() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}
}  // namespace

std::string NewLeaseHolder() { return ThisMachine() + "/" + std::to_string(getpid()) + "/" + RandomHex(4); }

bool LeaseHolderIsDead(const std::string& holder) {
  auto first = holder.find('/');
  auto second = first == std::string::npos ? std::string::npos : holder.find('/', first + 1);
  if (second == std::string::npos || holder.substr(0, first) != ThisMachine()) return false;
  pid_t pid = 0;
  try {
    pid = static_cast<pid_t>(std::stol(holder.substr(first + 1, second - first - 1)));
  } catch (...) {
    return false;
  }
  if (pid <= 0) return false;
  if (pid == getpid()) return false;  // another holder of this process (tests); never dead while we run
  return kill(pid, 0) != 0 && errno == ESRCH;
}

}  // namespace agent_store
}  // namespace dsh::agent
