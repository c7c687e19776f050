#include "agent/activity_store.h"

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <string>
#include <span>
#include <utility>

namespace dsh::agent::activity {

using store::OptValue;
using store::Row;
using store::Tx;
using store::Value;

std::vector<store::Migration> Migrations() {
  return {
      {"activity",
       1,
       {
           "CREATE TABLE activity ("
           " num /*sqlite: INTEGER PRIMARY KEY*/ /*postgres: BIGSERIAL PRIMARY KEY*/,"
           " key TEXT NOT NULL UNIQUE,"
           " message_id TEXT UNIQUE,"
           " kind TEXT NOT NULL,"
           " session_id TEXT,"
           " loop_id TEXT,"
           " nominal_at BIGINT,"
           " schedule_id TEXT,"
           " at BIGINT NOT NULL,"
           " status TEXT NOT NULL,"
           " error_code TEXT,"
           " error_message TEXT,"
           " seq BIGINT,"
           " started_at BIGINT,"
           " ended_at BIGINT,"
           " input_tokens BIGINT,"
           " output_tokens BIGINT,"
           " summary TEXT,"
           " read BIGINT NOT NULL)",
           // The list's filters, newest first; a session's items. Retention
           // walks the key order (items come in about `at` order).
           "CREATE INDEX activity_unread_num ON activity (num) WHERE read = 0",
           "CREATE INDEX activity_failed ON activity (num) WHERE status IN ('error', 'none')",
           "CREATE INDEX activity_by_session ON activity (session_id, num)",
           // Unread counts per session, kept with every change of `read`
           // (and every insert and delete), so the sidebar's counts read one
           // row per session instead of every unread item. '' stands for
           // no session.
           "CREATE TABLE activity_unread_counts (session_id TEXT PRIMARY KEY, n BIGINT NOT NULL)",
       }},
      // v2: a count is the sum of a few rows (`shard`), so that hosts
      // sharing a PostgreSQL database each change their own row of a
      // session instead of all waiting for one (see ShardSql). SQLite keeps
      // one row (shard 0).
      {"activity",
       2,
       {
           "CREATE TABLE activity_unread_shards (session_id TEXT NOT NULL, shard BIGINT NOT NULL,"
           " n BIGINT NOT NULL, PRIMARY KEY (session_id, shard))",
           // v1 on SQLite kept "no session" as NULL (distinct from each other).
           "INSERT INTO activity_unread_shards (session_id, shard, n) SELECT COALESCE(session_id, ''), 0, SUM(n)"
           " FROM activity_unread_counts GROUP BY COALESCE(session_id, '') HAVING SUM(n) <> 0",
           "DROP TABLE activity_unread_counts",
       }},
  };
}

namespace {

// The row of a count this transaction adds to. On PostgreSQL every delivery
// into a session changes its count in the delivery's transaction, and with
// one row per session the hosts delivering into it would queue for that row
// (held until each one's COMMIT): each writer connection has a row of its
// own (of 64, by its server process id), so a session has at most 64 rows
// however often hosts reconnect. SQLite has one writer: one row, shard 0.
const char* ShardSql(const Tx& tx) {
  return tx.dialect() == store::Dialect::kPostgres ? "pg_backend_pid() % 64 + 1" : "0";
}

// Adds `delta` to the unread count of `session_id` (nullopt: no session).
Status AddUnread(Tx& tx, const std::optional<std::string>& session_id, int64_t delta) {
  if (delta == 0) return Status::Ok();
  std::string_view id = session_id ? std::string_view(*session_id) : std::string_view("");  // not NULL: a key
  return tx
      .Exec(std::string("INSERT INTO activity_unread_shards (session_id, shard, n) VALUES (?, ") + ShardSql(tx) +
                ", ?) ON CONFLICT (session_id, shard) DO UPDATE SET n = activity_unread_shards.n + excluded.n",
            {id, delta})
      .status();
}

// Marks read the unread items `where` selects (with `params`), keeping the
// counts; returns how many.
// The counts come from the rows this statement changed (RETURNING), not
// from a count before it: on PostgreSQL another host may add unread items
// in between.
Result<int64_t> MarkWhere(Tx& tx, const std::string& where, std::span<const Value> params) {
  std::map<std::string, int64_t> per_session;
  int64_t marked = 0;
  DSH_RETURN_IF_ERROR(tx.Query("UPDATE inbox SET read = 1 WHERE read = 0 AND " + where + " RETURNING session_id",
                               params, [&](const Row& row) {
                                 ++per_session[row.String(0)];
                                 ++marked;
                                 return Status::Ok();
                               }));
  for (const auto& [session_id, n] : per_session) DSH_RETURN_IF_ERROR(AddUnread(tx, session_id, -n));
  return marked;
}

// The subscriptions in effect when any of them takes one of `events`.
std::shared_ptr<const outbox::Subscriptions> Wanting(outbox::SubscriptionSource* webhooks,
                                                    std::initializer_list<std::string_view> events) {
  if (webhooks == nullptr) return nullptr;
  auto subs = webhooks->Get();
  if (!subs || subs->empty()) return nullptr;
  for (std::string_view e : events) {
    if (subs->Wants(e)) return subs;
  }
  return nullptr;
}

Status Send(Tx& tx, const outbox::Subscriptions& subs, std::string_view event, const Item& item, std::string phase,
            int64_t at) {
  outbox::Fact fact{item.key, std::move(phase), item.loop_id, item.outcome.session_id};
  return outbox::Enqueue(tx, subs, event, fact, WebhookData(item), at);
}

// An item as a delivery made it, for its webhooks.
Item NewItem(int64_t num, int64_t at, const Source& s, const std::string& key, std::string_view status) {
  Item item;
  item.id = num;
  item.at = at;
  item.kind = s.kind;
  item.loop_id = s.loop_id;
  item.nominal_at = s.nominal_at;
  item.schedule_id = s.schedule_id;
  item.key = key;
  item.outcome.status = std::string(status);
  return item;
}

// An item's columns of its inbox row, as ItemFromRow reads them.
std::string ItemColumns() {
  return "num, created_at, kind, loop_id, schedule_id, nominal_at, summary, read, COALESCE(key, 'msg:' || message_id), " +
         OutcomeColumns("");
}
Item ItemFromRow(const Row& row, int col) {
  Item item;
  item.id = row.Int(col);
  item.at = row.Int(col + 1);
  item.kind = row.String(col + 2);
  item.loop_id = row.OptString(col + 3);
  item.schedule_id = row.OptString(col + 4);
  item.nominal_at = row.OptInt(col + 5);
  item.summary = row.OptString(col + 6);
  item.read = row.Int(col + 7) != 0;
  item.key = row.String(col + 8);
  item.outcome = OutcomeFromRow(row, col + 9).value_or(Outcome{});
  return item;
}

// What a new item sends: `activity.created`, and `reminder.dispatched` for
// a reminder (`phase` tells a failed dispatch from the delivery).
Status SendNew(Tx& tx, const outbox::Subscriptions& subs, const Item& item, bool created, std::string_view phase,
               int64_t at) {
  if (created) DSH_RETURN_IF_ERROR(Send(tx, subs, "activity.created", item, "", at));
  if (item.kind == "reminder") DSH_RETURN_IF_ERROR(Send(tx, subs, "reminder.dispatched", item, std::string(phase), at));
  return Status::Ok();
}

}  // namespace

std::array<Value, 8> DeliveryValues(const Source& s, const std::optional<Started>& started) {
  return {std::string_view(s.kind),
          OptValue(s.loop_id),
          OptValue(s.nominal_at),
          OptValue(s.schedule_id),
          kPending,  // running is read from the seq (OutcomeFromRow)
          started ? Value(started->seq) : Value(nullptr),
          started ? Value(started->at) : Value(nullptr),
          int64_t{0}};
}

Status Delivered(Tx& tx, int64_t num, bool created, const Source& s, const std::string& session_id,
                 const std::string& message_id, const std::optional<std::string>& key, int64_t at,
                 std::optional<Started> started, outbox::SubscriptionSource* webhooks) {
  if (created) DSH_RETURN_IF_ERROR(AddUnread(tx, session_id, 1));
  auto subs = Wanting(webhooks, {"activity.created", "reminder.dispatched"});
  if (!subs) return Status::Ok();
  Item item = NewItem(num, at, s, key ? *key : "msg:" + message_id, started ? kRunning : kPending);
  item.outcome.session_id = session_id;
  if (started) {
    item.outcome.seq = started->seq;
    item.outcome.started_at = started->at;
  }
  return SendNew(tx, *subs, item, created, "", at);
}

Status DeliveryFailed(Tx& tx, const Source& s, const std::optional<std::string>& session_id,
                      const std::string& key, const std::string& error, int64_t at,
                      outbox::SubscriptionSource* webhooks) {
  std::string message_id = "failed:" + key;
  std::string_view session = session_id ? std::string_view(*session_id) : std::string_view("");
  std::array<Value, 11> params = {std::string_view(message_id),
                                  session,
                                  std::string_view(key),
                                  at,
                                  at,
                                  std::string_view(s.kind),
                                  OptValue(s.loop_id),
                                  OptValue(s.nominal_at),
                                  OptValue(s.schedule_id),
                                  std::string_view("delivery_failed"),
                                  std::string_view(error)};
  std::optional<int64_t> num;
  DSH_RETURN_IF_ERROR(tx.Query("INSERT INTO inbox (message_id, session_id, key, mode, wakeup, text, meta, created_at,"
                               " consumed_at, kind, loop_id, nominal_at, schedule_id, status, error_code,"
                               " error_message, read) VALUES (?, ?, ?, 'followup', 0, '', '{}', ?, ?, ?, ?, ?, ?,"
                               " 'none', ?, ?, 0) ON CONFLICT DO NOTHING RETURNING num",
                               params, [&](const Row& row) {
                                 num = row.Int(0);
                                 return Status::Ok();
                               }));
  if (!num) {
    // Another failed attempt of the same occurrence updates its row; a
    // delivered one is left alone.
    return tx
        .Exec("UPDATE inbox SET created_at = ?, consumed_at = ?, error_message = ?"
              " WHERE session_id = ? AND key = ? AND status = 'none'",
              {at, at, std::string_view(error), session, std::string_view(key)})
        .status();
  }
  DSH_RETURN_IF_ERROR(AddUnread(tx, session_id, 1));
  auto subs = Wanting(webhooks, {"activity.created", "reminder.dispatched", "loop.run.failed"});
  if (!subs) return Status::Ok();
  Item item = NewItem(*num, at, s, key, kNone);
  item.outcome.error_code = "delivery_failed";
  item.outcome.error_message = error;
  item.outcome.session_id = session_id;
  item.summary = Summary(error);
  DSH_RETURN_IF_ERROR(SendNew(tx, *subs, item, true, ":failed", at));
  if (item.kind == "loop_run") return Send(tx, *subs, "loop.run.failed", item, ":delivery", at);
  return Status::Ok();
}

Status Superseded(Tx& tx, const std::string& key) {
  int64_t unread = 0;
  DSH_RETURN_IF_ERROR(tx.Query("DELETE FROM inbox WHERE session_id = '' AND key = ? AND status = 'none' RETURNING read",
                               {std::string_view(key)}, [&](const Row& row) {
                                 if (row.Int(0) == 0) ++unread;
                                 return Status::Ok();
                               }));
  return AddUnread(tx, std::nullopt, -unread);
}

Result<int64_t> TurnStarted(Tx& tx, const std::vector<session::Event>& stored, const std::vector<MessageRef>& taken) {
  int64_t changed = 0;
  for (const auto& e : stored) {
    if (e.type != session::event_types::kUserMessage) continue;
    auto id = e.data.find("message_id");
    if (id == e.data.end() || !id->is_string()) continue;
    auto m = std::find_if(taken.begin(), taken.end(),
                          [&](const MessageRef& r) { return r.message_id == id->get_ref<const std::string&>(); });
    if (m == taken.end()) continue;
    // Only columns no index holds nor names in its predicate: SQLite then
    // rewrites the row alone, and PostgreSQL can update it in place (HOT).
    DSH_ASSIGN_OR_RETURN(int64_t n, tx.Exec("UPDATE inbox SET seq = ?, started_at = ?"
                                            " WHERE num = ? AND status = 'pending' AND seq IS NULL",
                                            {e.seq, e.at, m->num}));
    changed += n;
  }
  return changed;
}

std::string Summary(std::string_view text) {
  size_t start = text.find_first_not_of(" \t\r\n");
  if (start == std::string_view::npos) return "";
  text.remove_prefix(start);
  if (size_t nl = text.find('\n'); nl != std::string_view::npos) text = text.substr(0, nl);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r'))
    text.remove_suffix(1);
  // Characters, not bytes: every byte but a UTF-8 continuation starts one.
  auto starts_char = [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; };
  size_t chars = static_cast<size_t>(std::count_if(text.begin(), text.end(), starts_char));
  if (chars <= kSummaryChars) return std::string(text);
  size_t kept = 0, cut = 0;
  for (; cut < text.size(); ++cut) {
    if (starts_char(text[cut]) && kept++ == kSummaryChars - 1) break;
  }
  return std::string(text.substr(0, cut)) + "…";
}

Result<int64_t> TurnEnded(Tx& tx, const std::vector<MessageRef>& messages, int64_t now, const TurnEnd& end,
                          outbox::SubscriptionSource* webhooks) {
  // A plain message (kind NULL) is only consumed; an item also takes its
  // outcome. One statement per message: the consumption's check is per
  // message (agent_store::Consume).
  static const std::string kSet = [] {
    std::string set = "UPDATE inbox SET consumed_at = ?";
    // Typed: PostgreSQL cannot tell a parameter's type inside CASE.
    for (auto [c, type] : std::initializer_list<std::pair<const char*, const char*>>{
             {"status", "TEXT"},
             {"error_code", "TEXT"},
             {"error_message", "TEXT"},
             {"ended_at", "BIGINT"},
             {"input_tokens", "BIGINT"},
             {"output_tokens", "BIGINT"},
             {"summary", "TEXT"}}) {
      set += std::string(", ") + c + " = CASE WHEN kind IS NULL THEN NULL ELSE CAST(? AS " + type + ") END";
    }
    return set + " WHERE num = ? AND consumed_at IS NULL RETURNING kind";
  }();
  static const std::string kSetReturningRuns = kSet + ", " + ItemColumns();
  auto subs = Wanting(webhooks, {"loop.run.completed", "loop.run.failed"});
  std::vector<Item> runs;
  int64_t changed = 0;
  for (const MessageRef& m : messages) {
    std::array<Value, 9> params = {now,
                                   std::string_view(end.status),
                                   OptValue(end.error_code),
                                   OptValue(end.error_message),
                                   end.ended_at,
                                   OptValue(end.input_tokens),
                                   OptValue(end.output_tokens),
                                   std::string_view(end.summary),
                                   m.num};
    bool consumed = false;
    DSH_RETURN_IF_ERROR(tx.Query(subs ? kSetReturningRuns : kSet, params, [&](const Row& row) {
      consumed = true;
      if (row.IsNull(0)) return Status::Ok();
      ++changed;
      if (subs && row.Text(0) == "loop_run") runs.push_back(ItemFromRow(row, 1));
      return Status::Ok();
    }));
    if (!consumed) return Status(codes::kConflict, "message " + m.message_id + " was already taken by another turn");
  }
  for (const Item& item : runs) {
    std::string_view event = end.status == kError ? "loop.run.failed" : "loop.run.completed";
    DSH_RETURN_IF_ERROR(Send(tx, *subs, event, item, "", end.ended_at));
  }
  return changed;
}

Json OutcomeJson(const Outcome& o) {
  Json j = {{"status", o.status}};
  if (o.error_code || o.error_message) {
    j["error"] = {{"code", o.error_code.value_or("error")}, {"message", o.error_message.value_or("")}};
  }
  if (o.session_id) j["session_id"] = *o.session_id;
  if (o.seq) j["seq"] = *o.seq;
  if (o.started_at) j["started_at"] = *o.started_at;
  if (o.ended_at) j["ended_at"] = *o.ended_at;
  if (o.started_at && o.ended_at) j["duration_ms"] = std::max<int64_t>(0, *o.ended_at - *o.started_at);
  if (o.input_tokens || o.output_tokens) {
    j["tokens"] = {{"input_tokens", o.input_tokens.value_or(0)},
                   {"output_tokens", o.output_tokens.value_or(0)}};
  }
  return j;
}

std::string OutcomeColumns(std::string_view alias) {
  std::string a = alias.empty() ? "" : std::string(alias) + ".";
  return a + "status, " + a + "error_code, " + a + "error_message, " + a + "session_id, " + a + "seq, " + a +
         "started_at, " + a + "ended_at, " + a + "input_tokens, " + a + "output_tokens";
}

std::optional<Outcome> OutcomeFromRow(const Row& row, int col) {
  if (row.IsNull(col)) return std::nullopt;
  Outcome o;
  o.status = row.String(col);
  // Stored `pending` until the turn ends; the turn's start set its seq.
  if (o.status == kPending && !row.IsNull(col + 4)) o.status = std::string(kRunning);
  o.error_code = row.OptString(col + 1);
  o.error_message = row.OptString(col + 2);
  o.session_id = row.OptString(col + 3);
  if (o.session_id && o.session_id->empty()) o.session_id.reset();  // a failed delivery to no known session
  o.seq = row.OptInt(col + 4);
  o.started_at = row.OptInt(col + 5);
  o.ended_at = row.OptInt(col + 6);
  o.input_tokens = row.OptInt(col + 7);
  o.output_tokens = row.OptInt(col + 8);
  return o;
}

Json ItemJson(const Item& item, const std::optional<std::string>& title) {
  Json outcome = OutcomeJson(item.outcome);
  Json j = {{"id", item.id}, {"at", item.at}, {"kind", item.kind}, {"read", item.read}};
  if (item.loop_id) j["loop_id"] = *item.loop_id;
  if (item.nominal_at) j["nominal_at"] = *item.nominal_at;
  if (item.schedule_id) j["schedule_id"] = *item.schedule_id;
  if (item.outcome.session_id) j["session_id"] = *item.outcome.session_id;
  if (item.outcome.seq) j["seq"] = *item.outcome.seq;
  if (title) j["title"] = *title;
  if (item.summary && !item.summary->empty()) j["summary"] = *item.summary;
  Json o = {{"status", outcome["status"]}};
  if (outcome.contains("error")) o["error"] = outcome["error"];
  j["outcome"] = std::move(o);
  for (const char* k : {"started_at", "ended_at", "duration_ms", "tokens"}) {
    if (outcome.contains(k)) j[k] = outcome[k];
  }
  return j;
}

Json WebhookData(const Item& item) {
  Json j = ItemJson(item, std::nullopt);
  j["activity_id"] = j["id"];
  j.erase("id");
  j.erase("read");
  return j;
}

std::optional<Filter> ParseFilter(std::string_view name) {
  if (name == "all") return Filter::kAll;
  if (name == "unread") return Filter::kUnread;
  if (name == "failed") return Filter::kFailed;
  return std::nullopt;
}

Result<Page> List(Tx& tx, Filter filter, int64_t limit, std::optional<int64_t> before) {
  std::string where;
  switch (filter) {
    case Filter::kAll:
      where = "";
      break;
    case Filter::kUnread:
      where = " AND read = 0";
      break;
    case Filter::kFailed:
      where = " AND status IN ('error', 'none')";
      break;
  }
  Page page;
  DSH_RETURN_IF_ERROR(tx.Query(
      "SELECT " + ItemColumns() + " FROM inbox WHERE kind IS NOT NULL AND num < ?" + where +
          " ORDER BY num DESC LIMIT ?",
      {before.value_or(std::numeric_limits<int64_t>::max()), limit + 1}, [&](const Row& row) {
        page.items.push_back(ItemFromRow(row, 0));
        return Status::Ok();
      }));
  if (static_cast<int64_t>(page.items.size()) > limit) {
    page.items.pop_back();
    page.next = page.items.back().id;
  }
  return page;
}

Result<Unread> CountUnread(Tx& tx) {
  Unread u;
  DSH_RETURN_IF_ERROR(
      tx.Query("SELECT session_id, SUM(n) FROM activity_unread_shards GROUP BY session_id HAVING SUM(n) > 0", {},
               [&](const Row& row) {
        int64_t n = row.Int(1);
        u.total += n;
        if (!row.Text(0).empty()) u.sessions[row.String(0)] = n;
        return Status::Ok();
      }));
  return u;
}

Result<int64_t> CountUnreadTotal(Tx& tx) {
  int64_t n = 0;
  DSH_RETURN_IF_ERROR(tx.Query("SELECT SUM(n) FROM activity_unread_shards", {}, [&](const Row& row) {
    n = row.IsNull(0) ? 0 : row.Int(0);
    return Status::Ok();
  }));
  return n;
}

Result<int64_t> MarkRead(Tx& tx, const std::vector<int64_t>& ids) {
  if (ids.empty()) return int64_t{0};
  std::string where = "num IN (";
  std::vector<Value> params;
  for (size_t i = 0; i < ids.size(); ++i) {
    where += i ? ", ?" : "?";
    params.emplace_back(ids[i]);
  }
  where += ")";
  return MarkWhere(tx, where, params);
}

Result<int64_t> MarkAllRead(Tx& tx) { return MarkWhere(tx, "1 = 1", {}); }

Result<int64_t> MarkSessionRead(Tx& tx, const std::string& session_id) {
  std::array<Value, 1> params = {std::string_view(session_id)};
  return MarkWhere(tx, "session_id = ?", params);
}

store::PruneTask PruneTask(int64_t max_age_ms) {
  return {"activity", [max_age_ms](Tx& tx, int64_t now, int64_t max_rows) -> Result<store::PruneSlice> {
            if (max_age_ms <= 0) return store::PruneSlice{0, false};
            std::vector<int64_t> doomed;
            DSH_RETURN_IF_ERROR(
                tx.Query("SELECT num FROM inbox WHERE kind IS NOT NULL AND created_at < ?"
                         " AND status NOT IN ('pending', 'running') ORDER BY num LIMIT ?",
                         {now - max_age_ms, max_rows}, [&](const Row& row) {
                           doomed.push_back(row.Int(0));
                           return Status::Ok();
                         }));
            if (doomed.empty()) return store::PruneSlice{0, false};
            // Unread ones leave the counts first.
            DSH_RETURN_IF_ERROR(MarkRead(tx, doomed).status());
            std::string in = " num IN (";
            std::vector<Value> params;
            for (size_t i = 0; i < doomed.size(); ++i) {
              in += i ? ", ?" : "?";
              params.emplace_back(doomed[i]);
            }
            in += ")";
            // A failed delivery's row was only the item; a message stays a
            // message, for the inbox's own retention (its key may still
            // matter).
            DSH_RETURN_IF_ERROR(tx.Exec("DELETE FROM inbox WHERE status = 'none' AND" + in, params).status());
            DSH_RETURN_IF_ERROR(
                tx.Exec("UPDATE inbox SET kind = NULL, loop_id = NULL, nominal_at = NULL, schedule_id = NULL,"
                        " status = NULL, error_code = NULL, error_message = NULL, seq = NULL, started_at = NULL,"
                        " ended_at = NULL, input_tokens = NULL, output_tokens = NULL, summary = NULL, read = NULL"
                        " WHERE" + in,
                        params)
                    .status());
            int64_t n = static_cast<int64_t>(doomed.size());
            return store::PruneSlice{n, n == max_rows};
          }};
}

}  // namespace dsh::agent::activity
