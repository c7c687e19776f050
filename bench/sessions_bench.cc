// Load program for the sessions plugin (docs/PERFORMANCE.md, "Sessions").
//
//   sessions_bench [--dir DIR] [--sessions N] [--live L] [--calls C]
//                  [--inflight K] [--read-turns R] [--long-events E]
//                  [--threads T] [--quick]
//
// A real host::Host over a profile in DIR, with the sessions plugin's tools
// registered the way `dsh web` registers them:
//
// 1. N persisted sessions (default 100,000), bulk-loaded in batched
//    transactions before the host starts: distinct, shuffled `updated_at`
//    (pairs share one, so the tie order by id matters too), a one-turn
//    conversation each (turn/start, message/user, title/fallback,
//    message/assistant, turn/end), a generated title for 30 % and a user
//    rename for 4 %; every tenth session is empty (no events, no title).
//    Session 0 holds a long conversation instead (R turns, 2R blocks) for
//    `session_read`. One more session, older than all of them, holds E
//    events (default 1,000,000: turns of turn/start, message/user,
//    message/reasoning, tool/call, tool/result, message/assistant, turn/end;
//    4 blocks per 7 events).
// 2. L of them (default 1,000) made live through the host's AgentManager
//    (lease, log, Agent; echo model), ten of them among the 50 most recent.
// 3. `session_status({})` through the ToolRegistry, one call at a time (C
//    calls after a warm-up), then from K concurrent callers; latency is
//    Invoke → done callback. Secondary: `session_status({session_id})` for a
//    cold and a live id, `session_read` of a 200-block window, and the two
//    store reads `session_status({})` is made of.
// 4. `session_read` of the E-event session: the first call (it builds the
//    session's block index from the whole log and stores it), the first
//    call of a new index as after a restart (loads the stored index), then
//    200-block windows, the newest and one in the middle, C calls each.
//
// Every result is checked (50 rows in the expected order with the expected
// status, title and updated_at; one exact row; 200 blocks), so the `--quick`
// smoke test fails when the tools return something wrong. Timings are printed,
// never asserted.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "agent/agent_manager.h"
#include "agent/tool_registry.h"
#include "base/clock.h"
#include "bench_cli.h"
#include "bench_util.h"
#include "host/host.h"
#include "plugins/sessions/conversation_index.h"
#include "plugins/sessions/sessions_tools.h"
#include "session/titles.h"
#include "time/rfc3339.h"

using namespace dsh;
using dsh::bench::Countdown;
using dsh::bench::Fail;
using dsh::bench::NowNs;
using dsh::bench::Percentile;
using namespace std::chrono_literals;

namespace {

struct Args {
  std::string dir;
  int64_t sessions = 100'000;
  int64_t live = 1'000;
  int calls = 2'000;
  int inflight = 4;
  int64_t read_turns = 1'000;
  int64_t long_events = 1'000'000;
  unsigned threads = 0;  // 0: as `dsh web` picks them
  bool quick = false;
};

constexpr int64_t kRecent = 50;        // session_status({}) lists this many
constexpr int64_t kLiveRecent = 10;    // live sessions among the kRecent most recent
constexpr int64_t kReadWindow = 200;   // session_read's maximum window
constexpr int64_t kLoadBatch = 5'000;  // sessions per bulk-load transaction

[[noreturn]] void Wrong(const std::string& what) {
  std::fprintf(stderr, "wrong result: %s\n", what.c_str());
  std::exit(1);
}

// What the bench wrote for one session, to check the tools' answers against.
struct Planned {
  std::string id;
  int64_t updated_at = 0;
  std::optional<std::string> title;  // the effective durable title
  bool live = false;
  int64_t events = 0;
};

struct Latencies {
  std::vector<double> ms;
  double wall_s = 0;
};

struct Bench {
  Args args;
  std::unique_ptr<host::Host> host;
  std::vector<Planned> plan;
  std::vector<size_t> order;  // indexes into plan: updated_at descending, ties by id
  std::string read_id;
  int64_t read_blocks = 0;
  std::string cold_id, live_id;
  std::string long_id = "ses_bench_long";
  int64_t long_blocks = 0;

