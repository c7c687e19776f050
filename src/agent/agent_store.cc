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
      // v3: an activity item (activity_store.h) is its delivery's inbox
      // row, with these columns set (`kind` not NULL), instead of a row of
      // its own (issue 29: the second row cost a burst 9%): a delivery writes
      // one row, and its turn's start and end update it (the end in the
      // same statement that consumes it). A failed delivery, which has no
      // message, is a consumed row with no text (message_id "failed:" +
      // key, session '' when the target was not known). Consumed rows
      // leave the inbox's own retention while they are items
      // (`inbox_consumed` is rebuilt without them); the activity retention
      // turns them back into plain messages (docs/STORAGE.md). Modules
      // migrate in name order: `activity` v1 made the table copied here.
      {"agent",
       3,
       {
           "ALTER TABLE inbox ADD COLUMN kind TEXT",
           "ALTER TABLE inbox ADD COLUMN loop_id TEXT",
           "ALTER TABLE inbox ADD COLUMN nominal_at BIGINT",
           "ALTER TABLE inbox ADD COLUMN schedule_id TEXT",
           "ALTER TABLE inbox ADD COLUMN status TEXT",
           "ALTER TABLE inbox ADD COLUMN error_code TEXT",
           "ALTER TABLE inbox ADD COLUMN error_message TEXT",
           "ALTER TABLE inbox ADD COLUMN seq BIGINT",
           "ALTER TABLE inbox ADD COLUMN started_at BIGINT",
           "ALTER TABLE inbox ADD COLUMN ended_at BIGINT",
           "ALTER TABLE inbox ADD COLUMN input_tokens BIGINT",
           "ALTER TABLE inbox ADD COLUMN output_tokens BIGINT",
           "ALTER TABLE inbox ADD COLUMN summary TEXT",
           "ALTER TABLE inbox ADD COLUMN read BIGINT",
           "UPDATE inbox SET kind = a.kind, loop_id = a.loop_id, nominal_at = a.nominal_at,"
           " schedule_id = a.schedule_id, status = a.status, error_code = a.error_code,"
           " error_message = a.error_message, seq = a.seq, started_at = a.started_at, ended_at = a.ended_at,"
           " input_tokens = a.input_tokens, output_tokens = a.output_tokens, summary = a.summary, read = a.read"
           " FROM activity a WHERE a.message_id = inbox.message_id",
           // Items whose message is gone (pruned by the inbox's retention)
           // or that never had one (failed deliveries).
           "INSERT INTO inbox (message_id, session_id, key, mode, wakeup, text, meta, created_at, consumed_at,"
           " kind, loop_id, nominal_at, schedule_id, status, error_code, error_message, seq, started_at, ended_at,"
           " input_tokens, output_tokens, summary, read)"
           " SELECT COALESCE(a.message_id, 'failed:' || a.key), COALESCE(a.session_id, ''),"
           " CASE WHEN a.key LIKE 'msg:%' THEN NULL ELSE a.key END, 'followup', 0, '', '{}', a.at,"
           " COALESCE(a.ended_at, a.at), a.kind, a.loop_id, a.nominal_at, a.schedule_id, a.status, a.error_code,"
           " a.error_message, a.seq, a.started_at, a.ended_at, a.input_tokens, a.output_tokens, a.summary, a.read"
           " FROM activity a WHERE NOT EXISTS (SELECT 1 FROM inbox i WHERE i.message_id = a.message_id)"
           " ORDER BY a.num ON CONFLICT DO NOTHING",
           "DROP TABLE activity",
           // The list, newest first, and its filters.
           "CREATE INDEX inbox_activity ON inbox (num) WHERE kind IS NOT NULL",
           "CREATE INDEX inbox_unread ON inbox (num) WHERE read = 0",
           "CREATE INDEX inbox_failed ON inbox (num) WHERE status IN ('error', 'none')",
           "DROP INDEX inbox_consumed",
           "CREATE INDEX inbox_consumed ON inbox (consumed_at, num) WHERE consumed_at IS NOT NULL AND kind IS NULL",
       }},
  };
}

