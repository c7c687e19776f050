// Load program: the PostgreSQL backend and several hosts against SQLite
// (issue 20; docs/PERFORMANCE.md, "PostgreSQL and several hosts").
//
//   multihost_bench [--dir DIR] [--pg CONNINFO] [--seconds S] [--sessions K] [--late L]
//                   [--late-seconds T] [--burst B] [--only appends|loops] [--max-batch N] [--quick]
//
// Both backends in one run, each durable: SQLite with synchronous=FULL (a
// file in DIR) and PostgreSQL with fsync=on, synchronous_commit=on,
// full_page_writes=on. PostgreSQL is the server of `--pg` (a key=value
// conninfo without dbname; the bench creates and drops its databases there,
// so the role needs CREATEDB), else a throwaway cluster this program starts
// in DIR with `scripts/pg_test_server start DIR --durable` and stops at exit.
// With --quick and $DSH_TEST_PG set, the tests' server (fsync off) is used.
//
// A "host" is one Database handle with its own stack, in this process: its
// own writer connection and group commit, reader connections, io threads,
// and for the loop cases a whole host::Host (SessionStore, AgentManager
// with its own lease holder, the loop plugin's LoopScheduler) composed as
// `dsh web` composes it. Three hosts share one database as three processes
// would (SQLite: three handles on one file; PostgreSQL: three sets of
// connections, separate homes). Three processes would be more faithful (no
// shared heap or allocator); like them, the in-process hosts share this
// machine's cores — on three machines each host would have its own.
//
// 1. Durable appends per second, 64 appenders, each appending one event at a
//    time to its own session on an io strand and waiting for the
//    acknowledgement (store_bench's "async, on strands"): one host, then the
//    64 spread over three hosts (22 / 21 / 21). Then the baseline of issue
//    32: `pgbench` running an append's statements with 64 clients on the
//    same PostgreSQL server (PgbenchAppends).
// 2. Loops, with K live echo sessions (default 100) spread over the hosts
//    (session k is resumed by host k mod H): L loops (default 10,000) due
//    evenly over T seconds (default 10: 1,000 due per second), then a burst
//    of B loops (default 20,000) due at one instant. Lateness is
//    delivered_at − nominal_at of the first set's run rows; for the burst,
//    claimed occurrences per second (first claim → last claim), delivered
//    occurrences per second (first claim → last delivery, as loop_bench), and
//    the time until the last of their turns ended (inbox consumed_at). One
//    host and three hosts, on both backends. Then the reference for the CPU
//    per occurrence: `pgbench` writing an occurrence's rows with the hosts'
//    statements, three clients, on the same server (PgbenchOccurrences).
//
// `--only` runs one of the two; `--max-batch` caps the append case's
// transactions (DatabaseOptions::max_batch), for A/B comparisons.
//
// Checks (so the `--quick` smoke test fails on wrong behaviour): every due
// occurrence has exactly one delivered run row and exactly one `<loop>`
// inbox row, every delivered message's turn runs (a message left pending
// while the inbox stops draining for 20 s fails the run, after the report),
// and every acknowledged append is stored. Timings are printed, never
// asserted.
#include <libpq-fe.h>
#include <sys/resource.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include "base/clock.h"
#include "bench_cli.h"
#include "bench_util.h"
#include "host/host.h"
#include "plugins/loop/loop_plugin.h"
#include "plugins/loop/loop_registry.h"
#include "plugins/loop/loop_scheduler.h"
#include "session/session_store.h"
#include "store/pg_connection.h"
#include "store/sqlite_connection.h"

using namespace dsh;
using dsh::bench::Fail;
using dsh::bench::Percentile;
using namespace std::chrono_literals;
namespace loop = dsh::plugins::loop;