  // Bulk load straight into the session tables (docs/STORAGE.md), in the
  // shape SessionStore::Append and Compact leave behind: events in the
  // session-clustered `events` table and the title snapshot columns set.
  void Load() {
    const int64_t n = args.sessions;
    const int64_t now = ToUnixMillis(RealClock().Now());
    // Everything is older than the global interface session Start creates.
    const int64_t base = now - 3'600'000 - (n / 2 + 1) * 1000;
    int64_t stride = 7919;
    while (std::gcd(stride, n) != 1) stride += 2;
    plan.resize(static_cast<size_t>(n));
    const bool tty = ::isatty(STDERR_FILENO) != 0;
    auto started = std::chrono::steady_clock::now();
    for (int64_t first = 0; first < n; first += kLoadBatch) {
      int64_t last = std::min(n, first + kLoadBatch);
      Status st = host->database().WriteSync([&](store::Tx& tx) -> Status {
        for (int64_t i = first; i < last; ++i)
          DSH_RETURN_IF_ERROR(LoadOne(tx, i, base + (i * stride % n) / 2 * 1000));
        return Status::Ok();
      });
      if (!st.ok()) Fail("load", st);
      if (tty || last == n) {
        std::fprintf(stderr, "%sloaded %lld / %lld sessions", tty ? "\r" : "", static_cast<long long>(last),
                     static_cast<long long>(n));
      }
    }
    std::fprintf(stderr, " (%.1f s)\n",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    LoadLong(n + 1, base - 7'200'000);
    order.resize(plan.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      if (plan[a].updated_at != plan[b].updated_at) return plan[a].updated_at > plan[b].updated_at;
      return plan[a].id < plan[b].id;
    });
  }

  Status LoadOne(store::Tx& tx, int64_t i, int64_t updated_at) {
    char id[32];
    std::snprintf(id, sizeof id, "ses_bench_%07lld", static_cast<long long>(i));
    Planned& p = plan[static_cast<size_t>(i)];
    p.id = id;
    p.updated_at = updated_at;
    const int64_t num = i + 1;  // the table is empty before the load
    const int64_t created_at = updated_at - 60'000;
    const bool empty = i % 10 == 9;
    const int64_t turns = i == 0 ? std::max<int64_t>(1, args.read_turns) : (empty ? 0 : 1);
    int64_t seq = 0;
    session::Titles titles;
    auto event = [&](std::string_view type, const Json& data) {
      std::string text = DumpJson(data);
      return tx
          .Exec("INSERT INTO events (session_num, seq, type, at, data) VALUES (?, ?, ?, ?, ?)",
                {num, ++seq, type, created_at + seq, std::string_view(text)})
          .status();
    };
    for (int64_t t = 0; t < turns; ++t) {
      std::string prompt = "Please look at report " + std::to_string(i) + "-" + std::to_string(t) +
                           " and tell me what changed in the quarterly numbers since last time";
      DSH_RETURN_IF_ERROR(event("turn/start", Json::object()));
      DSH_RETURN_IF_ERROR(event("message/user", {{"text", prompt}}));
      if (t == 0) {
        titles.fallback = session::FallbackTitle(prompt);
        DSH_RETURN_IF_ERROR(event("title/fallback", {{"title", *titles.fallback}}));
      }
      DSH_RETURN_IF_ERROR(event("message/assistant", {{"text", "echo: " + prompt}}));
      DSH_RETURN_IF_ERROR(event("turn/end", {{"status", "completed"}}));
    }
    if (!empty && i % 10 < 3) {
      titles.generated = "Quarterly report " + std::to_string(i) + " review";
      DSH_RETURN_IF_ERROR(event("title/generated", {{"title", *titles.generated}}));
    }
    if (!empty && i % 25 == 0) {
      titles.user = "Renamed session " + std::to_string(i);
      DSH_RETURN_IF_ERROR(event("title/user", {{"title", *titles.user}}));
    }
    p.title = titles.Effective();
    p.events = seq;
    auto opt = [](const std::optional<std::string>& s) -> store::Value {
      if (!s) return nullptr;
      return std::string_view(*s);
    };
    return tx
        .Exec(
            "INSERT INTO sessions (num, id, created_at, updated_at, provider, model, time_zone, seed_length, "
            "delegation_depth, origin, last_seq, title_user, title_generated, title_fallback) "
            "VALUES (?, ?, ?, ?, 'echo', 'echo', 'UTC', 0, 0, 'bench', ?, ?, ?, ?)",
            {num, std::string_view(p.id), created_at, updated_at, seq, opt(titles.user),
             opt(titles.generated), opt(titles.fallback)})
        .status();
  }

