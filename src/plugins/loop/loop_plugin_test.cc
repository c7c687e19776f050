#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <future>
#include <map>
#include <set>
#include <thread>

#include "agent/agent_manager.h"
#include "agent/agent_store.h"
#include "agent/testing/event_waiter.h"
#include "agent/testing/scripted_model.h"
#include "base/testing/temp_dir.h"
#include "plugins/loop/loop_plugin.h"
#include "plugins/loop/loop_routes.h"
#include "plugins/loop/loop_scheduler.h"
#include "plugins/loop/loop_service.h"
#include "plugins/loop/loop_tools.h"
#include "plugins/loop/v1_import.h"
#include "session/conversation.h"
#include "session/event.h"
#include "store/pruner.h"
#include "store/testing/forwarding_connection.h"
#include "store/testing/test_backend.h"

namespace dsh::plugins::loop {
namespace {

using agent::testing::ScriptedModel;
using namespace std::chrono_literals;

// A real store, AgentManager (scripted model), LoopScheduler and the loop
// tools, on a fake wall clock; the scheduler's waits are capped at 20 ms so
// it re-reads the fake clock often, and SettleForTesting runs a full tick.
class LoopTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { Open(); }
  void TearDown() override { Close(); }

  void Open() {
    std::vector<store::Migration> migrations = session::SessionStore::Migrations();
    for (auto& m : agent::AgentManager::Migrations()) migrations.push_back(m);
    for (auto& m : Migrations()) migrations.push_back(m);
    auto db = store::Database::Open(backend_.Factory(), migrations);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(db).value();
    store_ = std::make_unique<session::SessionStore>(*db_, clock_, &hub_);
    work_.emplace(ioc_.get_executor());
    for (int i = 0; i < 2; ++i) threads_.emplace_back([this] { ioc_.run(); });
    agent::AgentManagerOptions options;
    options.sweep_interval = 20ms;
    options.generate_titles = false;
    options.lease_ttl = 1h;
    agent::AgentEnvironment env;
    env.preset = [](const std::optional<std::string>& preset) {
      agent::PresetView v;
      v.system_prompt = "You are " + preset.value_or("nobody") + ".";
      return v;
    };
    tools_ = std::make_unique<agent::ToolRegistry>();
    manager_ = std::make_unique<agent::AgentManager>(ioc_, *db_, *store_, router_, *tools_, clock_, env, options);
    manager_->Start();
    if (global_.empty()) global_ = Session("default", Route("m1"));
    scheduler_ = MakeScheduler();
    service_ = std::make_shared<LoopService>(*db_, *store_, *scheduler_, clock_);
    ASSERT_TRUE(RegisterLoopTools(*tools_, service_).ok());
    scheduler_->Start();
  }

  std::unique_ptr<LoopScheduler> MakeScheduler() {
    LoopEnvironment env;
    env.global_session_id = [this]() -> std::optional<std::string> {
      if (!global_on_) return std::nullopt;
      return global_override_.empty() ? global_ : global_override_;
    };
    env.defaults = [] {
      session::NewSession s;
      s.route = {"scripted", "dflt", std::nullopt};
      s.preset = "default";
      return s;
    };
    env.preset_exists = [](const std::string& p) { return p == "default" || p == "reviewer" || p == "coder"; };
    env.host_zone = TimeZone::Utc();
    SchedulerOptions options;
    options.max_wait = 20ms;
    options.claim_ttl = 30s;
    options.metrics = &metrics_;
    return std::make_unique<LoopScheduler>(ioc_, *db_, *store_, *manager_, clock_, env, options);
  }

  // Stops everything (a host shutting down); the database files stay.
  void Close() {
    if (!db_) return;
    scheduler_->Stop();
    while (model_.Release()) {
    }
    manager_->Stop();
    db_->Close();
    work_.reset();
    for (auto& t : threads_) t.join();
    threads_.clear();
    service_.reset();
    scheduler_.reset();
    manager_.reset();
    tools_.reset();
    store_.reset();
    db_.reset();
    ioc_.restart();
  }
  void Restart() {
    Close();
    Open();
  }

  static session::ModelRoute Route(const char* model) { return {"scripted", model, std::nullopt}; }
  std::string Session(std::optional<std::string> preset, session::ModelRoute route) {
    session::NewSession s;
    s.preset = std::move(preset);
    s.route = std::move(route);
    auto h = store_->Create(s);
    EXPECT_TRUE(h.ok()) << h.status().ToString();
    return h.ok() ? h->id : "";
  }
  session::SessionHeader Header(const std::string& id) {
    auto h = store_->Get(id);
    EXPECT_TRUE(h.ok()) << h.status().ToString();
    return h.ok() ? *h : session::SessionHeader{};
  }
  static agent::ToolContext From(const std::string& session_id) {
    agent::ToolContext ctx;
    ctx.session_id = session_id;
    return ctx;
  }

  Result<Json> Call(const agent::ToolContext& ctx, const std::string& tool, const Json& args) {
    std::promise<Result<Json>> p;
    tools_->Invoke(tool, ctx, args, [&](Result<Json> r) { p.set_value(std::move(r)); });
    return p.get_future().get();
  }
  Json Ok(const agent::ToolContext& ctx, const std::string& tool, const Json& args) {
    auto r = Call(ctx, tool, args);
    EXPECT_TRUE(r.ok()) << tool << " " << args.dump() << ": " << r.status().ToString();
    return r.ok() ? *r : Json();
  }
  void ExpectRejected(const agent::ToolContext& ctx, const std::string& tool, const Json& args,
                      const std::string& mention, const std::string& code = codes::kInvalidArguments) {
    auto before = Registry();
    auto r = Call(ctx, tool, args);
    ASSERT_FALSE(r.ok()) << tool << " accepted " << args.dump();
    EXPECT_EQ(r.status().code(), code) << args.dump() << ": " << r.status().ToString();
    EXPECT_NE(r.status().message().find(mention), std::string::npos) << args.dump() << ": " << r.status().message();
    EXPECT_EQ(Registry(), before) << "a rejected call changed the registry";
  }
  Json AllLoops() { return Ok(agent::ToolContext{}, "loop_list", {{"session_id", "global"}}); }
  // The registry as loop_create/loop_delete change it: without the fields
  // derived from turns, which move on by themselves.
  Json Registry() {
    Json loops = AllLoops();
    for (auto& v : loops) {
      v.erase("last_outcome");
      v.erase("health");
    }
    return loops;
  }
  // Waits until the turn of every delivery so far has ended.
  void SettleTurns() {
    using Open = std::vector<std::pair<std::string, std::string>>;
    auto open = db_->ReadValue<Open>([](store::Tx& tx) -> Result<Open> {
      Open out;
      DSH_RETURN_IF_ERROR(tx.Query("SELECT session_id, message_id FROM inbox WHERE status IN ('pending', 'running')",
                                   {}, [&](const store::Row& row) {
                                     out.emplace_back(row.String(0), row.String(1));
                                     return Status::Ok();
                                   }));
      return out;
    });
    ASSERT_TRUE(open.ok()) << open.status().ToString();
    for (const auto& [session_id, message_id] : *open) {
      waiter_.WaitFor(session_id, [&](const std::vector<session::Event>& log) {
        bool seen = false;
        for (const auto& e : log) {
          if (e.type == session::event_types::kUserMessage && e.data.value("message_id", "") == message_id) seen = true;
          if (seen && e.type == agent::event_types::kTurnEnd) return true;
        }
        return false;
      });
    }
  }
  static std::vector<std::string> LoopIds(const Json& views) {
    std::vector<std::string> ids;
    for (const auto& v : views) ids.push_back(v["loop_id"]);
    return ids;
  }

  // Moves the fake wall clock and runs one full scheduler tick.
  void Advance(std::chrono::milliseconds d) {
    clock_.Advance(d);
    ASSERT_TRUE(scheduler_->SettleForTesting());
  }

  // The `<loop>` messages accepted into `session_id`'s inbox, in order.
  std::vector<std::string> LoopMessages(const std::string& session_id) {
    auto r = db_->ReadValue<std::vector<std::string>>([&](store::Tx& tx) -> Result<std::vector<std::string>> {
      std::vector<std::string> out;
      DSH_RETURN_IF_ERROR(tx.Query("SELECT text FROM inbox WHERE session_id = ? AND key LIKE 'loop:%' ORDER BY num",
                                   {std::string_view(session_id)}, [&](const store::Row& row) {
                                     out.push_back(row.String(0));
                                     return Status::Ok();
                                   }));
      return out;
    });
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : std::vector<std::string>{};
  }
  // Sessions the scheduler created for "new" loops.
  std::vector<session::SessionHeader> LoopSessions() {
    std::vector<session::SessionHeader> out;
    auto all = store_->ListRecent(10'000);
    EXPECT_TRUE(all.ok()) << all.status().ToString();
    if (!all.ok()) return out;
    for (const auto& h : *all) {
      if (h.origin == "loop") out.push_back(h);
    }
    return out;
  }
  std::vector<registry::Run> Runs(const std::string& loop_id) {
    auto r = db_->ReadValue<std::vector<registry::Run>>(
        [&](store::Tx& tx) { return registry::Runs(tx, loop_id, 1000); });
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : std::vector<registry::Run>{};
  }
  Json View(const std::string& loop_id) {
    for (const auto& v : AllLoops()) {
      if (v["loop_id"] == loop_id) return v;
    }
    return Json();
  }

  static Json Every(int64_t s) { return {{"kind", "every"}, {"every_seconds", s}}; }
  static Json After(int64_t s) { return {{"kind", "after"}, {"after_seconds", s}}; }
  static Json Cron(const std::string& expr, std::optional<std::string> tz = std::nullopt) {
    Json j = {{"kind", "cron"}, {"expr", expr}};
    if (tz) j["tz"] = *tz;
    return j;
  }

  store::testing::TestBackend backend_{GetParam(), /*fast=*/true};  // outlives the database
  FakeClock clock_;  // 2026-01-01T00:00:00Z
  metrics::Registry metrics_;  // the schedulers' (kept across Close/Open, as counters are)
  session::EventHub hub_;
  agent::testing::EventWaiter waiter_{hub_};  // every event of the test
  ScriptedModel model_;
  agent::testing::SingleModelRouter router_{model_};
  std::unique_ptr<agent::ToolRegistry> tools_;
  std::unique_ptr<store::Database> db_;
  std::unique_ptr<session::SessionStore> store_;
  boost::asio::io_context ioc_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
  std::unique_ptr<agent::AgentManager> manager_;
  std::unique_ptr<LoopScheduler> scheduler_;
  std::shared_ptr<LoopService> service_;
  std::string global_;
  std::string global_override_;
  bool global_on_ = true;
};

INSTANTIATE_TEST_SUITE_P(Backends, LoopTest, store::testing::BackendNames(), store::testing::BackendTestName);

// Remembers the last statement containing a needle, with its parameters.
class StatementRecorder final : public store::testing::ForwardingConnection {
 public:
  struct Seen {
    std::string needle;
    std::string sql;
    std::vector<store::Value> params;
  };
  StatementRecorder(std::unique_ptr<store::Connection> inner, std::shared_ptr<Seen> seen)
      : ForwardingConnection(std::move(inner)), seen_(std::move(seen)) {}
  Status Query(std::string_view sql, std::span<const store::Value> params, const store::RowFn& on_row) override {
    if (sql.find(seen_->needle) != std::string_view::npos && !sql.starts_with("EXPLAIN")) {
      seen_->sql = sql;
      seen_->params.assign(params.begin(), params.end());
    }
    return ForwardingConnection::Query(sql, params, on_row);
  }