namespace {

struct Args {
  std::string dir;
  std::string pg;  // --pg
  double seconds = 5;
  int64_t sessions = 100;
  int64_t late = 10'000;
  double late_seconds = 10;
  int64_t burst = 20'000;
  std::string only;         // "", "appends" or "loops"
  size_t max_batch = 1024;  // DatabaseOptions::max_batch of the append case's handles
  bool quick = false;
};

constexpr int kAppenders = 64;
constexpr unsigned kIoThreads = 2;  // per host, as `dsh web` picks on this 2-core machine
constexpr int64_t kDay = 86'400;
// Pending inbox messages whose number does not go down for this long are
// stuck: the inbox sweep runs every second.
constexpr auto kStalled = std::chrono::seconds(20);

[[noreturn]] void Wrong(const std::string& what) {
  std::fprintf(stderr, "wrong result: %s\n", what.c_str());
  std::exit(1);
}

int64_t WallMs() { return ToUnixMillis(RealClock().Now()); }

// ---- CPU accounting ----

// CPU seconds (user + system) this process has used (RUSAGE_SELF), or its
// children that ended and were waited for (RUSAGE_CHILDREN).
double CpuSeconds(int who = RUSAGE_SELF) {
  rusage u{};
  getrusage(who, &u);
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return sec(u.ru_utime) + sec(u.ru_stime);
}

// CPU seconds used by the PostgreSQL server `postmaster` and its live
// children (the backends serving the hosts), read from /proc; 0 when the
// server is not on this machine.
double ServerCpuSeconds(pid_t postmaster) {
  if (postmaster <= 0) return 0;
  double ticks = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    std::string state;
    long long ppid = 0, skip = 0, utime = 0, stime = 0, cutime = 0, cstime = 0;
    rest >> state >> ppid;
    for (int i = 0; i < 9; ++i) rest >> skip;  // pgrp .. cmajflt
    rest >> utime >> stime >> cutime >> cstime;
    // The postmaster's children's times count the backends that ended
    // (it waits for each): without them a connection closed in the window
    // would take its whole CPU out of the difference.
    if (std::stoll(name) == postmaster) ticks += static_cast<double>(utime + stime + cutime + cstime);
    else if (ppid == postmaster) ticks += static_cast<double>(utime + stime);
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// ---- the PostgreSQL server ----

// The cluster this process started, stopped at exit (also after Fail()).
std::string g_own_cluster;

void StopOwnCluster() {
  if (g_own_cluster.empty()) return;
  std::string cmd = "'" DSH_PG_TEST_SERVER "' stop '" + g_own_cluster + "' >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0)
    std::fprintf(stderr, "could not stop the cluster in %s\n", g_own_cluster.c_str());
  std::error_code ec;
  std::filesystem::remove_all(g_own_cluster, ec);
  g_own_cluster.clear();
}

// One statement on a fresh connection; its rows' first column, joined by
// ", ". For the server's administration only (databases, settings).
Result<std::string> PgAdmin(const std::string& conninfo, const std::string& sql) {
  PGconn* c = PQconnectdb(conninfo.c_str());
  if (PQstatus(c) != CONNECTION_OK) {
    std::string msg = PQerrorMessage(c);
    PQfinish(c);
    return Status(codes::kUnavailable, "cannot connect to PostgreSQL: " + msg);
  }
  PGresult* r = PQexec(c, sql.c_str());
  Status st = Status::Ok();
  std::string out;
  if (PQresultStatus(r) == PGRES_TUPLES_OK) {
    for (int i = 0; i < PQntuples(r); ++i) out += (i ? ", " : "") + std::string(PQgetvalue(r, i, 0));
  } else if (PQresultStatus(r) != PGRES_COMMAND_OK) {
    st = Status(codes::kStorage, sql + ": " + PQresultErrorMessage(r));
  }
  PQclear(r);
  PQfinish(c);
  if (!st.ok()) return st;
  return out;
}

class PgServer {
 public:
  // The server of --pg, of $DSH_TEST_PG (quick only), or a durable cluster
  // started in `dir`.
  static PgServer Open(const Args& args, const std::filesystem::path& dir) {
    PgServer s;
    if (!args.pg.empty()) {
      s.base_ = args.pg;
      s.origin_ = "--pg";
    } else if (const char* env = std::getenv("DSH_TEST_PG"); args.quick && env != nullptr && *env != '\0') {
      s.base_ = env;
      s.origin_ = "$DSH_TEST_PG";
    } else {
      std::filesystem::path cluster = dir / "pg";
      std::filesystem::remove_all(cluster);
      g_own_cluster = cluster.string();
      std::atexit(StopOwnCluster);
      std::string cmd = "'" DSH_PG_TEST_SERVER "' start '" + cluster.string() + "' --durable";
      FILE* p = popen(cmd.c_str(), "r");
      if (p == nullptr) Fail("start PostgreSQL", Status(codes::kIo, "cannot run " + cmd));
      std::array<char, 512> buf{};
      while (fgets(buf.data(), buf.size(), p) != nullptr) s.base_ += buf.data();
      if (pclose(p) != 0) Fail("start PostgreSQL", Status(codes::kUnavailable, "failed: " + cmd));
      while (!s.base_.empty() && (s.base_.back() == '\n' || s.base_.back() == ' ')) s.base_.pop_back();
      s.origin_ = "a cluster of scripts/pg_test_server --durable in " + cluster.string();
    }
    auto settings = PgAdmin(s.base_ + " dbname=postgres",
                            "SELECT name || '=' || setting FROM pg_settings WHERE name IN ('fsync', "
                            "'synchronous_commit', 'full_page_writes', 'wal_sync_method', 'shared_buffers') "
                            "UNION ALL SELECT version() ORDER BY 1");
    if (!settings.ok()) Fail("PostgreSQL", settings.status());
    s.settings_ = *settings;
    return s;
  }

  // A new, empty database; its conninfo.
  std::string NewDatabase() {
    std::string name = "dsh_bench_" + std::to_string(::getpid()) + "_" + std::to_string(++databases_);
    auto made = PgAdmin(base_ + " dbname=postgres",
                        "CREATE DATABASE " + name + " TEMPLATE template0 ENCODING 'UTF8'");
    if (!made.ok()) Fail("create a database", made.status());
    return base_ + " dbname=" + name;
  }
  void DropDatabase(const std::string& conninfo) {
    std::string name = conninfo.substr(conninfo.rfind("dbname=") + 7);
    auto dropped = PgAdmin(base_ + " dbname=postgres", "DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
    if (!dropped.ok())
      std::fprintf(stderr, "drop %s: %s\n", name.c_str(), dropped.status().ToString().c_str());
  }
  const std::string& origin() const { return origin_; }
  const std::string& settings() const { return settings_; }

 private:
  std::string base_;
  std::string origin_;
  std::string settings_;
  int databases_ = 0;
};

// Where one case's database is: a fresh SQLite file, or a fresh PostgreSQL
// database.
struct Place {
  bool postgres = false;
  std::filesystem::path home;  // SQLite: the profile home holding dsh.db (shared by its hosts)
  std::string conninfo;        // PostgreSQL

  std::unique_ptr<store::ConnectionFactory> Factory() const {
    if (postgres) return std::make_unique<store::PgConnectionFactory>(store::PgOptions{conninfo});
    return std::make_unique<store::SqliteConnectionFactory>(
        store::SqliteOptions{.path = (home / "dsh.db").string()});
  }
};

struct Bench {
  Args args;
  std::filesystem::path dir;
  std::optional<PgServer> pg;
  int places = 0;

  Place NewPlace(bool postgres) {
    Place p;
    p.postgres = postgres;
    p.home = dir / ("case-" + std::to_string(++places));
    std::filesystem::remove_all(p.home);
    std::filesystem::create_directories(p.home);
    if (postgres) p.conninfo = pg->NewDatabase();
    return p;
  }
  void DropPlace(const Place& p) {
    if (p.postgres) pg->DropDatabase(p.conninfo);
    std::filesystem::remove_all(p.home);
  }

  // ---- 1. durable appends ----

  // One host of the append case: a Database handle, its SessionStore, and
  // io threads whose strands issue the appends.
  struct AppendHost {
    std::unique_ptr<store::Database> db;
    std::unique_ptr<session::SessionStore> store;
    boost::asio::io_context io;
    std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work;
    std::vector<std::thread> threads;
  };

  struct AppendFigures {
    double per_second = 0, commits_per_second = 0, per_commit = 0;
    bench::WriterTime writer;  // mean over the hosts
  };

  AppendFigures Appends(const Place& place, int hosts) {
    std::vector<std::unique_ptr<AppendHost>> h;
    for (int i = 0; i < hosts; ++i) {
      auto host = std::make_unique<AppendHost>();
      auto db = store::Database::Open(place.Factory(), session::SessionStore::Migrations(),
                                      store::DatabaseOptions{.max_batch = args.max_batch});
      if (!db.ok()) Fail("open database", db.status());
      host->db = std::move(db).value();
      host->store = std::make_unique<session::SessionStore>(*host->db, RealClock());
      h.push_back(std::move(host));
    }
    struct Appender {
      AppendHost* host;
      std::string session_id;
      std::optional<boost::asio::strand<boost::asio::io_context::executor_type>> strand;
      int64_t acknowledged = 0;  // strand state
    };
    std::vector<Appender> appenders(kAppenders);
    for (int i = 0; i < kAppenders; ++i) {
      Appender& a = appenders[i];
      a.host = h[static_cast<size_t>(i % hosts)].get();
      auto made = a.host->store->Create({.route = {"echo", "echo", std::nullopt}});
      if (!made.ok()) Fail("create session", made.status());
      a.session_id = made->id;
      a.strand.emplace(boost::asio::make_strand(a.host->io));
    }
    const Json data = {{"text", "a typical short assistant message of about this length, with some words"}};
    std::atomic<bool> stop{false};
    std::atomic<int64_t> done{0};
    std::atomic<int> running{kAppenders};
    std::function<void(int)> next = [&](int i) {
      Appender& a = appenders[i];
      a.host->store->AppendAsync(a.session_id, {{"message/assistant", data}},
                                 [&, i](Result<std::vector<session::Event>> r) {
                                   if (!r.ok()) Fail("append", r.status());
                                   done.fetch_add(1, std::memory_order_relaxed);
                                   boost::asio::post(*appenders[i].strand, [&, i] {
                                     appenders[i].acknowledged++;
                                     if (!stop.load(std::memory_order_relaxed)) return next(i);
                                     running--;
                                     running.notify_all();
                                   });
                                 });
    };
    for (auto& host : h) {
      host->work.emplace(host->io.get_executor());
      for (unsigned t = 0; t < kIoThreads; ++t) host->threads.emplace_back([io = &host->io] { io->run(); });
    }
    for (int i = 0; i < kAppenders; ++i) boost::asio::post(*appenders[i].strand, [&, i] { next(i); });

    // A short warm-up, then the measured window.
    std::this_thread::sleep_for(std::chrono::duration<double>(std::min(0.5, args.seconds / 4)));
    std::vector<store::Database::Stats> before;
    for (auto& host : h) before.push_back(host->db->stats());
    const int64_t done_before = done.load();
    const auto started = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(args.seconds));
    const int64_t done_after = done.load();
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    AppendFigures f;
    f.per_second = static_cast<double>(done_after - done_before) / elapsed;
    uint64_t commits = 0, jobs = 0;
    for (size_t i = 0; i < h.size(); ++i) {
      auto after = h[i]->db->stats();
      commits += after.commits - before[i].commits;
      jobs += after.jobs - before[i].jobs;
      auto w = bench::WriterPerCommit(before[i], after, elapsed);
      f.writer.jobs += w.jobs / hosts;
      f.writer.commit += w.commit / hosts;
      f.writer.callbacks += w.callbacks / hosts;
      f.writer.waiting += w.waiting / hosts;
    }
    f.commits_per_second = static_cast<double>(commits) / elapsed;
    f.per_commit = commits ? static_cast<double>(jobs) / static_cast<double>(commits) : 0;

    stop = true;
    for (int left = running.load(); left > 0; left = running.load()) running.wait(left);
    for (auto& host : h) {
      host->work.reset();
      for (auto& t : host->threads) t.join();
    }
    // Every acknowledged append is stored, at the seq it was given.
    for (const Appender& a : appenders) {
      auto header = h[0]->store->Get(a.session_id);
      if (!header.ok()) Fail("read session", header.status());
      if (header->last_seq != a.acknowledged) {
        Wrong("session " + a.session_id + " holds " + std::to_string(header->last_seq) + " events; " +
              std::to_string(a.acknowledged) + " were acknowledged");
      }
    }
    for (auto& host : h) host->db->Close();
    return f;
  }

  // Debian's newest pgbench; empty when there is none.
  static std::string FindPgbench() {
    std::string pgbench;
    std::error_code ec;
    for (const auto& dir : std::filesystem::directory_iterator("/usr/lib/postgresql", ec)) {
      auto candidate = dir.path() / "bin" / "pgbench";
      if (std::filesystem::exists(candidate) && candidate.string() > pgbench) pgbench = candidate.string();
    }
    return pgbench;
  }

  // Runs pgbench with `script` and `clients` clients for about
  // args.seconds against `conninfo`; the transactions it committed (0 when
  // its clients were still connecting when the time was up). Fails the run
  // when pgbench fails (a script the schema no longer fits).
  int64_t RunPgbench(const std::string& pgbench, const std::filesystem::path& script, int clients,
                     const std::string& conninfo, const std::filesystem::path& out) {
    char duration[16];
    std::snprintf(duration, sizeof duration, "%d", std::max(1, static_cast<int>(args.seconds + 0.5)));
    std::string cmd = "'" + pgbench + "' -n -M prepared -c " + std::to_string(clients) + " -j " +
                      std::to_string(std::max(1u, std::thread::hardware_concurrency())) + " -T " + duration +
                      " -f '" + script.string() + "' '" + conninfo + "' > '" + out.string() + "' 2>&1";
    auto text = [&] {
      std::ifstream log(out);
      return std::string((std::istreambuf_iterator<char>(log)), {});
    };
    if (std::system(cmd.c_str()) != 0) Fail("pgbench", Status(codes::kUnavailable, cmd + ":\n" + text()));
    std::istringstream lines(text());
    const std::string processed = "number of transactions actually processed: ";
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind(processed, 0) == 0) return std::stoll(line.substr(processed.size()));
    }
    Fail("pgbench", Status(codes::kInternal, "no `" + processed + "` line in " + out.string()));
  }

