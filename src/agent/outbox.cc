#include "agent/outbox.h"

#include <algorithm>
#include <array>
#include <limits>
#include <utility>

#include "base/ids.h"

namespace dsh::agent::outbox {

using store::OptValue;
using store::Row;
using store::Tx;
using store::Value;

std::vector<store::Migration> Migrations() {
  return {
      {"outbox",
       1,
       {
           "CREATE TABLE webhook_messages ("
           " num /*sqlite: INTEGER PRIMARY KEY*/ /*postgres: BIGSERIAL PRIMARY KEY*/,"
           " id TEXT NOT NULL UNIQUE,"
           " endpoint TEXT NOT NULL,"
           " event TEXT NOT NULL,"
           " fact_key TEXT NOT NULL,"
           " once TEXT NOT NULL,"
           " data TEXT NOT NULL,"
           " created_at BIGINT NOT NULL,"
           " state TEXT NOT NULL,"
           " attempts BIGINT NOT NULL,"
           " next_at BIGINT NOT NULL,"
           " lease_owner TEXT,"
           " lease_until BIGINT,"
           " last_at BIGINT,"
           " last_status BIGINT,"
           " last_error TEXT,"
           " last_duration_ms BIGINT,"
           " done_at BIGINT,"
           " loop_id TEXT,"
           " session_id TEXT)",
           "CREATE UNIQUE INDEX webhook_messages_once ON webhook_messages (once, endpoint)",
           "CREATE INDEX webhook_messages_fact ON webhook_messages (fact_key)",
           // The sender's claims; a listing per endpoint; retention by end time.
           "CREATE INDEX webhook_messages_due ON webhook_messages (next_at) WHERE state = 'pending'",
           "CREATE INDEX webhook_messages_by_endpoint ON webhook_messages (endpoint, num)",
           "CREATE INDEX webhook_messages_done ON webhook_messages (done_at) WHERE done_at IS NOT NULL",
           "CREATE TABLE webhook_attempts ("
           " message_num BIGINT NOT NULL,"
           " n BIGINT NOT NULL,"
           " at BIGINT NOT NULL,"
           " status BIGINT,"
           " error TEXT,"
           " duration_ms BIGINT NOT NULL,"
           " PRIMARY KEY (message_num, n))",
       }},
  };
}

void Subscriptions::Add(std::string endpoint, std::vector<std::string> events) {
  endpoints_[std::move(endpoint)] = std::move(events);
}

namespace {

bool Takes(const std::vector<std::string>& events, std::string_view event) {
  return std::any_of(events.begin(), events.end(), [&](const std::string& e) { return e == "*" || e == event; });
}

constexpr const char* kMessageColumns =
    "num, id, endpoint, event, created_at, state, attempts, next_at, last_at, last_status, last_error,"
    " last_duration_ms, done_at, loop_id, session_id, fact_key, data";

// Stored by Enqueue from a Json, so it parses; an empty object otherwise.
Json DataOf(std::string_view text) {
  auto data = ParseJson(text);
  return data.ok() ? std::move(*data) : Json::object();
}

Message MessageFromRow(const Row& row) {
  Message m;
  m.num = row.Int(0);
  m.id = row.String(1);
  m.endpoint = row.String(2);
  m.event = row.String(3);
  m.created_at = row.Int(4);
  m.state = row.String(5);
  m.attempts = row.Int(6);
  m.next_at = row.Int(7);
  if (!row.IsNull(8)) m.last = Attempt{row.Int(8), row.OptInt(9), row.OptString(10), row.OptInt(11).value_or(0)};
  m.done_at = row.OptInt(12);
  m.loop_id = row.OptString(13);
  m.session_id = row.OptString(14);
  m.fact_key = row.String(15);
  m.data = DataOf(row.Text(16));
  return m;
}

Claimed ClaimedFromRow(const Row& row) {
  return Claimed{row.Int(0),      row.String(1), row.String(2),
                 row.String(3),   DataOf(row.Text(4)),
                 row.Int(5),      row.Int(6)};
}

std::string Placeholders(size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += i ? ", ?" : "?";
  return s;
}

}  // namespace

bool Subscriptions::Wants(std::string_view event) const {
  return std::any_of(endpoints_.begin(), endpoints_.end(), [&](const auto& kv) { return Takes(kv.second, event); });
}

std::vector<std::string> Subscriptions::For(std::string_view event) const {
  std::vector<std::string> out;
  for (const auto& [endpoint, events] : endpoints_) {
    if (Takes(events, event)) out.push_back(endpoint);
  }
  return out;
}

std::shared_ptr<const Subscriptions> SubscriptionSource::Get() const {
  std::lock_guard lock(mu_);
  return current_;
}

void SubscriptionSource::Set(std::shared_ptr<const Subscriptions> subscriptions) {
  std::lock_guard lock(mu_);
  current_ = std::move(subscriptions);
}

Result<std::string> EnqueueTo(Tx& tx, const std::string& endpoint, std::string_view event, const Fact& fact,
                              const Json& data, int64_t at) {
  std::string id = NewId("msg_");
  std::string body = DumpJson(data);
  // A fact without a key (a test message) is unique by its message id.
  std::string once = std::string(event) + "|" + (fact.key.empty() ? id : fact.key) + "|" + fact.phase;
  std::array<Value, 10> params = {std::string_view(id),   std::string_view(endpoint), event,
                                  std::string_view(fact.key), std::string_view(once), std::string_view(body),
                                  at,                     at,                     OptValue(fact.loop_id),
                                  OptValue(fact.session_id)};
  DSH_ASSIGN_OR_RETURN(int64_t inserted,
                       tx.Exec("INSERT INTO webhook_messages (id, endpoint, event, fact_key, once, data, created_at,"
                               " state, attempts, next_at, loop_id, session_id)"
                               " VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?, ?)"
                               " ON CONFLICT (once, endpoint) DO NOTHING",
                               params));
  if (inserted == 0) return std::string();
  return id;
}

Status Enqueue(Tx& tx, const Subscriptions& subscriptions, std::string_view event, const Fact& fact, const Json& data,
               int64_t at) {
  for (const std::string& endpoint : subscriptions.For(event)) {
    DSH_RETURN_IF_ERROR(EnqueueTo(tx, endpoint, event, fact, data, at).status());
  }
  return Status::Ok();
}

Result<std::vector<Claimed>> Claim(Tx& tx, const std::string& owner, int64_t now, int64_t lease_ms, int64_t limit) {
  // PostgreSQL: rows another host is claiming right now are skipped, not
  // waited for (SQLite has one writer: nothing to skip).
  std::string lock = tx.dialect() == store::Dialect::kPostgres ? " FOR UPDATE SKIP LOCKED" : "";
  std::vector<int64_t> nums;
  DSH_RETURN_IF_ERROR(tx.Query("SELECT num FROM webhook_messages WHERE state = 'pending' AND next_at <= ?"
                               " AND (lease_until IS NULL OR lease_until < ?) ORDER BY next_at, num LIMIT ?" +
                                   lock,
                               {now, now, limit}, [&](const Row& row) {
                                 nums.push_back(row.Int(0));
                                 return Status::Ok();
                               }));
  std::vector<Claimed> out;
  if (nums.empty()) return out;
  std::vector<Value> params = {std::string_view(owner), now + lease_ms};
  for (int64_t n : nums) params.emplace_back(n);
  DSH_RETURN_IF_ERROR(tx.Query("UPDATE webhook_messages SET lease_owner = ?, lease_until = ? WHERE num IN (" +
                                   Placeholders(nums.size()) +
                                   ") RETURNING num, id, endpoint, event, data, created_at, attempts",
                               params, [&](const Row& row) {
                                 out.push_back(ClaimedFromRow(row));
                                 return Status::Ok();
                               }));
  std::sort(out.begin(), out.end(), [](const Claimed& a, const Claimed& b) { return a.num < b.num; });
  return out;
}

Result<std::optional<Claimed>> ClaimOne(Tx& tx, const std::string& id, const std::string& owner, int64_t now,
                                        int64_t lease_ms) {
  std::optional<Claimed> out;
  DSH_RETURN_IF_ERROR(tx.Query("UPDATE webhook_messages SET lease_owner = ?, lease_until = ? WHERE id = ?"
                               " AND state = 'pending' AND (lease_until IS NULL OR lease_until < ?)"
                               " RETURNING num, id, endpoint, event, data, created_at, attempts",
                               {std::string_view(owner), now + lease_ms, std::string_view(id), now},
                               [&](const Row& row) {
                                 out = ClaimedFromRow(row);
                                 return Status::Ok();
                               }));
  return out;
}

Status Record(Tx& tx, int64_t num, const Attempt& a, const After& after) {
  int64_t n = 0;
  DSH_RETURN_IF_ERROR(tx.Query("SELECT attempts FROM webhook_messages WHERE num = ?", {num}, [&](const Row& row) {
    n = row.Int(0) + 1;
    return Status::Ok();
  }));
  if (n == 0) return Status::Ok();  // pruned meanwhile
  DSH_RETURN_IF_ERROR(tx.Exec("INSERT INTO webhook_attempts (message_num, n, at, status, error, duration_ms)"
                              " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (message_num, n) DO NOTHING",
                              {num, n, a.at, OptValue(a.status), OptValue(a.error), a.duration_ms})
                          .status());
  bool done = after.state != "pending";
  return tx
      .Exec("UPDATE webhook_messages SET attempts = ?, state = ?, next_at = ?, lease_owner = NULL,"
            " lease_until = NULL, last_at = ?, last_status = ?, last_error = ?, last_duration_ms = ?, done_at = ?"
            " WHERE num = ?",
            {n, std::string_view(after.state), after.next_at, a.at, OptValue(a.status), OptValue(a.error),
             a.duration_ms, done ? Value(a.at) : Value(nullptr), num})
      .status();
}

Result<std::optional<int64_t>> NextDue(Tx& tx) {
  std::optional<int64_t> due;
  DSH_RETURN_IF_ERROR(
      tx.Query("SELECT MIN(next_at) FROM webhook_messages WHERE state = 'pending'", {}, [&](const Row& row) {
        due = row.OptInt(0);
        return Status::Ok();
      }));
  return due;
}

Result<int64_t> CountPending(Tx& tx) {
  int64_t n = 0;
  DSH_RETURN_IF_ERROR(tx.Query("SELECT COUNT(*) FROM webhook_messages WHERE state = 'pending'", {}, [&](const Row& row) {
    n = row.Int(0);
    return Status::Ok();
  }));
  return n;
}

Json AttemptJson(const Attempt& a) {
  Json j = {{"at", a.at}, {"duration_ms", a.duration_ms}};
  if (a.status) j["status"] = *a.status;
  if (a.error) j["error"] = *a.error;
  return j;
}

Json MessageJson(const Message& m) {
  std::string state = m.state == "pending" && m.attempts > 0 ? "retrying" : m.state;
  Json j = {{"id", m.id},       {"endpoint", m.endpoint}, {"event", m.event},
            {"created_at", m.created_at}, {"state", state}, {"attempts", m.attempts}};
  if (m.state == "pending") j["next_attempt_at"] = m.next_at;
  if (m.state == "delivered" && m.done_at) j["delivered_at"] = *m.done_at;
  if (m.last) j["last_attempt"] = AttemptJson(*m.last);
  if (m.loop_id) j["loop_id"] = *m.loop_id;
  if (m.session_id) j["session_id"] = *m.session_id;
  if (auto a = m.data.find("activity_id"); a != m.data.end()) j["activity_id"] = *a;
  return j;
}

Result<MessagePage> ListMessages(Tx& tx, const MessageFilter& filter, int64_t limit, std::optional<int64_t> before) {
  std::string sql = std::string("SELECT ") + kMessageColumns + " FROM webhook_messages WHERE num < ?";
  std::vector<Value> params = {before.value_or(std::numeric_limits<int64_t>::max())};
  if (filter.endpoint) {
    sql += " AND endpoint = ?";
    params.emplace_back(std::string_view(*filter.endpoint));
  }
  if (filter.state) {
    sql += " AND state = ?";
    params.emplace_back(std::string_view(*filter.state));
  }
  sql += " ORDER BY num DESC LIMIT ?";
  params.emplace_back(limit + 1);
  MessagePage page;
  DSH_RETURN_IF_ERROR(tx.Query(sql, params, [&](const Row& row) {
    page.messages.push_back(MessageFromRow(row));
    return Status::Ok();
  }));
  if (static_cast<int64_t>(page.messages.size()) > limit) {
    page.messages.pop_back();
    page.next = page.messages.back().num;
  }
  return page;
}

Result<std::optional<Message>> GetMessage(Tx& tx, const std::string& id) {
  std::optional<Message> m;
  DSH_RETURN_IF_ERROR(tx.Query(std::string("SELECT ") + kMessageColumns + " FROM webhook_messages WHERE id = ?",
                               {std::string_view(id)}, [&](const Row& row) {
                                 m = MessageFromRow(row);
                                 return Status::Ok();
                               }));
  return m;
}

Result<std::vector<Attempt>> Attempts(Tx& tx, int64_t num) {
  std::vector<Attempt> out;
  DSH_RETURN_IF_ERROR(tx.Query("SELECT at, status, error, duration_ms FROM webhook_attempts WHERE message_num = ?"
                               " ORDER BY n",
                               {num}, [&](const Row& row) {
                                 out.push_back(Attempt{row.Int(0), row.OptInt(1), row.OptString(2), row.Int(3)});
                                 return Status::Ok();
                               }));
  return out;
}

Result<std::map<std::string, Json>> Receipts(Tx& tx, const std::vector<std::string>& fact_keys) {
  std::map<std::string, Json> out;
  if (fact_keys.empty()) return out;
  std::vector<Value> params;
  for (const auto& k : fact_keys) params.emplace_back(std::string_view(k));
  DSH_RETURN_IF_ERROR(tx.Query("SELECT fact_key, id, endpoint, event, state, attempts FROM webhook_messages"
                               " WHERE fact_key IN (" + Placeholders(fact_keys.size()) + ") ORDER BY num",
                               params, [&](const Row& row) {
                                 std::string state = row.String(4);
                                 if (state == "pending" && row.Int(5) > 0) state = "retrying";
                                 Json& list = out[row.String(0)];
                                 if (list.is_null()) list = Json::array();
                                 list.push_back({{"id", row.String(1)},
                                                 {"endpoint", row.String(2)},
                                                 {"event", row.String(3)},
                                                 {"state", state},
                                                 {"attempts", row.Int(5)}});
                                 return Status::Ok();
                               }));
  return out;
}

Result<std::map<std::string, EndpointStats>> Stats(Tx& tx) {
  std::map<std::string, EndpointStats> out;
  DSH_RETURN_IF_ERROR(tx.Query(
      "SELECT endpoint, COUNT(*),"
      " SUM(CASE WHEN state = 'pending' THEN 1 ELSE 0 END),"
      " SUM(CASE WHEN state = 'pending' AND attempts > 0 THEN 1 ELSE 0 END),"
      " MIN(CASE WHEN state = 'pending' AND attempts > 0 THEN created_at END),"
      " MAX(CASE WHEN state = 'delivered' THEN done_at END),"
      " MAX(CASE WHEN state = 'failed' THEN done_at END)"
      " FROM webhook_messages GROUP BY endpoint",
      {}, [&](const Row& row) {
        EndpointStats& s = out[row.String(0)];
        s.messages = row.Int(1);
        s.pending = row.Int(2);
        s.retrying = row.Int(3);
        s.oldest_retrying_at = row.OptInt(4);
        s.last_delivered_at = row.OptInt(5);
        s.last_failed_at = row.OptInt(6);
        return Status::Ok();
      }));
  for (auto& [endpoint, s] : out) {
    if (!s.last_failed_at) continue;
    DSH_RETURN_IF_ERROR(tx.Query(
        "SELECT last_status, last_error FROM webhook_messages WHERE endpoint = ? AND state = 'failed'"
        " ORDER BY done_at DESC, num DESC LIMIT 1",
        {std::string_view(endpoint)}, [&](const Row& row) {
          if (auto error = row.OptString(1)) {
            s.last_failure = *error;
          } else if (auto status = row.OptInt(0)) {
            s.last_failure = "HTTP " + std::to_string(*status);
          }
          return Status::Ok();
        }));
  }
  return out;
}

std::string EndpointState(const EndpointStats& s, int64_t now) {
  constexpr int64_t kRetryingTooLongMs = 3'600'000;
  if (s.messages == 0) return "idle";
  if (s.last_failed_at && (!s.last_delivered_at || *s.last_failed_at > *s.last_delivered_at)) return "failing";
  if (s.oldest_retrying_at && now - *s.oldest_retrying_at > kRetryingTooLongMs) return "failing";
  if (s.retrying > 0) return "retrying";
  return "ok";
}

store::PruneTask PruneTask(int64_t max_age_ms) {
  return {"webhook_messages", [max_age_ms](Tx& tx, int64_t now, int64_t max_rows) -> Result<store::PruneSlice> {
            if (max_age_ms <= 0) return store::PruneSlice{0, false};
            std::vector<int64_t> doomed;
            DSH_RETURN_IF_ERROR(tx.Query("SELECT num FROM webhook_messages WHERE done_at IS NOT NULL AND done_at < ?"
                                         " ORDER BY done_at LIMIT ?",
                                         {now - max_age_ms, max_rows}, [&](const Row& row) {
                                           doomed.push_back(row.Int(0));
                                           return Status::Ok();
                                         }));
            if (doomed.empty()) return store::PruneSlice{0, false};
            std::vector<Value> params(doomed.begin(), doomed.end());
            std::string in = "(" + Placeholders(doomed.size()) + ")";
            DSH_RETURN_IF_ERROR(tx.Exec("DELETE FROM webhook_attempts WHERE message_num IN " + in, params).status());
            DSH_ASSIGN_OR_RETURN(int64_t n, tx.Exec("DELETE FROM webhook_messages WHERE num IN " + in, params));
            return store::PruneSlice{n, static_cast<int64_t>(doomed.size()) == max_rows};
          }};
}

}  // namespace dsh::agent::outbox