 private:
  std::shared_ptr<Seen> seen_;
};

class LoopClaimPlanTest : public ::testing::TestWithParam<std::string> {
 protected:
  // A database of the loop tables whose connections remember the last
  // statement containing `needle` (in seen_).
  std::unique_ptr<store::Database> OpenRecording(std::string needle) {
    seen_->needle = std::move(needle);
    auto factory = std::make_unique<store::testing::WrappingFactory>(
        backend_.Factory(), [seen = seen_](std::unique_ptr<store::Connection> conn) {
          return std::unique_ptr<store::Connection>(std::make_unique<StatementRecorder>(std::move(conn), seen));
        });
    // The views join the inbox (agent) and sessions.
    std::vector<store::Migration> migrations = session::SessionStore::Migrations();
    for (auto& m : agent::AgentManager::Migrations()) migrations.push_back(m);
    for (auto& m : Migrations()) migrations.push_back(m);
    auto opened = store::Database::Open(std::move(factory), std::move(migrations));
    if (!opened.ok()) ADD_FAILURE() << opened.status().ToString();
    return opened.ok() ? std::move(opened).value() : nullptr;
  }

  // The plan of the statement seen last (its first parameter set to
  // `first`, if given).
  std::string ExplainSeen(store::Database& db, std::optional<store::Value> first = std::nullopt) {
    if (seen_->sql.empty()) {
      ADD_FAILURE() << "no statement containing " << seen_->needle;
      return "";
    }
    StatementRecorder::Seen statement = *seen_;
    if (first) statement.params.at(0) = *first;
    std::string plan;
    Status explained = db.WriteSync([&](store::Tx& tx) {  // a read-only transaction cannot lock rows
      return tx.Query((pg() ? "EXPLAIN " : "EXPLAIN QUERY PLAN ") + statement.sql, statement.params,
                      [&](const store::Row& row) {
                        plan += row.String(pg() ? 0 : 3) + "\n";
                        return Status::Ok();
                      });
    });
    if (!explained.ok()) ADD_FAILURE() << explained.ToString();
    return plan;
  }

  bool pg() const { return GetParam() == "postgres"; }

  // 4,000 loops, loop_1 … loop_4000 (created_at their number), all due at 1 s.
  static Status InsertDueLoops(store::Tx& tx, const std::string& schedule) {
    return tx
        .Exec("WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 4000)"
              " INSERT INTO loops (loop_id, prompt, schedule, target, created_at, due_at, next_at, failures, state,"
              " version) SELECT 'loop_' || n, 'p', ?, 'global', n, 1000, 1000, 0, 'scheduled', 1 FROM g",
              {std::string_view(schedule)})
        .status();
  }

  // Half of those loops claimed by another host, not yet recorded.
  static Status ClaimHalfElsewhere(store::Tx& tx) {
    return tx
        .Exec("INSERT INTO loop_runs (loop_id, nominal_at, claimed_at, claimed_by, claim_expires, attempts, skipped,"
              " skipped_capped) SELECT loop_id, 1000, 1000, 'another-host', 31000, 1, 0, 0 FROM loops"
              " WHERE created_at <= 2000")
        .status();
  }