  // The physical limit of appends on this server (issue 32): `pgbench`,
  // PostgreSQL's own load driver, running an append's statements — the
  // session row locked, the event inserted, the row's counters set — with
  // kAppenders clients, one session each, one transaction per append, for
  // args.seconds. Its transactions per second; -1 when it committed none
  // in that time; 0 when pgbench is missing
  // (it comes with Debian's postgresql package).
  double PgbenchAppends(const Place& place) {
    const std::string pgbench = FindPgbench();
    if (pgbench.empty()) return 0;
    {
      auto db = store::Database::Open(place.Factory(), session::SessionStore::Migrations());
      if (!db.ok()) Fail("open database", db.status());
      session::SessionStore store(**db, RealClock());
      for (int i = 0; i < kAppenders; ++i) {
        auto made = store.Create({.id = "ses_pgbench_" + std::to_string(i), .route = {"echo", "echo", std::nullopt}});
        if (!made.ok()) Fail("create session", made.status());
      }
      (*db)->Close();
    }
    // The same statements AppendTx runs on PostgreSQL, with a data text of
    // the same length as Appends' events.
    const std::filesystem::path script = place.home / "append.sql";
    std::ofstream(script) << "BEGIN;\n"
                             "SELECT num, last_seq + 1 AS seq, recent_tail AS tail FROM sessions"
                             " WHERE id = 'ses_pgbench_' || :client_id FOR NO KEY UPDATE \\gset\n"
                             "INSERT INTO events_recent (session_num, seq, type, at, data, prev) VALUES (:num, :seq,"
                             " 'message/assistant', 1764892800000, '{\"text\":\"a typical short assistant message of"
                             " about this length, with some words\"}', :tail) RETURNING id \\gset\n"
                             "UPDATE sessions SET last_seq = :seq, recent_tail = :id, updated_at = CASE WHEN updated_at"
                             " > 1764892800000 THEN updated_at ELSE 1764892800000 END WHERE num = :num;\n"
                             "END;\n";
    const std::filesystem::path out = place.home / "pgbench.out";
    const int64_t committed = RunPgbench(pgbench, script, kAppenders, place.conninfo, out);
    // Its 64 clients did not all connect within the run (a loaded machine,
    // a --quick run's one second): no rate.
    if (committed == 0) return -1;
    std::ifstream log(out);
    for (std::string line; std::getline(log, line);) {
      if (line.rfind("tps = ", 0) == 0) return std::stod(line.substr(6));
    }
    Fail("pgbench", Status(codes::kInternal, "no `tps = ` line in " + out.string()));
  }

