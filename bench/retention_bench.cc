// Load program for inbox retention (docs/PERFORMANCE.md, "Retention").
//
//   retention_bench [--dir DIR] [--postgres CONNINFO] [--rows N] [--sessions S]
//                   [--rate R] [--seconds T] [--slice-rows K] [--pause-ms P]
//                   [--sync full|normal] [--quick]
//
// 1. Fill: a database whose inbox holds N consumed rows, each with an
//    idempotency key, consumed 60 days ago — written straight with SQL in
//    transactions of 500,000 rows, under the agent schema of version 1 (no
//    inbox_consumed index). Then the database is reopened with every
//    migration, as a host upgraded to this version does: the time of that
//    open is the one-off cost of building inbox_consumed.
// 2. Baseline: S live echo sessions; R deliveries/s (AgentManager::Deliver,
//    steer, round-robin over the sessions, each answered by a turn that
//    consumes it) for T seconds, no pruning. Deliver → acknowledgement
//    (durable) latency p50 / p99 / max.
// 3. Pruning: the same deliveries while a store::Pruner with the inbox task
//    (retention.inbox_days = 30, slices of K rows, P ms apart, the host's
//    defaults unless given) deletes the N old rows; the same latencies, the
//    pruning time and rate. Ends when every old row is gone.
// The program fails when a delivery fails or an old row is left.
//
// `--quick` (20,000 rows, 20 sessions, 50/s, 1 s) runs as a CTest smoke test.
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agent/agent_manager.h"
#include "agent/agent_store.h"
#include "agent/model.h"
#include "agent/tool_registry.h"
#include "bench_cli.h"
#include "bench_util.h"
#include "session/event_hub.h"
#include "session/session_store.h"
#include "store/pg_connection.h"
#include "store/pruner.h"
#include "store/sqlite_connection.h"

using namespace dsh;
using dsh::bench::AtLeast;
using dsh::bench::Fail;
using dsh::bench::NowNs;
using dsh::bench::ParseCommandLine;
using dsh::bench::Percentile;
using dsh::bench::UseBenchOptionDefaults;
using Steady = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

constexpr int64_t kDayMs = 86'400'000;

struct Args {
  std::string dir;
  std::string postgres;  // conninfo of an empty database; SQLite in --dir when empty
  int64_t rows = 10'000'000;
  int sessions = 100;
  int rate = 200;
  double seconds = 10;
  int64_t slice_rows = store::PrunerOptions{}.slice_rows;
  int pause_ms = static_cast<int>(store::PrunerOptions{}.pause.count());
  bool sync_full = true;
  bool quick = false;
};

class EchoRouter final : public agent::ModelRouter {
 public:
  Result<agent::ModelAdapter*> AdapterFor(const std::string&) override { return echo_.get(); }

 private:
  std::unique_ptr<agent::ModelAdapter> echo_ = agent::MakeEchoModel();
};

struct Latencies {
  double p50 = 0, p99 = 0, max = 0;
  size_t count = 0;
};

struct Bench {
  Args args;
  std::unique_ptr<store::Database> db;
  session::EventHub hub;
  std::unique_ptr<session::SessionStore> sessions;
  boost::asio::io_context ioc;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  EchoRouter router;
  agent::ToolRegistry tools;
  std::unique_ptr<agent::AgentManager> manager;
  std::vector<std::string> ids;

  std::unique_ptr<store::ConnectionFactory> Factory() {
    if (!args.postgres.empty())
      return std::make_unique<store::PgConnectionFactory>(store::PgOptions{args.postgres});
    store::SqliteOptions sqlite{.path = args.dir + "/dsh.db"};
    sqlite.synchronous = args.sync_full ? store::SqliteOptions::Synchronous::kFull
                                        : store::SqliteOptions::Synchronous::kNormal;
    return std::make_unique<store::SqliteConnectionFactory>(sqlite);
  }

  static std::vector<store::Migration> Schema(bool upgraded) {
    std::vector<store::Migration> migrations = session::SessionStore::Migrations();
    for (auto& m : agent::AgentManager::Migrations()) {
      if (upgraded || m.version == 1) migrations.push_back(m);
    }
    return migrations;
  }

  void Open(bool upgraded) {
    auto opened = store::Database::Open(Factory(), Schema(upgraded));
    if (!opened.ok()) Fail("open", opened.status());
    db = std::move(opened).value();
  }

  int64_t Scalar(const std::string& sql) {
    auto r = db->ReadValue<int64_t>([&](store::Tx& tx) -> Result<int64_t> {
      int64_t n = 0;
      DSH_RETURN_IF_ERROR(tx.Query(sql, {}, [&](const store::Row& row) {
        n = row.IsNull(0) ? 0 : row.Int(0);
        return Status::Ok();
      }));
      return n;
    });
    if (!r.ok()) Fail(sql.c_str(), r.status());
    return *r;
  }