Result<Inserted> Insert(Tx& tx, InboxMessage& m, const std::optional<std::string>& key,
                        std::optional<activity::Started> started, outbox::SubscriptionSource* webhooks) {
  std::string meta = DumpJson(m.meta);
  store::Value key_value = key ? store::Value(std::string_view(*key)) : store::Value(nullptr);
  std::string_view mode = DeliveryModeName(m.mode);
  std::vector<store::Value> params = {std::string_view(m.message_id), std::string_view(m.session_id), key_value, mode,
                                      int64_t{m.wakeup ? 1 : 0},      std::string_view(m.text),
                                      std::string_view(meta),         m.created_at};
  if (m.activity) {
    auto item = activity::DeliveryValues(*m.activity, started);
    params.insert(params.end(), item.begin(), item.end());
  }
  // A key delivered before is not inserted again, without a failed statement
  // (which would abort a PostgreSQL transaction) and without a lock: hosts
  // delivering the same key at once wait only for each other (NULL keys
  // never conflict). The row is inserted only if its session exists, in the
  // same statement (one round trip); a message `started` by an append of
  // this transaction has one.
  auto insert = [](bool item, bool session_known) {
    std::string columns = "message_id, session_id, key, mode, wakeup, text, meta, created_at";
    std::string values = "?, ?, ?, ?, ?, ?, ?, ?";
    if (item) {
      columns += ", " + std::string(activity::kDeliveryColumns);
      values += ", ?, ?, ?, ?, ?, ?, ?, ?";
    }
    return "INSERT INTO inbox (" + columns + ")" +
           (session_known ? " VALUES (" + values + ")" : " SELECT " + values + " FROM sessions WHERE id = ?") +
           " ON CONFLICT (session_id, key) DO NOTHING RETURNING num";
  };
  static const std::array<std::string, 4> kInsert = {insert(false, false), insert(false, true), insert(true, false),
                                                     insert(true, true)};
  const bool session_known = started.has_value();
  bool inserted = false;
  auto on_num = [&](const Row& row) {
    m.num = row.Int(0);
    inserted = true;
    return Status::Ok();
  };
  if (!session_known) params.push_back(std::string_view(m.session_id));
  DSH_RETURN_IF_ERROR(tx.Query(kInsert[(m.activity ? 2 : 0) + (session_known ? 1 : 0)], params, on_num));
  if (!session_known) params.pop_back();
  if (!inserted && !session_known) {
    // Not inserted: its key was delivered before, or there is no session.
    bool exists = false;
    DSH_RETURN_IF_ERROR(tx.Query("SELECT 1 FROM sessions WHERE id = ?", {std::string_view(m.session_id)}, [&](const Row&) {
      exists = true;
      return Status::Ok();
    }));
    if (!exists) return Status(codes::kNotFound, "no session " + m.session_id);
  }
  bool created = inserted;
  if (!inserted && m.activity && key) {
    // The row of the key is a failed attempt of this occurrence (a consumed
    // row without a message): it becomes this delivery.
    params.pop_back();  // `read` stays as it was
    params.push_back(std::string_view(m.session_id));
    params.push_back(key_value);
    static const std::string kTakeOver =
        "UPDATE inbox SET message_id = ?, session_id = ?, key = ?, mode = ?, wakeup = ?, text = ?, meta = ?,"
        " created_at = ?, consumed_at = NULL, error_code = NULL, error_message = NULL, kind = ?, loop_id = ?,"
        " nominal_at = ?, schedule_id = ?, status = ?, seq = ?, started_at = ?"
        " WHERE session_id = ? AND key = ? AND status = 'none' RETURNING num";
    DSH_RETURN_IF_ERROR(tx.Query(kTakeOver, params, on_num));
  }
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
    DSH_RETURN_IF_ERROR(activity::Delivered(tx, m.num, created, *m.activity, m.session_id, m.message_id, key,
                                            m.created_at, started, webhooks));
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

Status Consume(Tx& tx, const std::vector<MessageRef>& messages, int64_t now) {
  for (const auto& m : messages) {
    DSH_ASSIGN_OR_RETURN(int64_t changed, tx.Exec("UPDATE inbox SET consumed_at = ? WHERE num = ? AND consumed_at IS NULL",
                                                  {now, m.num}));
    if (changed != 1) {
      return Status(codes::kConflict, "message " + m.message_id + " was already taken by another turn");
    }
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
      "SELECT num, key FROM inbox WHERE consumed_at IS NOT NULL AND kind IS NULL AND consumed_at < ?"
      " ORDER BY consumed_at, num LIMIT ?",
      {consumed_before, max_rows + static_cast<int64_t>(keep_keys.size())}, [&](const Row& row) {
        if (static_cast<int64_t>(doomed.size()) >= max_rows) return Status::Ok();
        if (!row.IsNull(1) && keep_keys.count(row.String(1)) > 0) return Status::Ok();
        doomed.push_back(row.Int(0));
        return Status::Ok();
      }));
  if (doomed.empty()) return int64_t{0};
  std::string sql = "DELETE FROM inbox WHERE consumed_at IS NOT NULL AND kind IS NULL AND num IN (";
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

Status CheckLease(Tx& tx, const std::string& session_id, const std::string& holder) {
  bool held = false;
  DSH_RETURN_IF_ERROR(tx.Query("SELECT 1 FROM session_leases WHERE session_id = ? AND holder = ?"
                               " /*postgres: FOR SHARE*/",
                               {std::string_view(session_id), std::string_view(holder)}, [&](const Row&) {
                                 held = true;
                                 return Status::Ok();
                               }));
  if (held) return Status::Ok();
  return Status(kLeaseLost, "this host no longer holds the lease of session " + session_id);
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