  // What an occurrence's own writes cost PostgreSQL driven by its own load
  // program, the reference for the loop case's CPU per occurrence on this
  // server (as PgbenchAppends is for appends): pgbench, three
  // clients (as three hosts), each on sessions of its own, writing in one
  // transaction sixteen occurrences' rows with the statements' shapes the
  // hosts use — the loop claimed (its row and a run row), the `<loop>`
  // delivery (its inbox row and unread count), the turn (the session row
  // locked, two events, the session's counters, a search document, the
  // inbox row started and consumed with its outcome) and the record (run
  // and loop rows) — and nothing else: none of the hosts' reads (pending
  // messages, leases, the claim's search for due loops), so it costs less
  // than an occurrence can — but statement by statement, where the hosts
  // write a claim's loops together. Server and pgbench CPU in ms per
  // occurrence; nullopt without pgbench or when it committed nothing.
  struct PgbenchCpu {
    double server_ms = 0, pgbench_ms = 0;
    int64_t occurrences = 0;
  };
  std::optional<PgbenchCpu> PgbenchOccurrences(const Place& place) {
    const std::string pgbench = FindPgbench();
    if (pgbench.empty()) return std::nullopt;
    constexpr int kClients = 3, kSessionsEach = 30, kLoops = 100'000, kPerTransaction = 16;
    {
      std::unique_ptr<host::Host> h = OpenHost(place, 0);  // the whole schema
      for (int i = 0; i < kClients * kSessionsEach; ++i) {
        session::NewSession s = h->DefaultNewSession();
        s.id = "ses_pgbench_" + std::to_string(i);
        auto made = h->sessions().Create(s);
        if (!made.ok()) Fail("create session", made.status());
      }
      h->Stop();
      h->Close();
    }
    auto seeded = PgAdmin(place.conninfo,
                          "INSERT INTO loops (loop_id, prompt, schedule, target, created_at, due_at, next_at,"
                          " failures, state, version) SELECT 'loop_' || i, 'a prompt of typical length for a loop',"
                          " '{\"kind\":\"every\",\"every_seconds\":60}', 'ses_pgbench_' || (i % " +
                              std::to_string(kClients * kSessionsEach) +
                              "), 0, 1000, 1000, 0, 'scheduled', 1 FROM generate_series(1, " +
                              std::to_string(kLoops) + ") i");
    if (!seeded.ok()) Fail("seed loops", seeded.status());
    if (auto analyzed = PgAdmin(place.conninfo, "VACUUM ANALYZE"); !analyzed.ok()) Fail("analyze", analyzed.status());
    // pgbench takes `:name` inside a literal for a variable: no colon in one.
    std::string occurrence =
        "\\set s :client_id * " + std::to_string(kSessionsEach) + " + random(0, " +
        std::to_string(kSessionsEach - 1) + ")\n\\set l random(1, " + std::to_string(kLoops) +
        ")\n"
        "\\set k random(1, 1000000000000)\n"
        "UPDATE loops SET due_at = 61000, next_at = 61000, version = version + 1"
        " WHERE loop_id = 'loop_' || CAST(:l AS text);\n"
        "INSERT INTO loop_runs (loop_id, nominal_at, claimed_at, claimed_by, claim_expires, attempts, skipped,"
        " skipped_capped) VALUES ('loop_' || CAST(:l AS text), :k, 1000, 'host-1', 31000, 1, 0, 0);\n"
        "INSERT INTO inbox (message_id, session_id, key, mode, wakeup, text, meta, created_at, kind, loop_id,"
        " nominal_at, schedule_id, status, read) VALUES ('msg_' || CAST(:k AS text), 'ses_pgbench_' || CAST(:s AS"
        " text), 'loop_' || CAST(:l AS text) || '/' || CAST(:k AS text), 'followup', 1, '<loop id=\"loop_x\">a"
        " prompt of typical length for a loop</loop>', '{}', 1000, 'loop_run', 'loop_' || CAST(:l AS text), :k,"
        " 'sched_x', 'pending', 0) RETURNING num AS inum \\gset\n"
        "INSERT INTO activity_unread_shards (session_id, shard, n) VALUES ('ses_pgbench_' || CAST(:s AS text),"
        " pg_backend_pid() % 8, CAST(1 AS bigint)) ON CONFLICT (session_id, shard) DO UPDATE SET n ="
        " activity_unread_shards.n + 1;\n"
        "SELECT num AS snum, last_seq + 1 AS seq, recent_tail AS tail FROM sessions"
        " WHERE id = 'ses_pgbench_' || CAST(:s AS text) FOR NO KEY UPDATE \\gset\n"
        "INSERT INTO events_recent (session_num, seq, type, at, data, prev) VALUES (:snum, :seq, 'message/user',"
        " 1000, '{\"text\":\"<loop id=\\\"loop_x\\\">a prompt of typical length for a loop</loop>\",\"message_id\":"
        "\"msg_x\"}', :tail) RETURNING id AS e1 \\gset\n"
        "INSERT INTO events_recent (session_num, seq, type, at, data, prev) VALUES (:snum, :seq + 1,"
        " 'message/assistant', 1001, '{\"text\":\"a prompt of typical length for a loop\"}', :e1)"
        " RETURNING id AS e2 \\gset\n"
        "UPDATE sessions SET last_seq = :seq + 1, recent_tail = :e2, updated_at = GREATEST(updated_at, 1001)"
        " WHERE num = :snum;\n"
        "INSERT INTO search_docs (session_num, seq, at, body) VALUES (:snum, :seq, 1000,"
        " 'a prompt of typical length for a loop');\n"
        "UPDATE inbox SET seq = :seq, started_at = 1000 WHERE num = :inum;\n"
        "UPDATE inbox SET consumed_at = 1001, status = 'ok', ended_at = 1001, input_tokens = 10,"
        " output_tokens = 10, summary = 'a prompt of typical length' WHERE num = :inum;\n"
        "UPDATE loop_runs SET result = 'delivered', delivered_at = 1001, message_id = 'msg_' || CAST(:k AS text),"
        " target_session_id = 'ses_pgbench_' || CAST(:s AS text)"
        " WHERE loop_id = 'loop_' || CAST(:l AS text) AND nominal_at = :k;\n"
        "UPDATE loops SET state = 'scheduled', last_run_at = 1001, last_result = 'delivered', failures = 0"
        " WHERE loop_id = 'loop_' || CAST(:l AS text);\n";
    const std::filesystem::path script = place.home / "occurrences.sql";
    {
      std::ofstream file(script);
      file << "BEGIN;\n";
      for (int i = 0; i < kPerTransaction; ++i) file << occurrence;
      file << "END;\n";
    }
    const pid_t postmaster = Postmaster(place.conninfo);
    // pgbench counts among the children once its shell is waited for.
    const double server0 = ServerCpuSeconds(postmaster), pgbench0 = CpuSeconds(RUSAGE_CHILDREN);
    const int64_t committed = RunPgbench(pgbench, script, kClients, place.conninfo, place.home / "occurrences.out");
    const double server = ServerCpuSeconds(postmaster) - server0,
                 own = CpuSeconds(RUSAGE_CHILDREN) - pgbench0;
    if (committed == 0 || postmaster == 0) return std::nullopt;
    PgbenchCpu f;
    f.occurrences = committed * kPerTransaction;
    f.server_ms = server * 1000.0 / static_cast<double>(f.occurrences);
    f.pgbench_ms = own * 1000.0 / static_cast<double>(f.occurrences);
    return f;
  }

  // ---- 2. loops ----

  static std::string LoopId(int64_t i) {
    char id[48];
    std::snprintf(id, sizeof id, "loop_mh_%07lld", static_cast<long long>(i));
    return id;
  }
  static std::string SessionId(int64_t k) {
    char id[48];
    std::snprintf(id, sizeof id, "ses_mhbench_%04lld", static_cast<long long>(k));
    return id;
  }

  std::unique_ptr<host::Host> OpenHost(const Place& place, int index) {
    host::HostOptions options;
    std::filesystem::path home = place.home;
    if (place.postgres) home /= "host-" + std::to_string(index);  // separate homes, one database
    options.home = home.string();
    std::optional<std::string> url;
    if (place.postgres) url = place.conninfo;
    options.env = [url](const std::string& name) -> std::optional<std::string> {
      if (name == "DSH_DATABASE_URL") return url;
      return std::nullopt;  // no model keys: echo/echo
    };
    options.plugin_migrations = loop::PluginMigrations();
    agent::AgentManagerOptions agent_options;
    agent_options.idle_eviction = std::chrono::hours(24);  // nothing is evicted during the run
    agent_options.generate_titles = false;
    options.agent_options = agent_options;
    auto opened = host::Host::Open(options);
    if (!opened.ok()) Fail("open host", opened.status());
    std::unique_ptr<host::Host> host = std::move(opened).value();
    if (Status st = loop::RegisterLoopPlugin(*host); !st.ok()) Fail("register loop plugin", st);
    return host;
  }