  // Phase 1: N consumed rows with keys, 500,000 per transaction.
  void Fill() {
    Open(/*upgraded=*/false);
    int64_t consumed_at = ToUnixMillis(RealClock().Now()) - 60 * kDayMs;
    auto start = Steady::now();
    constexpr int64_t kChunk = 500'000;
    for (int64_t first = 0; first < args.rows; first += kChunk) {
      int64_t last = std::min(args.rows, first + kChunk) - 1;
      Status st = db->WriteSync([&](store::Tx& tx) {
        return tx
            .Exec(
                "WITH RECURSIVE n(x) AS (SELECT ? UNION ALL SELECT x + 1 FROM n WHERE x < ?)"
                " INSERT INTO inbox (message_id, session_id, key, mode, wakeup, text, meta, created_at, "
                "consumed_at)"
                " SELECT 'msg_bulk_' || x, 'ses_bulk_' || (x % 1000), 'loop:bulk:' || x, 'followup', 1,"
                " 'an old message that was consumed long ago', '{\"origin\":\"loop\"}', ?, ?"
                " FROM n",
                {first, last, consumed_at - kDayMs, consumed_at})
            .status();
      });
      if (!st.ok()) Fail("fill", st);
    }
    double fill_s = std::chrono::duration<double>(Steady::now() - start).count();
    db->Close();
    db.reset();
    // The upgrade: agent migration 2 builds inbox_consumed over them.
    start = Steady::now();
    Open(/*upgraded=*/true);
    double upgrade_s = std::chrono::duration<double>(Steady::now() - start).count();
    std::printf("## Retention: %lld consumed inbox rows (%s)\n\n", static_cast<long long>(args.rows),
                args.postgres.empty()
                    ? (args.sync_full ? "SQLite, synchronous=FULL" : "SQLite, synchronous=NORMAL")
                    : "PostgreSQL");
    std::printf("| figure | value |\n|---|---:|\n");
    std::printf("| fill (direct SQL, 500k rows per transaction) | %.1f s (%.0f rows/s) |\n", fill_s,
                static_cast<double>(args.rows) / fill_s);
    std::printf("| first open after the upgrade (builds inbox_consumed) | %.1f s |\n", upgrade_s);
    std::fflush(stdout);
  }

  void StartAgents() {
    sessions = std::make_unique<session::SessionStore>(*db, RealClock(), &hub);
    work.emplace(ioc.get_executor());
    for (int i = 0; i < 2; ++i) threads.emplace_back([this] { ioc.run(); });
    agent::AgentManagerOptions options;
    options.idle_eviction = std::chrono::hours(24);
    options.generate_titles = false;
    agent::AgentEnvironment env;
    env.preset = [](const std::optional<std::string>&) { return agent::PresetView{}; };
    manager = std::make_unique<agent::AgentManager>(ioc, *db, *sessions, router, tools, RealClock(),
                                                    std::move(env), options);
    manager->Start();
    for (int i = 0; i < args.sessions; ++i) {
      session::NewSession s;
      s.route = {"echo", "echo", std::nullopt};
      auto h = sessions->Create(s);
      if (!h.ok()) Fail("create session", h.status());
      ids.push_back(h->id);
    }
  }

  void StopAgents() {
    manager->Stop();
    db->Close();
    work.reset();
    for (auto& t : threads) t.join();
    manager.reset();
    sessions.reset();
    db.reset();
  }

