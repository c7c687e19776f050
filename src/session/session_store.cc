#include "session/session_store.h"

#include <future>

#include <spdlog/spdlog.h>

#include "base/ids.h"
#include "time/time_zone.h"

namespace dsh::session {
namespace {

using store::Row;
using store::Tx;
using store::Value;

constexpr const char* kHeaderColumns =
    "id, created_at, updated_at, cwd, preset, provider, model, reasoning_effort, time_zone, parent_id, "
    "seed_length, delegation_depth, origin, last_seq";

std::optional<std::string> OptText(const Row& row, int c) {
  if (row.IsNull(c)) return std::nullopt;
  return row.String(c);
}

Value OptValue(const std::optional<std::string>& s) {
  if (!s) return nullptr;
  return std::string_view(*s);
}

SessionHeader HeaderFromRow(const Row& row) {
  SessionHeader h;
  h.id = row.String(0);
  h.created_at = row.Int(1);
  h.updated_at = row.Int(2);
  h.cwd = OptText(row, 3);
  h.preset = OptText(row, 4);
  h.route.provider = row.String(5);
  h.route.model = row.String(6);
  h.route.reasoning_effort = OptText(row, 7);
  h.time_zone = row.String(8);
  h.parent_id = OptText(row, 9);
  h.seed_length = row.Int(10);
  h.delegation_depth = row.Int(11);
  h.origin = row.String(12);
  h.last_seq = row.Int(13);
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

// The internal integer key of a session (events are keyed by it: shorter
// rows and index entries than the text id). not_found when unknown.
Result<int64_t> SessionNum(Tx& tx, const std::string& id) {
  std::optional<int64_t> num;
  DSH_RETURN_IF_ERROR(tx.Query("SELECT num FROM sessions WHERE id = ?", {std::string_view(id)}, [&](const Row& row) {
    num = row.Int(0);
    return Status::Ok();
  }));
  if (!num) return Unknown(id);
  return *num;
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

Result<SessionHeader> CreateTx(Tx& tx, const NewSession& s, int64_t now, const Clock& clock,
                               const std::optional<std::string>& parent_id = std::nullopt, int64_t seed_length = 0) {
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
    if (it == d.data.end() || !it->is_string() || it->get<std::string>().empty()) {
      return InvalidArguments("a '" + d.type + "' event needs a non-empty string `title`");
    }
  }
  return Status::Ok();
}

Status UpdateTitle(Tx& tx, const std::string& id, std::string_view type, const std::string& title) {
  const char* column = TitleColumn(type);
  if (column == nullptr) return Status::Ok();
  std::string sql = std::string("UPDATE sessions SET ") + column + " = ? WHERE id = ?";
  return tx.Exec(sql, {std::string_view(title), std::string_view(id)}).status();
}

// Every check (drafts, the session) comes before the first write: appends
// run without a savepoint of their own (JobIsolation::kFailsBeforeWriting),
// so after a write only a storage failure may end this with an error.
Result<std::vector<Event>> AppendTx(Tx& tx, const std::string& id, std::vector<EventDraft>& drafts, int64_t now) {
  if (drafts.empty()) return InvalidArguments("nothing to append");
  for (auto& d : drafts) {
    if (d.data.is_null()) d.data = Json::object();  // `{}` in C++ brace-init is null
  }
  for (const auto& d : drafts) DSH_RETURN_IF_ERROR(ValidateDraft(d));
  auto n = static_cast<int64_t>(drafts.size());
  // Look the session up by its text id once, then update it by its integer
  // key (not UPDATE ... RETURNING: SQLite takes a much slower path for
  // RETURNING when an indexed column, updated_at, changes).
  std::optional<int64_t> last;
  int64_t num = 0;
  DSH_RETURN_IF_ERROR(
      tx.Query("SELECT num, last_seq FROM sessions WHERE id = ?", {std::string_view(id)}, [&](const Row& row) {
        num = row.Int(0);
        last = row.Int(1) + n;
        return Status::Ok();
      }));
  if (!last) return Unknown(id);
  DSH_RETURN_IF_ERROR(tx.Exec("UPDATE sessions SET last_seq = ?, "
                              "updated_at = CASE WHEN updated_at > ? THEN updated_at ELSE ? END WHERE num = ?",
                              {*last, now, now, num})
                          .status());
  std::vector<Event> out;
  out.reserve(drafts.size());
  int64_t seq = *last - n;
  for (auto& d : drafts) {  // consumed: the drafts move into the result
    ++seq;
    std::string data = DumpJson(d.data);
    DSH_RETURN_IF_ERROR(tx.Exec("INSERT INTO events_recent (session_num, seq, type, at, data) VALUES (?, ?, ?, ?, ?)",
                                {num, seq, std::string_view(d.type), now, std::string_view(data)})
                            .status());
    if (TitleColumn(d.type) != nullptr) {
      DSH_RETURN_IF_ERROR(UpdateTitle(tx, id, d.type, d.data.at("title").get<std::string>()));
    }
    out.push_back(Event{seq, std::move(d.type), now, std::move(d.data)});
  }
  return out;
}

Result<Event> EventFromRow(const std::string& session_id, const Row& row) {
  Event e;
  e.seq = row.Int(0);
  e.type = row.String(1);
  e.at = row.Int(2);
  auto data = ParseJson(row.Text(3));
  if (!data.ok() || !data->is_object()) {
    return Status(codes::kCorruptEvent, "session " + session_id + " seq " + std::to_string(e.seq) + " (" + e.type +
                                            "): stored data is not a JSON object" +
                                            (data.ok() ? "" : " (" + data.status().message() + ")"));
  }
  e.data = std::move(data).value();
  return e;
}

// A session's events live in `events` (compacted, clustered by session) and
// `events_recent` (newest, in append order). Compaction moves the oldest rows
// first, so every seq of a session in `events` is below every seq of it in
// `events_recent`: read the first table, then continue in the second.
Result<std::vector<Event>> ReadEventsTx(Tx& tx, const std::string& id, int64_t after_seq, int64_t limit) {
  if (limit <= 0) return InvalidArguments("limit must be positive");
  DSH_ASSIGN_OR_RETURN(int64_t num, SessionNum(tx, id));
  std::vector<Event> out;
  auto collect = [&](const Row& row) -> Status {
    DSH_ASSIGN_OR_RETURN(Event e, EventFromRow(id, row));
    out.push_back(std::move(e));
    return Status::Ok();
  };
  DSH_RETURN_IF_ERROR(
      tx.Query("SELECT seq, type, at, data FROM events WHERE session_num = ? AND seq > ? ORDER BY seq LIMIT ?",
               {num, after_seq, limit}, collect));
  auto have = static_cast<int64_t>(out.size());
  if (have < limit) {
    int64_t after = have > 0 ? out.back().seq : after_seq;
    DSH_RETURN_IF_ERROR(tx.Query(
        "SELECT seq, type, at, data FROM events_recent WHERE session_num = ? AND seq > ? ORDER BY seq LIMIT ?",
        {num, after, limit - have}, collect));
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

Result<SessionHeader> ForkTx(Tx& tx, const std::string& parent_id, int64_t seed_length, const NewSession& child,
                             int64_t now, const Clock& clock) {
  DSH_ASSIGN_OR_RETURN(SessionHeader parent, GetTx(tx, parent_id));
  if (seed_length < 0 || seed_length > parent.last_seq) {
    return InvalidArguments("seed length " + std::to_string(seed_length) + " is outside 0.." +
                            std::to_string(parent.last_seq) + " of session " + parent_id);
  }
  DSH_ASSIGN_OR_RETURN(SessionHeader h, CreateTx(tx, child, now, clock, parent_id, seed_length));
  DSH_ASSIGN_OR_RETURN(int64_t parent_num, SessionNum(tx, parent_id));
  DSH_ASSIGN_OR_RETURN(int64_t child_num, SessionNum(tx, h.id));
  for (const char* table : {"events", "events_recent"}) {
    std::string sql =
        std::string("INSERT INTO events (session_num, seq, type, at, data) SELECT ?, seq, type, at, data FROM ") +
        table + " WHERE session_num = ? AND seq <= ?";
    DSH_RETURN_IF_ERROR(tx.Exec(sql, {child_num, parent_num, seed_length}).status());
  }
  // Title snapshot of the inherited prefix.
  std::vector<std::pair<std::string, std::string>> titles;
  DSH_RETURN_IF_ERROR(tx.Query(
      "SELECT type, data, seq FROM events WHERE session_num = ? AND seq <= ? AND type IN (?, ?, ?) ORDER BY seq",
      {child_num, seed_length, event_types::kTitleUser, event_types::kTitleGenerated,
       event_types::kTitleFallback},
      [&](const Row& row) -> Status {
        auto data = ParseJson(row.Text(1));
        if (data.ok() && data->is_object() && data->contains("title") && (*data)["title"].is_string()) {
          titles.emplace_back(row.String(0), (*data)["title"].get<std::string>());
        }
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
      Titles t{OptText(row, 1), OptText(row, 2), OptText(row, 3)};
      out[row.String(0)] = std::move(t);
      return Status::Ok();
    }));
  }
  return out;
}

// Moves up to `max_rows` of the oldest recent events into `events`; returns
// how many moved.
Result<int64_t> CompactTx(Tx& tx, int64_t max_rows) {
  std::optional<int64_t> lo;
  DSH_RETURN_IF_ERROR(tx.Query("SELECT MIN(id) FROM events_recent", {}, [&](const Row& row) {
    if (!row.IsNull(0)) lo = row.Int(0);
    return Status::Ok();
  }));
  if (!lo) return int64_t{0};
  int64_t hi = *lo + max_rows - 1;
  DSH_RETURN_IF_ERROR(tx.Exec("INSERT INTO events (session_num, seq, type, at, data) "
                              "SELECT session_num, seq, type, at, data FROM events_recent WHERE id <= ? ORDER BY id",
                              {hi})
                          .status());
  return tx.Exec("DELETE FROM events_recent WHERE id <= ?", {hi});
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
                              store::JobIsolation isolation) {
  RunAsync<T>([&](store::Database::Job j, store::Database::Done d) { db_.Write(std::move(j), std::move(d), isolation); },
              std::move(job), std::move(done));
}

template <typename T>
void SessionStore::ReadAsync(std::function<Result<T>(store::Tx&)> job, Callback<T> done) {
  RunAsync<T>([&](store::Database::Job j, store::Database::Done d) { db_.Read(std::move(j), std::move(d)); },
              std::move(job), std::move(done));
}

Result<SessionHeader> SessionStore::Create(const NewSession& s) {
  return db_.WriteValue<SessionHeader>(
      [&](Tx& tx) { return CreateTx(tx, s, ToUnixMillis(clock_.Now()), clock_); });
}

void SessionStore::CreateAsync(NewSession s, Callback<SessionHeader> done) {
  CreateWithAsync(std::move(s), nullptr, std::move(done));
}

void SessionStore::CreateWithAsync(NewSession s, CreateAlsoFn also, Callback<SessionHeader> done) {
  WriteAsync<SessionHeader>(
      [this, s = std::move(s), also = std::move(also)](Tx& tx) -> Result<SessionHeader> {
        DSH_ASSIGN_OR_RETURN(SessionHeader h, CreateTx(tx, s, ToUnixMillis(clock_.Now()), clock_));
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
                                   Callback<std::vector<Event>> done) {
  size_t n = events.size();
  auto published = Published(id, std::move(done));
  // AppendTx checks everything (drafts, the session) before its first write,
  // so a plain append needs no savepoint of its own; `also` may fail after
  // writing, so with it the append keeps one.
  auto isolation = also ? store::JobIsolation::kSavepoint : store::JobIsolation::kFailsBeforeWriting;
  WriteAsync<std::vector<Event>>(
      [this, id = std::move(id), events = std::move(events), also = std::move(also)](Tx& tx) mutable
      -> Result<std::vector<Event>> {
        DSH_ASSIGN_OR_RETURN(auto stored, AppendTx(tx, id, events, ToUnixMillis(clock_.Now())));
        if (also) DSH_RETURN_IF_ERROR(also(tx, stored));
        return stored;
      },
      std::move(published), isolation);
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
  auto moved = std::make_shared<int64_t>(0);
  db_.Write(
      [moved, slice](Tx& tx) -> Status {
        DSH_ASSIGN_OR_RETURN(*moved, CompactTx(tx, slice));
        return Status::Ok();
      },
      [this, moved, slice](Status st) {
        if (!st.ok() && st.code() != codes::kShuttingDown) {
          spdlog::warn("event compaction failed (it will be retried): {}", st.ToString());
        }
        if (st.ok()) {
          // Fewer rows than asked for: the table is drained.
          int64_t left = *moved < slice ? (backlog_ = 0) : (backlog_ -= *moved);
          if (left >= static_cast<int64_t>(kCompactSlice)) return CompactionStep();
        }
        std::lock_guard lock(compaction_mu_);
        compacting_ = false;
        compaction_cv_.notify_all();
      });
}

Result<int64_t> SessionStore::Compact(int64_t max_rows) {
  return db_.WriteValue<int64_t>([&](Tx& tx) { return CompactTx(tx, max_rows); });
}

Result<SessionHeader> SessionStore::Get(const std::string& id) {
  return db_.ReadValue<SessionHeader>([&](Tx& tx) { return GetTx(tx, id); });
}

void SessionStore::GetAsync(std::string id, Callback<SessionHeader> done) {
  ReadAsync<SessionHeader>([id = std::move(id)](Tx& tx) { return GetTx(tx, id); }, std::move(done));
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
        "SELECT s.id FROM sessions s WHERE EXISTS (SELECT 1 FROM events e WHERE e.session_num = s.num AND e.type = ?)"
        " OR EXISTS (SELECT 1 FROM events_recent r WHERE r.session_num = s.num AND r.type = ?) ORDER BY s.id",
        {std::string_view(type), std::string_view(type)}, [&](const Row& row) {
          ids.push_back(row.String(0));
          return Status::Ok();
        }));
    return ids;
  });
}

Result<SessionHeader> SessionStore::Fork(const std::string& parent_id, int64_t seed_length, const NewSession& child) {
  return db_.WriteValue<SessionHeader>(
      [&](Tx& tx) { return ForkTx(tx, parent_id, seed_length, child, ToUnixMillis(clock_.Now()), clock_); });
}

Result<std::map<std::string, Titles>> SessionStore::ReadTitles(const std::vector<std::string>& ids) {
  return db_.ReadValue<std::map<std::string, Titles>>([&](Tx& tx) { return ReadTitlesTx(tx, ids); });
}

void SessionStore::ReadTitlesAsync(std::vector<std::string> ids, Callback<std::map<std::string, Titles>> done) {
  ReadAsync<std::map<std::string, Titles>>([ids = std::move(ids)](Tx& tx) { return ReadTitlesTx(tx, ids); },
                                          std::move(done));
}

}  // namespace dsh::session
