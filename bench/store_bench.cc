// Load program for the durable session store (docs/PERFORMANCE.md, "Storage").
//
//   store_bench [--dir DIR] [--seconds S] [--quick] [--appenders N] [--mode strands|inline|threads]
//               [--wal-writes gathered|direct] [--gather US] [--checkpoints background|writer]
//               [--no-baseline] [--no-reads] [--no-search] [--metrics on|off]
//
// The selection flags run only part of it (for A/B comparisons of one case);
// without them it runs everything below. The others turn off what the host
// does, to measure the difference: `--wal-writes direct` writes each WAL
// frame as SQLite does by itself (SqliteOptions::gather_wal_writes),
// `--gather 0` makes each transaction take only the writes queued when it
// begins (DatabaseOptions::max_gather, 300 µs by default), `--checkpoints writer`
// leaves WAL checkpoints to SQLite, inside a COMMIT
// (SqliteOptions::checkpoints), `--metrics off` leaves out the commit
// metrics (DatabaseOptions::metrics; docs/DEPLOY.md, "Metrics").
//
// 1. Durable appends per second at synchronous=FULL with 1 and 64 concurrent
//    appenders (each appends one event at a time to its own session and waits
//    for the acknowledgement), with group commit and with one transaction per
//    append (max_batch = 1), in the same run.
//    Then the same async appends with the search index following them
//    (SearchIndex on its own thread, as in `dsh web`) against without it.
// 2. Listing the 50 most recent of 100,000 sessions (latency p50/p99).
// 3. Reading a 200-event window from a 1,000,000-event session (p50/p99).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include "bench_cli.h"
#include "bench_util.h"
#include "session/event_hub.h"
#include "session/search_index.h"
#include "session/session_store.h"
#include "store/sqlite_connection.h"

using namespace dsh;
using Clock_ = std::chrono::steady_clock;

