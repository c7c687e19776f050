#include "plugins/loop/loop_registry.h"

#include <algorithm>
#include <array>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "agent/agent_store.h"

namespace dsh::plugins::loop {

using store::Row;
using store::Tx;
using store::OptValue;
using store::Value;

std::vector<store::Migration> Migrations() {
  return {
      {"loop",
       1,
       {
           "CREATE TABLE loops ("
           " loop_id TEXT PRIMARY KEY,"
           " prompt TEXT NOT NULL,"
           " schedule TEXT NOT NULL,"
           " target TEXT NOT NULL,"
           " preset TEXT,"
           " created_by TEXT,"
           " created_at BIGINT NOT NULL,"
           " due_at BIGINT,"
           " retry_at BIGINT,"
           " retry_nominal BIGINT,"
           " next_at BIGINT,"
           " failures BIGINT NOT NULL,"
           " state TEXT NOT NULL,"
           " last_run_at BIGINT,"
           " last_result TEXT,"
           " last_error TEXT,"
           " version BIGINT NOT NULL)",
           "CREATE INDEX loops_by_next ON loops (next_at) WHERE next_at IS NOT NULL",
           "CREATE INDEX loops_by_target ON loops (target, created_at)",
           "CREATE INDEX loops_by_created ON loops (created_at, loop_id)",
           "CREATE TABLE loop_runs ("
           " num /*sqlite: INTEGER PRIMARY KEY*/ /*postgres: BIGSERIAL PRIMARY KEY*/,"
           " loop_id TEXT NOT NULL,"
           " nominal_at BIGINT NOT NULL,"
           " claimed_at BIGINT NOT NULL,"
           " claimed_by TEXT NOT NULL,"
           " claim_expires BIGINT NOT NULL,"
           " attempts BIGINT NOT NULL,"
           " skipped BIGINT NOT NULL,"
           " skipped_capped BIGINT NOT NULL,"
           " target_session_id TEXT,"
           " message_id TEXT,"
           " delivered_at BIGINT,"
           " result TEXT,"
           " error TEXT,"
           " note TEXT,"
           " UNIQUE (loop_id, nominal_at))",
           "CREATE INDEX loop_runs_open ON loop_runs (loop_id) WHERE result IS NULL",
           "CREATE INDEX loop_runs_expiring ON loop_runs (claim_expires) WHERE result IS NULL",
           "CREATE TABLE loop_v1_imports ("
           " session_id TEXT NOT NULL,"
           " v1_id TEXT NOT NULL,"
           " loop_id TEXT NOT NULL,"
           " PRIMARY KEY (session_id, v1_id))",
           // Profile-wide markers of the plugin ("v1_import": "done").
           "CREATE TABLE loop_settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
       }},
      // Retention (RunsPruneTask): finished runs by age, and the loops
      // waiting for a retry (RetryableOccurrences).
      {"loop",
       2,
       {
           "CREATE INDEX loop_runs_finished ON loop_runs (nominal_at, num) WHERE result IS NOT NULL",
           "CREATE INDEX loops_retrying ON loops (loop_id) WHERE retry_nominal IS NOT NULL",
       }},
      // On PostgreSQL loop_runs_expiring serves only statements that
      // compare claim_expires (which imply its new `IS NOT NULL`): a view's
      // lookup of a loop's open run (`loop_id = ? AND result IS NULL`)
      // cannot use it. PostgreSQL did, for every loop listed, reading every
      // open run each time, whenever the statistics had been taken while no
      // run was open (both partial indexes then look empty, and a scan
      // without the loop's parameter wins the tie). SQLite keeps the index
      // as it was: it would no longer use it for the comparisons, and looks
      // open runs up by their loop anyway.
      {"loop",
       3,
       {
           "DROP INDEX loop_runs_expiring",
           "CREATE INDEX loop_runs_expiring ON loop_runs (claim_expires)"
           " WHERE result IS NULL /*postgres: AND claim_expires IS NOT NULL*/",
       }},
  };
}

std::optional<int64_t> LoopRecord::next_at() const {
  if (due_at && retry_at) return std::min(*due_at, *retry_at);
  return due_at ? due_at : retry_at;
}

bool ClaimIsLive(const std::string& holder, int64_t expires, int64_t now) {
  return expires > now && !agent::agent_store::LeaseHolderIsDead(holder);
}

Json LoopViewJson(const LoopRecord& l, int64_t now) {
  Json j = {{"loop_id", l.loop_id},
            {"prompt", l.prompt},
            {"schedule", ScheduleToJson(l.schedule)},
            {"session_id", l.target},
            {"created_by_session_id", l.created_by.value_or(std::string(kCreatedByRoot))},
            {"created_at", l.created_at}};
  auto next = l.next_at();
  if (l.open_claim) next = next ? std::min(*next, l.open_claim->nominal) : l.open_claim->nominal;
  if (next && *next != kNever) j["next_at"] = *next;
  if (l.last_run_at) j["last_run_at"] = *l.last_run_at;
  if (l.last_result) j["last_result"] = *l.last_result;
  if (l.last_error) j["last_error"] = *l.last_error;
  std::string state = l.state;
  if (state != "completed") {
    if (l.open_claim) {
      state = ClaimIsLive(l.open_claim->holder, l.open_claim->expires, now) ? "running" : "overdue";
    } else if (state != "failed" && next && *next <= now) {
      state = "overdue";
    }
  }
  j["state"] = state;
  std::string health = "unknown";
  if (l.last_run) {
    auto outcome = RunOutcome(l.last_run->result, l.last_run->error, l.last_run->target_session_id,
                              l.last_run->outcome);
    bool failed = l.last_run->result == "failed";
    if (outcome) {
      Json last = {{"status", outcome->status}};
      if (outcome->error_code || outcome->error_message) {
        last["error"] = agent::activity::OutcomeJson(*outcome)["error"];
      }
      if (outcome->session_id) last["session_id"] = *outcome->session_id;
      if (outcome->seq) last["seq"] = *outcome->seq;
      j["last_outcome"] = std::move(last);
      failed = failed || outcome->status == agent::activity::kError;
    }
    health = failed ? "failing" : "ok";
  }
  j["health"] = health;
  return j;
}

std::optional<agent::activity::Outcome> RunOutcome(const std::optional<std::string>& result,
                                                    const std::optional<std::string>& error,
                                                    const std::optional<std::string>& target_session_id,
                                                    const std::optional<agent::activity::Outcome>& turn) {
  if (result == "failed") {
    agent::activity::Outcome o;
    o.status = std::string(agent::activity::kNone);
    o.error_code = "delivery_failed";
    o.error_message = error.value_or("the occurrence could not be delivered");
    o.session_id = target_session_id;
    return o;
  }
  if (!result || !turn) return std::nullopt;
  agent::activity::Outcome o = *turn;
  if (!o.session_id) o.session_id = target_session_id;
  return o;
}

std::string OccurrenceKey(const std::string& loop_id, int64_t nominal) {
  return "loop:" + loop_id + ":" + std::to_string(nominal);
}

namespace registry {
namespace {

// A loop's own row.
const std::string kLoopRowColumns =
    "l.loop_id, l.prompt, l.schedule, l.target, l.preset, l.created_by, l.created_at, l.due_at, l.retry_at,"
    " l.retry_nominal, l.failures, l.state, l.last_run_at, l.last_result, l.last_error, l.version";
constexpr int kOpenClaimColumn = 16;  // the first column kLoopColumns adds
// ... with its open claim (the earliest unrecorded run).
const std::string kLoopColumns = kLoopRowColumns + ", o.nominal_at, o.claimed_by, o.claim_expires";
// On PostgreSQL a lateral join: a nested loop keeps the loops in the order
// of their index, so a listing's `ORDER BY … LIMIT` reads only the loops it
// returns, whatever the table's statistics say (the join below got a hash
// join, which made a claim read and sort every loop: 2 ms a claim at 7,000
// loops, until the table was analyzed; claims no longer join).
const std::string kFromLoops =
    " FROM loops l LEFT JOIN"
    " /*postgres: LATERAL (SELECT r.nominal_at, r.claimed_by, r.claim_expires FROM loop_runs r"
    " WHERE r.loop_id = l.loop_id AND r.result IS NULL ORDER BY r.nominal_at LIMIT 1) o ON TRUE*/"
    " /*sqlite: loop_runs o ON o.num = (SELECT r.num FROM loop_runs r"
    " WHERE r.loop_id = l.loop_id AND r.result IS NULL ORDER BY r.nominal_at LIMIT 1)*/";
// ... with its last recorded run and that run's turn (the activity item of
// its message: its inbox row), which views show.
const std::string kSelectLoops =
    kLoopColumns + ", lr.nominal_at, lr.result, lr.error, lr.target_session_id, " +
    agent::activity::OutcomeColumns("a") + kFromLoops +
    " LEFT JOIN loop_runs lr ON lr.num = (SELECT r.num FROM loop_runs r"
    " WHERE r.loop_id = l.loop_id AND r.result IS NOT NULL ORDER BY r.nominal_at DESC LIMIT 1)"
    " LEFT JOIN inbox a ON a.message_id = lr.message_id";
// The loop's row alone (neither LoopRecord::open_claim nor last_run): for
// recording a run's result, which writes back only the loop's own state, and
// for claims, which open the occurrence they take themselves. (A claim's
// lookup of each loop's open run once read, on PostgreSQL, every open run
// of the profile for every loop it passed, whenever the statistics were
// taken while few runs were open: a burst at half speed.)
const std::string kSelectLoopRow = kLoopRowColumns + " FROM loops l";
constexpr int kLastRunColumn = 19;  // the first column kSelectLoops adds

Result<LoopRecord> RowToLoop(const Row& row) {
  LoopRecord l;
  l.loop_id = row.String(0);
  l.prompt = row.String(1);
  auto schedule = ParseJson(row.Text(2));
  if (!schedule.ok()) return Status("corrupt_loop", "loop " + l.loop_id + ": its stored schedule is not JSON");
  if (Status st = DecodeSchedule(*schedule, "schedule", l.schedule); !st.ok()) {
    return Status("corrupt_loop", "loop " + l.loop_id + ": its stored schedule does not decode: " + st.message());
  }
  l.target = row.String(3);
  l.preset = row.OptString(4);
  l.created_by = row.OptString(5);
  l.created_at = row.Int(6);
  l.due_at = row.OptInt(7);
  l.retry_at = row.OptInt(8);
  l.retry_nominal = row.OptInt(9);
  l.failures = row.Int(10);
  l.state = row.String(11);
  l.last_run_at = row.OptInt(12);
  l.last_result = row.OptString(13);
  l.last_error = row.OptString(14);
  l.version = row.Int(15);
  if (row.columns() > kOpenClaimColumn && !row.IsNull(kOpenClaimColumn)) {
    l.open_claim = LoopRecord::OpenClaim{row.Int(16), row.String(17), row.Int(18)};
  }
  if (row.columns() > kLastRunColumn && !row.IsNull(kLastRunColumn)) {
    l.last_run = LoopRecord::LastRun{row.Int(19), row.String(20), row.OptString(21), row.OptString(22),
                                     agent::activity::OutcomeFromRow(row, 23)};
  }
  return l;
}

Result<std::vector<LoopRecord>> SelectLoops(Tx& tx, const std::string& where, std::span<const Value> params,
                                            const std::string& select = kSelectLoops) {
  std::vector<LoopRecord> out;
  DSH_RETURN_IF_ERROR(tx.Query("SELECT " + select + " " + where, params,
                               [&](const Row& row) -> Status {
                                 DSH_ASSIGN_OR_RETURN(LoopRecord l, RowToLoop(row));
                                 out.push_back(std::move(l));
                                 return Status::Ok();
                               }));
  return out;
}

// The loop's row (without its open claim or last run), locked until the
// transaction ends (PostgreSQL; a writer on SQLite holds the whole
// database): what is read here is still so when WriteState writes it back.
Result<std::optional<LoopRecord>> GetLocked(Tx& tx, const std::string& loop_id) {
  std::array<Value, 1> params = {std::string_view(loop_id)};
  DSH_ASSIGN_OR_RETURN(auto loops,
                       SelectLoops(tx, "WHERE l.loop_id = ? /*postgres: FOR NO KEY UPDATE OF l*/", params, kSelectLoopRow));
  if (loops.empty()) return std::optional<LoopRecord>();
  return std::optional<LoopRecord>(std::move(loops.front()));
}

// Writes the scheduling state and result fields of `l` and bumps its
// version. The row is locked by this transaction (GetLocked, or the claim's
// SELECT ... FOR NO KEY UPDATE; on SQLite the writer holds the database), so
// the compare-and-set on the version cannot lose: it goes with the next
// round trip (Tx::ExecLater), and a lock that did not hold would fail the
// transaction with kConflict rather than write nothing.
Status WriteState(Tx& tx, const LoopRecord& l) {
  std::array<Value, 12> params = {OptValue(l.due_at),      OptValue(l.retry_at),    OptValue(l.retry_nominal),
                                  OptValue(l.next_at()),   l.failures,         std::string_view(l.state),
                                  OptValue(l.last_run_at), OptValue(l.last_result), OptValue(l.last_error),
                                  l.version + 1,      std::string_view(l.loop_id), l.version};
  return tx.ExecLater("UPDATE loops SET due_at = ?, retry_at = ?, retry_nominal = ?, next_at = ?, failures = ?,"
                      " state = ?, last_run_at = ?, last_result = ?, last_error = ?, version = ?"
                      " WHERE loop_id = ? AND version = ?",
                      params, 1);
}

// The fresh occurrences of one claim, written a chunk of them per statement
// (each statement costs the server more than its rows): the loops' next due
// time, compare-and-set on their versions, then their run rows. A chunk is
// padded to one of two sizes, so that the texts stay few.
struct FreshClaim {
  Claim claim;
  int64_t version = 0;  // the loop's, as read
};
constexpr size_t kSmallChunk = 8;
constexpr size_t kChunk = 64;

std::string ChunkValues(size_t rows, std::string_view typed_row, std::string_view row) {
  std::string out = "(VALUES " + std::string(typed_row);
  for (size_t i = 1; i < rows; ++i) out += ", " + std::string(row);
  return out + ") AS v";
}

// `make`'s statement for a chunk of `rows` (kSmallChunk or kChunk), built once.
template <typename Make>
const std::string& ChunkSql(size_t rows, Make make) {
  static const std::string kSmall = make(kSmallChunk), kLarge = make(kChunk);
  return rows == kSmallChunk ? kSmall : kLarge;
}

// UPDATE … FROM VALUES names the values' columns column1… on both backends;
// the first row's casts type them on PostgreSQL.
const std::string& ClaimLoopsSql(size_t rows) {
  return ChunkSql(rows, [](size_t n) {
    return "UPDATE loops SET due_at = v.column2, next_at = v.column3, retry_at = NULL, retry_nominal = NULL,"
           " version = version + 1 FROM " +
           ChunkValues(n, "(CAST(? AS TEXT), CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS BIGINT))",
                       "(?, ?, ?, ?)") +
           " WHERE loops.loop_id = v.column1 AND loops.version = v.column4";
  });
}

const std::string& InsertRunsSql(size_t rows) {
  return ChunkSql(rows, [](size_t n) {
    return "INSERT INTO loop_runs (loop_id, nominal_at, claimed_at, claimed_by, claim_expires, attempts, skipped,"
           " skipped_capped, target_session_id) SELECT v.column1, v.column2, ?, ?, ?, 1, v.column3, v.column4,"
           " v.column5 FROM " +
           ChunkValues(n,
                       "(CAST(? AS TEXT), CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS TEXT))",
                       "(?, ?, ?, ?, ?)") +
           " WHERE v.column1 IS NOT NULL ON CONFLICT (loop_id, nominal_at) DO NOTHING RETURNING loop_id";
  });
}

// Appends to `claims` those of `fresh` whose run row this claim inserted (a
// run row of the same occurrence exists when the wall clock went back).
Status ClaimFresh(Tx& tx, const ClaimOptions& o, int64_t expires, std::vector<FreshClaim>& fresh,
                  std::vector<Claim>& claims) {
  for (size_t at = 0; at < fresh.size(); at += kChunk) {
    const size_t n = std::min(kChunk, fresh.size() - at);
    const size_t rows = n <= kSmallChunk ? kSmallChunk : kChunk;
    std::vector<Value> loops, runs = {o.now, std::string_view(o.holder), expires};
    loops.reserve(rows * 4);
    runs.reserve(3 + rows * 5);
    for (size_t i = 0; i < rows; ++i) {
      if (i >= n) {  // padding: matches no loop, inserts no row
        loops.insert(loops.end(), 4, Value(nullptr));
        runs.insert(runs.end(), 5, Value(nullptr));
        continue;
      }
      const FreshClaim& f = fresh[at + i];
      const Claim& c = f.claim;
      loops.insert(loops.end(), {std::string_view(c.loop.loop_id), OptValue(c.loop.due_at), OptValue(c.loop.next_at()),
                                 f.version});
      runs.insert(runs.end(), {std::string_view(c.loop.loop_id), c.nominal, c.skipped,
                               int64_t{c.skipped_capped ? 1 : 0}, OptValue(c.new_session_id)});
    }
    // The rows are this claim's (SKIP LOCKED): each must match.
    DSH_RETURN_IF_ERROR(tx.ExecLater(ClaimLoopsSql(rows), loops, static_cast<int64_t>(n)));
    std::set<std::string> inserted;
    DSH_RETURN_IF_ERROR(tx.Query(InsertRunsSql(rows), runs, [&](const Row& row) {
      inserted.insert(row.String(0));
      return Status::Ok();
    }));
    for (size_t i = at; i < at + n; ++i) {
      if (inserted.count(fresh[i].claim.loop.loop_id)) claims.push_back(std::move(fresh[i].claim));
    }
  }
  return Status::Ok();
}

}  // namespace

Status Insert(Tx& tx, const LoopRecord& l) {
  std::string schedule = DumpJson(ScheduleToJson(l.schedule));
  std::array<Value, 16> params = {std::string_view(l.loop_id), std::string_view(l.prompt), std::string_view(schedule),
                                  std::string_view(l.target),  OptValue(l.preset),              OptValue(l.created_by),
                                  l.created_at,                OptValue(l.due_at),              OptValue(l.retry_at),
                                  OptValue(l.retry_nominal),        OptValue(l.next_at()),           l.failures,
                                  std::string_view(l.state),   OptValue(l.last_run_at),         OptValue(l.last_result),
                                  OptValue(l.last_error)};
  auto r = tx.Exec(
      "INSERT INTO loops (loop_id, prompt, schedule, target, preset, created_by, created_at, due_at, retry_at,"
      " retry_nominal, next_at, failures, state, last_run_at, last_result, last_error, version)"
      " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)",
      params);
  DSH_RETURN_IF_ERROR(r.status());
  // Whichever host is due first claims it.
  auto next = l.next_at();
  return tx.Notify(kLoopsChannel, next ? std::to_string(*next) : "");
}

Result<bool> Delete(Tx& tx, const std::string& loop_id) {
  DSH_ASSIGN_OR_RETURN(int64_t n, tx.Exec("DELETE FROM loops WHERE loop_id = ?", {std::string_view(loop_id)}));
  if (n > 0) DSH_RETURN_IF_ERROR(tx.Notify(kLoopsChannel, ""));
  return n > 0;
}

Result<std::optional<LoopRecord>> Get(Tx& tx, const std::string& loop_id) {
  std::array<Value, 1> params = {std::string_view(loop_id)};
  DSH_ASSIGN_OR_RETURN(auto loops, SelectLoops(tx, "WHERE l.loop_id = ?", params));
  if (loops.empty()) return std::optional<LoopRecord>();
  return std::optional<LoopRecord>(std::move(loops.front()));
}

Result<std::vector<LoopRecord>> ListActive(Tx& tx, const std::vector<std::string>& targets) {
  if (targets.empty()) {
    return SelectLoops(tx, "WHERE l.state <> 'completed' ORDER BY l.created_at, l.loop_id", {});
  }
  std::string where = "WHERE l.state <> 'completed' AND l.target IN (";
  std::vector<Value> params;
  for (size_t i = 0; i < targets.size(); ++i) {
    where += i ? ", ?" : "?";
    params.emplace_back(std::string_view(targets[i]));
  }
  where += ") ORDER BY l.created_at, l.loop_id";
  return SelectLoops(tx, where, params);
}

Result<std::vector<LoopRecord>> ListFinished(Tx& tx, const std::vector<std::string>& targets, int64_t limit,
                                             std::optional<int64_t> before) {
  std::string where = "WHERE l.state = 'completed' AND COALESCE(l.last_run_at, l.created_at) < ?";
  std::vector<Value> params = {before.value_or(std::numeric_limits<int64_t>::max())};
  if (!targets.empty()) {
    where += " AND l.target IN (";
    for (size_t i = 0; i < targets.size(); ++i) {
      where += i ? ", ?" : "?";
      params.emplace_back(std::string_view(targets[i]));
    }
    where += ")";
  }
  where += " ORDER BY COALESCE(l.last_run_at, l.created_at) DESC, l.loop_id LIMIT ?";
  params.emplace_back(limit);
  return SelectLoops(tx, where, params);
}

Result<std::optional<int64_t>> NextWake(Tx& tx) {
  std::optional<int64_t> next;
  // One round trip: the next due loop, and the next claim to expire.
  DSH_RETURN_IF_ERROR(tx.Query("SELECT (SELECT MIN(next_at) FROM loops WHERE next_at IS NOT NULL),"
                               " (SELECT MIN(claim_expires) FROM loop_runs WHERE result IS NULL)",
                               {}, [&](const Row& row) {
                                 for (int i = 0; i < 2; ++i) {
                                   if (!row.IsNull(i)) next = next ? std::min(*next, row.Int(i)) : row.Int(i);
                                 }
                                 return Status::Ok();
                               }));
  return next;
}

Result<std::vector<Claim>> ClaimDue(Tx& tx, const ClaimOptions& o,
                                    const std::function<Result<Timetable>(const Schedule&)>& timetable,
                                    const std::function<std::string()>& new_session_id) {
  std::vector<Claim> claims;
  int64_t expires = o.now + o.claim_ttl_ms;
  int64_t horizon = std::max(o.now, o.horizon);
  // 1. Runs a host claimed and never finished (it died): take them over.
  struct Stale {
    int64_t num, nominal, attempts, skipped, capped, claim_expires;
    std::string loop_id;
    std::optional<std::string> target;
  };
  std::vector<Stale> stale;
  auto collect = [&](const Row& row) {
    stale.push_back(
        {row.Int(0), row.Int(2), row.Int(3), row.Int(4), row.Int(5), row.Int(7), row.String(1), row.OptString(6)});
    return Status::Ok();
  };
  constexpr const char* kOpenRuns =
      "SELECT num, loop_id, nominal_at, attempts, skipped, skipped_capped, target_session_id, claim_expires"
      " FROM loop_runs WHERE result IS NULL AND ";
  // On PostgreSQL, where hosts claim at once, each skips the rows another
  // is taking (and then compares and sets what it read).
  constexpr const char* kSkipLocked = " /*postgres: FOR NO KEY UPDATE SKIP LOCKED*/";
  // Expired claims, whoever held them.
  DSH_RETURN_IF_ERROR(tx.Query(std::string(kOpenRuns) + "claim_expires <= ? ORDER BY claim_expires LIMIT ?" + kSkipLocked,
                               {o.now, int64_t{o.limit}}, collect));
  // Unexpired claims of holders that are dead processes of this machine
  // (a host killed and restarted): no need to wait for their expiry.
  std::vector<std::string> holders;
  DSH_RETURN_IF_ERROR(tx.Query("SELECT DISTINCT claimed_by FROM loop_runs WHERE result IS NULL AND claim_expires > ?",
                               {o.now}, [&](const Row& row) {
                                 holders.push_back(row.String(0));
                                 return Status::Ok();
                               }));
  for (const std::string& holder : holders) {
    int64_t room = o.limit - static_cast<int64_t>(stale.size());
    if (room <= 0) break;
    if (holder == o.holder || !agent::agent_store::LeaseHolderIsDead(holder)) continue;
    DSH_RETURN_IF_ERROR(tx.Query(
        std::string(kOpenRuns) + "claimed_by = ? AND claim_expires > ? ORDER BY nominal_at LIMIT ?" + kSkipLocked,
        {std::string_view(holder), o.now, room}, collect));
  }
  for (const auto& s : stale) {
    DSH_ASSIGN_OR_RETURN(int64_t taken,
                         tx.Exec("UPDATE loop_runs SET claimed_by = ?, claimed_at = ?, claim_expires = ?,"
                                 " attempts = attempts + 1 WHERE num = ? AND claim_expires = ? AND result IS NULL",
                                 {std::string_view(o.holder), o.now, expires, s.num, s.claim_expires}));
    if (taken != 1) continue;
    DSH_ASSIGN_OR_RETURN(auto loop, Get(tx, s.loop_id));
    if (!loop) {
      DSH_RETURN_IF_ERROR(tx.Exec("UPDATE loop_runs SET result = 'failed', error = ? WHERE num = ?",
                                  {std::string_view("the loop was deleted before this occurrence was delivered"), s.num})
                              .status());
      continue;
    }
    claims.push_back(Claim{*loop, s.nominal, s.skipped, s.capped != 0, s.attempts + 1, s.target,
                           std::max(o.now, s.nominal)});
  }
  // 2. Loops whose next occurrence (or retry) is due.
  int64_t room = o.limit - static_cast<int64_t>(claims.size());
  if (room <= 0) return claims;
  std::array<Value, 2> params = {horizon, room};
  DSH_ASSIGN_OR_RETURN(auto due, SelectLoops(tx,
                                              "WHERE l.next_at <= ? ORDER BY l.next_at LIMIT ?"
                                              " /*postgres: FOR NO KEY UPDATE OF l SKIP LOCKED*/",
                                              params, kSelectLoopRow));
  std::vector<FreshClaim> fresh_claims;
  for (LoopRecord& l : due) {
    Claim c;
    bool fresh = l.due_at && *l.due_at <= horizon;
    LoopRecord updated = l;
    if (fresh) {
      DSH_ASSIGN_OR_RETURN(Timetable t, timetable(l.schedule));
      // Due already: the latest occurrence by now. Due within the horizon:
      // that occurrence itself, delivered at its time.
      c.deliver_at = std::max(o.now, *l.due_at);
      Timetable::Catchup up = t.Catch(*l.due_at, c.deliver_at);
      c.nominal = up.nominal;
      c.skipped = up.skipped;
      c.skipped_capped = up.skipped_capped;
      if (l.target == kTargetNew) c.new_session_id = new_session_id();
      updated.due_at = up.following;
      updated.retry_at.reset();  // a failed earlier occurrence is given up for this newer one
      updated.retry_nominal.reset();
      updated.open_claim = LoopRecord::OpenClaim{c.nominal, o.holder, expires};
      const int64_t version = updated.version++;
      c.loop = std::move(updated);
      fresh_claims.push_back({std::move(c), version});  // written together below
      continue;
    }
    // A retry of a failed occurrence: its run row opens again.
    updated.retry_at.reset();
    if (!l.retry_nominal) {  // a retry time without an occurrence: cannot happen; clear it
      DSH_RETURN_IF_ERROR(WriteState(tx, updated));
      continue;
    }
    c.nominal = *l.retry_nominal;
    c.deliver_at = std::max(o.now, l.retry_at.value_or(o.now));
    DSH_RETURN_IF_ERROR(WriteState(tx, updated));  // the row is this claim's: SKIP LOCKED
    ++updated.version;
    std::optional<std::string> target;
    int64_t attempts = 0;
    DSH_RETURN_IF_ERROR(tx.Query(
        "UPDATE loop_runs SET claimed_at = ?, claimed_by = ?, claim_expires = ?, attempts = attempts + 1,"
        " result = NULL, error = NULL WHERE loop_id = ? AND nominal_at = ? RETURNING attempts, target_session_id",
        {o.now, std::string_view(o.holder), expires, std::string_view(l.loop_id), c.nominal}, [&](const Row& row) {
          attempts = row.Int(0);
          target = row.OptString(1);
          return Status::Ok();
        }));
    if (attempts == 0) continue;  // the run row is gone: nothing to retry
    c.attempts = attempts;
    c.new_session_id = target;
    updated.open_claim = LoopRecord::OpenClaim{c.nominal, o.holder, expires};
    c.loop = std::move(updated);
    claims.push_back(std::move(c));
  }
  DSH_RETURN_IF_ERROR(ClaimFresh(tx, o, expires, fresh_claims, claims));
  return claims;
}

int64_t BackoffMs(int64_t failures) {
  static constexpr std::array<int64_t, 4> kSteps = {30'000, 60'000, 300'000, 900'000};
  if (failures <= 0) return kSteps[0];
  if (failures <= static_cast<int64_t>(kSteps.size())) return kSteps[failures - 1];
  return 3'600'000;
}

Status Record(Tx& tx, const Claim& c, const Outcome& out, int64_t now, agent::outbox::SubscriptionSource* webhooks) {
  std::string_view result = out.delivered ? "delivered" : "failed";
  std::array<Value, 8> run = {result,
                              out.delivered ? Value(now) : Value(nullptr),
                              OptValue(out.target_session_id),
                              OptValue(out.message_id),
                              OptValue(out.error),
                              OptValue(out.note),
                              std::string_view(c.loop.loop_id),
                              c.nominal};
  // Its answer is not needed: it goes with the next round trip.
  DSH_RETURN_IF_ERROR(tx.ExecLater("UPDATE loop_runs SET result = ?, delivered_at = ?,"
                                   " target_session_id = COALESCE(?, target_session_id), message_id = ?, error = ?,"
                                   " note = ? WHERE loop_id = ? AND nominal_at = ?",
                                   run));
  if (out.delivered && c.attempts > 1) {
    DSH_RETURN_IF_ERROR(agent::activity::Superseded(tx, OccurrenceKey(c.loop.loop_id, c.nominal)));
  }
  if (!out.delivered) {
    agent::activity::Source source{"loop_run", c.loop.loop_id, c.nominal, std::nullopt};
    std::optional<std::string> target = out.target_session_id ? out.target_session_id : c.new_session_id;
    if (!target && c.loop.target != kTargetSelf && c.loop.target != kTargetNew) target = c.loop.target;
    DSH_RETURN_IF_ERROR(agent::activity::DeliveryFailed(tx, source, target, OccurrenceKey(c.loop.loop_id, c.nominal),
                                                        out.error.value_or("the occurrence could not be delivered"),
                                                        now, webhooks));
  }
  DSH_ASSIGN_OR_RETURN(auto loop, GetLocked(tx, c.loop.loop_id));
  if (!loop) return Status::Ok();  // deleted meanwhile: the run row is the record
  LoopRecord l = *loop;
  l.last_run_at = now;
  l.last_result = std::string(result);
  if (out.delivered) {
    l.last_error.reset();
    l.failures = 0;
    if (l.retry_nominal == c.nominal) {
      l.retry_nominal.reset();
      l.retry_at.reset();
    }
    if (l.schedule.kind == ScheduleKind::kAfter) {
      l.state = "completed";
      l.due_at.reset();
      l.retry_at.reset();
      l.retry_nominal.reset();
    } else if (!l.retry_nominal) {
      l.state = "scheduled";
    }
  } else {
    l.last_error = out.error.value_or("the occurrence could not be delivered");
    l.failures += 1;
    l.state = "failed";
    // Retry this occurrence unless a newer one was claimed since.
    if (!l.retry_nominal || *l.retry_nominal <= c.nominal) {
      l.retry_nominal = c.nominal;
      l.retry_at = now + BackoffMs(l.failures);
    }
  }
  return WriteState(tx, l);
}

Json RunJson(const Run& r) {
  Json j = {{"nominal_at", r.nominal_at}, {"claimed_at", r.claimed_at}, {"attempts", r.attempts},
            {"skipped", r.skipped}};
  if (r.skipped_capped) j["skipped_capped"] = true;
  if (r.delivered_at) j["delivered_at"] = *r.delivered_at;
  if (r.target_session_id) j["target_session_id"] = *r.target_session_id;
  if (r.message_id) j["message_id"] = *r.message_id;
  j["result"] = r.result ? Json(*r.result) : Json("running");
  if (r.error) j["error"] = *r.error;
  if (r.note) j["note"] = *r.note;
  if (r.outcome) j["outcome"] = agent::activity::OutcomeJson(*r.outcome);
  if (!r.notifications.is_null()) j["notifications"] = r.notifications;
  return j;
}

Result<std::vector<Run>> Runs(Tx& tx, const std::string& loop_id, int64_t limit,
                              std::optional<int64_t> before) {
  std::vector<Run> out;
  // Without `before` the bound is above every instant, so one statement serves both.
  DSH_RETURN_IF_ERROR(tx.Query(
      "SELECT r.nominal_at, r.claimed_at, r.delivered_at, r.target_session_id, r.message_id, r.result, r.error,"
      " r.note, r.attempts, r.skipped, r.skipped_capped, " +
          agent::activity::OutcomeColumns("a") +
          " FROM loop_runs r LEFT JOIN inbox a ON a.message_id = r.message_id"
          " WHERE r.loop_id = ? AND r.nominal_at < ? ORDER BY r.nominal_at DESC LIMIT ?",
      {std::string_view(loop_id), before.value_or(std::numeric_limits<int64_t>::max()), limit},
      [&](const Row& row) {
        Run run{row.Int(0), row.Int(1), row.OptInt(2), row.OptString(3), row.OptString(4), row.OptString(5),
                row.OptString(6), row.OptString(7), row.Int(8), row.Int(9), row.Int(10) != 0};
        run.outcome = RunOutcome(run.result, run.error, run.target_session_id, agent::activity::OutcomeFromRow(row, 11));
        out.push_back(std::move(run));
        return Status::Ok();
      }));
  // What went out about each run (outbox.h): keyed by the occurrence.
  std::vector<std::string> keys;
  for (const Run& run : out) keys.push_back(OccurrenceKey(loop_id, run.nominal_at));
  DSH_ASSIGN_OR_RETURN(auto receipts, agent::outbox::Receipts(tx, keys));
  for (Run& run : out) {
    if (auto it = receipts.find(OccurrenceKey(loop_id, run.nominal_at)); it != receipts.end()) {
      run.notifications = std::move(it->second);
    }
  }
  return out;
}

namespace {

Status DeleteRuns(Tx& tx, const std::vector<int64_t>& nums, int64_t& deleted) {
  if (nums.empty()) return Status::Ok();
  std::string sql = "DELETE FROM loop_runs WHERE result IS NOT NULL AND num IN (";
  std::vector<Value> params;
  params.reserve(nums.size());
  for (size_t i = 0; i < nums.size(); ++i) {
    sql += i ? ",?" : "?";
    params.emplace_back(nums[i]);
  }
  sql += ")";
  DSH_ASSIGN_OR_RETURN(int64_t n, tx.Exec(sql, params));
  deleted += n;
  return Status::Ok();
}

// Where a round of RunsPruneTask is (one host's; rounds of several hosts
// may overlap, each deletes what is still there).
struct RunsCursor {
  bool capping = false;  // the age pass is over
  int64_t nominal = std::numeric_limits<int64_t>::min();  // age pass: last run examined
  int64_t num = std::numeric_limits<int64_t>::min();
  std::string loop_id;  // count pass: loops up to here are done ("" = none yet)
};

// Age pass: up to `room` finished runs older than `cutoff`, from the cursor
// on. True when it examined a full page (more may be due).
Result<bool> PruneOld(Tx& tx, RunsCursor& c, int64_t cutoff, int64_t room, int64_t& deleted) {
  std::vector<int64_t> doomed;
  int64_t examined = 0;
  DSH_RETURN_IF_ERROR(tx.Query(
      "SELECT r.num, r.nominal_at, CASE WHEN l.loop_id IS NULL THEN 0 ELSE 1 END, l.retry_nominal,"
      " (SELECT MAX(n.nominal_at) FROM loop_runs n WHERE n.loop_id = r.loop_id)"
      " FROM loop_runs r LEFT JOIN loops l ON l.loop_id = r.loop_id"
      " WHERE r.result IS NOT NULL AND r.nominal_at < ? AND (r.nominal_at > ? OR (r.nominal_at = ? AND r.num > ?))"
      " ORDER BY r.nominal_at, r.num LIMIT ?",
      {cutoff, c.nominal, c.nominal, c.num, room}, [&](const Row& row) {
        ++examined;
        c.num = row.Int(0);
        c.nominal = row.Int(1);
        bool loop_exists = row.Int(2) != 0;
        bool retrying = !row.IsNull(3) && row.Int(3) == c.nominal;
        bool newest = !row.IsNull(4) && row.Int(4) == c.nominal;
        if (retrying || (loop_exists && newest)) return Status::Ok();
        doomed.push_back(c.num);
        return Status::Ok();
      }));
  DSH_RETURN_IF_ERROR(DeleteRuns(tx, doomed, deleted));
  return examined == room;
}

// Count pass: loop by loop after the cursor, the finished runs beyond the
// `max_runs` newest, at most `room` rows. True when it stopped for room.
Result<bool> PruneBeyondCap(Tx& tx, RunsCursor& c, int64_t max_runs, int64_t room, int64_t& deleted) {
  constexpr int kLoopsPerSlice = 256;
  for (int loops = 0; loops < kLoopsPerSlice; ++loops) {
    std::optional<std::string> loop_id;
    DSH_RETURN_IF_ERROR(tx.Query("SELECT loop_id FROM loop_runs WHERE loop_id > ? ORDER BY loop_id LIMIT 1",
                                 {std::string_view(c.loop_id)}, [&](const Row& row) {
                                   loop_id = row.String(0);
                                   return Status::Ok();
                                 }));
    if (!loop_id) return false;
    // The newest run beyond the cap: it and everything older may go.
    std::optional<int64_t> beyond;
    DSH_RETURN_IF_ERROR(tx.Query(
        "SELECT nominal_at FROM loop_runs WHERE loop_id = ? ORDER BY nominal_at DESC LIMIT 1 OFFSET ?",
        {std::string_view(*loop_id), max_runs}, [&](const Row& row) {
          beyond = row.Int(0);
          return Status::Ok();
        }));
    if (beyond) {
      std::optional<int64_t> retry;
      DSH_RETURN_IF_ERROR(tx.Query("SELECT retry_nominal FROM loops WHERE loop_id = ?", {std::string_view(*loop_id)},
                                   [&](const Row& row) {
                                     if (!row.IsNull(0)) retry = row.Int(0);
                                     return Status::Ok();
                                   }));
      int64_t left = room - deleted;
      std::vector<int64_t> doomed;
      bool full = false;
      DSH_RETURN_IF_ERROR(tx.Query(
          "SELECT num, nominal_at FROM loop_runs WHERE loop_id = ? AND nominal_at <= ? AND result IS NOT NULL"
          " ORDER BY nominal_at LIMIT ?",
          {std::string_view(*loop_id), *beyond, left + 1}, [&](const Row& row) {
            if (retry && row.Int(1) == *retry) return Status::Ok();
            if (static_cast<int64_t>(doomed.size()) == left) {
              full = true;  // more of this loop than room: stay on it
              return Status::Ok();
            }
            doomed.push_back(row.Int(0));
            return Status::Ok();
          }));
      DSH_RETURN_IF_ERROR(DeleteRuns(tx, doomed, deleted));
      if (full || deleted >= room) return true;
    }
    c.loop_id = *loop_id;
  }
  return true;  // more loops to look at: the next slice goes on from the cursor
}

}  // namespace

store::PruneTask RunsPruneTask(RunRetention keep) {
  auto cursor = std::make_shared<RunsCursor>();
  return {"loop_runs", [keep, cursor](Tx& tx, int64_t now, int64_t max_rows) -> Result<store::PruneSlice> {
            int64_t deleted = 0;
            if (!cursor->capping) {
              if (keep.max_age_ms > 0) {
                DSH_ASSIGN_OR_RETURN(bool more, PruneOld(tx, *cursor, now - keep.max_age_ms, max_rows, deleted));
                if (more) return store::PruneSlice{deleted, true};
              }
              cursor->capping = true;
            }
            if (keep.max_runs > 0 && deleted < max_rows) {
              DSH_ASSIGN_OR_RETURN(bool more, PruneBeyondCap(tx, *cursor, keep.max_runs, max_rows, deleted));
              if (more) return store::PruneSlice{deleted, true};
            } else if (keep.max_runs > 0) {
              return store::PruneSlice{deleted, true};
            }
            *cursor = RunsCursor{};  // the round is over; the next one starts afresh
            return store::PruneSlice{deleted, false};
          }};
}

Result<std::vector<Occurrence>> RetryableOccurrences(Tx& tx) {
  std::vector<Occurrence> out;
  auto add = [&](const Row& row) {
    out.push_back({row.String(0), row.Int(1)});
    return Status::Ok();
  };
  DSH_RETURN_IF_ERROR(tx.Query("SELECT loop_id, nominal_at FROM loop_runs WHERE result IS NULL", {}, add));
  DSH_RETURN_IF_ERROR(
      tx.Query("SELECT loop_id, retry_nominal FROM loops WHERE retry_nominal IS NOT NULL", {}, add));
  return out;
}

}  // namespace registry
}  // namespace dsh::plugins::loop