  // The E-event session, older than every other (it never enters the
  // listings), in transactions of ~50,000 events.
  void LoadLong(int64_t num, int64_t created_at) {
    auto started = std::chrono::steady_clock::now();
    const int64_t total = args.long_events;
    int64_t seq = 0;
    while (seq < total) {
      Status st = host->database().WriteSync([&](store::Tx& tx) -> Status {
        int64_t stop = std::min(total, seq + 50'000);
        while (seq < stop) {
          int64_t t = seq / 7;
          std::string n = std::to_string(t);
          std::string type, text;
          switch (seq % 7) {
            case 0: type = "turn/start"; text = "{}"; break;
            case 1: type = "message/user"; text = DumpJson({{"text", "Please check file " + n + " for the quarterly numbers"}}); break;
            case 2: type = "message/reasoning"; text = DumpJson({{"text", "The user wants file " + n + "; read it."}}); break;
            case 3: type = "tool/call"; text = DumpJson({{"call_id", "call_" + n}, {"name", "read"}, {"arguments", {{"path", "reports/" + n + ".txt"}}}}); break;
            case 4: type = "tool/result"; text = DumpJson({{"call_id", "call_" + n}, {"name", "read"}, {"result", "revenue " + n + ", costs " + n}}); break;
            case 5: type = "message/assistant"; text = DumpJson({{"text", "File " + n + " shows revenue " + n + "."}}); break;
            default: type = "turn/end"; text = R"({"status":"completed"})"; break;
          }
          // A block begins at the prompt, the reasoning (the call joins it), the result and the answer.
          if (seq % 7 == 1 || seq % 7 == 2 || seq % 7 == 4 || seq % 7 == 5) ++long_blocks;
          ++seq;
          DSH_RETURN_IF_ERROR(tx.Exec("INSERT INTO events (session_num, seq, type, at, data) VALUES (?, ?, ?, ?, ?)",
                                      {num, seq, std::string_view(type), created_at + seq / 1000, std::string_view(text)})
                                  .status());
        }
        return Status::Ok();
      });
      if (!st.ok()) Fail("load long session", st);
    }
    Status st = host->database().WriteSync([&](store::Tx& tx) -> Status {
      return tx
          .Exec("INSERT INTO sessions (num, id, created_at, updated_at, provider, model, time_zone, seed_length, "
                "delegation_depth, origin, last_seq) VALUES (?, ?, ?, ?, 'echo', 'echo', 'UTC', 0, 0, 'bench', ?)",
                {num, std::string_view(long_id), created_at, created_at + total / 1000, total})
          .status();
    });
    if (!st.ok()) Fail("load long session", st);
    std::fprintf(stderr, "loaded a %lld-event session, %lld blocks (%.1f s)\n", static_cast<long long>(total),
                 static_cast<long long>(long_blocks),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  }

  // kLiveRecent of the most recent kRecent, the rest spread over the others;
  // never the session `session_read` reads (it stays cold).
  std::vector<std::string> PickLive() {
    std::vector<std::string> ids;
    const int64_t want = std::min<int64_t>(args.live, args.sessions - 1);
    const int64_t top = std::min<int64_t>(kRecent, static_cast<int64_t>(order.size()));
    for (int64_t r = 2; r < top && static_cast<int64_t>(ids.size()) < std::min(want, kLiveRecent); r += 5) {
      if (order[static_cast<size_t>(r)] == 0) continue;
      plan[order[static_cast<size_t>(r)]].live = true;
      ids.push_back(plan[order[static_cast<size_t>(r)]].id);
    }
    std::vector<size_t> rest(order.begin() + top, order.end());
    std::mt19937_64 rng(42);
    std::shuffle(rest.begin(), rest.end(), rng);
    for (size_t i : rest) {
      if (static_cast<int64_t>(ids.size()) >= want) break;
      if (i == 0) continue;
      plan[i].live = true;
      ids.push_back(plan[i].id);
    }
    return ids;
  }

  void MakeLive(const std::vector<std::string>& ids) {
    auto started = std::chrono::steady_clock::now();
    agent::AgentManager& agents = host->agents();
    Countdown resumed(ids.size());
    for (const auto& id : ids) {
      agents.Resume(id, [&](Status st) {
        if (!st.ok()) Fail("resume", st);
        resumed.Done();
      });
    }
    if (!resumed.Wait(300s)) Fail("resume", Status("timeout", "sessions were not resumed in time"));
    Countdown idle(ids.size());
    for (const auto& id : ids) {
      agents.WhenIdle(id, [&](Status st) {
        if (!st.ok()) Fail("when idle", st);
        idle.Done();
      });
    }
    if (!idle.Wait(300s)) Fail("when idle", Status("timeout", "agents did not start in time"));
    std::fprintf(stderr, "made %zu sessions live (%.1f s)\n", ids.size(),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  }

  // One tool call, Invoke → done, from the calling thread; returns its
  // latency in ms and its result in `out`.
  double Call(const std::string& tool, const Json& args_json, Result<Json>* out) {
    Countdown done(1);
    int64_t end_ns = 0;
    agent::ToolContext ctx;  // a root call, as POST /api/tools without session_id
    int64_t start_ns = NowNs();
    host->tools().Invoke(tool, ctx, args_json, [&](Result<Json> r) {
      end_ns = NowNs();
      *out = std::move(r);
      done.Done();
    });
    if (!done.Wait(60s)) Fail(tool.c_str(), Status("timeout", "no answer in 60 s"));
    return static_cast<double>(end_ns - start_ns) / 1e6;
  }

  // `calls` calls after `warmup` unmeasured ones, from `callers` threads each
  // calling one at a time; `check` sees every result (outside the timing).
  Latencies Measure(const std::string& tool, int warmup, int calls, int callers,
                    const std::function<Json(int)>& args_of, const std::function<void(const Json&)>& check) {
    for (int i = 0; i < warmup; ++i) {
      Result<Json> r = Status("unset", "");
      Call(tool, args_of(i), &r);
      if (!r.ok()) Fail(tool.c_str(), r.status());
      check(*r);
    }
    Latencies out;
    std::vector<std::vector<double>> per(static_cast<size_t>(callers));
    auto started = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (int c = 0; c < callers; ++c) {
      threads.emplace_back([&, c] {
        for (int i = c; i < calls; i += callers) {
          Result<Json> r = Status("unset", "");
          Json a = args_of(i);
          per[static_cast<size_t>(c)].push_back(Call(tool, a, &r));
          if (!r.ok()) Fail(tool.c_str(), r.status());
          check(*r);
        }
      });
    }
    for (auto& t : threads) t.join();
    out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    for (auto& v : per) out.ms.insert(out.ms.end(), v.begin(), v.end());
    return out;
  }

  // Like Measure for an asynchronous store read, for the breakdown.
  Latencies MeasureRead(int warmup, int calls, const std::function<void(std::function<void()>)>& read) {
    Latencies out;
    auto started = std::chrono::steady_clock::now();
    for (int i = 0; i < warmup + calls; ++i) {
      if (i == warmup) started = std::chrono::steady_clock::now();
      Countdown done(1);
      int64_t end_ns = 0;
      int64_t start_ns = NowNs();
      read([&] {
        end_ns = NowNs();
        done.Done();
      });
      if (!done.Wait(60s)) Fail("read", Status("timeout", "no answer in 60 s"));
      if (i >= warmup) out.ms.push_back(static_cast<double>(end_ns - start_ns) / 1e6);
    }
    out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return out;
  }

  // The rows session_status({}) must return, in order: the newest kRecent of
  // the planned sessions and the global interface session.
  std::vector<Planned> ExpectedRecent() {
    std::vector<Planned> rows;
    for (size_t r = 0; r < order.size() && static_cast<int64_t>(r) < kRecent; ++r)
      rows.push_back(plan[order[r]]);
    if (const auto& global = host->global_session_id()) {
      auto h = host->sessions().Get(*global);
      if (!h.ok()) Fail("global session", h.status());
      rows.push_back({h->id, h->updated_at, std::nullopt, host->agents().LiveStatus(h->id).has_value()});
    }
    std::sort(rows.begin(), rows.end(), [](const Planned& a, const Planned& b) {
      if (a.updated_at != b.updated_at) return a.updated_at > b.updated_at;
      return a.id < b.id;
    });
    if (static_cast<int64_t>(rows.size()) < kRecent) Wrong("fewer than 50 sessions planned");
    rows.resize(static_cast<size_t>(kRecent));
    return rows;
  }

  static void CheckRow(const Json& row, const Planned& want) {
    std::string at = "row of " + want.id;
    if (row.value("session_id", "") != want.id) Wrong(at + ": session_id is " + row.dump());
    std::string status = row.value("status", "");
    bool live = status == "idle" || status == "running";
    if (live != want.live || (!live && status != "cold")) Wrong(at + ": status " + status);
    if (want.title) {
      if (!row.contains("title") || row["title"] != *want.title) Wrong(at + ": title " + row.dump());
    } else if (row.contains("title")) {
      Wrong(at + ": unexpected title " + row.dump());
    }
    if (row.value("updated_at", "") != FormatRfc3339Utc(FromUnixMillis(want.updated_at))) {
      Wrong(at + ": updated_at " + row.dump());
    }
  }

  static void CheckRecent(const Json& result, const std::vector<Planned>& want) {
    const Json& rows = result.at("sessions");
    if (rows.size() != want.size())
      Wrong("session_status({}) returned " + std::to_string(rows.size()) + " rows");
    for (size_t i = 0; i < want.size(); ++i) CheckRow(rows[i], want[i]);
  }

  void Run() {
    spdlog::set_level(spdlog::level::warn);  // stdout is the report
    std::filesystem::path dir = args.dir.empty()
                                    ? std::filesystem::temp_directory_path() / "dsh-sessions-bench"
                                    : std::filesystem::path(args.dir);
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);

    host::HostOptions options;
    options.home = dir.string();
    options.env = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };  // echo/echo
    agent::AgentManagerOptions agent_options;
    agent_options.idle_eviction = std::chrono::hours(24);  // nothing is evicted during the run
    agent_options.generate_titles = false;
    options.agent_options = agent_options;
    auto opened = host::Host::Open(options);
    if (!opened.ok()) Fail("open host", opened.status());
    host = std::move(opened).value();
    if (Status st = plugins::sessions::RegisterSessionsPlugin(*host); !st.ok()) Fail("register", st);

    Load();
    read_id = plan[0].id;
    read_blocks = 2 * std::max<int64_t>(1, args.read_turns);
    std::vector<std::string> live_ids = PickLive();

    unsigned threads =
        args.threads ? args.threads : std::max(2u, std::min(4u, std::thread::hardware_concurrency()));
    if (Status st = host->Start(threads); !st.ok()) Fail("start", st);
    MakeLive(live_ids);

    std::vector<Planned> recent = ExpectedRecent();
    int64_t live_in_recent =
        std::count_if(recent.begin(), recent.end(), [](const Planned& p) { return p.live; });
    int64_t titled_in_recent =
        std::count_if(recent.begin(), recent.end(), [](const Planned& p) { return p.title.has_value(); });
    if (live_in_recent == 0) Wrong("no live session among the most recent");
    // A titled cold session from the middle of the order, not one the listing keeps hot.
    for (size_t r = order.size() / 2; r < order.size() && cold_id.empty(); ++r) {
      if (!plan[order[r]].live && order[r] != 0 && plan[order[r]].title) cold_id = plan[order[r]].id;
    }
    if (cold_id.empty()) Wrong("no cold titled session to look up");
    live_id = live_ids.back();
    const Planned& cold =
        *std::find_if(plan.begin(), plan.end(), [&](const Planned& p) { return p.id == cold_id; });
    const Planned& live =
        *std::find_if(plan.begin(), plan.end(), [&](const Planned& p) { return p.id == live_id; });

    const int calls = args.calls;
    const int warmup = std::max(10, calls / 10);
    auto recent_check = [&](const Json& r) { CheckRecent(r, recent); };
    auto no_args = [](int) { return Json::object(); };

    Latencies status_seq = Measure("session_status", warmup, calls, 1, no_args, recent_check);
    Latencies status_par = Measure("session_status", warmup, calls, args.inflight, no_args, recent_check);
    auto exact_check = [](const Planned& want) {
      return [&want](const Json& r) {
        if (r.at("sessions").size() != 1) Wrong("session_status({session_id}) returned " + r.dump());
        CheckRow(r["sessions"][0], want);
      };
    };
    Latencies status_cold = Measure(
        "session_status", warmup, calls, 1,
        [&](int) {
          return Json{{"session_id", cold_id}};
        },
        exact_check(cold));
    Latencies status_live = Measure(
        "session_status", warmup, calls, 1,
        [&](int) {
          return Json{{"session_id", live_id}};
        },
        exact_check(live));
    std::mt19937_64 rng(7);
    const int64_t last_offset = std::max<int64_t>(1, read_blocks - kReadWindow + 1);
    std::vector<int64_t> offsets(static_cast<size_t>(calls + warmup));
    for (auto& o : offsets) o = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(last_offset));
    Latencies read = Measure(
        "session_read", warmup, calls, 1,
        [&](int i) {
          return Json{
              {"session_id", read_id}, {"offset", offsets[static_cast<size_t>(i)]}, {"limit", kReadWindow}};
        },
        [&](const Json& r) {
          if (r.at("total_messages") != read_blocks)
            Wrong("session_read total_messages: " + r["footer"].dump());
          if (static_cast<int64_t>(r.at("messages").size()) != std::min(kReadWindow, read_blocks)) {
            Wrong("session_read returned " + std::to_string(r["messages"].size()) + " messages");
          }
        });

    // session_read of the long session: the first call reads the whole log
    // (the block index of the session), later ones the window.
    auto long_check = [&](int64_t offset) {
      return [&, offset](const Json& r) {
        if (r.at("total_messages") != long_blocks) Wrong("long session_read total_messages: " + r["footer"].dump());
        const Json& m = r.at("messages");
        if (static_cast<int64_t>(m.size()) != std::min(kReadWindow, long_blocks - offset + 1))
          Wrong("long session_read returned " + std::to_string(m.size()) + " messages");
        // Block k (1-based) is the (k-1)%4-th of turn (k-1)/4: user, assistant, tool, assistant.
        static const char* kRoles[] = {"user", "assistant", "tool", "assistant"};
        for (size_t i = 0; i < m.size(); ++i) {
          int64_t k = offset + static_cast<int64_t>(i);
          if (m[i].value("role", "") != kRoles[(k - 1) % 4]) Wrong("long session_read block " + std::to_string(k));
        }
        if ((offset - 1) % 4 == 0 &&
            m[0].value("content", "") != "Please check file " + std::to_string((offset - 1) / 4) + " for the quarterly numbers")
          Wrong("long session_read block " + std::to_string(offset) + ": " + m[0].dump());
      };
    };
    const int64_t newest_offset = std::max<int64_t>(1, long_blocks - kReadWindow + 1);
    const int64_t middle_offset = std::max<int64_t>(1, long_blocks / 2 / 4 * 4 + 1);
    Result<Json> first_long = Status("unset", "");
    double first_long_ms =
        Call("session_read", {{"session_id", long_id}, {"offset", newest_offset}, {"limit", kReadWindow}}, &first_long);
    if (!first_long.ok()) Fail("session_read", first_long.status());
    long_check(newest_offset)(*first_long);
    // As after a restart: a new index on the same database loads the block
    // starts the first call stored and reads the log after the last one.
    if (!host->database().WriteSync([](store::Tx&) { return Status::Ok(); }).ok()) Wrong("barrier write");
    double restarted_ms = 0;
    {
      auto restarted = plugins::sessions::ConversationIndex::Create(host->sessions());
      std::promise<Result<plugins::sessions::ConversationIndex::Window>> p;
      auto t0 = std::chrono::steady_clock::now();
      restarted->Read(long_id, newest_offset, kReadWindow,
                      [&](Result<plugins::sessions::ConversationIndex::Window> w) { p.set_value(std::move(w)); });
      auto w = p.get_future().get();
      restarted_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (!w.ok()) Fail("session_read after a restart", w.status());
      if (w->total != long_blocks || static_cast<int64_t>(w->blocks.size()) != std::min(kReadWindow, long_blocks))
        Wrong("session_read after a restart: " + std::to_string(w->blocks.size()) + " blocks");
    }
    Latencies long_newest = Measure(
        "session_read", warmup, calls, 1,
        [&](int) { return Json{{"session_id", long_id}, {"offset", newest_offset}, {"limit", kReadWindow}}; },
        long_check(newest_offset));
    Latencies long_middle = Measure(
        "session_read", warmup, calls, 1,
        [&](int) { return Json{{"session_id", long_id}, {"offset", middle_offset}, {"limit", kReadWindow}}; },
        long_check(middle_offset));

    // What session_status({}) is made of, one store read at a time.
    session::SessionStore& store = host->sessions();
    std::vector<std::string> recent_ids;
    for (const auto& p : recent) recent_ids.push_back(p.id);
    Latencies list = MeasureRead(warmup, calls, [&](std::function<void()> done) {
      store.ListRecentAsync(kRecent, [done](Result<std::vector<session::SessionHeader>> r) {
        if (!r.ok() || static_cast<int64_t>(r->size()) != kRecent) Wrong("ListRecentAsync");
        done();
      });
    });
    Latencies titles = MeasureRead(warmup, calls, [&](std::function<void()> done) {
      store.ReadTitlesAsync(recent_ids, [done](Result<std::map<std::string, session::Titles>> r) {
        if (!r.ok()) Wrong("ReadTitlesAsync: " + r.status().ToString());
        done();
      });
    });

    Latencies read_log = MeasureRead(warmup, calls, [&](std::function<void()> done) {
      store.ReadEventsAsync(read_id, 0, 1'000'000, [done](Result<std::vector<session::Event>> r) {
        if (!r.ok() || r->empty()) Wrong("ReadEventsAsync");
        done();
      });
    });

    auto live_now = host->agents().LiveSessions();
    std::printf("## session_status over %lld persisted sessions, %zu live (%u io threads)\n\n",
                static_cast<long long>(args.sessions), live_now.size(), threads);
    std::printf(
        "The %lld rows of `session_status({})`: %lld live, %lld with a title. %d calls per figure after %d "
        "warm-up calls; latency is ToolRegistry::Invoke → done callback.\n\n",
        static_cast<long long>(kRecent), static_cast<long long>(live_in_recent),
        static_cast<long long>(titled_in_recent), calls, warmup);
    std::printf("| call | p50 | p90 | p99 | max | calls/s |\n|---|---:|---:|---:|---:|---:|\n");
    auto row = [](const std::string& what, Latencies l) {
      double p50 = Percentile(l.ms, 0.50), p90 = Percentile(l.ms, 0.90), p99 = Percentile(l.ms, 0.99);
      double max = l.ms.empty() ? 0.0 : l.ms.back();  // sorted by Percentile
      std::printf("| %s | %.3f ms | %.3f ms | %.3f ms | %.3f ms | %.0f |\n", what.c_str(), p50, p90, p99, max,
                  static_cast<double>(l.ms.size()) / l.wall_s);
    };
    row("**`session_status({})`**, one call at a time", status_seq);
    row("`session_status({})`, " + std::to_string(args.inflight) + " concurrent callers", status_par);
    row("`session_status({session_id})`, cold session", status_cold);
    row("`session_status({session_id})`, live session", status_live);
    row("`session_read` 200-block window of a " + std::to_string(read_blocks) + "-block session", read);
    row("part: `SessionStore::ListRecentAsync(50)`", list);
    row("part: `SessionStore::ReadTitlesAsync` of the 50 ids", titles);
    row("part of `session_read`: `SessionStore::ReadEventsAsync` of that session's whole log (" +
            std::to_string(plan[0].events) + " events)",
        read_log);
    std::printf("\n");
    std::printf("## session_read of a %lld-event session (%lld blocks)\n\n", static_cast<long long>(args.long_events),
                static_cast<long long>(long_blocks));
    std::printf("First call (builds the session's block index from the whole log and stores it): %.1f ms\n\n",
                first_long_ms);
    std::printf("First call of a new index on the same database, as after a restart (loads the stored block "
                "index, reads the log after its last chunk): %.1f ms\n\n",
                restarted_ms);
    std::printf("| call | p50 | p90 | p99 | max | calls/s |\n|---|---:|---:|---:|---:|---:|\n");
    row("**`session_read`** newest 200 blocks (offset " + std::to_string(newest_offset) + ")", long_newest);
    row("**`session_read`** 200 blocks in the middle (offset " + std::to_string(middle_offset) + ")", long_middle);
    std::printf("\n");
    std::fflush(stdout);

    host->Close();
    host.reset();
    std::filesystem::remove_all(dir);
  }
};

}  // namespace