  static int64_t Count(host::Host& host, const std::string& sql,
                       std::initializer_list<store::Value> params = {}) {
    std::vector<store::Value> p(params);
    int64_t n = 0;
    Status st = host.database().ReadSync([&](store::Tx& tx) {
      return tx.Query(sql, std::span<const store::Value>(p), [&](const store::Row& row) {
        n = row.IsNull(0) ? 0 : row.Int(0);
        return Status::Ok();
      });
    });
    if (!st.ok()) Fail("count", st);
    return n;
  }

  // How often the waits below count: each count is a statement the server
  // runs inside the CPU measurement (a COUNT over up to a burst's runs, about
  // 1 ms). Every 20 ms, one PostgreSQL case of a run on a loaded machine
  // spent 844 ms of server time in 903 of them (pg_stat_statements), against
  // about 1 ms of server CPU per occurrence measured. The figures come from
  // the rows, so a later look only ends the wait later.
  static constexpr auto kPoll = 100ms;

  // Waits until loops [first, first + n) each have a recorded run.
  static void AwaitRecorded(host::Host& host, int64_t first, int64_t n, std::chrono::seconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    std::string lo = LoopId(first), hi = LoopId(first + n - 1);
    for (;;) {
      int64_t done = Count(
          host, "SELECT COUNT(*) FROM loop_runs WHERE loop_id >= ? AND loop_id <= ? AND result IS NOT NULL",
          {std::string_view(lo), std::string_view(hi)});
      if (done >= n) return;
      if (std::chrono::steady_clock::now() > deadline) {
        Wrong(std::to_string(done) + " of " + std::to_string(n) + " occurrences finished in time");
      }
      std::this_thread::sleep_for(kPoll);
    }
  }

  // Waits until no inbox message is pending (every delivered message's turn
  // ended); 0 then. When their number stops going down for `stalled`, the
  // messages left are stuck: says which on stderr and returns how many.
  static int64_t AwaitDrained(host::Host& host, std::chrono::seconds stalled) {
    int64_t least = INT64_MAX;
    auto progressed = std::chrono::steady_clock::now();
    for (;;) {
      const int64_t pending = Count(host, "SELECT COUNT(*) FROM inbox WHERE consumed_at IS NULL");
      if (pending == 0) return 0;
      if (pending < least) {
        least = pending;
        progressed = std::chrono::steady_clock::now();
      } else if (std::chrono::steady_clock::now() - progressed > stalled) {
        ReportStuck(host, pending);
        return pending;
      }
      std::this_thread::sleep_for(kPoll);
    }
  }

  // The sessions with messages left pending: for each, the pending
  // messages' nums, the newest consumed num and the lease holder.
  static void ReportStuck(host::Host& host, int64_t pending) {
    std::fprintf(stderr, "%lld inbox messages stay pending (their turns never ran); the first sessions:\n",
                 static_cast<long long>(pending));
    Status st = host.database().ReadSync([&](store::Tx& tx) {
      return tx.Query(
          "SELECT i.session_id, MIN(i.num), MAX(i.num), COUNT(*),"
          " (SELECT MAX(c.num) FROM inbox c WHERE c.session_id = i.session_id AND c.consumed_at IS NOT NULL),"
          " (SELECT l.holder FROM session_leases l WHERE l.session_id = i.session_id)"
          " FROM inbox i WHERE i.consumed_at IS NULL GROUP BY i.session_id ORDER BY i.session_id LIMIT 5",
          {}, [&](const store::Row& row) {
            std::fprintf(stderr, "  %s: %lld pending (nums %lld..%lld), newest consumed num %lld, lease %s\n",
                         row.String(0).c_str(), static_cast<long long>(row.Int(3)),
                         static_cast<long long>(row.Int(1)), static_cast<long long>(row.Int(2)),
                         static_cast<long long>(row.IsNull(4) ? 0 : row.Int(4)),
                         row.IsNull(5) ? "none" : row.String(5).c_str());
            return Status::Ok();
          });
    });
    if (!st.ok()) std::fprintf(stderr, "  (could not read them: %s)\n", st.ToString().c_str());
  }

  struct RunRow {
    int64_t nominal, claimed, delivered, consumed;
    std::string claimed_by;
  };

  // The run rows of loops [first, first + n), checked: one delivered run
  // and one inbox row per loop.
  static std::vector<RunRow> Runs(host::Host& host, int64_t first, int64_t n) {
    std::vector<RunRow> out;
    std::string lo = LoopId(first), hi = LoopId(first + n - 1);
    Status st = host.database().ReadSync([&](store::Tx& tx) {
      return tx.Query(
          "SELECT r.nominal_at, r.claimed_at, r.delivered_at, r.result, r.claimed_by,"
          " (SELECT COUNT(*) FROM inbox i WHERE i.session_id = r.target_session_id"
          "   AND i.key = 'loop:' || r.loop_id || ':' || r.nominal_at),"
          " (SELECT MAX(i.consumed_at) FROM inbox i WHERE i.session_id = r.target_session_id"
          "   AND i.key = 'loop:' || r.loop_id || ':' || r.nominal_at)"
          " FROM loop_runs r WHERE r.loop_id >= ? AND r.loop_id <= ?",
          {std::string_view(lo), std::string_view(hi)}, [&](const store::Row& row) {
            if (row.IsNull(3) || row.Text(3) != "delivered" || row.IsNull(2)) {
              Wrong("an occurrence was not delivered: " +
                    std::string(row.IsNull(3) ? "running" : row.Text(3)));
            }
            if (row.Int(5) != 1) Wrong("an occurrence has " + std::to_string(row.Int(5)) + " inbox rows");
            out.push_back(
                {row.Int(0), row.Int(1), row.Int(2), row.IsNull(6) ? 0 : row.Int(6), row.String(4)});
            return Status::Ok();
          });
    });
    if (!st.ok()) Fail("read runs", st);
    if (static_cast<int64_t>(out.size()) != n) {
      Wrong(std::to_string(out.size()) + " run rows for " + std::to_string(n) + " due occurrences");
    }
    return out;
  }

  struct LoopFigures {
    double late_p50 = 0, late_p99 = 0, late_max = 0;
    double claims_per_second = 0, delivered_per_second = 0;
    double turns_ended_s = 0;  // burst: first claim → last turn ended
    int64_t stuck = 0;         // messages whose turn never ran (a defect: the run fails)
    std::string shares;        // burst claims per host, in %
    // The hosts' writers from the burst being made due to its last record:
    // write transactions, jobs per transaction, and per transaction the
    // time from BEGIN to COMMIT (the jobs, and on several hosts the wait
    // for the write lock) and the COMMIT itself, in µs.
    uint64_t commits = 0;
    uint64_t contended = 0;  // jobs run again after waiting too long for a row (store::Database)
    double per_commit = 0, jobs_us = 0, commit_us = 0;
    // CPU the burst took, from just before it could be claimed to its last
    // turn's end: this process (every host) and the PostgreSQL server, in ms
    // per occurrence.
    double cpu_hosts_ms = 0, cpu_server_ms = 0;
  };

