// Load program for the activity list (issue 29; docs/PERFORMANCE.md,
// "Activity").
//
//   activity_bench [--dir DIR] [--pg URL] [--items N] [--sessions K]
//                  [--reps R] [--quick]
//
// A profile database (SQLite in DIR, or the PostgreSQL database at URL,
// emptied first) with K sessions (each with a title) and N activity items
// spread over them round robin, written as the agent layer writes them
// (agent_store::Insert, then activity::TurnEnded; every 10th ends in error). Then the
// routes of the browser's Activity view and sidebar are timed, R calls each,
// through host::ActivityRoutes (the handlers `dsh web` serves, minus HTTP):
//   GET /api/activity (all, first page and a deep page; unread; failed),
//   GET /api/activity/unread, POST /api/activity/read {"session_id"}.
// First with every item unread (the worst case for unread counts), then
// with all but 10% read. Prints p50 / p99 / max per route. Checks the
// answers' sizes so the smoke run fails on wrong behaviour; never asserts a
// time.
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <string>
#include <vector>

#include "agent/activity_store.h"
#include "agent/agent_manager.h"
#include "bench_cli.h"
#include "bench_util.h"
#include "host/activity_routes.h"
#include "session/session_store.h"
#include "store/pg_connection.h"
#include "store/sqlite_connection.h"

using namespace dsh;
using dsh::bench::Countdown;
using dsh::bench::Fail;
using dsh::bench::Percentile;
using namespace std::chrono_literals;
namespace activity = dsh::agent::activity;