  static Result<std::vector<registry::Claim>> Claim(store::Database& db, int64_t now, int limit) {
    return db.WriteValue<std::vector<registry::Claim>>([=](store::Tx& tx) {
      registry::ClaimOptions o{now, now, "this-host", 30'000, limit};
      return registry::ClaimDue(tx, o, [](const Schedule& s) { return Timetable::Make(s, TimeZone::Utc()); },
                                [] { return std::string("unused"); });
    });
  }

  store::testing::TestBackend backend_{GetParam()};
  std::shared_ptr<StatementRecorder::Seen> seen_ = std::make_shared<StatementRecorder::Seen>();
};

INSTANTIATE_TEST_SUITE_P(Backends, LoopClaimPlanTest, store::testing::BackendNames(),
                         store::testing::BackendTestName);

// A claim reads the due loops through their index, in its order, and stops
// at its limit: never every loop, sorted, whatever the table's statistics
// say (here: none yet, as on a new profile; thousands of loops all due, as
// in a burst). On PostgreSQL the open run's join once made it scan and sort
// every loop, 2 ms a claim at 7,000 loops.
TEST_P(LoopClaimPlanTest, AClaimReadsTheDueLoopsThroughTheirIndex) {
  auto db = OpenRecording("l.next_at <= ?");
  ASSERT_TRUE(db);
  ASSERT_TRUE(db->WriteSync([](store::Tx& tx) {
                  return tx.Exec("WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 5000)"
                                 " INSERT INTO loops (loop_id, prompt, schedule, target, created_at, due_at, next_at,"
                                 " failures, state, version)"
                                 " SELECT 'loop_' || n, 'p', '{}', 'global', n, 1000 + n % 100, 1000 + n % 100, 0,"
                                 " 'scheduled', 1 FROM g")
                      .status();
                }).ok());
  // A claim when nothing is due yet: what it asks is what a burst's asks.
  auto claims = Claim(*db, 500, 64);
  ASSERT_TRUE(claims.ok()) << claims.status().ToString();
  EXPECT_TRUE(claims->empty());
  std::string plan = ExplainSeen(*db, int64_t{2000});  // every loop due
  EXPECT_NE(plan.find("loops_by_next"), std::string::npos) << plan;
  EXPECT_EQ(plan.find(pg() ? "Seq Scan on loops" : "SCAN l"), std::string::npos) << plan;
  EXPECT_EQ(plan.find(pg() ? "Sort" : "TEMP B-TREE"), std::string::npos) << plan;
  db->Close();
}

// A claim reads nothing of the loops' runs: it opens each occurrence it
// takes itself. On PostgreSQL its join to each loop's open run once read,
// for every loop it passed, every open run of the profile (through
// loop_runs_expiring, whenever the statistics were taken while few runs were
// open): in a burst with three hosts, claims of up to 640 ms and the burst
// at half speed in one run of five to seven of ten.
TEST_P(LoopClaimPlanTest, AClaimReadsNoRunsWhateverIsOpen) {
  auto db = OpenRecording("l.next_at <= ?");
  ASSERT_TRUE(db);
  ASSERT_TRUE(db->WriteSync([&](store::Tx& tx) {
                  DSH_RETURN_IF_ERROR(InsertDueLoops(tx, "{}"));
                  // Statistics of a profile with no run open ...
                  DSH_RETURN_IF_ERROR(tx.Exec("ANALYZE").status());
                  // ... then half the loops claimed and not yet recorded.
                  return ClaimHalfElsewhere(tx);
                }).ok());
  auto claims = Claim(*db, 500, 64);
  ASSERT_TRUE(claims.ok()) << claims.status().ToString();
  std::string plan = ExplainSeen(*db, int64_t{2000});  // every loop due
  EXPECT_NE(plan.find("loops_by_next"), std::string::npos) << plan;
  EXPECT_EQ(plan.find("loop_runs"), std::string::npos) << plan;
  db->Close();
}

// A listing looks each loop's open run up by the loop, whatever the
// statistics say: never every open run for each loop it lists (what the
// claim's plan did when the statistics were taken while no run was open).
TEST_P(LoopClaimPlanTest, AListingLooksUpEachOpenRunByItsLoop) {
  auto db = OpenRecording("ORDER BY l.created_at, l.loop_id");
  ASSERT_TRUE(db);
  ASSERT_TRUE(db->WriteSync([&](store::Tx& tx) {
                  DSH_RETURN_IF_ERROR(InsertDueLoops(tx, R"({"kind": "every", "every_seconds": 60})"));
                  // Every loop ran once, and its run is recorded ...
                  DSH_RETURN_IF_ERROR(
                      tx.Exec("INSERT INTO loop_runs (loop_id, nominal_at, claimed_at, claimed_by, claim_expires,"
                              " attempts, skipped, skipped_capped, result)"
                              " SELECT loop_id, 500, 500, 'another-host', 30500, 1, 0, 0, 'delivered' FROM loops")
                          .status());
                  // ... when the statistics are taken ...
                  DSH_RETURN_IF_ERROR(tx.Exec("ANALYZE").status());
                  // ... then half the loops are claimed again.
                  return ClaimHalfElsewhere(tx);
                }).ok());
  auto listed = db->ReadValue<std::vector<LoopRecord>>(
      [](store::Tx& tx) { return registry::ListActive(tx, {}); });
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  ASSERT_EQ(listed->size(), 4000u);
  EXPECT_TRUE(listed->front().open_claim.has_value());
  EXPECT_FALSE(listed->back().open_claim.has_value());
  std::string plan = ExplainSeen(*db);
  EXPECT_EQ(plan.find("loop_runs_expiring"), std::string::npos) << plan;
  // The open run and the last run, each found by its loop.
  const std::string by_loop = pg() ? "Index Cond: (loop_id = l.loop_id)" : "(loop_id=?)";
  size_t lookups = 0;
  for (size_t at = plan.find(by_loop); at != std::string::npos; at = plan.find(by_loop, at + 1)) ++lookups;
  EXPECT_EQ(lookups, 2u) << plan;
  db->Close();
}

// The take-over's reads of open runs by their claim's expiry still go
// through loop_runs_expiring (migration loop v3 narrowed its predicate).
TEST_P(LoopClaimPlanTest, TakeOversReadOpenRunsByExpiryThroughTheirIndex) {
  auto db = OpenRecording("claim_expires <= ?");
  ASSERT_TRUE(db);
  ASSERT_TRUE(db->WriteSync([&](store::Tx& tx) {
                  DSH_RETURN_IF_ERROR(
                      tx.Exec("WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 4000)"
                              " INSERT INTO loop_runs (loop_id, nominal_at, claimed_at, claimed_by, claim_expires,"
                              " attempts, skipped, skipped_capped, result)"
                              " SELECT 'loop_' || n, 1000, 1000, 'another-host', 31000 + n, 1, 0, 0,"
                              " CASE WHEN n % 100 = 0 THEN NULL ELSE 'delivered' END FROM g")
                          .status());
                  return tx.Exec("ANALYZE").status();
                }).ok());
  for (const char* needle : {"claim_expires <= ?", "SELECT DISTINCT claimed_by"}) {
    SCOPED_TRACE(needle);
    *seen_ = {needle, "", {}};
    auto claims = Claim(*db, 500, 64);
    ASSERT_TRUE(claims.ok()) << claims.status().ToString();
    std::string plan = ExplainSeen(*db);
    EXPECT_NE(plan.find("loop_runs_expiring"), std::string::npos) << plan;
  }
  db->Close();
}

// A claim writes its fresh occurrences a chunk of loops per statement (up
// to 64, padded): every loop of a large batch moves on once and gets its run
// row, and an occurrence whose run row exists already (the wall clock went
// back) moves its loop on without being claimed a second time.
TEST_P(LoopClaimPlanTest, AClaimOfManyLoopsWritesEachLoopAndRunOnce) {
  auto opened = store::Database::Open(backend_.Factory(), Migrations());
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  auto db = std::move(opened).value();
  constexpr int kLoops = 75;  // a chunk of 64 and one of 8, padded
  ASSERT_TRUE(db->WriteSync([](store::Tx& tx) {
                  DSH_RETURN_IF_ERROR(
                      tx.Exec("WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 75)"
                              " INSERT INTO loops (loop_id, prompt, schedule, target, created_at, due_at, next_at,"
                              " failures, state, version)"
                              " SELECT 'loop_' || n, 'p', '{\"kind\": \"every\", \"every_seconds\": 60}', 'global',"
                              " 0, 60000, 60000, 0, 'scheduled', 3 FROM g")
                          .status());
                  // loop_7's occurrence at 60 s was claimed before.
                  return tx.Exec("INSERT INTO loop_runs (loop_id, nominal_at, claimed_at, claimed_by, claim_expires,"
                                 " attempts, skipped, skipped_capped, result)"
                                 " VALUES ('loop_7', 60000, 60000, 'earlier', 90000, 1, 0, 0, 'delivered')")
                      .status();
                }).ok());
  auto claims = Claim(*db, 61'000, 256);
  ASSERT_TRUE(claims.ok()) << claims.status().ToString();
  ASSERT_EQ(claims->size(), static_cast<size_t>(kLoops - 1));
  std::set<std::string> claimed;
  for (const registry::Claim& c : *claims) {
    claimed.insert(c.loop.loop_id);
    EXPECT_EQ(c.nominal, 60'000);
    EXPECT_EQ(c.attempts, 1);
    EXPECT_EQ(c.loop.version, 4);
    EXPECT_EQ(c.loop.due_at, std::optional<int64_t>(120'000));
  }
  EXPECT_EQ(claimed.size(), static_cast<size_t>(kLoops - 1));
  EXPECT_FALSE(claimed.count("loop_7"));
  auto counts = db->ReadValue<std::array<int64_t, 3>>([](store::Tx& tx) -> Result<std::array<int64_t, 3>> {
    std::array<int64_t, 3> out{};
    DSH_RETURN_IF_ERROR(tx.Query(
        "SELECT (SELECT COUNT(*) FROM loops WHERE due_at = 120000 AND next_at = 120000 AND version = 4),"
        " (SELECT COUNT(*) FROM loop_runs WHERE claimed_by = 'this-host' AND nominal_at = 60000"
        "   AND claim_expires = 91000 AND result IS NULL),"
        " (SELECT COUNT(*) FROM loop_runs)",
        {}, [&](const store::Row& row) {
          out = {row.Int(0), row.Int(1), row.Int(2)};
          return Status::Ok();
        }));
    return out;
  });
  ASSERT_TRUE(counts.ok()) << counts.status().ToString();
  EXPECT_EQ((*counts)[0], kLoops);      // every loop moved on once, loop_7 too
  EXPECT_EQ((*counts)[1], kLoops - 1);  // a run row each, claimed now
  EXPECT_EQ((*counts)[2], kLoops);      // and loop_7's earlier one
  db->Close();
}

TEST_P(LoopTest, RegistersTheThreeToolsInTheLoopGroup) {
  for (const char* name : {"loop_create", "loop_list", "loop_delete"}) {
    ASSERT_NE(tools_->Find(name), nullptr) << name;
    EXPECT_EQ(tools_->GroupOf(name), "loop");
    EXPECT_EQ(tools_->Find(name)->parameters()["additionalProperties"], false);
  }
  EXPECT_EQ(tools_->List().size(), 3u);
}

TEST_P(LoopTest, EveryAfterAndCronAcceptOnlyTheirDocumentedFields) {
  std::string me = Session("default", Route("m1"));
  ExpectRejected(From(me), "loop_create", {{"prompt", "p"}, {"schedule", {{"kind", "every"}, {"after_seconds", 5}}}},
                 "after_seconds");
  ExpectRejected(From(me), "loop_create", {{"prompt", "p"}, {"schedule", {{"kind", "after"}, {"every_seconds", 5}}}},
                 "every_seconds");
  ExpectRejected(From(me), "loop_create",
                 {{"prompt", "p"}, {"schedule", {{"kind", "cron"}, {"expr", "* * * * *"}, {"every_seconds", 5}}}},
                 "every_seconds");
  ExpectRejected(From(me), "loop_create", {{"prompt", "p"}, {"schedule", {{"kind", "every"}, {"every_seconds", 5}, {"tz", "UTC"}}}},
                 "tz");
  ExpectRejected(From(me), "loop_create", {{"prompt", "p"}, {"schedule", Cron("0 0 30 2 *")}}, "schedule.expr",
                 "cron_never_fires");
  ExpectRejected(From(me), "loop_create", {{"prompt", "p"}, {"schedule", Cron("0 9 * * *", "CST")}}, "schedule.tz",
                 "invalid_time_zone");
  ExpectRejected(From(me), "loop_create", {{"prompt", "p"}, {"schedule", Every(5)}, {"time_in_seconds", 5}},
                 "time_in_seconds");
  ExpectRejected(From(me), "loop_create", {{"prompt", "p"}}, "schedule");
  for (const Json& s : {Every(60), After(60), Cron("*/5 * * * *", "Asia/Shanghai")}) {
    Json v = Ok(From(me), "loop_create", {{"prompt", "p"}, {"schedule", s}});
    EXPECT_EQ(v["schedule"], s);
  }
  // The deprecated alias maps to `every`.
  EXPECT_EQ(Ok(From(me), "loop_create", {{"prompt", "p"}, {"time_in_seconds", 30}})["schedule"], Every(30));
}

TEST_P(LoopTest, EveryDurationUsesSecondsAndRejectsZeroNegativeFractionalAndUnsafeValues) {
  std::string me = Session("default", Route("m1"));
  for (const Json& bad : {Json(0), Json(-5), Json(2.5), Json(9'007'199'254'740'992.0), Json("60")}) {
    ExpectRejected(From(me), "loop_create", {{"prompt", "p"}, {"schedule", {{"kind", "every"}, {"every_seconds", bad}}}},
                   "every_seconds");
    ExpectRejected(From(me), "loop_create", {{"prompt", "p"}, {"schedule", {{"kind", "after"}, {"after_seconds", bad}}}},
                   "after_seconds");
    ExpectRejected(From(me), "loop_create", {{"prompt", "p"}, {"time_in_seconds", bad}}, "time_in_seconds");
  }
  Json v = Ok(From(me), "loop_create", {{"prompt", "p"}, {"schedule", Every(90)}});
  EXPECT_EQ(v["next_at"], v["created_at"].get<int64_t>() + 90'000) << "seconds, not milliseconds";
}

TEST_P(LoopTest, PromptsAreTrimmedAndMustNotBeEmpty) {
  std::string me = Session("default", Route("m1"));
  EXPECT_EQ(Ok(From(me), "loop_create", {{"prompt", "  check it \n"}, {"schedule", Every(60)}})["prompt"], "check it");
  ExpectRejected(From(me), "loop_create", {{"prompt", " \n "}, {"schedule", Every(60)}}, "prompt");
  ExpectRejected(From(me), "loop_create", {{"prompt", ""}, {"schedule", Every(60)}}, "prompt");
  ExpectRejected(From(me), "loop_create", {{"schedule", Every(60)}}, "prompt");
}

TEST_P(LoopTest, AfterExecutesOnceAndDisappearsFromTheActiveListAfterSuccess) {
  std::string me = Session("default", Route("m1"));
  Json v = Ok(From(me), "loop_create", {{"prompt", "once"}, {"schedule", After(30)}});
  std::string id = v["loop_id"];
  EXPECT_EQ(v["state"], "scheduled");
  Advance(29s);
  EXPECT_TRUE(LoopMessages(me).empty()) << "not due yet";
  Advance(1s);
  EXPECT_EQ(LoopMessages(me).size(), 1u);
  EXPECT_TRUE(AllLoops().empty()) << AllLoops().dump();
  EXPECT_TRUE(Ok(From(me), "loop_list", Json::object()).empty());
  Advance(1h);
  EXPECT_EQ(LoopMessages(me).size(), 1u) << "an after loop runs once";
  auto runs = Runs(id);  // the run history keeps it
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].result, std::optional<std::string>("delivered"));
  EXPECT_EQ(runs[0].nominal_at, v["next_at"].get<int64_t>());
  EXPECT_EQ(runs[0].target_session_id, std::optional<std::string>(me));
}

TEST_P(LoopTest, TheOccurrenceIsDeliveredAsTheLoopMessageWithWakeup) {
  std::string me = Session("default", Route("m1"));
  std::string id = Ok(From(me), "loop_create", {{"prompt", "Check <deploy> & \"report\""}, {"schedule", Every(60)}})["loop_id"];
  Advance(60s);
  auto messages = LoopMessages(me);
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0], "<loop>\n  <loop_id>" + id +
                             "</loop_id>\n  <prompt>Check &lt;deploy&gt; &amp; &quot;report&quot;</prompt>\n</loop>");
  // Wakeup: the cold session was resumed and took it as a turn.
  ASSERT_TRUE(model_.WaitForRequests(1));
  EXPECT_EQ(model_.requests().at(0).messages.back().text, messages[0]);
}

TEST_P(LoopTest, CountsClaimedDeliveredAndSkippedOccurrencesAndTheirLateness) {
  std::string me = Session("default", Route("m1"));
  Ok(From(me), "loop_create", {{"prompt", "e"}, {"schedule", Every(60)}});
  Advance(60s);  // 00:01 delivered on time
  Close();       // down from 00:01 to 00:11:30
  clock_.Advance(10min + 30s);
  Open();
  ASSERT_TRUE(scheduler_->SettleForTesting());
  ASSERT_EQ(LoopMessages(me).size(), 2u);
  std::string text = metrics_.Render();
  for (const char* want : {
           "dsh_loop_occurrences_total{event=\"claimed\"} 2\n",
           "dsh_loop_occurrences_total{event=\"delivered\"} 2\n",
           "dsh_loop_occurrences_total{event=\"failed\"} 0\n",
           "dsh_loop_occurrences_total{event=\"skipped\"} 9\n",  // 00:02 .. 00:10; 00:11 delivered 30 s late
           "dsh_loop_delivery_lateness_seconds_bucket{le=\"0.0001\"} 1\n",
           "dsh_loop_delivery_lateness_seconds_bucket{le=\"10\"} 1\n",
           "dsh_loop_delivery_lateness_seconds_bucket{le=\"30\"} 2\n",
           "dsh_loop_delivery_lateness_seconds_sum 30\n",
           "dsh_loop_delivery_lateness_seconds_count 2\n",
       }) {
    EXPECT_NE(text.find(want), std::string::npos) << want << " in:\n" << text;
  }
}

TEST_P(LoopTest, EveryAndCronRecoverAfterProcessRestartWithoutBurstReplay) {
  std::string me = Session("default", Route("m1"));
  std::string every = Ok(From(me), "loop_create", {{"prompt", "e"}, {"schedule", Every(60)}})["loop_id"];
  std::string other = Session("default", Route("m1"));
  std::string cron = Ok(From(other), "loop_create", {{"prompt", "c"}, {"schedule", Cron("*/5 * * * *")}})["loop_id"];
  Advance(60s);
  EXPECT_EQ(LoopMessages(me).size(), 1u);
  Close();  // the host is down for ten every-periods and six cron periods
  clock_.Advance(10min + 30s);
  Open();
  ASSERT_TRUE(scheduler_->SettleForTesting());
  EXPECT_EQ(LoopMessages(me).size(), 2u) << "exactly one catch-up delivery";
  EXPECT_EQ(LoopMessages(other).size(), 1u);
  auto runs = Runs(every);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].skipped, 9);  // 00:02 .. 00:10 missed, 00:11 delivered
  EXPECT_EQ(runs[0].nominal_at, ToUnixMillis(FromUnixMillis(1'767'225'600'000)) + 11 * 60'000);
  EXPECT_EQ(Runs(cron).at(0).nominal_at, 1'767'225'600'000 + 10 * 60'000);  // 00:10, the latest due
  // And it continues from the next future occurrence, not from the backlog.
  EXPECT_EQ(View(every)["next_at"], 1'767'225'600'000 + 12 * 60'000);
  EXPECT_EQ(View(cron)["next_at"], 1'767'225'600'000 + 15 * 60'000);
  Advance(1min);
  EXPECT_EQ(LoopMessages(me).size(), 3u);
}

TEST_P(LoopTest, ATenYearOutageRecoversInstantlyWithOneDelivery) {
  std::string me = Session("default", Route("m1"));
  std::string id = Ok(From(me), "loop_create", {{"prompt", "tick"}, {"schedule", Cron("* * * * *")}})["loop_id"];
  Close();
  clock_.Advance(std::chrono::hours(24 * 3653));
  Open();
  ASSERT_TRUE(scheduler_->SettleForTesting());
  EXPECT_EQ(LoopMessages(me).size(), 1u);
  EXPECT_TRUE(Runs(id).at(0).skipped_capped);
}

TEST_P(LoopTest, TheWallClockSteppedBackFiresNothingEarlyAndSteppedForwardGivesOneOverdueDelivery) {
  std::string me = Session("default", Route("m1"));
  Ok(From(me), "loop_create", {{"prompt", "p"}, {"schedule", Every(600)}});
  Advance(5min);
  clock_.StepWall(-1h);
  Advance(10min);  // 10 minutes of real time passed, but the wall clock says 00:10 - 1h + ...
  EXPECT_TRUE(LoopMessages(me).empty()) << "a backward step must not fire early";
  clock_.StepWall(1h + 1h);
  ASSERT_TRUE(scheduler_->SettleForTesting());
  EXPECT_EQ(LoopMessages(me).size(), 1u) << "a forward step gives one overdue delivery";
  Advance(1s);
  EXPECT_EQ(LoopMessages(me).size(), 1u);
}

TEST_P(LoopTest, OmittedSessionIdTargetsTheCurrentSession) {
  std::string me = Session("reviewer", Route("m2"));
  Json v = Ok(From(me), "loop_create", {{"prompt", "p"}, {"schedule", After(1)}});
  EXPECT_EQ(v["session_id"], me);
  EXPECT_EQ(v["created_by_session_id"], me);
  Advance(1s);
  EXPECT_EQ(LoopMessages(me).size(), 1u);
  // A root call has no current session.
  ExpectRejected(agent::ToolContext{}, "loop_create", {{"prompt", "p"}, {"schedule", After(1)}}, "session_id");
}

TEST_P(LoopTest, SelfTargetsTheStableGlobalInterface) {
  std::string me = Session("default", Route("m1"));
  Json v = Ok(From(me), "loop_create", {{"prompt", "p"}, {"schedule", Every(60)}, {"session_id", "self"}});
  EXPECT_EQ(v["session_id"], "self");
  Advance(60s);
  Advance(60s);
  EXPECT_EQ(LoopMessages(global_).size(), 2u);
  EXPECT_TRUE(LoopMessages(me).empty());
  // With the global interface off, self is refused, never silently retargeted.
  global_on_ = false;
  ExpectRejected(From(me), "loop_create", {{"prompt", "p"}, {"schedule", Every(60)}, {"session_id", "self"}},
                 "global interface");
  // Reserved ids are exact and case-sensitive: "Self" is a (missing) session id.
  ExpectRejected(From(me), "loop_create", {{"prompt", "p"}, {"schedule", Every(60)}, {"session_id", "Self"}}, "Self",
                 codes::kNotFound);
  ExpectRejected(From(me), "loop_create", {{"prompt", "p"}, {"schedule", Every(60)}, {"session_id", "global"}},
                 "global");
}

TEST_P(LoopTest, NewCreatesAFreshSessionForEachOccurrence) {
  std::string me = Session("reviewer", Route("m2"));
  Json v = Ok(From(me), "loop_create", {{"prompt", "p"}, {"schedule", Every(60)}, {"session_id", "new"}});
  EXPECT_EQ(v["session_id"], "new");
  Advance(60s);
  Advance(60s);
  auto made = LoopSessions();
  ASSERT_EQ(made.size(), 2u);
  EXPECT_NE(made[0].id, made[1].id);
  for (const auto& h : made) {
    EXPECT_EQ(LoopMessages(h.id).size(), 1u);
    // Inherits the creator's preset and model.
    EXPECT_EQ(h.preset, std::optional<std::string>("reviewer"));
    EXPECT_EQ(h.route, Route("m2"));
  }
  // `after` with new makes one session.
  Ok(From(me), "loop_create", {{"prompt", "once"}, {"schedule", After(1)}, {"session_id", "new"}, {"preset", "coder"}});
  Advance(1s);
  Advance(1h);
  made = LoopSessions();
  EXPECT_EQ(std::count_if(made.begin(), made.end(), [](const auto& h) { return h.preset == std::optional<std::string>("coder"); }),
            1);
}

TEST_P(LoopTest, AnActualSessionIdResumesAndReusesThatSession) {
  std::string me = Session("default", Route("m1"));
  std::string target = Session("reviewer", Route("m2"));
  Ok(From(me), "loop_create", {{"prompt", "p"}, {"schedule", Every(60)}, {"session_id", target}});
  EXPECT_FALSE(manager_->LiveStatus(target).has_value());
  Advance(60s);
  ASSERT_TRUE(model_.WaitForRequests(1));
  EXPECT_TRUE(manager_->LiveStatus(target).has_value()) << "the cold target was resumed";
  // With its persisted preset and model: no override.
  EXPECT_EQ(model_.requests().at(0).model, "m2");
  EXPECT_EQ(model_.requests().at(0).messages.at(0).text, "You are reviewer.");
  Advance(60s);
  EXPECT_EQ(LoopMessages(target).size(), 2u);
  EXPECT_TRUE(LoopSessions().empty()) << "no new session is made for an explicit target";
  ExpectRejected(From(me), "loop_create", {{"prompt", "p"}, {"schedule", Every(60)}, {"session_id", "ses_missing"}},
                 "ses_missing", codes::kNotFound);
}

TEST_P(LoopTest, ExplicitPresetsAreAcceptedOnlyForNew) {
  std::string me = Session("default", Route("m1"));
  for (const Json& target : {Json(nullptr), Json("self"), Json(me)}) {
    Json args = {{"prompt", "p"}, {"schedule", Every(60)}, {"preset", "coder"}};
    if (!target.is_null()) args["session_id"] = target;
    ExpectRejected(From(me), "loop_create", args, "preset");
  }
  ExpectRejected(From(me), "loop_create", {{"prompt", "p"}, {"schedule", Every(60)}, {"session_id", "new"}, {"preset", "nope"}},
                 "preset");
  EXPECT_TRUE(Call(From(me), "loop_create", {{"prompt", "p"}, {"schedule", Every(60)}, {"session_id", "new"}, {"preset", "coder"}})
                  .ok());
}

TEST_P(LoopTest, ExistingSelfAndCurrentTargetsInheritPresetAndModelConfiguration) {
  std::string me = Session("coder", Route("m2"));
  Ok(From(me), "loop_create", {{"prompt", "mine"}, {"schedule", After(1)}});
  Ok(From(me), "loop_create", {{"prompt", "global"}, {"schedule", After(2)}, {"session_id", "self"}});
  Advance(1s);
  ASSERT_TRUE(model_.WaitForRequests(1));
  EXPECT_EQ(model_.requests().at(0).model, "m2");  // the current session's own route
  EXPECT_EQ(model_.requests().at(0).messages.at(0).text, "You are coder.");
  Advance(1s);
  ASSERT_TRUE(model_.WaitForRequests(2));
  EXPECT_EQ(model_.requests().at(1).model, "m1");  // the global session's
  EXPECT_EQ(model_.requests().at(1).messages.at(0).text, "You are default.");
  // new from a root call inherits the global interface session's.
  Ok(agent::ToolContext{}, "loop_create", {{"prompt", "fresh"}, {"schedule", After(1)}, {"session_id", "new"}});
  Advance(1s);
  auto made = LoopSessions();
  ASSERT_EQ(made.size(), 1u);
  EXPECT_EQ(made[0].route, Route("m1"));
  EXPECT_EQ(made[0].preset, std::optional<std::string>("default"));
}

TEST_P(LoopTest, ALoopMadeByARootCallNamesRootAsItsCreator) {
  Json made = Ok(agent::ToolContext{}, "loop_create", {{"prompt", "p"}, {"schedule", Every(60)}, {"session_id", "new"}});
  EXPECT_EQ(made["created_by_session_id"], "root");
  Json listed = AllLoops();
  ASSERT_EQ(listed.size(), 1u) << listed.dump();
  EXPECT_EQ(listed[0]["created_by_session_id"], "root");
}

TEST_P(LoopTest, NoPublicModelEffortOrModelSelectionFieldIsAccepted) {
  std::string me = Session("default", Route("m1"));
  for (const char* field : {"model", "model_effort", "reasoningEffort", "provider", "mode", "global"}) {
    ExpectRejected(From(me), "loop_create", {{"prompt", "p"}, {"schedule", Every(60)}, {field, "x"}}, field);
  }
  ExpectRejected(From(me), "loop_list", {{"session_id", "global"}, {"state", "failed"}}, "state");
  ExpectRejected(From(me), "loop_delete", {{"loop_id", "x"}, {"force", true}}, "force");
}

TEST_P(LoopTest, LoopListEmptyGlobalAndExactSessionFilteringReturnTheExpectedSets) {
  std::string a = Session("default", Route("m1"));
  std::string b = Session("default", Route("m1"));
  // Lists are in creation order.
  std::string la = Ok(From(a), "loop_create", {{"prompt", "a"}, {"schedule", Every(60)}})["loop_id"];
  clock_.Advance(1ms);
  std::string lb = Ok(From(a), "loop_create", {{"prompt", "b"}, {"schedule", Every(60)}, {"session_id", b}})["loop_id"];
  clock_.Advance(1ms);
  std::string ls = Ok(From(b), "loop_create", {{"prompt", "s"}, {"schedule", Every(60)}, {"session_id", "self"}})["loop_id"];
  clock_.Advance(1ms);
  std::string ln = Ok(From(b), "loop_create", {{"prompt", "n"}, {"schedule", Every(60)}, {"session_id", "new"}})["loop_id"];
  EXPECT_EQ(LoopIds(Ok(From(a), "loop_list", Json::object())), std::vector<std::string>{la});
  EXPECT_EQ(LoopIds(Ok(From(b), "loop_list", Json::object())), std::vector<std::string>{lb});
  EXPECT_EQ(LoopIds(Ok(From(a), "loop_list", {{"session_id", b}})), std::vector<std::string>{lb});
  EXPECT_EQ(LoopIds(Ok(From(a), "loop_list", {{"session_id", global_}})), std::vector<std::string>{ls});
  EXPECT_EQ(LoopIds(Ok(From(global_), "loop_list", Json::object())), std::vector<std::string>{ls});
  EXPECT_EQ(LoopIds(Ok(From(a), "loop_list", {{"session_id", "global"}})), (std::vector<std::string>{la, lb, ls, ln}));
  ExpectRejected(From(a), "loop_list", {{"session_id", "self"}}, "self");
  ExpectRejected(agent::ToolContext{}, "loop_list", Json::object(), "session_id");
  // Views carry the documented fields.
  Json v = Ok(From(a), "loop_list", Json::object())[0];
  for (const char* f : {"loop_id", "prompt", "schedule", "session_id", "created_by_session_id", "created_at", "next_at", "state"}) {
    EXPECT_TRUE(v.contains(f)) << f << " in " << v.dump();
  }
}

TEST_P(LoopTest, AnyLoopCanBeDeletedByGloballyUniqueLoopId) {
  std::string a = Session("default", Route("m1"));
  std::string b = Session("default", Route("m1"));
  std::string la = Ok(From(a), "loop_create", {{"prompt", "a"}, {"schedule", Every(60)}})["loop_id"];
  std::string lb = Ok(From(a), "loop_create", {{"prompt", "b"}, {"schedule", Every(60)}})["loop_id"];
  // From another session, and from a root call; the deprecated {id} form too.
  EXPECT_EQ(Ok(From(b), "loop_delete", {{"loop_id", la}}), (Json{{"deleted", true}, {"loop_id", la}}));
  EXPECT_EQ(Ok(agent::ToolContext{}, "loop_delete", {{"id", lb}}), (Json{{"deleted", true}, {"loop_id", lb}}));
  EXPECT_TRUE(AllLoops().empty());
  ExpectRejected(From(a), "loop_delete", {{"loop_id", la}}, la, "unknown_loop");
  ExpectRejected(From(a), "loop_delete", Json::object(), "loop_id");
  ExpectRejected(From(a), "loop_delete", {{"loop_id", la}, {"id", la}}, "not both");
  Advance(60s);
  EXPECT_TRUE(LoopMessages(a).empty()) << "a deleted loop never fires";
}

TEST_P(LoopTest, ViewsAreToldWhenTheLoopsChange) {
  std::atomic<int> changes{0};
  auto sub = hub_.SubscribeChanges([&](const session::EventHub::Change& c) {
    if (c.topic == "loops") ++changes;
  });
  std::string me = Session("default", Route("m1"));
  std::string id = Ok(From(me), "loop_create", {{"prompt", "tick"}, {"schedule", Every(60)}})["loop_id"];
  EXPECT_EQ(changes.load(), 1) << "created";
  Advance(60s);
  ASSERT_EQ(LoopMessages(me).size(), 1u);
  EXPECT_EQ(changes.load(), 3) << "claimed, then recorded";
  Ok(From(me), "loop_delete", {{"loop_id", id}});
  EXPECT_EQ(changes.load(), 4) << "deleted";
  ExpectRejected(From(me), "loop_delete", {{"loop_id", id}}, id, "unknown_loop");
  Ok(From(me), "loop_list", Json::object());
  EXPECT_EQ(changes.load(), 4) << "a failed delete and a read change nothing";
}

TEST_P(LoopTest, AFailedDeliveryIsRetriedWithBackoffAndARecurringLoopKeepsItsSchedule) {
  std::string me = Session("default", Route("m1"));
  std::string id = Ok(From(me), "loop_create", {{"prompt", "p"}, {"schedule", Every(3600)}, {"session_id", "self"}})["loop_id"];
  global_override_ = "ses_gone";  // the global session went missing
  Advance(1h);
  Json v = View(id);
  EXPECT_EQ(v["state"], "failed");
  EXPECT_EQ(v["last_result"], "failed");
  EXPECT_NE(v["last_error"].get<std::string>().find("ses_gone does not exist"), std::string::npos) << v.dump();
  int64_t failed_at = v["last_run_at"];
  EXPECT_EQ(v["next_at"], failed_at + 30'000) << "first retry after 30 s";
  Advance(30s);
  EXPECT_EQ(View(id)["next_at"], ToUnixMillis(clock_.Now()) + 60'000) << "then 1 min";
  global_override_.clear();
  Advance(1min);
  v = View(id);
  EXPECT_EQ(v["state"], "scheduled");
  EXPECT_EQ(v["last_result"], "delivered");
  EXPECT_FALSE(v.contains("last_error"));
  EXPECT_EQ(LoopMessages(global_).size(), 1u);
  auto runs = Runs(id);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].attempts, 3);
  EXPECT_EQ(runs[0].nominal_at, 1'767'225'600'000 + 3'600'000);
  EXPECT_EQ(v["next_at"], 1'767'225'600'000 + 2 * 3'600'000) << "the schedule is kept";
}

TEST_P(LoopTest, AClaimThatNeverReachedTheInboxIsRetriedAndOneThatDidIsFinishedWithoutASecondMessage) {
  std::string me = Session("default", Route("m1"));
  std::string first = Ok(From(me), "loop_create", {{"prompt", "one"}, {"schedule", After(10)}})["loop_id"];
  std::string second = Ok(From(me), "loop_create", {{"prompt", "two"}, {"schedule", After(10)}})["loop_id"];
  scheduler_->Stop();  // this host's scheduler is out of the way: a "dead" host claims instead
  clock_.Advance(10s);
  auto claims = db_->WriteValue<std::vector<registry::Claim>>([&](store::Tx& tx) {
    int64_t now = ToUnixMillis(clock_.Now());
    registry::ClaimOptions o{now, now, "dead-host", 30'000, 10};
    return registry::ClaimDue(tx, o, [](const Schedule& s) { return Timetable::Make(s, TimeZone::Utc()); },
                              [] { return std::string("unused"); });
  });
  ASSERT_TRUE(claims.ok()) << claims.status().ToString();
  ASSERT_EQ(claims->size(), 2u);
  EXPECT_EQ(View(first)["state"], "running");
  // The dead host delivered `second` before dying, but never recorded it.
  for (const auto& c : *claims) {
    if (c.loop.loop_id != second) continue;
    std::promise<Result<agent::Delivered>> p;
    agent::Delivery d{me, LoopMessage(second, "two"), agent::DeliveryMode::kSteer, true, OccurrenceKey(second, c.nominal),
                      Json::object()};
    manager_->Deliver(d, [&](Result<agent::Delivered> r) { p.set_value(std::move(r)); });
    ASSERT_TRUE(p.get_future().get().ok());
  }
  scheduler_ = MakeScheduler();
  service_ = std::make_shared<LoopService>(*db_, *store_, *scheduler_, clock_);
  scheduler_->Start();
  Advance(29s);
  EXPECT_EQ(LoopMessages(me).size(), 1u) << "the claims have not expired yet";
  Advance(1s);
  auto messages = LoopMessages(me);
  ASSERT_EQ(messages.size(), 2u) << "one message per occurrence";
  EXPECT_EQ(std::count(messages.begin(), messages.end(), LoopMessage(first, "one")), 1);
  EXPECT_EQ(std::count(messages.begin(), messages.end(), LoopMessage(second, "two")), 1);
  for (const auto& id : {first, second}) {
    auto runs = Runs(id);
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].result, std::optional<std::string>("delivered"));
    EXPECT_EQ(runs[0].attempts, 2);
  }
}

// The lease holder name of a process of this machine that has exited.
std::string DeadLocalHolder() {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  waitpid(pid, nullptr, 0);
  std::string live = agent::agent_store::NewLeaseHolder();
  return live.substr(0, live.find('/')) + "/" + std::to_string(pid) + "/dead";
}

TEST_P(LoopTest, AClaimOfADeadProcessOfThisMachineIsTakenOverAtOnceWhileARemoteClaimKeepsItsExpiry) {
  std::string me = Session("default", Route("m1"));
  std::string remote = Ok(From(me), "loop_create", {{"prompt", "remote"}, {"schedule", After(10)}})["loop_id"];
  std::string local = Ok(From(me), "loop_create", {{"prompt", "local"}, {"schedule", After(11)}})["loop_id"];
  scheduler_->Stop();  // other "hosts" claim instead, then are gone
  auto claim = [&](const std::string& holder, int64_t lookahead) {
    auto claims = db_->WriteValue<std::vector<registry::Claim>>([&](store::Tx& tx) {
      int64_t now = ToUnixMillis(clock_.Now());
      registry::ClaimOptions o{now, now + lookahead, holder, 30'000, 10};
      return registry::ClaimDue(tx, o, [](const Schedule& s) { return Timetable::Make(s, TimeZone::Utc()); },
                                [] { return std::string("unused"); });
    });
    EXPECT_TRUE(claims.ok()) << claims.status().ToString();
    return claims.ok() ? claims->size() : 0u;
  };
  int64_t created = ToUnixMillis(clock_.Now());
  clock_.Advance(10s);
  ASSERT_EQ(claim("other-machine/4242/abcd", 0), 1u);  // a host of another machine claims `remote`
  clock_.Advance(900ms);
  ASSERT_EQ(claim(DeadLocalHolder(), 200), 1u) << "`local` claimed 100 ms ahead by a process that then died";
  clock_.Advance(2s);

  // Meanwhile the views tell the truth: the dead claimer's occurrence is
  // overdue, the remote one running; both show the claimed occurrence.
  Json local_view = View(local);
  EXPECT_EQ(local_view["state"], "overdue") << local_view.dump();
  EXPECT_EQ(local_view["next_at"], created + 11'000) << local_view.dump();
  Json remote_view = View(remote);
  EXPECT_EQ(remote_view["state"], "running") << remote_view.dump();
  EXPECT_EQ(remote_view["next_at"], created + 10'000) << remote_view.dump();

  scheduler_ = MakeScheduler();
  service_ = std::make_shared<LoopService>(*db_, *store_, *scheduler_, clock_);
  scheduler_->Start();
  ASSERT_TRUE(scheduler_->SettleForTesting());
  EXPECT_EQ(LoopMessages(me), std::vector<std::string>{LoopMessage(local, "local")})
      << "the dead process's claim is taken over at once, the remote one is not";
  auto runs = Runs(local);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].result, std::optional<std::string>("delivered"));
  EXPECT_EQ(runs[0].attempts, 2);
  EXPECT_EQ(View(remote)["state"], "running");

  Advance(27s);  // the remote claim (made at +10 s) expires at +40 s
  EXPECT_EQ(LoopMessages(me).size(), 1u);
  Advance(1s);
  EXPECT_EQ(LoopMessages(me).size(), 2u) << "the remote claim is taken over once it expired";
  EXPECT_TRUE(View(remote).is_null()) << "completed";
}

TEST_P(LoopTest, AnOccurrenceDueWithinTheLookaheadIsClaimedAheadAndDeliveredAfterAMonotonicWait) {
  std::string me = Session("default", Route("m1"));
  std::string soon = Ok(From(me), "loop_create", {{"prompt", "soon"}, {"schedule", After(10)}})["loop_id"];
  std::string later = Ok(From(me), "loop_create", {{"prompt", "later"}, {"schedule", After(11)}})["loop_id"];
  Advance(10s - 150ms);  // 150 ms before `soon`, inside the default 200 ms lookahead; `later` is not
  EXPECT_EQ(LoopMessages(me), std::vector<std::string>{LoopMessage(soon, "soon")});
  auto runs = Runs(soon);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].claimed_at, runs[0].nominal_at - 150) << "claimed ahead of its time";
  EXPECT_EQ(runs[0].skipped, 0);
  EXPECT_EQ(runs[0].result, std::optional<std::string>("delivered"));
  EXPECT_TRUE(Runs(later).empty());
  EXPECT_EQ(View(later)["state"], "scheduled");
}

TEST_P(LoopTest, TwoSchedulersOnOneProfileDeliverEachOccurrenceOnce) {
  auto second = MakeScheduler();
  second->Start();
  std::vector<std::string> targets;
  for (int i = 0; i < 10; ++i) {
    targets.push_back(Session("default", Route("m1")));
    Ok(From(targets.back()), "loop_create", {{"prompt", "p"}, {"schedule", Every(60)}});
  }
  for (int i = 0; i < 5; ++i) {
    clock_.Advance(60s);
    ASSERT_TRUE(second->SettleForTesting());
    ASSERT_TRUE(scheduler_->SettleForTesting());
  }
  for (const auto& t : targets) EXPECT_EQ(LoopMessages(t).size(), 5u) << t;
  second->Stop();
}


session::Event V1Event(int64_t seq, int64_t at, Json data) {
  return session::Event{seq, std::string(kV1EventType), at, std::move(data)};
}

// Retention of the run history (retention.loop_runs, retention.loop_run_days)
// and of the inbox keys of occurrences that may still be delivered again.
constexpr int64_t kDay = 86'400'000;
constexpr int64_t kHour = 3'600'000;

class LoopRetentionTest : public LoopTest {
 protected:
  // A run row as ClaimDue and Record leave it; `result` nullopt = open.
  void PutRun(const std::string& loop_id, int64_t nominal, std::optional<std::string> result) {
    ASSERT_TRUE(db_->WriteSync([&](store::Tx& tx) {
                      store::Value r = result ? store::Value(std::string_view(*result)) : store::Value(nullptr);
                      return tx
                          .Exec("INSERT INTO loop_runs (loop_id, nominal_at, claimed_at, claimed_by, claim_expires,"
                                " attempts, skipped, skipped_capped, result) VALUES (?, ?, ?, 'h/1/x', ?, 1, 0, 0, ?)",
                                {std::string_view(loop_id), nominal, nominal, nominal + 100 * kDay * 10, r})
                          .status();
                    }).ok());
  }
  std::vector<int64_t> Nominals(const std::string& loop_id) {
    std::vector<int64_t> out;
    for (const auto& r : Runs(loop_id)) out.push_back(r.nominal_at);
    return out;
  }
  Result<store::Pruner::Stats> Prune(std::vector<store::PruneTask> tasks, int64_t slice_rows) {
    store::Pruner pruner(*db_, clock_, std::move(tasks), {.slice_rows = slice_rows});
    return pruner.RunRound();
  }
  std::string NewLoop(const std::string& me) {
    return Ok(From(me), "loop_create", {{"prompt", "p"}, {"schedule", Every(3600)}})["loop_id"];
  }
};

INSTANTIATE_TEST_SUITE_P(Backends, LoopRetentionTest, store::testing::BackendNames(),
                         store::testing::BackendTestName);

TEST_P(LoopRetentionTest, RunHistoryKeepsTheNewestRunsPerLoopAndNoneOlderThanTheAge) {
  scheduler_->Stop();  // the rows below are the whole history
  std::string me = Session("default", Route("m1"));
  std::string a = NewLoop(me), b = NewLoop(me);
  int64_t now = ToUnixMillis(clock_.Now());
  for (int i = 1; i <= 30; ++i) PutRun(a, now - i * kHour, "delivered");
  for (int i = 1; i <= 4; ++i) PutRun(a, now - 100 * kDay - i * kHour, "failed");
  for (int i = 1; i <= 5; ++i) PutRun(b, now - i * kHour, "delivered");
  for (int i = 1; i <= 3; ++i) PutRun("loop_deleted_long_ago", now - 100 * kDay - i * kHour, "delivered");

  auto round = Prune({registry::RunsPruneTask({10, 90 * kDay})}, 4);
  ASSERT_TRUE(round.ok()) << round.status().ToString();
  EXPECT_EQ(round->deleted, 4 + 3 + 20);
  EXPECT_LE(round->max_slice, 4);  // bounded slices
  std::vector<int64_t> newest;
  for (int i = 1; i <= 10; ++i) newest.push_back(now - i * kHour);
  EXPECT_EQ(Nominals(a), newest);
  EXPECT_EQ(Nominals(b).size(), 5u);
  EXPECT_TRUE(Runs("loop_deleted_long_ago").empty());

  // A second round (another host's, or the next one) finds nothing more.
  round = Prune({registry::RunsPruneTask({10, 90 * kDay})}, 4);
  ASSERT_TRUE(round.ok());
  EXPECT_EQ(round->deleted, 0);
  // 0 keeps forever.
  clock_.Advance(std::chrono::hours(24 * 1000));
  round = Prune({registry::RunsPruneTask({0, 0})}, 4);
  ASSERT_TRUE(round.ok());
  EXPECT_EQ(round->deleted, 0);
  EXPECT_EQ(Runs(a).size(), 10u);
}

TEST_P(LoopRetentionTest, OpenRunsRetriesAndALoopsNewestRunAreNeverPruned) {
  scheduler_->Stop();
  std::string me = Session("default", Route("m1"));
  std::string a = NewLoop(me);
  int64_t now = ToUnixMillis(clock_.Now());
  int64_t newest = now - 200 * kDay, retrying = now - 250 * kDay, open = now - 300 * kDay;
  PutRun(a, newest, "delivered");
  PutRun(a, retrying, "failed");
  PutRun(a, open, std::nullopt);  // claimed, never recorded
  for (int i = 1; i <= 3; ++i) PutRun(a, now - 400 * kDay - i, "delivered");
  ASSERT_TRUE(db_->WriteSync([&](store::Tx& tx) {
                    return tx
                        .Exec("UPDATE loops SET retry_nominal = ?, retry_at = ? WHERE loop_id = ?",
                              {retrying, now + 30'000, std::string_view(a)})
                        .status();
                  }).ok());

  auto round = Prune({registry::RunsPruneTask({1, 90 * kDay})}, 2);
  ASSERT_TRUE(round.ok()) << round.status().ToString();
  EXPECT_EQ(round->deleted, 3);
  EXPECT_EQ(Nominals(a), (std::vector<int64_t>{newest, retrying, open}));
  // Their inbox keys outlive inbox retention.
  auto keys = db_->ReadValue<std::vector<std::string>>([](store::Tx& tx) { return OccurrenceKeysToRetain(tx); });
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  std::sort(keys->begin(), keys->end());
  std::vector<std::string> expected = {OccurrenceKey(a, open), OccurrenceKey(a, retrying)};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(*keys, expected);

  // Once the loop is deleted nothing waits for a retry and no newest run is
  // kept; the open run stays until it is finished.
  Ok(From(me), "loop_delete", {{"loop_id", a}});
  round = Prune({registry::RunsPruneTask({1, 90 * kDay})}, 2);
  ASSERT_TRUE(round.ok());
  EXPECT_EQ(Nominals(a), (std::vector<int64_t>{open}));
}

// The crash window of DESIGN.md, a month long: a host delivered an
// occurrence, the turn consumed it, and the host died before recording it.
// Inbox retention runs first; the occurrence's key survives it, so the host
// that takes the claim over finds the duplicate and delivers nothing twice.
TEST_P(LoopRetentionTest, AnOccurrenceTakenOverAfterTheInboxWindowIsStillDeliveredOnce) {
  std::string me = Session("default", Route("m1"));
  std::string id = Ok(From(me), "loop_create", {{"prompt", "one"}, {"schedule", After(10)}})["loop_id"];
  scheduler_->Stop();
  clock_.Advance(10s);
  auto claims = db_->WriteValue<std::vector<registry::Claim>>([&](store::Tx& tx) {
    int64_t now = ToUnixMillis(clock_.Now());
    registry::ClaimOptions o{now, now, "dead-host", 30'000, 10};
    return registry::ClaimDue(tx, o, [](const Schedule& s) { return Timetable::Make(s, TimeZone::Utc()); },
                              [] { return std::string("unused"); });
  });
  ASSERT_TRUE(claims.ok() && claims->size() == 1u);
  agent::testing::EventWaiter waiter(hub_);
  for (const auto& [text, key] : std::vector<std::pair<std::string, std::string>>{
           {LoopMessage(id, "one"), OccurrenceKey(id, claims->front().nominal)}, {"unrelated", "k"}}) {
    std::promise<Result<agent::Delivered>> p;
    manager_->Deliver({me, text, agent::DeliveryMode::kFollowup, true, key, Json::object()},
                      [&](Result<agent::Delivered> r) { p.set_value(std::move(r)); });
    ASSERT_TRUE(p.get_future().get().ok());
  }
  waiter.WaitForTurnEnds(me, 2);  // both consumed

  clock_.Advance(std::chrono::hours(24 * 31));
  auto round = Prune({agent::agent_store::InboxPruneTask(30, {OccurrenceKeysToRetain}),
                      registry::RunsPruneTask({1000, 90 * kDay})},
                     100);
  ASSERT_TRUE(round.ok()) << round.status().ToString();
  EXPECT_EQ(round->deleted, 1) << "the unrelated message only";

  scheduler_ = MakeScheduler();
  service_ = std::make_shared<LoopService>(*db_, *store_, *scheduler_, clock_);
  scheduler_->Start();
  Advance(1s);
  EXPECT_EQ(LoopMessages(me), std::vector<std::string>{LoopMessage(id, "one")});
  auto runs = Runs(id);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].result, std::optional<std::string>("delivered"));
  EXPECT_EQ(runs[0].attempts, 2);
}

TEST(LoopV1, TheFoldKeepsTheLoopsThatAreStillActiveWithTheirLatestNextAt) {
  std::vector<session::Event> log = {
      V1Event(1, 1000, {{"id", "a"}, {"prompt", " check a "}, {"time_in_seconds", 60}, {"next_at", 61'000}}),
      V1Event(2, 2000, {{"id", "b"}, {"prompt", "check b"}, {"time_in_seconds", 30}}),
      V1Event(3, 3000, {{"id", "a"}, {"next_at", 121'000}}),  // dispatch
      V1Event(4, 4000, {{"id", "c"}, {"prompt", "check c"}, {"time_in_seconds", 10}}),
      V1Event(5, 5000, {{"id", "c"}}),  // delete
      V1Event(6, 6000, {{"action", "dispatch"}, {"id", "b"}, {"next_at", "2026-01-01T00:00:00Z"}}),
      V1Event(7, 7000, {{"id", "bad"}, {"prompt", "x"}, {"time_in_seconds", 0}}),  // skipped
      V1Event(8, 8000, Json::array()),                                               // skipped
      session::Event{9, "message/user", 9000, {{"text", "not a loop"}}},
  };
  auto active = FoldV1Loops("ses_x", log);
  ASSERT_EQ(active.size(), 2u);
  EXPECT_EQ(active[0].id, "a");
  EXPECT_EQ(active[0].prompt, "check a");
  EXPECT_EQ(active[0].time_in_seconds, 60);
  EXPECT_EQ(active[0].next_at, 121'000);
  EXPECT_EQ(active[1].id, "b");
  EXPECT_EQ(active[1].next_at, 1'767'225'600'000);
  EXPECT_EQ(active[1].created_at, 2000);
}

TEST_P(LoopTest, ActiveV1LoopsAreImportedOnceAndKeepDelivering) {
  std::string me = Session("default", Route("m1"));
  int64_t now = ToUnixMillis(clock_.Now());
  ASSERT_TRUE(store_->Append(me, {{"message/user", {{"text", "hi"}}},
                                  {kV1EventType, {{"id", "1"}, {"prompt", "v1 check"}, {"time_in_seconds", 60}, {"next_at", now + 60'000}}},
                                  {kV1EventType, {{"id", "2"}, {"prompt", "gone"}, {"time_in_seconds", 60}}},
                                  {kV1EventType, {{"id", "2"}}}})
                  .ok());
  auto first = ImportV1Loops(*db_, *store_, clock_);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->imported, 1);
  Json loops = AllLoops();
  ASSERT_EQ(loops.size(), 1u);
  EXPECT_EQ(loops[0]["prompt"], "v1 check");
  EXPECT_EQ(loops[0]["schedule"], Every(60));
  EXPECT_EQ(loops[0]["session_id"], me);
  EXPECT_EQ(loops[0]["next_at"], now + 60'000);
  // Never two copies: the marker skips the scan, and without it the per-loop
  // record still refuses a second import.
  EXPECT_TRUE(ImportV1Loops(*db_, *store_, clock_)->already_done);
  ASSERT_TRUE(db_->WriteValue<bool>([](store::Tx& tx) -> Result<bool> {
                   DSH_RETURN_IF_ERROR(tx.Exec("DELETE FROM loop_settings").status());
                   return true;
                 }).ok());
  auto again = ImportV1Loops(*db_, *store_, clock_);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->imported, 0);
  EXPECT_EQ(AllLoops().size(), 1u);
  // The v1 log keeps reading: its loop events are not conversation.
  auto events = store_->ReadEvents(me, 0, 100);
  ASSERT_TRUE(events.ok());
  auto blocks = session::ProjectConversation(me, *events);
  ASSERT_TRUE(blocks.ok()) << blocks.status().ToString();
  EXPECT_EQ(blocks->size(), 1u);
  // And the imported loop runs like any other.
  Advance(60s);
  EXPECT_EQ(LoopMessages(me).size(), 1u);
}

// --- HTTP routes (LoopRoutes) ---------------------------------------------

class LoopRoutesTest : public LoopTest {
 protected:
  Result<host::HttpRouteResponse> Get(const std::string& pattern, std::map<std::string, std::string> query,
                                      std::map<std::string, std::string, std::less<>> path_params = {}) {
    for (const auto& route : LoopRoutes(service_)) {
      if (route.pattern != pattern) continue;
      EXPECT_EQ(route.method, "GET");
      for (const auto& [key, value] : query) {
        EXPECT_NE(std::find(route.query_keys.begin(), route.query_keys.end(), key), route.query_keys.end())
            << pattern << " does not declare query key " << key;
      }
      std::promise<Result<host::HttpRouteResponse>> p;
      route.handler(host::HttpRouteRequest{std::move(path_params), std::move(query), ""},
                    [&](Result<host::HttpRouteResponse> r) { p.set_value(std::move(r)); });
      return p.get_future().get();
    }
    ADD_FAILURE() << "no route " << pattern;
    return Status("test", "no route");
  }
};

INSTANTIATE_TEST_SUITE_P(Backends, LoopRoutesTest, store::testing::BackendNames(), store::testing::BackendTestName);

TEST_P(LoopRoutesTest, ListsLikeLoopListForGlobalAndForOneSession) {
  std::string a = Session("default", Route("m1"));
  std::string b = Session("default", Route("m1"));
  std::string la = Ok(From(a), "loop_create", {{"prompt", "for a"}, {"schedule", Every(60)}})["loop_id"];
  std::string lb = Ok(From(b), "loop_create", {{"prompt", "for b"}, {"schedule", After(30)}})["loop_id"];

  auto all = Get("/api/loops", {{"session_id", "global"}});
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(all->status, 200);
  EXPECT_EQ(all->body["loops"], AllLoops());
  auto ids = LoopIds(all->body["loops"]);  // ordered by created_at, then id: the fake clock ties them
  std::sort(ids.begin(), ids.end());
  std::vector<std::string> want = {la, lb};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(ids, want);

  auto only_b = Get("/api/loops", {{"session_id", b}});
  ASSERT_TRUE(only_b.ok()) << only_b.status().ToString();
  EXPECT_EQ(LoopIds(only_b->body["loops"]), (std::vector<std::string>{lb}));
  EXPECT_EQ(only_b->body["loops"], Ok(From(b), "loop_list", Json::object()));
}

TEST_P(LoopRoutesTest, ListWithoutSessionIdIsRejectedNamingIt) {
  for (auto query : {std::map<std::string, std::string>{}, std::map<std::string, std::string>{{"session_id", ""}}}) {
    auto r = Get("/api/loops", query);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), codes::kInvalidArguments);
    EXPECT_NE(r.status().message().find("session_id"), std::string::npos) << r.status().message();
  }
}

TEST_P(LoopRoutesTest, RunsAreNewestFirstAndLimited) {
  std::string me = Session("default", Route("m1"));
  std::string id = Ok(From(me), "loop_create", {{"prompt", "tick"}, {"schedule", Every(60)}})["loop_id"];
  for (int i = 0; i < 3; ++i) Advance(60s);
  SettleTurns();

  auto r = Get("/api/loops/{id}/runs", {}, {{"id", id}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Json& runs = r->body["runs"];
  ASSERT_EQ(runs.size(), 3u) << runs.dump();
  auto history = Runs(id);
  for (size_t i = 0; i < history.size(); ++i) EXPECT_EQ(runs[i], registry::RunJson(history[i]));
  EXPECT_GT(runs[0]["nominal_at"].get<int64_t>(), runs[1]["nominal_at"].get<int64_t>()) << "newest first";

  auto one = Get("/api/loops/{id}/runs", {{"limit", "1"}}, {{"id", id}});
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  ASSERT_EQ(one->body["runs"].size(), 1u);
  EXPECT_EQ(one->body["runs"][0], runs[0]);
}

TEST_P(LoopRoutesTest, RunsPageBackwardsWithBeforeAndNextBeforeWithoutOverlapOrGap) {
  std::string me = Session("default", Route("m1"));
  std::string id = Ok(From(me), "loop_create", {{"prompt", "tick"}, {"schedule", Every(60)}})["loop_id"];
  for (int i = 0; i < 5; ++i) Advance(60s);
  SettleTurns();
  auto all = Get("/api/loops/{id}/runs", {}, {{"id", id}});
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->body["runs"].size(), 5u) << all->body.dump();
  EXPECT_FALSE(all->body.contains("next_before")) << "fewer than limit: the last page";

  // limit 2: pages of 2, 2 and 1; together exactly the whole history, in order.
  Json paged = Json::array();
  std::map<std::string, std::string> query = {{"limit", "2"}};
  std::vector<size_t> sizes;
  for (int page = 0; page < 10; ++page) {
    auto r = Get("/api/loops/{id}/runs", query, {{"id", id}});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const Json& runs = r->body["runs"];
    sizes.push_back(runs.size());
    for (const auto& run : runs) paged.push_back(run);
    if (!r->body.contains("next_before")) break;
    ASSERT_EQ(runs.size(), 2u) << "next_before only on a full page";
    EXPECT_EQ(r->body["next_before"], runs.back()["nominal_at"]);
    query["before"] = std::to_string(r->body["next_before"].get<int64_t>());
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{2, 2, 1}));
  EXPECT_EQ(paged, all->body["runs"]);

  // A history that is a whole number of pages ends with an empty page.
  auto five = Get("/api/loops/{id}/runs", {{"limit", "5"}}, {{"id", id}});
  ASSERT_TRUE(five.ok()) << five.status().ToString();
  ASSERT_TRUE(five->body.contains("next_before"));
  auto after_last = Get(
      "/api/loops/{id}/runs",
      {{"limit", "5"}, {"before", std::to_string(five->body["next_before"].get<int64_t>())}}, {{"id", id}});
  ASSERT_TRUE(after_last.ok()) << after_last.status().ToString();
  EXPECT_EQ(after_last->body, (Json{{"runs", Json::array()}}));

  // `before` is exclusive and need not be a run's instant.
  int64_t newest = all->body["runs"][0]["nominal_at"];
  auto below =
      Get("/api/loops/{id}/runs", {{"before", std::to_string(newest + 1)}, {"limit", "1"}}, {{"id", id}});
  ASSERT_TRUE(below.ok()) << below.status().ToString();
  EXPECT_EQ(below->body["runs"], Json::array({all->body["runs"][0]}));
  EXPECT_EQ(below->body["next_before"], newest);

  // A deleted loop's history still pages, and past its oldest run is empty, not unknown.
  Ok(From(me), "loop_delete", {{"loop_id", id}});
  auto gone = Get("/api/loops/{id}/runs", {{"before", "0"}}, {{"id", id}});
  ASSERT_TRUE(gone.ok()) << gone.status().ToString();
  EXPECT_TRUE(gone->body["runs"].empty());
  auto never = Get("/api/loops/{id}/runs", {{"before", "0"}}, {{"id", "loop_nope"}});
  ASSERT_FALSE(never.ok());
  EXPECT_EQ(never.status().code(), "unknown_loop");
}

TEST_P(LoopRoutesTest, RunsRejectABadBeforeNamingIt) {
  std::string me = Session("default", Route("m1"));
  std::string id = Ok(From(me), "loop_create", {{"prompt", "tick"}, {"schedule", Every(60)}})["loop_id"];
  for (const char* bad : {"-1", "x", "1.5", "", "9007199254740992"}) {
    auto r = Get("/api/loops/{id}/runs", {{"before", bad}}, {{"id", id}});
    ASSERT_FALSE(r.ok()) << "before=" << bad;
    EXPECT_EQ(r.status().code(), codes::kInvalidArguments);
    EXPECT_NE(r.status().message().find("`before`"), std::string::npos) << r.status().message();
  }
}

TEST_P(LoopRoutesTest, RunsRejectBadLimitsAndUnknownLoops) {
  std::string me = Session("default", Route("m1"));
  std::string id = Ok(From(me), "loop_create", {{"prompt", "tick"}, {"schedule", Every(60)}})["loop_id"];
  for (const char* bad : {"0", "1001", "-1", "x", "1.5", ""}) {
    auto r = Get("/api/loops/{id}/runs", {{"limit", bad}}, {{"id", id}});
    ASSERT_FALSE(r.ok()) << "limit=" << bad;
    EXPECT_EQ(r.status().code(), codes::kInvalidArguments);
    EXPECT_NE(r.status().message().find("limit"), std::string::npos) << r.status().message();
  }
  auto max = Get("/api/loops/{id}/runs", {{"limit", "1000"}}, {{"id", id}});
  ASSERT_TRUE(max.ok()) << max.status().ToString();
  EXPECT_TRUE(max->body["runs"].empty());

  auto missing = Get("/api/loops/{id}/runs", {}, {{"id", "loop_nope"}});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), "unknown_loop");
}

// --- run outcomes: the turn each delivery started ---------------------------

TEST_P(LoopTest, ALoopWhoseTurnsFailIsFailingAndItsRunsSayWhyUntilATurnCompletes) {
  auto& waiter = waiter_;
  std::string me = Session("default", Route("m1"));
  std::string id = Ok(From(me), "loop_create", {{"prompt", "check"}, {"schedule", Every(60)}})["loop_id"];
  EXPECT_EQ(View(id)["health"], "unknown") << "no run yet";
  model_.Push(ScriptedModel::Error("model_unavailable", "connection refused"));
  Advance(60s);
  auto log = waiter.WaitForTurnEnds(me, 1);
  Json v = View(id);
  EXPECT_EQ(v["last_result"], "delivered") << "spec 000's field keeps its meaning";
  EXPECT_EQ(v["health"], "failing");
  EXPECT_EQ(v["last_outcome"]["status"], "error");
  EXPECT_EQ(v["last_outcome"]["error"]["code"], "model_unavailable");
  EXPECT_EQ(v["last_outcome"]["session_id"], me);
  int64_t user_seq = 0;
  for (const auto& e : log) {
    if (e.type == session::event_types::kUserMessage) user_seq = e.seq;
  }
  EXPECT_EQ(v["last_outcome"]["seq"], user_seq);
  auto runs = Runs(id);
  ASSERT_EQ(runs.size(), 1u);
  ASSERT_TRUE(runs[0].outcome);
  EXPECT_EQ(runs[0].outcome->status, "error");
  EXPECT_EQ(registry::RunJson(runs[0])["outcome"]["error"]["message"], "connection refused");

  Advance(60s);  // the scripted model answers this time
  waiter.WaitForTurnEnds(me, 2);
  v = View(id);
  EXPECT_EQ(v["health"], "ok");
  EXPECT_EQ(v["last_outcome"]["status"], "completed");
  runs = Runs(id);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].outcome->status, "completed");
  EXPECT_EQ(runs[1].outcome->status, "error") << "older runs keep their outcome";
}

TEST_P(LoopTest, AFailedDeliveryHasOutcomeNoneAndIsAFailedActivityItem) {
  std::string id = Ok(From(global_), "loop_create", {{"prompt", "report"}, {"session_id", "self"}, {"schedule", Every(60)}})["loop_id"];
  global_on_ = false;
  Advance(60s);
  Json v = View(id);
  EXPECT_EQ(v["last_result"], "failed");
  EXPECT_EQ(v["health"], "failing");
  EXPECT_EQ(v["last_outcome"]["status"], "none");
  EXPECT_EQ(v["last_outcome"]["error"]["code"], "delivery_failed");
  auto failed = db_->ReadValue<agent::activity::Page>([](store::Tx& tx) {
    return agent::activity::List(tx, agent::activity::Filter::kFailed, 10, std::nullopt);
  });
  ASSERT_TRUE(failed.ok()) << failed.status().ToString();
  ASSERT_EQ(failed->items.size(), 1u);
  EXPECT_EQ(failed->items[0].kind, "loop_run");
  EXPECT_EQ(failed->items[0].loop_id, std::optional<std::string>(id));
  EXPECT_NE(failed->items[0].outcome.error_message.value_or("").find("global interface"), std::string::npos);
}

TEST_P(LoopRoutesTest, FinishedAfterLoopsAreListedNewestFirstAndPaged) {
  auto& waiter = waiter_;
  std::string me = Session("default", Route("m1"));
  std::string first = Ok(From(me), "loop_create", {{"prompt", "one"}, {"schedule", After(30)}})["loop_id"];
  std::string second = Ok(From(me), "loop_create", {{"prompt", "two"}, {"schedule", After(60)}})["loop_id"];
  std::string ongoing = Ok(From(me), "loop_create", {{"prompt", "on"}, {"schedule", Every(3600)}})["loop_id"];
  Advance(30s);
  waiter.WaitForTurnEnds(me, 1);
  Advance(30s);
  waiter.WaitForTurnEnds(me, 2);
  ASSERT_TRUE(scheduler_->SettleForTesting());

  auto active = Get("/api/loops", {{"session_id", "global"}});
  ASSERT_TRUE(active.ok());
  EXPECT_EQ(LoopIds(active->body["loops"]), (std::vector<std::string>{ongoing}));
  auto finished = Get("/api/loops", {{"session_id", "global"}, {"finished", "true"}});
  ASSERT_TRUE(finished.ok()) << finished.status().ToString();
  EXPECT_EQ(LoopIds(finished->body["loops"]), (std::vector<std::string>{second, first}));
  EXPECT_FALSE(finished->body.contains("next"));
  for (const auto& v : finished->body["loops"]) {
    EXPECT_EQ(v["state"], "completed");
    EXPECT_EQ(v["last_outcome"]["status"], "completed") << v.dump();
  }
  auto mine = Get("/api/loops", {{"session_id", me}, {"finished", "true"}});
  EXPECT_EQ(mine->body["loops"].size(), 2u);
  auto page = Get("/api/loops", {{"session_id", "global"}, {"finished", "true"}, {"limit", "1"}});
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(LoopIds(page->body["loops"]), (std::vector<std::string>{second}));
  ASSERT_TRUE(page->body.contains("next"));
  auto rest = Get("/api/loops", {{"session_id", "global"},
                                 {"finished", "true"},
                                 {"limit", "1"},
                                 {"before", std::to_string(page->body["next"].get<int64_t>())}});
  ASSERT_TRUE(rest.ok()) << rest.status().ToString();
  EXPECT_EQ(LoopIds(rest->body["loops"]), (std::vector<std::string>{first}));

  auto bad = Get("/api/loops", {{"session_id", "global"}, {"finished", "yes"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("finished"), std::string::npos);
  auto stray = Get("/api/loops", {{"session_id", "global"}, {"limit", "5"}});
  ASSERT_FALSE(stray.ok());
  EXPECT_EQ(stray.status().code(), codes::kInvalidArguments);
}

}  // namespace
}  // namespace dsh::plugins::loop