  static std::vector<store::Database::Stats> WriterStats(std::vector<std::unique_ptr<host::Host>>& hosts) {
    std::vector<store::Database::Stats> out;
    for (auto& host : hosts) out.push_back(host->database().stats());
    return out;
  }

  // The postmaster of `conninfo`'s server when it runs on this machine: the
  // parent of its checkpointer, which lives as long as the server (the
  // backend answering the query ends with its connection, often before its
  // /proc entry could be read).
  static pid_t Postmaster(const std::string& conninfo) {
    auto checkpointer = PgAdmin(conninfo, "SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'");
    if (!checkpointer.ok() || checkpointer->empty()) return 0;
    std::ifstream in("/proc/" + *checkpointer + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    size_t close = stat.rfind(')');
    if (close == std::string::npos) return 0;
    std::istringstream rest(stat.substr(close + 2));
    std::string state;
    long long ppid = 0;
    rest >> state >> ppid;
    return static_cast<pid_t>(ppid);
  }

  LoopFigures Loops(const Place& place, int hosts) {
    const pid_t postmaster = place.postgres ? Postmaster(place.conninfo) : 0;
    if (place.postgres && postmaster == 0)
      std::fprintf(stderr, "the PostgreSQL server's process was not found: its CPU is not counted\n");
    std::vector<std::unique_ptr<host::Host>> h;
    for (int i = 0; i < hosts; ++i) h.push_back(OpenHost(place, i));  // the first migrates
    host::Host& h0 = *h[0];

    // K sessions, L + B loops a day away, each loop targeting one session.
    for (int64_t k = 0; k < args.sessions; ++k) {
      session::NewSession s = h0.DefaultNewSession();
      s.id = SessionId(k);
      auto made = h0.sessions().Create(s);
      if (!made.ok()) Fail("create session", made.status());
    }
    const int64_t total = args.late + args.burst;
    const int64_t now = WallMs();
    for (int64_t first = 0; first < total; first += 5'000) {
      const int64_t last = std::min(total, first + 5'000);
      Status st = h0.database().WriteSync([&](store::Tx& tx) -> Status {
        for (int64_t i = first; i < last; ++i) {
          loop::LoopRecord l;
          l.loop_id = LoopId(i);
          l.prompt = "Check on report " + std::to_string(i) + " and summarise what changed";
          l.schedule = loop::Schedule{loop::ScheduleKind::kEvery, kDay, "", std::nullopt};
          l.target = SessionId(i % args.sessions);
          l.created_at = now;
          l.due_at = now + kDay * 1000;
          DSH_RETURN_IF_ERROR(loop::registry::Insert(tx, l));
        }
        return Status::Ok();
      });
      if (!st.ok()) Fail("insert loops", st);
    }

    // Start the hosts; session k goes live on host k mod H.
    for (auto& host : h) {
      if (Status st = host->Start(kIoThreads); !st.ok()) Fail("start host", st);
    }
    {
      bench::Countdown live(static_cast<size_t>(args.sessions));
      for (int64_t k = 0; k < args.sessions; ++k) {
        h[static_cast<size_t>(k % hosts)]->agents().Resume(SessionId(k), [&](Status st) {
          if (!st.ok()) Fail("resume", st);
          live.Done();
        });
      }
      if (!live.Wait(120s)) Fail("resume", Status("timeout", "the sessions did not go live in time"));
    }

    // The schedulers notice a loop made due by another writer at their next
    // re-check (SchedulerOptions::max_wait, 1 s) and claim it 200 ms ahead
    // of its time, so the first occurrence is set further ahead than that.
    const int64_t lead_ms = args.quick ? 300 : 1'600;
    const int64_t span_ms = static_cast<int64_t>(args.late_seconds * 1000);
    // The burst comes once the lateness set's turns ended; with --quick
    // right after that set (one wait for the schedulers to notice, not two).
    const int64_t t0 = WallMs() + lead_ms;
    int64_t burst_at = t0 + span_ms + 200;
    int64_t late_stuck = 0;
    auto writers_before = WriterStats(h);
    double cpu_hosts0 = CpuSeconds(), cpu_server0 = ServerCpuSeconds(postmaster);
    MakeDue(h0, 0, args.late, [&](int64_t k) { return t0 + k * span_ms / args.late; });
    if (args.quick) MakeDue(h0, args.late, args.burst, [&](int64_t) { return burst_at; });
    AwaitRecorded(h0, 0, args.late, std::chrono::seconds(static_cast<int64_t>(args.late_seconds) + 300));
    if (!args.quick) {
      late_stuck = AwaitDrained(h0, kStalled);
      burst_at = WallMs() + lead_ms;
      MakeDue(h0, args.late, args.burst, [&](int64_t) { return burst_at; });
      // The burst's CPU is counted from shortly before the schedulers may
      // claim it (their look-ahead before its time): not the bench's own
      // updates that made it due, nor the hosts idling through the lead.
      const int64_t claimable = burst_at - loop::SchedulerOptions{}.lookahead.count() - 100;
      if (const int64_t wait = claimable - WallMs(); wait > 0) std::this_thread::sleep_for(std::chrono::milliseconds(wait));
      writers_before = WriterStats(h);
      cpu_hosts0 = CpuSeconds();
      cpu_server0 = ServerCpuSeconds(postmaster);
    }
    auto late_runs = Runs(h0, 0, args.late);
    std::vector<double> late_ms;
    for (const RunRow& r : late_runs) late_ms.push_back(static_cast<double>(r.delivered - r.nominal));

    AwaitRecorded(h0, args.late, args.burst, 600s);
    auto writers_after = WriterStats(h);
    const int64_t burst_stuck = AwaitDrained(h0, kStalled);
    const double cpu_hosts = CpuSeconds() - cpu_hosts0, cpu_server = ServerCpuSeconds(postmaster) - cpu_server0;
    auto burst_runs = Runs(h0, args.late, args.burst);

    // Nothing else ran.
    const int64_t runs = Count(h0, "SELECT COUNT(*) FROM loop_runs");
    if (runs != total)
      Wrong(std::to_string(runs) + " run rows in all for " + std::to_string(total) + " occurrences");
    const int64_t keys = Count(h0, "SELECT COUNT(DISTINCT key) FROM inbox WHERE key LIKE 'loop:%'");
    const int64_t rows = Count(h0, "SELECT COUNT(*) FROM inbox WHERE key LIKE 'loop:%'");
    if (keys != runs || rows != runs) {
      Wrong(std::to_string(rows) + " <loop> inbox rows, " + std::to_string(keys) + " keys, for " +
            std::to_string(runs) + " runs");
    }

    LoopFigures f;
    f.stuck = std::max(late_stuck, burst_stuck);
    f.cpu_hosts_ms = cpu_hosts * 1000.0 / static_cast<double>(args.burst);
    f.cpu_server_ms = cpu_server * 1000.0 / static_cast<double>(args.burst);
    f.late_p50 = Percentile(late_ms, 0.5);
    f.late_p99 = Percentile(late_ms, 0.99);
    f.late_max = late_ms.back();
    int64_t first_claim = INT64_MAX, last_claim = 0, last_delivery = 0, last_turn = 0;
    std::map<std::string, int64_t> by_host;
    for (const RunRow& r : burst_runs) {
      first_claim = std::min(first_claim, r.claimed);
      last_claim = std::max(last_claim, r.claimed);
      last_delivery = std::max(last_delivery, r.delivered);
      last_turn = std::max(last_turn, r.consumed);
      by_host[r.claimed_by]++;
    }
    const double n = static_cast<double>(args.burst);
    f.claims_per_second = n / (static_cast<double>(std::max<int64_t>(1, last_claim - first_claim)) / 1000.0);
    f.delivered_per_second =
        n / (static_cast<double>(std::max<int64_t>(1, last_delivery - first_claim)) / 1000.0);
    f.turns_ended_s = static_cast<double>(last_turn - first_claim) / 1000.0;
    std::vector<int64_t> shares;
    for (const auto& [holder, count] : by_host) shares.push_back(count);
    std::sort(shares.rbegin(), shares.rend());
    for (size_t i = 0; i < shares.size(); ++i) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%s%.0f", i ? " / " : "", 100.0 * static_cast<double>(shares[i]) / n);
      f.shares += buf;
    }
    f.shares += " %";
    uint64_t jobs = 0, run_us = 0, commit_us = 0;
    for (size_t i = 0; i < h.size(); ++i) {
      f.commits += writers_after[i].commits - writers_before[i].commits;
      f.contended += writers_after[i].contended - writers_before[i].contended;
      jobs += writers_after[i].jobs - writers_before[i].jobs;
      run_us += writers_after[i].run_us - writers_before[i].run_us;
      commit_us += writers_after[i].commit_us - writers_before[i].commit_us;
    }
    if (f.commits > 0) {
      const double c = static_cast<double>(f.commits);
      f.per_commit = static_cast<double>(jobs) / c;
      f.jobs_us = static_cast<double>(run_us) / c;
      f.commit_us = static_cast<double>(commit_us) / c;
    }

    for (auto& host : h) host->Stop();
    for (auto& host : h) host->Close();
    return f;
  }

  // Sets loops [first, first + n) due at `at(k)` (k = 0..n-1).
  static void MakeDue(host::Host& host, int64_t first, int64_t n, const std::function<int64_t(int64_t)>& at) {
    Status st = host.database().WriteSync([&](store::Tx& tx) -> Status {
      for (int64_t k = 0; k < n; ++k) {
        const int64_t t = at(k);
        std::string id = LoopId(first + k);
        DSH_ASSIGN_OR_RETURN(
            int64_t changed,
            tx.Exec("UPDATE loops SET due_at = ?, next_at = ?, version = version + 1 WHERE loop_id = ?",
                    {t, t, std::string_view(id)}));
        if (changed != 1) return Status("bench", "no loop " + id);
      }
      return Status::Ok();
    });
    if (!st.ok()) Fail("make due", st);
  }

  // ---- the report ----

  static std::string Ratio(double value, double reference) {
    if (reference <= 0) return "–";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f×", value / reference);
    return buf;
  }

  static std::string TurnsEnded(const LoopFigures& f) {
    if (f.stuck > 0) return "never: " + std::to_string(f.stuck) + " messages stuck";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f s", f.turns_ended_s);
    return buf;
  }

  void Run() {
    spdlog::set_level(spdlog::level::warn);  // stdout is the report
    dir = args.dir.empty() ? std::filesystem::temp_directory_path() / "dsh-multihost-bench"
                           : std::filesystem::path(args.dir);
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    pg.emplace(PgServer::Open(args, dir));
    std::printf("# PostgreSQL and several hosts against SQLite\n\n");
    std::printf("SQLite: synchronous=FULL, files in %s. PostgreSQL: %s; %s.\n", dir.string().c_str(),
                pg->origin().c_str(), pg->settings().c_str());
    std::printf(
        "Hosts: in this process, each its own Database handle (writer + 2 readers) and %u io threads; "
        "%u cores.\n\n",
        kIoThreads, std::thread::hardware_concurrency());
    std::fflush(stdout);

    if (args.only.empty() || args.only == "appends") {
      std::printf("## Durable appends, %d appenders (one session each, on io strands), %.1f s each\n\n",
                  kAppenders, args.seconds);
      std::printf(
          "| hosts | backend | events/s | ÷ SQLite, same hosts | commits/s | appends per commit | writer per "
          "commit, mean of the hosts: jobs incl. write-lock wait / COMMIT / callbacks / waiting (µs) |\n");
      std::printf("|---:|---|---:|---:|---:|---:|---|\n");
      double pg_three = 0;
      for (int hosts : {1, 3}) {
        double sqlite = 0;
        for (bool postgres : {false, true}) {
          Place place = NewPlace(postgres);
          AppendFigures f = Appends(place, hosts);
          DropPlace(place);
          if (!postgres) sqlite = f.per_second;
          if (postgres && hosts == 3) pg_three = f.per_second;
          std::printf("| %d | %s | %.0f | %s | %.0f | %.1f | %.0f / %.0f / %.0f / %.0f |\n", hosts,
                      postgres ? "PostgreSQL" : "SQLite", f.per_second, Ratio(f.per_second, sqlite).c_str(),
                      f.commits_per_second, f.per_commit, f.writer.jobs, f.writer.commit, f.writer.callbacks,
                      f.writer.waiting);
          std::fflush(stdout);
        }
      }
      Place place = NewPlace(true);
      const double baseline = PgbenchAppends(place);
      DropPlace(place);
      if (baseline > 0) {
        std::printf(
            "\n`pgbench -M prepared`, %d clients, the same statements, one transaction per append: %.0f appends/s; "
            "three PostgreSQL hosts ÷ pgbench: %s\n",
            kAppenders, baseline, Ratio(pg_three, baseline).c_str());
      } else if (baseline < 0) {
        std::printf("\n`pgbench` committed no transaction in its %.0f s (its clients were still connecting): no "
                    "baseline; run it longer.\n",
                    std::max(1.0, args.seconds));
      } else {
        std::printf("\nNo pgbench under /usr/lib/postgresql: no baseline.\n");
      }
      std::printf("\n");
    }

    if (args.only.empty() || args.only == "loops") {
      struct Row {
        int hosts;
        bool postgres;
        LoopFigures f;
      };
      std::vector<Row> rows;
      for (int hosts : {1, 3}) {
        for (bool postgres : {false, true}) {
          Place place = NewPlace(postgres);
          rows.push_back({hosts, postgres, Loops(place, hosts)});
          DropPlace(place);
          std::fprintf(stderr, "loops: %d host(s) on %s done\n", hosts, postgres ? "PostgreSQL" : "SQLite");
        }
      }
      const LoopFigures& sqlite1 = rows[0].f;
      auto sqlite_same = [&](int hosts) -> const LoopFigures& {
        for (const Row& r : rows) {
          if (r.hosts == hosts && !r.postgres) return r.f;
        }
        return sqlite1;
      };
      std::printf(
          "## Loops: a burst of %lld due at one instant, %lld live echo sessions spread over the hosts\n\n",
          static_cast<long long>(args.burst), static_cast<long long>(args.sessions));
      std::printf(
          "| hosts | backend | claims/s | delivered/s | ÷ SQLite, same hosts | ÷ SQLite, one host | last "
          "turn "
          "ended | claims per host | write transactions: count, jobs each, BEGIN→COMMIT / COMMIT (µs) | jobs run "
          "again (contended) |\n");
      std::printf("|---:|---|---:|---:|---:|---:|---:|---|---|---:|\n");
      for (const Row& r : rows) {
        std::printf("| %d | %s | %.0f | %.0f | %s | %s | %s | %s | %llu, %.1f, %.0f / %.0f | %llu |\n", r.hosts,
                    r.postgres ? "PostgreSQL" : "SQLite", r.f.claims_per_second, r.f.delivered_per_second,
                    Ratio(r.f.delivered_per_second, sqlite_same(r.hosts).delivered_per_second).c_str(),
                    Ratio(r.f.delivered_per_second, sqlite1.delivered_per_second).c_str(),
                    TurnsEnded(r.f).c_str(), r.f.shares.c_str(), static_cast<unsigned long long>(r.f.commits),
                    r.f.per_commit, r.f.jobs_us, r.f.commit_us, static_cast<unsigned long long>(r.f.contended));
      }
      const double cores = static_cast<double>(std::thread::hardware_concurrency());
      std::printf(
          "\n## CPU per burst occurrence (claimable → its turn ended), and what this machine's %.0f cores "
          "could deliver at that cost\n\n",
          cores);
      std::printf("| hosts | backend | hosts' CPU (ms) | PostgreSQL server CPU (ms) | total (ms) | "
                  "ceiling: cores ÷ total (occ/s) | ceiling ÷ SQLite one host, measured |\n");
      std::printf("|---:|---|---:|---:|---:|---:|---:|\n");
      for (const Row& r : rows) {
        const double total = r.f.cpu_hosts_ms + r.f.cpu_server_ms;
        const double ceiling = total > 0 ? cores * 1000.0 / total : 0;
        std::printf("| %d | %s | %.3f | %.3f | %.3f | %.0f | %s |\n", r.hosts, r.postgres ? "PostgreSQL" : "SQLite",
                    r.f.cpu_hosts_ms, r.f.cpu_server_ms, total, ceiling,
                    Ratio(ceiling, sqlite1.delivered_per_second).c_str());
      }
      {
        Place place = NewPlace(true);
        std::optional<PgbenchCpu> reference = PgbenchOccurrences(place);
        DropPlace(place);
        const LoopFigures* three = nullptr;
        for (const Row& r : rows) {
          if (r.hosts == 3 && r.postgres) three = &r.f;
        }
        if (reference && three) {
          const double total = reference->server_ms + reference->pgbench_ms;
          std::printf(
              "\nAn occurrence's rows written by PostgreSQL's own load program: `pgbench -M prepared`, 3 clients, "
              "the hosts' statements for those rows and no reads, 16 occurrences a transaction (%lld occurrences): "
              "pgbench %.3f ms, server %.3f ms, total %.3f ms CPU per occurrence; three PostgreSQL hosts ÷ pgbench: "
              "%s; pgbench ÷ one SQLite host: %s.\n",
              static_cast<long long>(reference->occurrences), reference->pgbench_ms, reference->server_ms, total,
              Ratio(three->cpu_hosts_ms + three->cpu_server_ms, total).c_str(),
              Ratio(total, sqlite1.cpu_hosts_ms + sqlite1.cpu_server_ms).c_str());
        } else {
          std::printf("\nNo pgbench reference for the CPU (no pgbench under /usr/lib/postgresql, the server is not "
                      "on this machine, or it committed nothing in its time).\n");
        }
      }
      std::printf(
          "\n## Delivery lateness: %lld occurrences over %g s (%.0f due/s), delivered_at − nominal\n\n",
          static_cast<long long>(args.late), args.late_seconds,
          static_cast<double>(args.late) / args.late_seconds);
      std::printf("| hosts | backend | p50 | p99 | max | p99 ÷ SQLite, one host |\n");
      std::printf("|---:|---|---:|---:|---:|---:|\n");
      for (const Row& r : rows) {
        std::printf("| %d | %s | %.0f ms | %.0f ms | %.0f ms | %s |\n", r.hosts,
                    r.postgres ? "PostgreSQL" : "SQLite", r.f.late_p50, r.f.late_p99, r.f.late_max,
                    Ratio(std::max(1.0, r.f.late_p99), std::max(1.0, sqlite1.late_p99)).c_str());
      }
      const LoopFigures* pg3 = nullptr;
      for (const Row& r : rows) {
        if (r.hosts == 3 && r.postgres) pg3 = &r.f;
      }
      std::printf(
          "\nGoal (three hosts on PostgreSQL deliver more occurrences per second than one host on SQLite): "
          "%s — %.0f/s against %.0f/s (%s).\n",
          pg3->delivered_per_second > sqlite1.delivered_per_second ? "met" : "NOT met",
          pg3->delivered_per_second, sqlite1.delivered_per_second,
          Ratio(pg3->delivered_per_second, sqlite1.delivered_per_second).c_str());
      std::printf("\nChecked: every occurrence delivered once, with exactly one `<loop>` inbox row.\n");
      for (const Row& r : rows) {
        if (r.f.stuck == 0) continue;
        std::fflush(stdout);
        Wrong(std::to_string(r.f.stuck) + " delivered messages were never consumed (" +
              std::to_string(r.hosts) + " hosts on " + (r.postgres ? "PostgreSQL" : "SQLite") +
              "): their turns did not run");
      }
    }
    std::fflush(stdout);
    StopOwnCluster();  // before its directory (inside `dir`) goes: a server left without one keeps running
    std::filesystem::remove_all(dir);
  }
};

}  // namespace