namespace {

struct Args {
  std::string dir;
  std::string pg;
  int64_t items = 100'000;
  int64_t sessions = 10'000;
  int64_t reps = 300;
  bool quick = false;
};

[[noreturn]] void Wrong(const std::string& what) {
  std::fprintf(stderr, "wrong: %s\n", what.c_str());
  std::exit(1);
}

std::string SessionId(int64_t k) {
  char id[48];
  std::snprintf(id, sizeof id, "ses_actbench_%05lld", static_cast<long long>(k));
  return id;
}

std::unique_ptr<store::Database> Open(const Args& args) {
  std::vector<store::Migration> migrations = session::SessionStore::Migrations();
  for (auto& m : agent::AgentManager::Migrations()) migrations.push_back(m);
  std::unique_ptr<store::ConnectionFactory> factory;
  if (!args.pg.empty()) {
    factory = std::make_unique<store::PgConnectionFactory>(store::PgOptions{args.pg});
  } else {
    std::filesystem::remove_all(args.dir);
    std::filesystem::create_directories(args.dir);
    factory = std::make_unique<store::SqliteConnectionFactory>(store::SqliteOptions{.path = args.dir + "/dsh.db"});
  }
  auto db = store::Database::Open(std::move(factory), migrations);
  if (!db.ok()) Fail("open", db.status());
  if (!args.pg.empty()) {
    // Empty whatever an earlier run left.
    Status st = (*db)->WriteSync([](store::Tx& tx) -> Status {
      for (const char* table : {"activity_unread_shards", "events", "events_recent", "sessions", "inbox"}) {
        DSH_RETURN_IF_ERROR(tx.Exec(std::string("DELETE FROM ") + table).status());
      }
      return Status::Ok();
    });
    if (!st.ok()) Fail("empty the database", st);
  }
  return std::move(db).value();
}

void Fill(store::Database& db, session::SessionStore& sessions, const Args& args) {
  {
    Countdown made(static_cast<size_t>(args.sessions));
    for (int64_t k = 0; k < args.sessions; ++k) {
      session::NewSession s;
      s.id = SessionId(k);
      s.route = {"echo", "echo", std::nullopt};
      sessions.CreateAsync(s, [&, k](Result<session::SessionHeader> h) {
        if (!h.ok()) Fail("create session", h.status());
        sessions.AppendAsync(SessionId(k), {{"title/fallback", {{"title", "Nightly report " + std::to_string(k)}}}},
                             [&](Result<std::vector<session::Event>> r) {
                               if (!r.ok()) Fail("title", r.status());
                               made.Done();
                             });
      });
    }
    if (!made.Wait(600s)) Fail("sessions", Status("timeout", "sessions were not made in time"));
  }
  constexpr int64_t kBatch = 5000;
  for (int64_t first = 0; first < args.items; first += kBatch) {
    int64_t last = std::min(args.items, first + kBatch);
    Status st = db.WriteSync([&](store::Tx& tx) -> Status {
      for (int64_t i = first; i < last; ++i) {
        std::string message_id = "msg_actbench_" + std::to_string(i);
        std::string session_id = SessionId(i % args.sessions);
        activity::Source source{"loop_run", "loop_actbench_" + std::to_string(i % 500), 1767225600000 + i, std::nullopt};
        agent::InboxMessage m;
        m.message_id = message_id;
        m.session_id = session_id;
        m.text = "<loop>…</loop>";
        m.created_at = 1767225600000 + i;
        m.activity = source;
        DSH_RETURN_IF_ERROR(agent::agent_store::Insert(tx, m, "loop:bench:" + std::to_string(i)).status());
        activity::TurnEnd end;
        bool failed = i % 10 == 0;
        end.status = failed ? "error" : "completed";
        if (failed) {
          end.error_code = "model_unavailable";
          end.error_message = "connection refused";
        }
        end.ended_at = 1767225600000 + i + 3000;
        end.input_tokens = 1200;
        end.output_tokens = 80;
        end.summary = failed ? "connection refused" : "All partitions are below 80%.";
        DSH_RETURN_IF_ERROR(activity::TurnEnded(tx, {{m.num, message_id}}, end.ended_at, end).status());
      }
      return Status::Ok();
    });
    if (!st.ok()) Fail("fill", st);
  }
}

struct Routes {
  std::vector<host::HttpRoute> all;
  const host::HttpRoute& Find(const std::string& method, const std::string& pattern) const {
    for (const auto& r : all) {
      if (r.method == method && r.pattern == pattern) return r;
    }
    Wrong("no route " + pattern);
  }
};

Json Call(const host::HttpRoute& route, std::map<std::string, std::string> query, std::string body = "") {
  std::promise<Result<host::HttpRouteResponse>> p;
  route.handler(host::HttpRouteRequest{{}, std::move(query), std::move(body)},
                [&](Result<host::HttpRouteResponse> r) { p.set_value(std::move(r)); });
  auto r = p.get_future().get();
  if (!r.ok()) Fail(route.pattern.c_str(), r.status());
  return r->body;
}

// Times `reps` calls; prints one table row.
void Time(const char* name, int64_t reps, const std::function<void(int64_t)>& call) {
  std::vector<double> ms;
  ms.reserve(static_cast<size_t>(reps));
  call(0);  // warm: statements prepared, pages cached
  for (int64_t i = 0; i < reps; ++i) {
    auto started = std::chrono::steady_clock::now();
    call(i);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count());
  }
  double p50 = Percentile(ms, 0.5), p99 = Percentile(ms, 0.99);
  std::printf("| %s | %.2f | **%.2f** | %.2f |\n", name, p50, p99, ms.back());
}