int main(int argc, char** argv) {
  Bench b;
  Args& args = b.args;
  using dsh::bench::AtLeast;
  CLI::App app("Load program for the sessions plugin (docs/PERFORMANCE.md, \"Sessions\").", "sessions_bench");
  dsh::bench::UseBenchOptionDefaults(app);
  app.add_option("--dir", args.dir, "directory of the profile (default: a temporary one); emptied first");
  app.add_option("--sessions", args.sessions, "persisted sessions, bulk-loaded")
      ->check(AtLeast<int64_t>(kRecent + 1));
  app.add_option("--live", args.live, "sessions made live")->check(AtLeast<int64_t>(1));
  app.add_option("--calls", args.calls, "measured calls per figure")->check(AtLeast(1));
  app.add_option("--inflight", args.inflight, "concurrent callers of session_status({})")->check(AtLeast(1));
  app.add_option("--read-turns", args.read_turns, "turns of session 0's long conversation (session_read)")
      ->check(AtLeast<int64_t>(1));
  app.add_option("--long-events", args.long_events, "events of the long session (session_read of its log)")
      ->check(AtLeast<int64_t>(7));
  app.add_option("--threads", args.threads, "io threads of the host (default: as `dsh web` picks them)")
      ->check(AtLeast(1u))
      ->default_str("");
  app.add_flag("--quick", args.quick, "a short run (the smoke test)");
  if (auto exit_code = dsh::bench::ParseCommandLine(app, argc, argv)) return *exit_code;
  if (args.quick) {
    args.sessions = std::min<int64_t>(args.sessions, 2'000);
    args.live = std::min<int64_t>(args.live, 50);
    args.calls = std::min(args.calls, 100);
    args.read_turns = std::min<int64_t>(args.read_turns, 150);
    args.long_events = std::min<int64_t>(args.long_events, 20'000);
  }
  b.Run();
  return 0;
}