  // Paced deliveries until `until()` says stop; deliver → ack latencies.
  Latencies Deliveries(const std::function<bool()>& until) {
    std::mutex mu;
    std::condition_variable answered;
    std::vector<double> ms;
    int64_t pending = 0;  // GUARDED_BY(mu)
    std::atomic<int64_t> failures{0};
    auto period = std::chrono::nanoseconds(1'000'000'000 / std::max(1, args.rate));
    auto next = Steady::now();
    for (uint64_t i = 0; !until(); ++i) {
      std::this_thread::sleep_until(next);
      next += period;
      int64_t sent = NowNs();
      {
        std::lock_guard lock(mu);
        ++pending;
      }
      manager->Deliver(
          agent::Delivery{ids[i % ids.size()], "a short message delivered while pruning runs",
                          agent::DeliveryMode::kSteer, true, std::nullopt, Json{{"origin", "bench"}}},
          [&, sent](Result<agent::Delivered> r) {
            if (!r.ok()) failures.fetch_add(1);
            std::lock_guard lock(mu);
            ms.push_back(static_cast<double>(NowNs() - sent) / 1e6);
            if (--pending == 0) answered.notify_all();
          });
    }
    std::unique_lock lock(mu);
    answered.wait(lock, [&] { return pending == 0; });
    if (failures.load() > 0)
      Fail("deliver", Status("bench", std::to_string(failures.load()) + " deliveries failed"));
    Latencies l;
    l.count = ms.size();
    l.p50 = Percentile(ms, 0.50);
    l.p99 = Percentile(ms, 0.99);
    l.max = ms.empty() ? 0 : ms.back();
    return l;
  }

  void Run() {
    Fill();
    StartAgents();
    auto baseline_end = Steady::now() + std::chrono::duration<double>(args.seconds);
    Latencies base = Deliveries([&] { return Steady::now() >= baseline_end; });

    store::PrunerOptions options;
    options.slice_rows = args.slice_rows;
    options.pause = std::chrono::milliseconds(args.pause_ms);
    store::Pruner pruner(*db, RealClock(), {agent::agent_store::InboxPruneTask(30, {})}, options);
    auto start = Steady::now();
    pruner.Start();
    auto deadline = start + std::chrono::hours(6);
    Latencies during =
        Deliveries([&] { return pruner.stats().deleted >= args.rows || Steady::now() > deadline; });
    double prune_s = std::chrono::duration<double>(Steady::now() - start).count();
    pruner.Stop();
    auto stats = pruner.stats();
    int64_t left = Scalar("SELECT COUNT(*) FROM inbox WHERE key LIKE 'loop:bulk:%'");
    int64_t recent = Scalar("SELECT COUNT(*) FROM inbox WHERE key IS NULL");

    std::printf("| pruning %lld rows: time / rate | %.1f s / **%.0f rows/s** |\n",
                static_cast<long long>(stats.deleted), prune_s, static_cast<double>(stats.deleted) / prune_s);
    std::printf("| slices / most rows in one / pause | %lld / %lld / %d ms |\n",
                static_cast<long long>(stats.slices), static_cast<long long>(stats.max_slice), args.pause_ms);
    std::printf(
        "| deliveries (%d/s over %d echo sessions) without pruning: deliver → ack p50 / p99 / max "
        "(%zu deliveries) | %.2f / %.2f / %.2f ms |\n",
        args.rate, args.sessions, base.count, base.p50, base.p99, base.max);
    std::printf(
        "| **the same while pruning**: p50 / p99 / max (%zu deliveries) | **%.2f / %.2f / %.2f ms** |\n",
        during.count, during.p50, during.p99, during.max);
    std::printf("| old rows left / messages of the run kept | %lld / %lld |\n", static_cast<long long>(left),
                static_cast<long long>(recent));
    if (args.postgres.empty()) {
      std::printf("| SQLite file (free pages are reused, the file does not shrink) | %.0f MiB |\n",
                  static_cast<double>(std::filesystem::file_size(args.dir + "/dsh.db")) / (1024.0 * 1024.0));
    }
    std::printf("\n");
    std::fflush(stdout);
    StopAgents();
    if (left != 0) Fail("prune", Status("bench", std::to_string(left) + " old rows were not pruned"));
    if (stats.failures != 0) Fail("prune", Status("bench", "a slice failed"));
  }
};

}  // namespace

int main(int argc, char** argv) {
  Bench b;
  Args& a = b.args;
  CLI::App app("Prunes a database of consumed inbox rows while deliveries go on; delivery latency with and "
               "without pruning.",
               "retention_bench");
  UseBenchOptionDefaults(app);
  app.add_option("--dir", a.dir, "Directory for the SQLite database (emptied first)");
  app.add_option("--postgres", a.postgres, "Conninfo of an empty PostgreSQL database, instead of SQLite");
  app.add_option("--rows", a.rows, "Consumed inbox rows to prune")->check(AtLeast<int64_t>(1));
  app.add_option("--sessions", a.sessions, "Sessions the deliveries go to")->check(AtLeast(1));
  app.add_option("--rate", a.rate, "Deliveries per second")->check(AtLeast(1));
  app.add_option("--seconds", a.seconds, "Seconds of deliveries without pruning")->check(AtLeast(0.1));
  app.add_option("--slice-rows", a.slice_rows, "Rows per pruning slice")->check(AtLeast<int64_t>(1));
  app.add_option("--pause-ms", a.pause_ms, "Pause between slices, ms")->check(AtLeast(0));
  std::string sync = a.sync_full ? "full" : "normal";
  app.add_option("--sync", sync, "SQLite synchronous")->check(CLI::IsMember({"full", "normal"}));
  app.add_flag("--quick", a.quick, "A small run (the smoke test)");
  if (auto exit_code = ParseCommandLine(app, argc, argv)) return *exit_code;
  a.sync_full = sync == "full";
  if (a.quick) {
    a.rows = std::min<int64_t>(a.rows, 20'000);
    a.sessions = std::min(a.sessions, 20);
    a.rate = std::min(a.rate, 50);
    a.seconds = std::min(a.seconds, 1.0);
  }
  if (a.postgres.empty()) {
    if (a.dir.empty()) {
      std::fprintf(stderr, "--dir DIR (or --postgres CONNINFO) is required\n");
      return 2;
    }
    std::filesystem::remove_all(a.dir);
    std::filesystem::create_directories(a.dir);
  }
  b.Run();
  return 0;
}