void Measure(const Routes& routes, const Args& args, const char* state) {
  const auto& list = routes.Find("GET", "/api/activity");
  const auto& unread = routes.Find("GET", "/api/activity/unread");
  const auto& read = routes.Find("POST", "/api/activity/read");
  std::printf("\n### %s\n\n| route | p50 ms | p99 ms | max ms |\n|---|---:|---:|---:|\n", state);
  Time("GET /api/activity (first page of 50, with titles)", args.reps, [&](int64_t) {
    Json page = Call(list, {});
    if (page["items"].size() != 50) Wrong("a first page of " + std::to_string(page["items"].size()));
  });
  int64_t deep = args.items / 2;
  Time("GET /api/activity?before=(middle)", args.reps, [&](int64_t) {
    Json page = Call(list, {{"before", std::to_string(deep)}});
    if (page["items"].size() != 50) Wrong("a deep page of " + std::to_string(page["items"].size()));
  });
  Time("GET /api/activity?filter=unread", args.reps, [&](int64_t) { (void)Call(list, {{"filter", "unread"}}); });
  Time("GET /api/activity?filter=failed", args.reps, [&](int64_t) {
    Json page = Call(list, {{"filter", "failed"}});
    if (page["items"].empty()) Wrong("no failed item");
  });
  Time("GET /api/activity/unread (per session)", args.reps, [&](int64_t) { (void)Call(unread, {}); });
  Time("POST /api/activity/read {session_id}", args.reps, [&](int64_t i) {
    (void)Call(read, {}, Json{{"session_id", SessionId((i * 7919) % args.sessions)}}.dump());
  });
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  using dsh::bench::AtLeast;
  CLI::App app("Load program for the activity list (docs/PERFORMANCE.md, \"Activity\").", "activity_bench");
  dsh::bench::UseBenchOptionDefaults(app);
  app.add_option("--dir", args.dir, "directory of the SQLite profile (default: a temporary one); emptied first");
  app.add_option("--pg", args.pg, "a PostgreSQL URL to run on instead of SQLite (its tables are emptied)");
  app.add_option("--items", args.items, "activity items")->check(AtLeast<int64_t>(100));
  app.add_option("--sessions", args.sessions, "sessions the items are spread over")->check(AtLeast<int64_t>(1));
  app.add_option("--reps", args.reps, "calls timed per route")->check(AtLeast<int64_t>(10));
  app.add_flag("--quick", args.quick, "a short run (the smoke test)");
  if (auto exit_code = dsh::bench::ParseCommandLine(app, argc, argv)) return *exit_code;
  if (args.quick) {
    args.items = 2'000;
    args.sessions = 200;
    args.reps = 20;
  }
  if (args.dir.empty()) args.dir = (std::filesystem::temp_directory_path() / "dsh-activity-bench").string();
  spdlog::set_level(spdlog::level::warn);

  FakeClock clock;
  auto db = Open(args);
  session::EventHub hub;
  session::SessionStore sessions(*db, clock, &hub);
  auto fill_started = std::chrono::steady_clock::now();
  Fill(*db, sessions, args);
  double fill_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - fill_started).count();
  Routes routes{host::ActivityRoutes(*db, sessions, &hub)};

  std::printf("## %lld activity items over %lld sessions (%s), %lld calls per route\n\n",
              static_cast<long long>(args.items), static_cast<long long>(args.sessions),
              args.pg.empty() ? "SQLite" : "PostgreSQL", static_cast<long long>(args.reps));
  std::printf("Filled in %.1f s.\n", fill_s);
  Json counts = Call(routes.Find("GET", "/api/activity/unread"), {});
  if (counts["total"] != args.items) Wrong("unread total " + counts["total"].dump());
  if (static_cast<int64_t>(counts["sessions"].size()) != args.sessions) Wrong("unread sessions");
  Measure(routes, args, "every item unread");
  // All but a tenth read, marked as the browser marks them (by id).
  std::vector<int64_t> ids;
  Status st = db->ReadSync([&](store::Tx& tx) {
    return tx.Query("SELECT num FROM inbox WHERE kind IS NOT NULL AND num % 10 <> 3", {}, [&](const store::Row& row) {
      ids.push_back(row.Int(0));
      return Status::Ok();
    });
  });
  if (!st.ok()) Fail("read ids", st);
  for (size_t first = 0; first < ids.size(); first += 1000) {
    std::vector<int64_t> batch(ids.begin() + static_cast<std::ptrdiff_t>(first),
                               ids.begin() + static_cast<std::ptrdiff_t>(std::min(ids.size(), first + 1000)));
    st = db->WriteSync([&](store::Tx& tx) { return activity::MarkRead(tx, batch).status(); });
    if (!st.ok()) Fail("mark read", st);
  }
  // The counts kept agree with the items (the first pass marked some sessions read too).
  int64_t unread_items = 0;
  st = db->ReadSync([&](store::Tx& tx) {
    return tx.Query("SELECT COUNT(*) FROM inbox WHERE read = 0", {}, [&](const store::Row& row) {
      unread_items = row.Int(0);
      return Status::Ok();
    });
  });
  if (!st.ok()) Fail("count unread", st);
  counts = Call(routes.Find("GET", "/api/activity/unread"), {});
  if (counts["total"] != unread_items) Wrong("unread total after marking: " + counts["total"].dump());
  Measure(routes, args, "a tenth unread");
  db->Close();
  if (args.pg.empty()) std::filesystem::remove_all(args.dir);
  return 0;
}
