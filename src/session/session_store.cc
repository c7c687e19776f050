#include "session/session_store.h"

#include <deque>
#include <future>
#include <unordered_set>

#include <spdlog/spdlog.h>

#include "base/ids.h"
#include "time/time_zone.h"

namespace dsh::session {
namespace {

using store::Row;
using store::Tx;
using store::OptValue;
using store::Value;
using store::Dialect;

constexpr const char* kHeaderColumns =
    "id, created_at, updated_at, cwd, preset, provider, model, reasoning_effort, time_zone, parent_id, "
    "seed_length, delegation_depth, origin, last_seq, archived";


SessionHeader HeaderFromRow(const Row& row) {
  SessionHeader h;
  h.id = row.String(0);
  h.created_at = row.Int(1);
  h.updated_at = row.Int(2);
  h.cwd = row.OptString(3);
  h.preset = row.OptString(4);
  h.route.provider = row.String(5);
  h.route.model = row.String(6);
  h.route.reasoning_effort = row.OptString(7);
  h.time_zone = row.String(8);
  h.parent_id = row.OptString(9);
  h.seed_length = row.Int(10);
  h.delegation_depth = row.Int(11);
  h.origin = row.String(12);
  h.last_seq = row.Int(13);
  h.archived = row.Int(14) != 0;
  return h;
}

Status Unknown(const std::string& id) { return NotFound("no session with id '" + id + "'"); }

Result<SessionHeader> GetTx(Tx& tx, const std::string& id) {
  std::optional<SessionHeader> h;
  DSH_RETURN_IF_ERROR(tx.Query(std::string("SELECT ") + kHeaderColumns + " FROM sessions WHERE id = ?",
                               {std::string_view(id)}, [&](const Row& row) {
                                 h = HeaderFromRow(row);
                                 return Status::Ok();
                               }));
  if (!h) return Unknown(id);
  return *h;
}

// What locates a session's events: its integer key (events are keyed by it:
// shorter rows and index entries than the text id), its newest seq, and the
// id of its newest row in `events_recent` (0: none was ever there).
struct EventKeys {
  int64_t num = 0;
  int64_t last_seq = 0;
  int64_t recent_tail = 0;
};

// not_found when the session is unknown. `kLock` (an append) also locks the
// session's row until the transaction ends: on PostgreSQL, where hosts
// write at once, the row is what serializes the writes of one session (its
// seq, its recent_tail) and only them (docs/STORAGE.md, "Locking").
enum class RowLock { kNone, kLock };
Result<EventKeys> SessionKeys(Tx& tx, const std::string& id, RowLock lock = RowLock::kNone) {
  std::optional<EventKeys> keys;
  DSH_RETURN_IF_ERROR(tx.Query(lock == RowLock::kLock
                                   ? "SELECT num, last_seq, recent_tail FROM sessions WHERE id = ?"
                                     " /*postgres: FOR NO KEY UPDATE*/"
                                   : "SELECT num, last_seq, recent_tail FROM sessions WHERE id = ?",
                               {std::string_view(id)}, [&](const Row& row) {
                                 keys = EventKeys{row.Int(0), row.Int(1), row.Int(2)};
                                 return Status::Ok();
                               }));
  if (!keys) return Unknown(id);
  return *keys;
}

Status ValidateNew(const NewSession& s) {
  if (s.id && s.id->empty()) return InvalidArguments("session id must not be empty");
  if (s.route.provider.empty() || s.route.model.empty()) {
    return InvalidArguments("a session needs a model route with a provider and a model");
  }
  if (s.route.reasoning_effort && s.route.reasoning_effort->empty()) {
    return InvalidArguments("reasoning effort must not be empty when given");
  }
  if (s.time_zone.empty()) return InvalidArguments("a session needs a time zone");
  if (s.origin.empty()) return InvalidArguments("a session needs an origin");
  if (s.delegation_depth < 0) return InvalidArguments("delegation depth must not be negative");
  return Status::Ok();
}

// A named empty parent: GCC 12 warns (maybe-uninitialized) about a
// defaulted std::nullopt temporary once the call is inlined.
const std::optional<std::string> kNoParent;

Result<SessionHeader> CreateTx(Tx& tx, const NewSession& s, int64_t now, const Clock& clock,
                               const std::optional<std::string>& parent_id, int64_t seed_length = 0) {
  DSH_RETURN_IF_ERROR(ValidateNew(s));
  DSH_ASSIGN_OR_RETURN(TimeZone zone, ResolveTimeZone(s.time_zone));
  SessionHeader h;
  h.id = s.id ? *s.id : NewId("ses_", clock);
  h.created_at = now;
  h.updated_at = now;
  h.cwd = s.cwd;
  h.preset = s.preset;
  h.route = s.route;
  h.time_zone = zone.name();  // canonical: a link such as US/Eastern is stored as its target
  h.parent_id = parent_id;
  h.seed_length = seed_length;
  h.delegation_depth = s.delegation_depth;
  h.origin = s.origin;
  h.last_seq = seed_length;
  DSH_ASSIGN_OR_RETURN(
      int64_t changed,
      tx.Exec("INSERT INTO sessions (id, created_at, updated_at, cwd, preset, provider, model, reasoning_effort, "
              "time_zone, parent_id, seed_length, delegation_depth, origin, last_seq) "
              "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
              {std::string_view(h.id), h.created_at, h.updated_at, OptValue(h.cwd), OptValue(h.preset),
               std::string_view(h.route.provider), std::string_view(h.route.model),
               OptValue(h.route.reasoning_effort), std::string_view(h.time_zone), OptValue(h.parent_id),
               h.seed_length, h.delegation_depth, std::string_view(h.origin), h.last_seq}));
  if (changed == 0) return Status(codes::kAlreadyExists, "a session with id '" + h.id + "' already exists");
  return h;
}

const char* TitleColumn(std::string_view type) {
  if (type == event_types::kTitleUser) return "title_user";
  if (type == event_types::kTitleGenerated) return "title_generated";
  if (type == event_types::kTitleFallback) return "title_fallback";
  return nullptr;
}

Status ValidateDraft(const EventDraft& d) {
  if (d.type.empty()) return InvalidArguments("event type must not be empty");
  if (!d.data.is_object()) return InvalidArguments("event data of '" + d.type + "' must be a JSON object");
  if (TitleColumn(d.type) != nullptr) {
    auto it = d.data.find("title");
    const bool cleared = d.type == event_types::kTitleUser && it != d.data.end() && it->is_null();
    if (!cleared && (it == d.data.end() || !it->is_string() || it->get<std::string>().empty())) {
      return InvalidArguments("a '" + d.type + "' event needs a non-empty string `title`" +
                              (d.type == event_types::kTitleUser ? " (or null to clear it)" : ""));
    }
  }
  if (d.type == event_types::kArchived) {
    auto it = d.data.find("archived");
    if (it == d.data.end() || !it->is_boolean()) {
      return InvalidArguments("a '" + d.type + "' event needs a boolean `archived`");
    }
  }
  return Status::Ok();
}

// The title an event sets: its `title`, or nullopt when it clears it.
std::optional<std::string> TitleOf(const Json& data) {
  auto it = data.find("title");
  if (it == data.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

Status UpdateTitle(Tx& tx, const std::string& id, std::string_view type, const std::optional<std::string>& title) {
  const char* column = TitleColumn(type);
  if (column == nullptr) return Status::Ok();
  std::string sql = std::string("UPDATE sessions SET ") + column + " = ? WHERE id = ?";
  return tx.Exec(sql, {OptValue(title), std::string_view(id)}).status();
}

// What a header keeps of an appended event: its title columns, `archived`.
Status UpdateHeaderOf(Tx& tx, const std::string& id, const EventDraft& d) {
  if (TitleColumn(d.type) != nullptr) return UpdateTitle(tx, id, d.type, TitleOf(d.data));
  if (d.type == event_types::kArchived) {
    return tx.Exec("UPDATE sessions SET archived = ? WHERE id = ?",
                   {int64_t{d.data.at("archived").get<bool>() ? 1 : 0}, std::string_view(id)})
        .status();
  }
  return Status::Ok();
}

// An append checked and serialized on the caller's thread, so that the
// writer thread, which every append shares, runs little more than the SQL.
struct PreparedAppend {
  Status status;  // a bad draft: the append fails without writing
  std::vector<EventDraft> drafts;
  std::vector<std::string> data;  // drafts[i].data as JSON text
};

PreparedAppend PrepareAppend(std::vector<EventDraft> drafts) {
  PreparedAppend p;
  if (drafts.empty()) p.status = InvalidArguments("nothing to append");
  for (auto& d : drafts) {
    if (d.data.is_null()) d.data = Json::object();  // `{}` in C++ brace-init is null
    if (p.status.ok()) p.status = ValidateDraft(d);
  }
  if (p.status.ok()) {
    p.data.reserve(drafts.size());
    for (const auto& d : drafts) p.data.push_back(DumpJson(d.data));
  }
  p.drafts = std::move(drafts);
  return p;
}

// Every check (drafts, the session) comes before the first write: appends
// run without a savepoint of their own (JobIsolation::kFailsBeforeWriting),
// so after a write only a storage failure may end this with an error.
Result<std::vector<Event>> AppendTx(Tx& tx, const std::string& id, PreparedAppend& append, int64_t now,
                                    const SessionStore::FenceFn& fence = nullptr) {
  DSH_RETURN_IF_ERROR(append.status);
  DSH_ASSIGN_OR_RETURN(EventKeys keys, SessionKeys(tx, id, RowLock::kLock));
  if (fence) DSH_RETURN_IF_ERROR(fence(tx));
  int64_t seq = keys.last_seq;
  if (tx.dialect() == store::Dialect::kPostgres) {
    // Nothing here needs the server's answer (the session's row is locked,
    // so no key can collide): the rows go with the next statement's round
    // trip (Tx::ExecLater). Each row links to the one this connection
    // inserted just before it, the first to the session's tail. That is
    // currval of the ids' sequence, read in a SELECT (a subquery with a
    // volatile function is not merged into the INSERT): in VALUES it would
    // run after the row's own id default, which comes first in the table.
    for (size_t i = 0; i < append.drafts.size(); ++i) {
      const EventDraft& d = append.drafts[i];
      ++seq;
      if (i == 0) {
        DSH_RETURN_IF_ERROR(tx.ExecLater("INSERT INTO events_recent (session_num, seq, type, at, data, prev) "
                                         "VALUES (?, ?, ?, ?, ?, ?)",
                                         {keys.num, seq, std::string_view(d.type), now,
                                          std::string_view(append.data[i]), keys.recent_tail}));
      } else {
        DSH_RETURN_IF_ERROR(tx.ExecLater("INSERT INTO events_recent (session_num, seq, type, at, data, prev) "
                                         "SELECT ?, ?, ?, ?, ?, currval('events_recent_id_seq')",
                                         {keys.num, seq, std::string_view(d.type), now,
                                          std::string_view(append.data[i])}));
      }
      DSH_RETURN_IF_ERROR(UpdateHeaderOf(tx, id, d));
    }
    DSH_RETURN_IF_ERROR(tx.ExecLater("UPDATE sessions SET last_seq = ?, recent_tail = currval('events_recent_id_seq'), "
                                     "updated_at = GREATEST(updated_at, ?) WHERE num = ?",
                                     {seq, now, keys.num}));
  } else {
    int64_t tail = keys.recent_tail;
    for (size_t i = 0; i < append.drafts.size(); ++i) {
      const EventDraft& d = append.drafts[i];
      ++seq;
      // Each row links to the session's previous one (see ReadRecentTx).
      DSH_ASSIGN_OR_RETURN(tail, tx.Insert("INSERT INTO events_recent (session_num, seq, type, at, data, prev) "
                                           "VALUES (?, ?, ?, ?, ?, ?)",
                                           {keys.num, seq, std::string_view(d.type), now,
                                            std::string_view(append.data[i]), tail}));
      DSH_RETURN_IF_ERROR(UpdateHeaderOf(tx, id, d));
    }
    // By the integer key (not UPDATE ... RETURNING: SQLite takes a much
    // slower path for RETURNING when an indexed column, updated_at, changes).
    DSH_RETURN_IF_ERROR(tx.Exec("UPDATE sessions SET last_seq = ?, recent_tail = ?, "
                                "updated_at = CASE WHEN updated_at > ? THEN updated_at ELSE ? END WHERE num = ?",
                                {seq, tail, now, now, keys.num})
                            .status());
  }
  // Only now are the drafts consumed: a job that was contended runs again
  // (store::Database), with its drafts whole. On PostgreSQL the job may also
  // run again after it returned (store::JobRerun): there they are copied.
  const bool keep = tx.dialect() == store::Dialect::kPostgres;
  std::vector<Event> out;
  out.reserve(append.drafts.size());
  seq = keys.last_seq;
  for (EventDraft& d : append.drafts) {
    out.push_back(keep ? Event{++seq, d.type, now, d.data} : Event{++seq, std::move(d.type), now, std::move(d.data)});
  }
  return out;
}

Result<Event> EventFromStored(const std::string& session_id, int64_t seq, std::string type, int64_t at,
                              std::string_view data) {
  auto parsed = ParseJson(data);
  if (!parsed.ok() || !parsed->is_object()) {
    return Status(codes::kCorruptEvent, "session " + session_id + " seq " + std::to_string(seq) + " (" + type +
                                            "): stored data is not a JSON object" +
                                            (parsed.ok() ? "" : " (" + parsed.status().message() + ")"));
  }
  return Event{seq, std::move(type), at, std::move(parsed).value()};
}

// The session's events in `events_recent` with seq > after_seq, oldest first,
// at most `limit`, appended to `out`; the caller has read every event up to
// after_seq from `events`, so all later ones are here. The table has no index
// by session (each commit would dirty an index page per few sessions):
// every row links to the session's previous row (`prev`), and
// `sessions.recent_tail` names the newest. The walk goes back from the newest
// row to after_seq + 1; a row that is missing or is not the seq expected is
// a damaged log, reported like an undecodable event.
Status ReadRecentTx(Tx& tx, const std::string& id, const EventKeys& keys, int64_t after_seq, int64_t limit,
                    std::vector<Event>& out) {
  struct Stored {
    int64_t seq;
    std::string type;
    int64_t at;
    std::string data;
  };
  std::deque<Stored> oldest;  // newest first; the `limit` oldest seen so far
  int64_t row_id = keys.recent_tail;
  for (int64_t expect = keys.last_seq; expect > after_seq; --expect) {
    bool found = false;
    DSH_RETURN_IF_ERROR(
        tx.Query("SELECT session_num, seq, prev, type, at, data FROM events_recent WHERE id = ?", {row_id},
                 [&](const Row& row) {
                   if (row.Int(0) != keys.num || row.Int(1) != expect) return Status::Ok();
                   found = true;
                   row_id = row.Int(2);
                   oldest.push_back(Stored{expect, row.String(3), row.Int(4), row.String(5)});
                   if (static_cast<int64_t>(oldest.size()) > limit) oldest.pop_front();
                   return Status::Ok();
                 }));
    if (!found) {
      // A compaction that committed after this transaction's earlier reads
      // moved it, and every older one of the session, to `events` (a write
      // transaction on PostgreSQL sees what is committed when each statement
      // starts): read those from there.
      std::vector<Event> moved;
      DSH_RETURN_IF_ERROR(tx.Query(
          "SELECT seq, type, at, data FROM events WHERE session_num = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?",
          {keys.num, after_seq, expect, limit}, [&](const Row& row) -> Status {
            DSH_ASSIGN_OR_RETURN(Event e, EventFromStored(id, row.Int(0), row.String(1), row.Int(2), row.Text(3)));
            moved.push_back(std::move(e));
            return Status::Ok();
          }));
      const int64_t want = std::min(limit, expect - after_seq);
      if (static_cast<int64_t>(moved.size()) != want || moved.back().seq != after_seq + want) {
        return Status(codes::kCorruptEvent,
                      "session " + id + " seq " + std::to_string(expect) + ": the event is missing from the log");
      }
      for (Event& e : moved) out.push_back(std::move(e));
      int64_t room = limit - want;
      for (auto it = oldest.rbegin(); it != oldest.rend() && room > 0; ++it, --room) {
        DSH_ASSIGN_OR_RETURN(Event e, EventFromStored(id, it->seq, std::move(it->type), it->at, it->data));
        out.push_back(std::move(e));
      }
      return Status::Ok();
    }
  }
  for (auto it = oldest.rbegin(); it != oldest.rend(); ++it) {
    DSH_ASSIGN_OR_RETURN(Event e, EventFromStored(id, it->seq, std::move(it->type), it->at, it->data));
    out.push_back(std::move(e));
  }
  return Status::Ok();
}

// A session's events live in `events` (compacted, clustered by session) and
// `events_recent` (newest, in append order). Compaction moves the oldest rows
// first, so every seq of a session in `events` is below every seq of it in
// `events_recent`: read the first table, then continue in the second.
Result<std::vector<Event>> ReadEventsTx(Tx& tx, const std::string& id, int64_t after_seq, int64_t limit) {
  if (limit <= 0) return InvalidArguments("limit must be positive");
  DSH_ASSIGN_OR_RETURN(EventKeys keys, SessionKeys(tx, id));
  std::vector<Event> out;
  DSH_RETURN_IF_ERROR(
      tx.Query("SELECT seq, type, at, data FROM events WHERE session_num = ? AND seq > ? ORDER BY seq LIMIT ?",
               {keys.num, after_seq, limit}, [&](const Row& row) -> Status {
                 DSH_ASSIGN_OR_RETURN(Event e, EventFromStored(id, row.Int(0), row.String(1), row.Int(2), row.Text(3)));
                 out.push_back(std::move(e));
                 return Status::Ok();
               }));
  auto have = static_cast<int64_t>(out.size());
  if (have < limit) {
    DSH_RETURN_IF_ERROR(ReadRecentTx(tx, id, keys, have > 0 ? out.back().seq : after_seq, limit - have, out));
  }
  return out;
}

Result<std::vector<SessionHeader>> ListRecentTx(Tx& tx, int64_t limit) {
  if (limit <= 0) return InvalidArguments("limit must be positive");
  std::vector<SessionHeader> out;
  DSH_RETURN_IF_ERROR(tx.Query(std::string("SELECT ") + kHeaderColumns +
                                   " FROM sessions ORDER BY updated_at DESC, id ASC LIMIT ?",
                               {limit}, [&](const Row& row) {
                                 out.push_back(HeaderFromRow(row));
                                 return Status::Ok();
                               }));
  return out;
}

// The seq of the last turn/start or turn/end at or before `seq` (0: none),
// and whether it is a start: then `seq` lies inside that turn.
struct TurnMark {
  int64_t seq = 0;
  bool start = false;
};
Result<TurnMark> LastTurnMarkTx(Tx& tx, int64_t session_num, int64_t seq) {
  TurnMark mark;
  // events_recent holds the session's newest seqs: look there first. (In
  // that order a row a concurrent compaction moves between the two reads is
  // seen in one of them.)
  for (const char* table : {"events_recent", "events"}) {
    DSH_RETURN_IF_ERROR(tx.Query(std::string("SELECT seq, type FROM ") + table +
                                     " WHERE session_num = ? AND seq <= ? AND type IN (?, ?) ORDER BY seq DESC LIMIT 1",
                                 {session_num, seq, event_types::kTurnStart, event_types::kTurnEnd},
                                 [&](const Row& row) {
                                   mark = {row.Int(0), row.String(1) == event_types::kTurnStart};
                                   return Status::Ok();
                                 }));
    if (mark.seq > 0) break;
  }
  return mark;
}

// The seq of the first turn/end after `seq`, if any.
Result<std::optional<int64_t>> NextTurnEndTx(Tx& tx, int64_t session_num, int64_t seq) {
  std::optional<int64_t> end;
  // events_recent first, then the earliest of both: a row a concurrent
  // compaction moves between the two reads is seen in one of them.
  for (const char* table : {"events_recent", "events"}) {
    DSH_RETURN_IF_ERROR(tx.Query(std::string("SELECT seq FROM ") + table +
                                     " WHERE session_num = ? AND seq > ? AND type = ? ORDER BY seq LIMIT 1",
                                 {session_num, seq, event_types::kTurnEnd}, [&](const Row& row) {
                                   end = end ? std::min(*end, row.Int(0)) : row.Int(0);
                                   return Status::Ok();
                                 }));
  }
  return end;
}

// The seed of a fork: `wanted` when it is a turn boundary of the parent
// (Fork in session_store.h), else the parent's last boundary.
Result<int64_t> ForkSeedTx(Tx& tx, const std::string& parent_id, const EventKeys& parent,
                           std::optional<int64_t> wanted) {
  const int64_t seed = wanted.value_or(parent.last_seq);
  if (seed < 0 || seed > parent.last_seq) {
    return InvalidArguments("seed length " + std::to_string(seed) + " is outside 0.." +
                            std::to_string(parent.last_seq) + " of session " + parent_id);
  }
  DSH_ASSIGN_OR_RETURN(TurnMark mark, LastTurnMarkTx(tx, parent.num, seed));
  if (!mark.start) return seed;
  const int64_t before = mark.seq - 1;
  if (!wanted) return before;
  DSH_ASSIGN_OR_RETURN(std::optional<int64_t> end, NextTurnEndTx(tx, parent.num, seed));
  return InvalidArguments("seed length " + std::to_string(seed) + " ends inside the turn of session " + parent_id +
                          " that starts at seq " + std::to_string(mark.seq) + "; the nearest turn boundaries are " +
                          std::to_string(before) +
                          (end ? " and " + std::to_string(*end) : " (that turn has not ended yet)"));
}

Result<SessionHeader> ForkTx(Tx& tx, const std::string& parent_id, std::optional<int64_t> wanted,
                             const NewSession& child, int64_t now, const Clock& clock) {
  DSH_ASSIGN_OR_RETURN(EventKeys parent, SessionKeys(tx, parent_id));
  DSH_ASSIGN_OR_RETURN(const int64_t seed_length, ForkSeedTx(tx, parent_id, parent, wanted));
  DSH_ASSIGN_OR_RETURN(SessionHeader h, CreateTx(tx, child, now, clock, parent_id, seed_length));
  DSH_ASSIGN_OR_RETURN(EventKeys child_keys, SessionKeys(tx, h.id));
  const int64_t parent_num = parent.num, child_num = child_keys.num;
  // The copy lands in `events` directly. From `events_recent` it is a scan of
  // that table (no index by session), which compaction keeps small. One
  // statement, so that it reads both tables at one moment even while a
  // compaction moves rows between them.
  DSH_RETURN_IF_ERROR(tx.Exec("INSERT INTO events (session_num, seq, type, at, data)"
                              " SELECT ?, seq, type, at, data FROM events WHERE session_num = ? AND seq <= ?"
                              " UNION ALL"
                              " SELECT ?, seq, type, at, data FROM events_recent WHERE session_num = ? AND seq <= ?",
                              {child_num, parent_num, seed_length, child_num, parent_num, seed_length})
                          .status());
  // Title snapshot of the inherited prefix.
  std::vector<std::pair<std::string, std::optional<std::string>>> titles;
  DSH_RETURN_IF_ERROR(tx.Query(
      "SELECT type, data, seq FROM events WHERE session_num = ? AND seq <= ? AND type IN (?, ?, ?) ORDER BY seq",
      {child_num, seed_length, event_types::kTitleUser, event_types::kTitleGenerated,
       event_types::kTitleFallback},
      [&](const Row& row) -> Status {
        auto data = ParseJson(row.Text(1));
        if (data.ok() && data->is_object()) titles.emplace_back(row.String(0), TitleOf(*data));
        return Status::Ok();
      }));
  for (const auto& [type, title] : titles) DSH_RETURN_IF_ERROR(UpdateTitle(tx, h.id, type, title));
  return h;
}

Result<std::map<std::string, Titles>> ReadTitlesTx(Tx& tx, const std::vector<std::string>& ids) {
  std::map<std::string, Titles> out;
  constexpr size_t kChunk = 256;
  for (size_t start = 0; start < ids.size(); start += kChunk) {
    size_t n = std::min(kChunk, ids.size() - start);
    // Pad to a power of two so only a handful of distinct statements exist.
    size_t padded = 1;
    while (padded < n) padded *= 2;
    std::string sql = "SELECT id, title_user, title_generated, title_fallback FROM sessions WHERE id IN (";
    std::vector<Value> params;
    params.reserve(padded);
    for (size_t i = 0; i < padded; ++i) {
      sql += i ? ", ?" : "?";
      params.emplace_back(std::string_view(ids[start + std::min(i, n - 1)]));
    }
    sql += ")";
    DSH_RETURN_IF_ERROR(tx.Query(sql, params, [&](const Row& row) {
      Titles t{row.OptString(1), row.OptString(2), row.OptString(3)};
      out[row.String(0)] = std::move(t);
      return Status::Ok();
    }));
  }
  return out;
}

struct Compacted {
  int64_t moved = 0;
  bool drained = false;  // no recent event is left
};

// Moves the oldest recent events into `events`: at most `max_rows`, and only
// as many as fit an estimate of `max_pages` pages written to `events` (one
// leaf per session in the slice, plus the events' bytes), the first at least.
Result<Compacted> CompactTx(Tx& tx, int64_t max_rows, int64_t max_pages) {
  constexpr int64_t kPageBytes = 4096;
  std::optional<int64_t> hi;  // the newest row that fits
  int64_t scanned = 0, bytes = 0;
  bool full = false;
  std::unordered_set<int64_t> sessions;
  DSH_RETURN_IF_ERROR(tx.Query("SELECT id, session_num, length(data) FROM events_recent ORDER BY id LIMIT ?",
                               {max_rows}, [&](const Row& row) {
                                 ++scanned;
                                 if (full) return Status::Ok();
                                 sessions.insert(row.Int(1));
                                 bytes += row.Int(2);
                                 auto pages = static_cast<int64_t>(sessions.size()) + bytes / kPageBytes;
                                 if (hi && pages > max_pages) {
                                   full = true;
                                   return Status::Ok();
                                 }
                                 hi = row.Int(0);
                                 return Status::Ok();
                               }));
  if (!hi) return Compacted{0, true};
  if (tx.dialect() == Dialect::kPostgres) {
    // One statement: a row committed by another host between a copy and a
    // delete would be deleted uncopied, and a second compactor's rows are
    // skipped once the first deleted them (it waits for them, then finds
    // them gone). Rows below `hi` still being written stay for the next run.
    DSH_ASSIGN_OR_RETURN(int64_t moved,
                         tx.Exec("WITH moved AS (DELETE FROM events_recent WHERE id <= ?"
                                 " RETURNING session_num, seq, type, at, data)"
                                 " INSERT INTO events (session_num, seq, type, at, data)"
                                 " SELECT session_num, seq, type, at, data FROM moved",
                                 {*hi}));
    return Compacted{moved, !full && scanned < max_rows};
  }
  DSH_RETURN_IF_ERROR(tx.Exec("INSERT INTO events (session_num, seq, type, at, data) "
                              "SELECT session_num, seq, type, at, data FROM events_recent WHERE id <= ? ORDER BY id",
                              {*hi})
                          .status());
  DSH_ASSIGN_OR_RETURN(int64_t moved, tx.Exec("DELETE FROM events_recent WHERE id <= ?", {*hi}));
  return Compacted{moved, !full && scanned < max_rows};
}

}  // namespace

std::vector<store::Migration> SessionStore::Migrations() {
  return {
      {"session",
       1,
       {
           "CREATE TABLE sessions ("
           " num /*sqlite: INTEGER PRIMARY KEY*/ /*postgres: BIGSERIAL PRIMARY KEY*/,"
           " id TEXT NOT NULL UNIQUE,"
           " created_at BIGINT NOT NULL,"
           " updated_at BIGINT NOT NULL,"
           " cwd TEXT,"
           " preset TEXT,"
           " provider TEXT NOT NULL,"
           " model TEXT NOT NULL,"
           " reasoning_effort TEXT,"
           " time_zone TEXT NOT NULL,"
           " parent_id TEXT,"
           " seed_length BIGINT NOT NULL,"
           " delegation_depth BIGINT NOT NULL,"
           " origin TEXT NOT NULL,"
           " last_seq BIGINT NOT NULL,"
           " title_user TEXT,"
           " title_generated TEXT,"
           " title_fallback TEXT)",
           "CREATE INDEX sessions_by_update ON sessions (updated_at DESC, id)",
           "CREATE TABLE events ("
           " session_num BIGINT NOT NULL,"
           " seq BIGINT NOT NULL,"
           " type TEXT NOT NULL,"
           " at BIGINT NOT NULL,"
           " data TEXT NOT NULL,"
           " PRIMARY KEY (session_num, seq)) /*sqlite: WITHOUT ROWID*/",
           // New events land here, in append order, so a commit of many
           // sessions' appends writes a few tail pages instead of one page
           // per session; CompactTx moves them to `events` in bulk.
           "CREATE TABLE events_recent ("
           " id /*sqlite: INTEGER PRIMARY KEY*/ /*postgres: BIGSERIAL PRIMARY KEY*/,"
           " session_num BIGINT NOT NULL,"
           " seq BIGINT NOT NULL,"
           " type TEXT NOT NULL,"
           " at BIGINT NOT NULL,"
           " data TEXT NOT NULL)",
           "CREATE UNIQUE INDEX events_recent_by_session ON events_recent (session_num, seq)",
       }},
      // v2: `events_recent` loses its index by session (one dirty index page
      // per few sessions in every commit); each row links to the session's
      // previous one instead, and `sessions.recent_tail` names the newest.
      // Existing rows move to `events` first, so no chain is needed for them.
      {"session",
       2,
       {
           "INSERT INTO events (session_num, seq, type, at, data) "
           "SELECT session_num, seq, type, at, data FROM events_recent ORDER BY id",
           "DELETE FROM events_recent",
           "DROP INDEX events_recent_by_session",
           "ALTER TABLE events_recent ADD COLUMN prev BIGINT NOT NULL DEFAULT 0",
           "ALTER TABLE sessions ADD COLUMN recent_tail BIGINT NOT NULL DEFAULT 0",
       }},
      // v3: where a session's conversation blocks begin, kept by the
      // sessions plugin so that session_read after a restart does not read
      // the whole log again (ReadBlockChunksAsync).
      {"session",
       3,
       {
           "CREATE TABLE conversation_blocks ("
           " session_id TEXT NOT NULL,"
           " chunk BIGINT NOT NULL,"
           " rules BIGINT NOT NULL,"
           " starts TEXT NOT NULL,"
           " PRIMARY KEY (session_id, chunk))",
       }},
      // v4: a session the person archived (session/archived events) leaves
      // the default session list; the column keeps the latest choice.
      {"session", 4, {"ALTER TABLE sessions ADD COLUMN archived BIGINT NOT NULL DEFAULT 0"}},
  };
}

template <typename T>
void SessionStore::RunAsync(const std::function<void(store::Database::Job, store::Database::Done)>& submit,
                            std::function<Result<T>(store::Tx&)> job, Callback<T> done) {
  auto out = std::make_shared<std::optional<T>>();
  submit(
      [job = std::move(job), out](store::Tx& tx) -> Status {
        auto r = job(tx);
        if (!r.ok()) return r.status();
        *out = std::move(r).value();
        return Status::Ok();
      },
      [out, done = std::move(done)](Status st) {
        if (!st.ok()) return done(st);
        done(std::move(**out));
      });
}

template <typename T>
void SessionStore::WriteAsync(std::function<Result<T>(store::Tx&)> job, Callback<T> done,
                              store::JobIsolation isolation, store::JobRerun rerun) {
  RunAsync<T>(
      [&](store::Database::Job j, store::Database::Done d) { db_.Write(std::move(j), std::move(d), isolation, rerun); },
              std::move(job), std::move(done));
}

template <typename T>
void SessionStore::ReadAsync(std::function<Result<T>(store::Tx&)> job, Callback<T> done) {
  RunAsync<T>([&](store::Database::Job j, store::Database::Done d) { db_.Read(std::move(j), std::move(d)); },
              std::move(job), std::move(done));
}

Result<SessionHeader> SessionStore::Create(const NewSession& s) {
  return db_.WriteValue<SessionHeader>(
      [&](Tx& tx) { return CreateTx(tx, s, ToUnixMillis(clock_.Now()), clock_, kNoParent); });
}

void SessionStore::CreateAsync(NewSession s, Callback<SessionHeader> done) {
  CreateWithAsync(std::move(s), nullptr, std::move(done));
}

void SessionStore::CreateWithAsync(NewSession s, CreateAlsoFn also, Callback<SessionHeader> done) {
  WriteAsync<SessionHeader>(
      [this, s = std::move(s), also = std::move(also)](Tx& tx) -> Result<SessionHeader> {
        DSH_ASSIGN_OR_RETURN(SessionHeader h, CreateTx(tx, s, ToUnixMillis(clock_.Now()), clock_, kNoParent));
        if (also) DSH_RETURN_IF_ERROR(also(tx, h));
        return h;
      },
      std::move(done));
}

Result<std::vector<Event>> SessionStore::Append(const std::string& id, std::vector<EventDraft> events) {
  // Through the async path so the hub sees appends in commit order.
  std::promise<Result<std::vector<Event>>> promise;
  auto future = promise.get_future();
  AppendWithAsync(id, std::move(events), nullptr, [&promise](Result<std::vector<Event>> r) { promise.set_value(std::move(r)); });
  return future.get();
}

void SessionStore::AppendAsync(std::string id, std::vector<EventDraft> events, Callback<std::vector<Event>> done) {
  AppendWithAsync(std::move(id), std::move(events), nullptr, std::move(done));
}

void SessionStore::AppendWithAsync(std::string id, std::vector<EventDraft> events, AlsoFn also,
                                   Callback<std::vector<Event>> done, FenceFn fence) {
  size_t n = events.size();
  auto published = Published(id, std::move(done));
  // AppendTx checks everything (drafts, the session) before its first write,
  // so a plain append needs no savepoint of its own; `also` may fail after
  // writing, so with it the append keeps one.
  auto isolation = also ? store::JobIsolation::kSavepoint : store::JobIsolation::kFailsBeforeWriting;
  WriteAsync<std::vector<Event>>(
      [this, id = std::move(id), append = PrepareAppend(std::move(events)), also = std::move(also),
       fence = std::move(fence)](Tx& tx) mutable -> Result<std::vector<Event>> {
        DSH_ASSIGN_OR_RETURN(auto stored, AppendTx(tx, id, append, ToUnixMillis(clock_.Now()), fence));
        Status rest = also ? also(tx, stored) : Status::Ok();
        // Streams of this session on other hosts read the new events.
        if (rest.ok()) rest = tx.Notify(kEventsChannel, id);
        if (!rest.ok()) {
          // Rolled back: the drafts go back where they came from, whole for
          // a run again (a contended job runs again, store::Database).
          for (size_t i = 0; i < stored.size(); ++i) {
            append.drafts[i].type = std::move(stored[i].type);
            append.drafts[i].data = std::move(stored[i].data);
          }
          return rest;
        }
        return stored;
      },
      std::move(published), isolation, store::JobRerun::kAlsoAfterSuccess);
  NoteAppended(n);  // queued after the append, so a compaction it starts includes it
}

SessionStore::Callback<std::vector<Event>> SessionStore::Published(const std::string& session_id,
                                                                    Callback<std::vector<Event>> done) {
  if (hub_ == nullptr) return done;
  return [hub = hub_, session_id, done = std::move(done)](Result<std::vector<Event>> r) {
    if (r.ok()) hub->Publish(session_id, *r);
    done(std::move(r));
  };
}

SessionStore::SessionStore(store::Database& db, const Clock& clock, EventHub* hub) : db_(db), clock_(clock), hub_(hub) {
  if (hub_ != nullptr) {
    remote_appends_ = db_.Subscribe(std::string(kEventsChannel),
                                    [hub = hub_](std::string_view session_id) { hub->PublishRemote(std::string(session_id)); });
  }
}

SessionStore::~SessionStore() {
  std::unique_lock lock(compaction_mu_);
  compaction_cv_.wait(lock, [&] { return !compacting_; });
}

namespace {

// At this write load the writer is saturated: compaction
// then moves large slices (fewer pages written per event), else small ones
// (an append waits behind about a millisecond of it at most).
constexpr size_t kSaturatedLoad = 32;

}  // namespace

void SessionStore::NoteAppended(size_t n) {
  int64_t backlog = backlog_.fetch_add(static_cast<int64_t>(n)) + static_cast<int64_t>(n);
  if (backlog < static_cast<int64_t>(kCompactSlice)) return;
  if (backlog < static_cast<int64_t>(kCompactEvery) && db_.write_load() >= kSaturatedLoad) return;
  {
    std::lock_guard lock(compaction_mu_);
    if (compacting_) return;  // one compaction in flight at a time
    compacting_ = true;
  }
  CompactionStep();
}

void SessionStore::CompactionStep() {
  const int64_t slice = static_cast<int64_t>(db_.write_load() >= kSaturatedLoad ? kCompactEvery : kCompactSlice);
  auto done = std::make_shared<Compacted>();
  db_.Write(
      [done, slice](Tx& tx) -> Status {
        DSH_ASSIGN_OR_RETURN(*done, CompactTx(tx, slice, kCompactPages));
        return Status::Ok();
      },
      [this, done](Status st) {
        if (!st.ok() && st.code() != codes::kShuttingDown) {
          spdlog::warn("event compaction failed (it will be retried): {}", st.ToString());
        }
        if (st.ok()) {
          int64_t left = done->drained ? (backlog_ = 0) : (backlog_ -= done->moved);
          if (left >= static_cast<int64_t>(kCompactSlice)) return CompactionStep();
        }
        std::lock_guard lock(compaction_mu_);
        compacting_ = false;
        compaction_cv_.notify_all();
      });
}

Result<int64_t> SessionStore::Compact(int64_t max_rows, int64_t max_pages) {
  return db_.WriteValue<int64_t>([&](Tx& tx) -> Result<int64_t> {
    DSH_ASSIGN_OR_RETURN(Compacted done, CompactTx(tx, max_rows, max_pages));
    return done.moved;
  });
}

Result<SessionHeader> SessionStore::Get(const std::string& id) {
  return db_.ReadValue<SessionHeader>([&](Tx& tx) { return GetTx(tx, id); });
}

void SessionStore::GetAsync(std::string id, Callback<SessionHeader> done) {
  ReadAsync<SessionHeader>([id = std::move(id)](Tx& tx) { return GetTx(tx, id); }, std::move(done));
}

Result<std::vector<Event>> SessionStore::ReadEventsIn(Tx& tx, const std::string& id, int64_t after_seq,
                                                      int64_t limit) {
  return ReadEventsTx(tx, id, after_seq, limit);
}

Result<std::vector<Event>> SessionStore::ReadEvents(const std::string& id, int64_t after_seq, int64_t limit) {
  return db_.ReadValue<std::vector<Event>>([&](Tx& tx) { return ReadEventsTx(tx, id, after_seq, limit); });
}

void SessionStore::ReadEventsAsync(std::string id, int64_t after_seq, int64_t limit,
                                   Callback<std::vector<Event>> done) {
  ReadAsync<std::vector<Event>>(
      [id = std::move(id), after_seq, limit](Tx& tx) { return ReadEventsTx(tx, id, after_seq, limit); },
      std::move(done));
}

void SessionStore::ReadBlockChunksAsync(std::string session_id, int64_t rules,
                                        Callback<std::vector<std::string>> done) {
  ReadAsync<std::vector<std::string>>(
      [id = std::move(session_id), rules](Tx& tx) -> Result<std::vector<std::string>> {
        std::vector<std::string> chunks;
        bool gap = false;  // the chunks after a missing one are of no use
        DSH_RETURN_IF_ERROR(tx.Query(
            "SELECT chunk, starts FROM conversation_blocks WHERE session_id = ? AND rules = ? ORDER BY chunk",
            {std::string_view(id), rules}, [&](const store::Row& row) {
              gap = gap || row.Int(0) != static_cast<int64_t>(chunks.size());
              if (!gap) chunks.push_back(row.String(1));
              return Status::Ok();
            }));
        return chunks;
      },
      [done = std::move(done)](Result<std::vector<std::string>> r) { done(std::move(r)); });
}

void SessionStore::SaveBlockChunksAsync(std::string session_id, int64_t rules, int64_t first_chunk,
                                        std::vector<std::string> chunks, std::function<void(Status)> done) {
  db_.Write(
      [id = std::move(session_id), rules, first_chunk, chunks = std::move(chunks)](Tx& tx) -> Status {
        for (size_t i = 0; i < chunks.size(); ++i) {
          DSH_RETURN_IF_ERROR(tx.Exec("INSERT INTO conversation_blocks (session_id, chunk, rules, starts) "
                                      "VALUES (?, ?, ?, ?) ON CONFLICT (session_id, chunk) DO UPDATE SET "
                                      "rules = excluded.rules, starts = excluded.starts",
                                      {std::string_view(id), first_chunk + static_cast<int64_t>(i), rules,
                                       std::string_view(chunks[i])})
                                  .status());
        }
        return Status::Ok();
      },
      std::move(done));
}

void SessionStore::DropBlockChunksAsync(std::string session_id, std::function<void(Status)> done) {
  db_.Write(
      [id = std::move(session_id)](Tx& tx) {
        return tx.Exec("DELETE FROM conversation_blocks WHERE session_id = ?", {std::string_view(id)}).status();
      },
      std::move(done));
}

Result<std::vector<SessionHeader>> SessionStore::ListRecent(int64_t limit) {
  return db_.ReadValue<std::vector<SessionHeader>>([&](Tx& tx) { return ListRecentTx(tx, limit); });
}

void SessionStore::ListRecentAsync(int64_t limit, Callback<std::vector<SessionHeader>> done) {
  ReadAsync<std::vector<SessionHeader>>([limit](Tx& tx) { return ListRecentTx(tx, limit); }, std::move(done));
}

Result<std::vector<std::string>> SessionStore::SessionsWithEventType(const std::string& type) {
  return db_.ReadValue<std::vector<std::string>>([&](Tx& tx) -> Result<std::vector<std::string>> {
    std::vector<std::string> ids;
    DSH_RETURN_IF_ERROR(tx.Query(
        "SELECT id FROM sessions WHERE num IN (SELECT session_num FROM events WHERE type = ?"
        " UNION SELECT session_num FROM events_recent WHERE type = ?) ORDER BY id",
        {std::string_view(type), std::string_view(type)}, [&](const Row& row) {
          ids.push_back(row.String(0));
          return Status::Ok();
        }));
    return ids;
  });
}

Result<SessionHeader> SessionStore::Fork(const std::string& parent_id, std::optional<int64_t> seed_length,
                                         const NewSession& child) {
  return db_.WriteValue<SessionHeader>(
      [&](Tx& tx) { return ForkTx(tx, parent_id, seed_length, child, ToUnixMillis(clock_.Now()), clock_); });
}

void SessionStore::ForkAsync(std::string parent_id, std::optional<int64_t> seed_length, NewSession child,
                             Callback<SessionHeader> done) {
  WriteAsync<SessionHeader>(
      [this, parent_id = std::move(parent_id), seed_length, child = std::move(child)](Tx& tx) {
        return ForkTx(tx, parent_id, seed_length, child, ToUnixMillis(clock_.Now()), clock_);
      },
      std::move(done));
}

Result<std::map<std::string, Titles>> SessionStore::ReadTitles(const std::vector<std::string>& ids) {
  return db_.ReadValue<std::map<std::string, Titles>>([&](Tx& tx) { return ReadTitlesTx(tx, ids); });
}

void SessionStore::ReadTitlesAsync(std::vector<std::string> ids, Callback<std::map<std::string, Titles>> done) {
  ReadAsync<std::map<std::string, Titles>>([ids = std::move(ids)](Tx& tx) { return ReadTitlesTx(tx, ids); },
                                          std::move(done));
}

}  // namespace dsh::session