namespace {

struct Args {
  std::string dir;
  double seconds = 3;
  bool quick = false;
  int only_appenders = 0;  // 0: both 1 and 64
  int only_mode = -1;      // a Mode, or -1: all
  bool baseline = true;
  bool reads = true;
  bool search = true;
};

// What the host does unless a flag says otherwise.
bool gather_wal_writes = true;       // --wal-writes
int gather_us = 300;                 // --gather
bool background_checkpoints = true;  // --checkpoints
bool with_metrics = true;            // --metrics
metrics::Registry bench_metrics;     // the commit metrics' registry, as the host's

std::unique_ptr<store::Database> Open(const std::string& path, size_t max_batch, bool search = false) {
  std::vector<store::Migration> migrations = session::SessionStore::Migrations();
  if (search) {
    for (auto& m : session::SearchIndex::Migrations()) migrations.push_back(std::move(m));
  }
  auto db = store::Database::Open(
      std::make_unique<store::SqliteConnectionFactory>(
          store::SqliteOptions{.path = path,
                               .gather_wal_writes = gather_wal_writes,
                               .checkpoints = {.background = background_checkpoints}}),
      std::move(migrations),
      store::DatabaseOptions{.readers = 2,
                             .max_batch = max_batch,
                             .max_gather = std::chrono::microseconds(gather_us),
                             .metrics = with_metrics ? &bench_metrics : nullptr});
  if (!db.ok()) {
    std::fprintf(stderr, "open %s: %s\n", path.c_str(), db.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(db).value();
}

struct AppendResult {
  double per_second;
  double commits_per_second;
  bench::WriterTime writer;
  int64_t indexed = 0;  // events the search index took during the run (with `search`)
};

// How appenders wait for their acknowledgement:
//  kStrands: how the host appends: each appender is a strand on an
//            io_context run by as many threads as `dsh web` runs here
//            (2–4); its completion callback posts to the strand, which
//            issues the next append (`appenders` appends in flight).
//  kInline:  the next append is issued from the completion callback itself,
//            on the writer thread (which then also does the appender's work).
//  kThreads: one OS thread per appender blocking in Append().
enum class Mode { kStrands, kInline, kThreads };
struct ModeInfo {
  Mode mode;
  const char* name;   // for --mode
  const char* label;  // in the table
};
constexpr ModeInfo kModes[] = {{Mode::kStrands, "strands", "async, on strands"},
                               {Mode::kInline, "inline", "async, on the writer"},
                               {Mode::kThreads, "threads", "blocked threads"}};

// With `search`, the host's search index follows the appends (its own
// thread indexing what they add, as in `dsh web`).
AppendResult Appends(const std::string& path, int appenders, size_t max_batch, double seconds, Mode mode,
                     bool search = false) {
  std::filesystem::remove(path);
  std::filesystem::remove(path + "-wal");
  std::filesystem::remove(path + "-shm");
  session::EventHub hub;
  auto db = Open(path, max_batch, search);
  session::SessionStore store(*db, RealClock(), search ? &hub : nullptr);
  std::unique_ptr<session::SearchIndex> index;
  if (search) {
    index = std::make_unique<session::SearchIndex>(*db, RealClock(), &hub);
    index->Start();
  }
  std::vector<std::string> ids;
  for (int i = 0; i < appenders; ++i) ids.push_back(store.Create({.route = {"echo", "echo"}})->id);
  const Json data = {{"text", "a typical short assistant message of about this length, with some words"}};
  std::atomic<bool> stop{false};
  std::atomic<int64_t> done{0};
  std::atomic<int> running{appenders};
  auto fail = [](const Status& st) {
    std::fprintf(stderr, "append: %s\n", st.ToString().c_str());
    std::exit(1);
  };
  auto before = db->stats();
  auto start = Clock_::now();
  std::vector<std::thread> threads;
  boost::asio::io_context io;
  auto work = boost::asio::make_work_guard(io);
  std::vector<boost::asio::strand<boost::asio::io_context::executor_type>> strands;
  std::function<void(int)> next;  // outlives every in-flight append
  auto finished = [&] {
    running--;
    running.notify_all();
  };
  if (mode == Mode::kThreads) {
    for (int i = 0; i < appenders; ++i) {
      threads.emplace_back([&, i] {
        while (!stop.load(std::memory_order_relaxed)) {
          auto r = store.Append(ids[i], {{"message/assistant", data}});
          if (!r.ok()) fail(r.status());
          done.fetch_add(1, std::memory_order_relaxed);
        }
        finished();
      });
    }
  } else {
    for (int i = 0; i < appenders; ++i) strands.push_back(boost::asio::make_strand(io));
    next = [&](int i) {
      store.AppendAsync(ids[i], {{"message/assistant", data}}, [&, i](Result<std::vector<session::Event>> r) {
        if (!r.ok()) fail(r.status());
        done.fetch_add(1, std::memory_order_relaxed);
        if (stop.load(std::memory_order_relaxed)) return finished();
        if (mode == Mode::kInline) return next(i);
        boost::asio::post(strands[i], [&, i] { next(i); });
      });
    };
    for (int i = 0; i < appenders; ++i) next(i);
    if (mode == Mode::kStrands) {
      unsigned n = std::max(2u, std::min(4u, std::thread::hardware_concurrency()));  // as `dsh web`
      for (unsigned t = 0; t < n; ++t) threads.emplace_back([&] { io.run(); });
    }
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (int left = running.load(); left > 0; left = running.load()) running.wait(left);
  work.reset();
  for (auto& t : threads) t.join();
  double elapsed = std::chrono::duration<double>(Clock_::now() - start).count();
  auto after = db->stats();
  int64_t indexed = 0;
  if (index) {
    index->Stop();
    indexed = index->stats().events_indexed;
  }
  return {static_cast<double>(done.load()) / elapsed, static_cast<double>(after.commits - before.commits) / elapsed,
          bench::WriterPerCommit(before, after, elapsed), indexed};
}

struct Latency {
  double p50_ms, p99_ms, max_ms;
};

template <typename Fn>
Latency Measure(int runs, Fn fn) {
  std::vector<double> ms;
  ms.reserve(runs);
  for (int i = 0; i < runs; ++i) {
    auto t0 = Clock_::now();
    fn(i);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock_::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms[std::min(ms.size() - 1, ms.size() * 99 / 100)], ms.back()};
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  using dsh::bench::AtLeast;
  CLI::App app("Load program for the durable session store (docs/PERFORMANCE.md, \"Storage\").",
               "store_bench");
  dsh::bench::UseBenchOptionDefaults(app);
  app.add_option("--dir", args.dir, "directory of the database (default: a temporary one)");
  app.add_option("--seconds", args.seconds, "length of each append case");
  app.add_flag("--quick", args.quick, "a short run (the smoke test)");
  app.add_option("--appenders", args.only_appenders,
                 "run the append cases with this many appenders only; 0: 1 and 64")
      ->check(AtLeast(0));
  std::vector<std::string> mode_names;
  for (const auto& m : kModes) mode_names.emplace_back(m.name);
  app.add_option_function<std::string>(
         "--mode",
         [&](const std::string& name) {
           for (const auto& m : kModes) {
             if (name == m.name) args.only_mode = static_cast<int>(m.mode);
           }
         },
         "run the append cases in this mode only (default: all)")
      ->check(CLI::IsMember(mode_names));
  app.add_option_function<std::string>(
         "--wal-writes", [](const std::string& v) { gather_wal_writes = v == "gathered"; },
         "a commit's WAL frames as one write, or each as SQLite writes it (SqliteOptions::gather_wal_writes)")
      ->check(CLI::IsMember({"gathered", "direct"}))
      ->default_str("gathered");
  app.add_option("--gather", gather_us,
                 "DatabaseOptions::max_gather in µs; 0: only the writes queued when a transaction begins")
      ->check(AtLeast(0));
  app.add_option_function<std::string>(
         "--checkpoints", [](const std::string& v) { background_checkpoints = v == "background"; },
         "who runs WAL checkpoints (SqliteOptions::checkpoints)")
      ->check(CLI::IsMember({"background", "writer"}))
      ->default_str("background");
  app.add_flag_callback(
      "--no-baseline", [&] { args.baseline = false; }, "leave out the one-transaction-per-append baseline");
  app.add_flag_callback(
      "--no-reads", [&] { args.reads = false; }, "leave out the read cases");
  app.add_flag_callback(
      "--no-search", [&] { args.search = false; }, "leave out the appends with the search index following");
  app.add_option_function<std::string>(
         "--metrics", [](const std::string& v) { with_metrics = v == "on"; },
         "the commit metrics (DatabaseOptions::metrics)")
      ->check(CLI::IsMember({"on", "off"}))
      ->default_str("on");
  if (auto exit_code = dsh::bench::ParseCommandLine(app, argc, argv)) return *exit_code;
  if (args.quick) args.seconds = std::min(args.seconds, 0.3);
  std::filesystem::path dir =
      args.dir.empty() ? std::filesystem::temp_directory_path() / "dsh-store-bench" : std::filesystem::path(args.dir);
  std::filesystem::create_directories(dir);
  std::string path = (dir / "bench.db").string();

  std::printf("## Durable appends (synchronous=FULL, %.1f s each, one session per appender)\n\n", args.seconds);
  std::printf("| appenders | waiting | group commit: events/s | commits/s | one transaction per append: events/s | ratio "
              "| writer per commit: jobs / COMMIT / callbacks / waiting (µs) |\n");
  std::printf("|---:|---|---:|---:|---:|---:|---|\n");
  for (const auto& [mode, name, label] : kModes) {
    if (args.only_mode >= 0 && static_cast<int>(mode) != args.only_mode) continue;
    for (int appenders : {1, 64}) {
      if (args.only_appenders > 0) {
        if (appenders != 1) continue;  // one pass with the chosen count
        appenders = args.only_appenders;
      }
      AppendResult group = Appends(path, appenders, 1024, args.seconds, mode);
      std::printf("| %d | %s | %.0f | %.0f | ", appenders, label,
                  group.per_second, group.commits_per_second);
      if (args.baseline) {
        AppendResult single = Appends(path, appenders, 1, args.seconds, mode);
        std::printf("%.0f | %.1fx | ", single.per_second, group.per_second / single.per_second);
      } else {
        std::printf("- | - | ");
      }
      std::printf("%.0f / %.0f / %.0f / %.0f |\n", group.writer.jobs, group.writer.commit, group.writer.callbacks,
                  group.writer.waiting);
      std::fflush(stdout);
    }
  }
  if (args.search) {
    // The same appends (async, on strands) with and without the search
    // index following them, one after the other.
    std::printf("\n## Appends with the search index following (group commit, async on strands, %.1f s each)\n\n",
                args.seconds);
    std::printf("| appenders | index off: events/s | index on: events/s | on / off | events indexed during the run |\n");
    std::printf("|---:|---:|---:|---:|---:|\n");
    for (int appenders : {1, 64}) {
      AppendResult off = Appends(path, appenders, 1024, args.seconds, Mode::kStrands);
      AppendResult on = Appends(path, appenders, 1024, args.seconds, Mode::kStrands, /*search=*/true);
      std::printf("| %d | %.0f | %.0f | %.2f | %lld |\n", appenders, off.per_second, on.per_second,
                  on.per_second / off.per_second, static_cast<long long>(on.indexed));
      std::fflush(stdout);
    }
  }
  if (!args.reads) return 0;

  const int64_t kSessions = args.quick ? 2'000 : 100'000;
  const int64_t kEvents = args.quick ? 20'000 : 1'000'000;
  std::filesystem::remove(path);
  std::filesystem::remove(path + "-wal");
  std::filesystem::remove(path + "-shm");
  auto db = Open(path, 1024);
  session::SessionStore store(*db, RealClock());
  // Bulk load: sessions with distinct updated_at, and one long session.
  {
    auto st = db->WriteSync([&](store::Tx& tx) -> Status {
      for (int64_t i = 0; i < kSessions; ++i) {
        std::string id = "ses_bench_" + std::to_string(i);
        DSH_RETURN_IF_ERROR(tx.Exec("INSERT INTO sessions (id, created_at, updated_at, provider, model, time_zone, "
                                    "seed_length, delegation_depth, origin, last_seq, title_fallback) "
                                    "VALUES (?, ?, ?, 'echo', 'echo', 'UTC', 0, 0, 'bench', 0, ?)",
                                    {std::string_view(id), int64_t{1'700'000'000'000} + i,
                                     int64_t{1'700'000'000'000} + (i * 7919) % kSessions,
                                     std::string_view("session number " + std::to_string(i))})
                                .status());
      }
      return Status::Ok();
    });
    if (!st.ok()) return std::fprintf(stderr, "load: %s\n", st.ToString().c_str()), 1;
  }
  std::string long_id = store.Create({.route = {"echo", "echo"}})->id;
  int64_t long_num = 0;
  (void)db->ReadSync([&](store::Tx& tx) {
    return tx.Query("SELECT num FROM sessions WHERE id = ?", {std::string_view(long_id)}, [&](const store::Row& row) {
      long_num = row.Int(0);
      return Status::Ok();
    });
  });
  for (int64_t done = 0; done < kEvents;) {
    int64_t n = std::min<int64_t>(50'000, kEvents - done);
    auto st = db->WriteSync([&](store::Tx& tx) -> Status {
      std::string data = R"({"text":"a stored message of moderate length for the window benchmark"})";
      for (int64_t k = 1; k <= n; ++k) {
        DSH_RETURN_IF_ERROR(tx.Exec("INSERT INTO events (session_num, seq, type, at, data) VALUES (?, ?, ?, ?, ?)",
                                    {long_num, done + k, std::string_view("message/assistant"),
                                     int64_t{1'700'000'000'000}, std::string_view(data)})
                                .status());
      }
      return tx.Exec("UPDATE sessions SET last_seq = ? WHERE id = ?", {done + n, std::string_view(long_id)}).status();
    });
    if (!st.ok()) return std::fprintf(stderr, "load events: %s\n", st.ToString().c_str()), 1;
    done += n;
  }

  int runs = args.quick ? 50 : 2000;
  Latency list = Measure(runs, [&](int) {
    auto r = store.ListRecent(50);
    if (!r.ok() || r->size() != 50) std::exit(1);
  });
  std::mt19937_64 rng(42);
  Latency window = Measure(runs, [&](int) {
    int64_t after = static_cast<int64_t>(rng() % static_cast<uint64_t>(kEvents - 200));
    auto r = store.ReadEvents(long_id, after, 200);
    if (!r.ok() || r->size() != 200) std::exit(1);
  });
  std::printf("\n## Reads (%d runs each, through SessionStore's blocking API: includes the hop to a reader thread)\n\n",
              runs);
  std::printf("| operation | p50 | p99 | max |\n|---|---:|---:|---:|\n");
  std::printf("| list 50 most recent of %lld sessions | %.3f ms | %.3f ms | %.3f ms |\n",
              static_cast<long long>(kSessions), list.p50_ms, list.p99_ms, list.max_ms);
  std::printf("| read a 200-event window of a %lld-event session | %.3f ms | %.3f ms | %.3f ms |\n",
              static_cast<long long>(kEvents), window.p50_ms, window.p99_ms, window.max_ms);
  db->Close();
  std::filesystem::remove_all(dir);
  return 0;
}