int main(int argc, char** argv) {
  Bench b;
  Args& args = b.args;
  using dsh::bench::AtLeast;
  CLI::App app(
      "Load program: the PostgreSQL backend and several hosts against SQLite (docs/PERFORMANCE.md, "
      "\"PostgreSQL and several hosts\").",
      "multihost_bench");
  dsh::bench::UseBenchOptionDefaults(app);
  app.add_option("--dir", args.dir,
                 "directory of the SQLite files and the throwaway cluster (default: a temporary one)");
  app.add_option("--pg", args.pg,
                 "a PostgreSQL server of your own: key=value conninfo without dbname, a role with CREATEDB "
                 "(default: a durable throwaway cluster in --dir)");
  app.add_option("--seconds", args.seconds, "measured window of each append case, in seconds")
      ->check(AtLeast(0.1));
  app.add_option("--sessions", args.sessions, "live sessions the loops target")->check(AtLeast<int64_t>(1));
  app.add_option("--late", args.late, "loops made due over --late-seconds (lateness)")
      ->check(AtLeast<int64_t>(1));
  app.add_option("--late-seconds", args.late_seconds, "seconds the --late loops' occurrences spread over")
      ->check(AtLeast(0.1));
  app.add_option("--burst", args.burst, "loops made due at once (throughput)")->check(AtLeast<int64_t>(1));
  app.add_option("--only", args.only, "run only one half (default: both)")
      ->check(CLI::IsMember({"appends", "loops"}));
  app.add_option("--max-batch", args.max_batch, "DatabaseOptions::max_batch of the append case's handles")
      ->check(AtLeast<size_t>(1));
  app.add_flag("--quick", args.quick, "a short run (the smoke test)");
  if (auto exit_code = dsh::bench::ParseCommandLine(app, argc, argv)) return *exit_code;
  if (args.quick) {
    args.seconds = std::min(args.seconds, 0.3);
    args.sessions = std::min<int64_t>(args.sessions, 10);
    args.late = std::min<int64_t>(args.late, 200);
    args.late_seconds = std::min(args.late_seconds, 0.5);
    args.burst = std::min<int64_t>(args.burst, 300);
  }
  b.Run();
  return 0;
}
