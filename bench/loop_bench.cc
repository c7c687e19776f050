// Load program for the loop plugin (issue 6; docs/PERFORMANCE.md, "Loops").
//
//   loop_bench [--dir DIR] [--loops N] [--service S] [--sessions K]
//              [--late L] [--late-seconds T] [--burst B] [--threads H] [--quick]
//              [--no-outcomes] [--webhooks]
//
// Real host::Host instances with the loop plugin composed the way `dsh web`
// composes it (plugin migrations + RegisterLoopPlugin), echo model, real
// clock:
//
// 1. Creation (in a child process, so its heap does not count in the memory
//    figure): K echo sessions made through AgentManager::Create; N loops
//    (default 1,000,000) through registry::Insert in batched transactions
//    (5,000 per transaction), then S more (default 10,000) through the real
//    `loop_create` tool (LoopService::Create: validation, target lookup, one
//    write transaction and a scheduler poke each), 8 callers in flight, with
//    the N loops already present. Every loop is `every 86400 s`, its next
//    occurrence a day away, targeting one of the K sessions.
// 2. An empty host (no loops) is opened and started; its resident set (after
//    the allocator returned its free memory) is the baseline.
// 3. The profile with N + S loops is opened; one loop is made due; then
//    Host::Start → that occurrence's `<loop>` inbox row (its created_at).
//    The resident set after that, minus the baseline, is the memory figure.
// 4. The K sessions are made live. Lateness: L loops (default 10,000) get
//    next occurrences spread evenly over T seconds (default 10, so 1,000 due
//    per second); lateness is delivered_at − nominal_at of their run rows
//    (and the inbox row's created_at − nominal_at).
// 5. Throughput: B loops (default 20,000) made due at once; occurrences
//    delivered per second into the live sessions (first claim → last
//    delivery, from the run rows).
//
// With --webhooks (issue 34; docs/PERFORMANCE.md, "Webhooks"), the host of
// steps 3-5 also composes the webhooks plugin the way `dsh web` does, with
// one `standard` endpoint for loop.run.completed and loop.run.failed (a
// --patch overlay, as `dsh web --patch` would load) pointing at a receiver
// of this program's own on loopback (bench/webhook_receiver.h, 200 to every
// POST). Beside the figures above it prints, for the lateness phase and the
// burst: messages received, outbox throughput (first to last receipt) and
// each message's lag (receipt − data.ended_at, the end of the turn it
// reports, which is also the message's created_at). At the end it waits
// (at most 5 min) until the receiver has a message for every run and the
// outbox has nothing pending.
//
// Checks (so the `--quick` smoke test fails on wrong behaviour): every due
// occurrence has exactly one delivered run row and exactly one inbox row,
// and no other loop ran; with --webhooks, every run's turn produced exactly
// one signed loop.run.completed message at the receiver, no webhook-id came
// twice, and the outbox holds every message as delivered in one attempt.
// Timings are printed, never asserted.
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "agent/agent_manager.h"
#include "agent/outbox.h"
#include "agent/tool_registry.h"
#include "base/clock.h"
#include "bench_cli.h"
#include "bench_util.h"
#include "host/host.h"
#include "plugins/loop/loop_plugin.h"
#include "plugins/loop/loop_registry.h"
#include "plugins/loop/loop_scheduler.h"
#include "plugins/webhooks/webhook_format.h"
#include "plugins/webhooks/webhook_plugin.h"
#include "webhook_receiver.h"

using namespace dsh;
using dsh::bench::Countdown;
using dsh::bench::Fail;
using dsh::bench::NowNs;
using dsh::bench::Percentile;
using namespace std::chrono_literals;
namespace loop = dsh::plugins::loop;

namespace {

struct Args {
  std::string dir;
  int64_t loops = 1'000'000;
  int64_t service = 10'000;
  int64_t sessions = 100;
  int64_t late = 10'000;
  int64_t late_seconds = 10;
  int64_t burst = 20'000;
  unsigned threads = 0;  // 0: as `dsh web` picks them
  bool quick = false;
  bool no_outcomes = false;  // measure without recording activity items and turn outcomes
  bool webhooks = false;     // compose the webhooks plugin with one endpoint on loopback
};

constexpr int64_t kLoadBatch = 5'000;
constexpr int64_t kDay = 86'400;
constexpr int kServiceInflight = 8;

[[noreturn]] void Wrong(const std::string& what) {
  std::fprintf(stderr, "wrong result: %s\n", what.c_str());
  std::exit(1);
}

int64_t WallMs() { return ToUnixMillis(RealClock().Now()); }

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Resident set size of this process in MiB (bench::ResidentInUse).
double RssMb() { return static_cast<double>(bench::ResidentInUse()) / (1024.0 * 1024.0); }

std::string LoopId(int64_t i) {
  char id[48];
  std::snprintf(id, sizeof id, "loop_bench_%07lld", static_cast<long long>(i));
  return id;
}

std::string SessionId(int64_t k) {
  char id[48];
  std::snprintf(id, sizeof id, "ses_loopbench_%04lld", static_cast<long long>(k));
  return id;
}

// Standard base64 (with padding), for the endpoint's secret.
std::string Base64(const std::string& bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t v = static_cast<uint32_t>(static_cast<unsigned char>(bytes[i])) << 16;
    if (i + 1 < bytes.size()) v |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8;
    if (i + 2 < bytes.size()) v |= static_cast<unsigned char>(bytes[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[v & 63] : '=';
  }
  return out;
}

// `webhooks_patch`: a config overlay declaring the webhook endpoint; when
// set, the webhooks plugin is composed too (as `dsh web` does).
std::unique_ptr<host::Host> OpenHost(const std::filesystem::path& home, bool record_outcomes = true,
                                     const std::string& webhooks_patch = "") {
  host::HostOptions options;
  options.home = home.string();
  if (!webhooks_patch.empty()) options.patches = {webhooks_patch};
  options.env = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };  // echo/echo
  options.plugin_migrations = loop::PluginMigrations();
  agent::AgentManagerOptions agent_options;
  agent_options.idle_eviction = std::chrono::hours(24);  // nothing is evicted during the run
  agent_options.generate_titles = false;
  agent_options.record_activity = record_outcomes;
  options.agent_options = agent_options;
  auto opened = host::Host::Open(options);
  if (!opened.ok()) Fail("open host", opened.status());
  std::unique_ptr<host::Host> host = std::move(opened).value();
  if (Status st = loop::RegisterLoopPlugin(*host); !st.ok()) Fail("register loop plugin", st);
  if (!webhooks_patch.empty()) {
    if (Status st = plugins::webhooks::RegisterWebhooksPlugin(*host); !st.ok())
      Fail("register webhooks plugin", st);
  }
  return host;
}

int64_t CountSync(host::Host& host, const std::string& sql, std::initializer_list<store::Value> params = {}) {
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

// What the receiver saw of one phase's messages.
struct WebhookPhase {
  size_t received = 0;
  int64_t first_us = 0, last_us = 0;  // first and last receipt
  std::vector<double> lag_ms;         // receipt − data.ended_at
};

struct Bench {
  Args args;
  std::filesystem::path dir;
  unsigned threads = 2;
  // --webhooks: the receiver, the endpoint's secret and the config overlay.
  std::unique_ptr<bench::WebhookReceiver> receiver;
  std::string secret;
  std::string webhooks_patch;

  // Starts the receiver and writes the overlay declaring the endpoint.
  void SetUpWebhooks() {
    receiver = std::make_unique<bench::WebhookReceiver>();
    std::random_device random;
    std::string key(32, '\0');
    for (char& c : key) c = static_cast<char>(random() & 0xff);
    secret = "whsec_" + Base64(key);
    webhooks_patch = (dir / "webhooks.yml").string();
    std::FILE* f = std::fopen(webhooks_patch.c_str(), "w");
    if (f == nullptr) Fail("write the webhooks overlay", Status("io", std::strerror(errno)));
    std::fprintf(f,
                 "notifications:\n"
                 "  webhooks:\n"
                 "    - name: bench\n"
                 "      url: http://127.0.0.1:%u/hook\n"
                 "      format: standard\n"
                 "      events: [\"loop.run.completed\", \"loop.run.failed\"]\n"
                 "      secret: %s\n"
                 "      allow_private: true\n",
                 static_cast<unsigned>(receiver->port()), secret.c_str());
    std::fclose(f);
  }

  // Waits until the receiver has `expected` messages and the outbox has
  // nothing pending; returns the pending count seen last.
  void AwaitOutboxDrained(host::Host& host, size_t expected, std::chrono::seconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      auto pending =
          host.database().ReadValue<int64_t>([](store::Tx& tx) { return agent::outbox::CountPending(tx); });
      if (!pending.ok()) Fail("count pending webhook messages", pending.status());
      size_t received = receiver->count();
      if (received >= expected && *pending == 0) return;
      if (std::chrono::steady_clock::now() > deadline) {
        Wrong("the outbox was not drained in time: " + std::to_string(received) + " of " +
              std::to_string(expected) + " messages received, " + std::to_string(*pending) + " pending");
      }
      // Until the next receipt (the last ones are recorded after they arrive).
      (void)receiver->WaitFor(received + 1, 50ms);
    }
  }

  // Checks every message the receiver got against the run rows (one signed
  // loop.run.completed per run, no webhook-id twice, each delivered in one
  // attempt) and sorts them into phases by loop id: [late_first, late_first
  // + n_late) and [burst_first, burst_first + n_burst).
  std::pair<WebhookPhase, WebhookPhase> CheckWebhooks(host::Host& host, int64_t runs, int64_t late_first,
                                                      int64_t n_late, int64_t burst_first, int64_t n_burst) {
    auto key = dsh::webhooks::SecretKey(secret);
    if (!key.ok()) Fail("webhook secret", key.status());
    std::map<std::pair<std::string, int64_t>, int> per_run;
    std::set<std::string> ids;
    WebhookPhase late, burst;
    const std::string late_lo = LoopId(late_first), late_hi = LoopId(late_first + n_late - 1);
    const std::string burst_lo = LoopId(burst_first), burst_hi = LoopId(burst_first + n_burst - 1);
    for (const auto& r : receiver->receipts()) {
      if (r.id.empty() || !ids.insert(r.id).second)
        Wrong("webhook-id \"" + r.id + "\" received twice (or empty)");
      int64_t timestamp = 0;
      try {
        timestamp = std::stoll(r.timestamp);
      } catch (const std::exception&) {
        Wrong("a message without a webhook-timestamp: " + r.id);
      }
      if (r.signature != dsh::webhooks::StandardSignature(*key, r.id, timestamp, r.body)) {
        Wrong("a message whose signature does not verify: " + r.id);
      }
      auto body = ParseJson(r.body);
      if (!body.ok() || !body->is_object()) Wrong("a message whose body is not a JSON object: " + r.id);
      Json data = (*body)["data"];  // a copy: a missing member reads as null
      if ((*body)["type"] != "loop.run.completed" || !data.is_object() || data["kind"] != "loop_run" ||
          !data["loop_id"].is_string() || !data["nominal_at"].is_number_integer() ||
          !data["ended_at"].is_number_integer() || data["outcome"]["status"] != "completed") {
        Wrong("an unexpected message: " + r.body);
      }
      const std::string loop_id = data["loop_id"].get<std::string>();
      ++per_run[{loop_id, data["nominal_at"].get<int64_t>()}];
      WebhookPhase* phase = loop_id >= late_lo && loop_id <= late_hi     ? &late
                            : loop_id >= burst_lo && loop_id <= burst_hi ? &burst
                                                                         : nullptr;
      if (phase == nullptr) continue;
      ++phase->received;
      phase->first_us = phase->received == 1 ? r.at_us : std::min(phase->first_us, r.at_us);
      phase->last_us = std::max(phase->last_us, r.at_us);
      phase->lag_ms.push_back(static_cast<double>(r.at_us) / 1000.0 -
                              static_cast<double>(data["ended_at"].get<int64_t>()));
    }
    // Exactly one message per run.
    int64_t matched = 0;
    Status st = host.database().ReadSync([&](store::Tx& tx) {
      return tx.Query("SELECT loop_id, nominal_at FROM loop_runs", {}, [&](const store::Row& row) {
        auto it = per_run.find({row.String(0), row.Int(1)});
        int n = it == per_run.end() ? 0 : it->second;
        if (n != 1)
          Wrong("the run " + row.String(0) + " produced " + std::to_string(n) + " messages at the receiver");
        ++matched;
        return Status::Ok();
      });
    });
    if (!st.ok()) Fail("read runs", st);
    if (matched != runs || static_cast<int64_t>(per_run.size()) != runs) {
      Wrong(std::to_string(per_run.size()) + " runs had messages, " + std::to_string(runs) + " runs in all");
    }
    int64_t in_one = CountSync(host,
                               "SELECT COUNT(*) FROM webhook_messages WHERE endpoint = 'bench' AND state = "
                               "'delivered' AND attempts = 1");
    int64_t messages = CountSync(host, "SELECT COUNT(*) FROM webhook_messages");
    if (in_one != runs || messages != runs) {
      Wrong(std::to_string(messages) + " outbox messages, " + std::to_string(in_one) +
            " delivered in one attempt, for " + std::to_string(runs) + " runs");
    }
    return {std::move(late), std::move(burst)};
  }

  // ---- 1. creation (child process) ----
  void Create() {
    auto host = OpenHost(dir / "profile");
    if (Status st = host->Start(threads); !st.ok()) Fail("start", st);
    Countdown made(static_cast<size_t>(args.sessions));
    for (int64_t k = 0; k < args.sessions; ++k) {
      session::NewSession s = host->DefaultNewSession();
      s.id = SessionId(k);
      host->agents().Create(std::move(s), [&](Result<session::SessionHeader> r) {
        if (!r.ok()) Fail("create session", r.status());
        made.Done();
      });
    }
    if (!made.Wait(300s)) Fail("create session", Status("timeout", "sessions were not created in time"));

    // Bulk: registry::Insert, 5,000 per transaction.
    const int64_t now = WallMs();
    loop::Schedule daily{loop::ScheduleKind::kEvery, kDay, "", std::nullopt};
    auto started = std::chrono::steady_clock::now();
    for (int64_t first = 0; first < args.loops; first += kLoadBatch) {
      int64_t last = std::min(args.loops, first + kLoadBatch);
      Status st = host->database().WriteSync([&](store::Tx& tx) -> Status {
        for (int64_t i = first; i < last; ++i) {
          loop::LoopRecord l;
          l.loop_id = LoopId(i);
          l.prompt = "Check on report " + std::to_string(i) + " and summarise what changed";
          l.schedule = daily;
          l.target = SessionId(i % args.sessions);
          l.created_at = now - (args.loops - i);
          l.due_at = l.created_at + kDay * 1000;  // a day away: nothing is due
          DSH_RETURN_IF_ERROR(loop::registry::Insert(tx, l));
        }
        return Status::Ok();
      });
      if (!st.ok()) Fail("bulk insert", st);
    }
    double bulk_s = SecondsSince(started);

    // Service: the loop_create tool, kServiceInflight callers, N loops present.
    std::atomic<int64_t> next{0};
    started = std::chrono::steady_clock::now();
    std::vector<std::thread> callers;
    for (int c = 0; c < kServiceInflight; ++c) {
      callers.emplace_back([&] {
        for (int64_t i; (i = next.fetch_add(1)) < args.service;) {
          Countdown done(1);
          agent::ToolContext ctx;  // a root call, as POST /api/tools
          Json in = {{"prompt", "Service-made loop " + std::to_string(i)},
                     {"schedule", {{"kind", "every"}, {"every_seconds", kDay}}},
                     {"session_id", SessionId(i % args.sessions)}};
          host->tools().Invoke("loop_create", ctx, in, [&](Result<Json> r) {
            if (!r.ok()) Fail("loop_create", r.status());
            done.Done();
          });
          if (!done.Wait(60s)) Fail("loop_create", Status("timeout", "no answer in 60 s"));
        }
      });
    }
    for (auto& t : callers) t.join();
    double service_s = SecondsSince(started);

    int64_t total = CountSync(*host, "SELECT COUNT(*) FROM loops WHERE state <> 'completed'");
    if (total != args.loops + args.service) Wrong("the registry holds " + std::to_string(total) + " loops");
    if (CountSync(*host, "SELECT COUNT(*) FROM loop_runs") != 0) Wrong("a loop ran during creation");
    std::printf("## Creation (%lld active loops at the end)\n\n", static_cast<long long>(total));
    std::printf("| path | loops | time | loops/s |\n|---|---:|---:|---:|\n");
    std::printf("| `registry::Insert`, %lld per transaction (`WriteSync`) | %lld | %.1f s | %.0f |\n",
                static_cast<long long>(kLoadBatch), static_cast<long long>(args.loops), bulk_s,
                static_cast<double>(args.loops) / bulk_s);
    std::printf(
        "| `loop_create` tool (LoopService::Create), %d in flight, %lld loops present | %lld | %.1f s | %.0f "
        "|\n\n",
        kServiceInflight, static_cast<long long>(args.loops), static_cast<long long>(args.service), service_s,
        static_cast<double>(args.service) / service_s);
    std::fflush(stdout);
    host->Close();
  }

  // ---- 2. empty host baseline ----
  double EmptyRss() {
    auto host = OpenHost(dir / "empty");
    if (Status st = host->Start(threads); !st.ok()) Fail("start empty host", st);
    std::this_thread::sleep_for(1500ms);  // a few scheduler ticks
    double rss = RssMb();
    host->Close();
    return rss;
  }

  // Sets loops [first, first+n) due at `at(k)` (k = 0..n-1).
  void MakeDue(host::Host& host, int64_t first, int64_t n, const std::function<int64_t(int64_t)>& at) {
    Status st = host.database().WriteSync([&](store::Tx& tx) -> Status {
      for (int64_t k = 0; k < n; ++k) {
        int64_t t = at(k);
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

  // Waits until the loops [first, first+n) each have a delivered run.
  void AwaitDelivered(host::Host& host, int64_t first, int64_t n, std::chrono::seconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    std::string lo = LoopId(first), hi = LoopId(first + n - 1);
    for (;;) {
      int64_t done = CountSync(
          host, "SELECT COUNT(*) FROM loop_runs WHERE loop_id >= ? AND loop_id <= ? AND result IS NOT NULL",
          {std::string_view(lo), std::string_view(hi)});
      if (done >= n) return;
      if (std::chrono::steady_clock::now() > deadline) {
        Wrong(std::to_string(done) + " of " + std::to_string(n) + " occurrences finished in time");
      }
      std::this_thread::sleep_for(50ms);
    }
  }

  struct Delivery {
    int64_t nominal, claimed, delivered, inbox_created;
  };

  // The run rows of loops [first, first+n), checked: one delivered run and
  // one inbox row per loop.
  std::vector<Delivery> Deliveries(host::Host& host, int64_t first, int64_t n) {
    std::vector<Delivery> out;
    std::string lo = LoopId(first), hi = LoopId(first + n - 1);
    Status st = host.database().ReadSync([&](store::Tx& tx) {
      return tx.Query(
          "SELECT r.nominal_at, r.claimed_at, r.delivered_at, r.result, r.target_session_id,"
          " (SELECT COUNT(*) FROM inbox i WHERE i.session_id = r.target_session_id"
          "   AND i.key = 'loop:' || r.loop_id || ':' || r.nominal_at),"
          " (SELECT MIN(i.created_at) FROM inbox i WHERE i.session_id = r.target_session_id"
          "   AND i.key = 'loop:' || r.loop_id || ':' || r.nominal_at)"
          " FROM loop_runs r WHERE r.loop_id >= ? AND r.loop_id <= ?",
          {std::string_view(lo), std::string_view(hi)}, [&](const store::Row& row) {
            if (row.IsNull(3) || row.Text(3) != "delivered" || row.IsNull(2)) {
              Wrong("an occurrence was not delivered: " +
                    std::string(row.IsNull(3) ? "running" : row.Text(3)));
            }
            if (row.Int(5) != 1) Wrong("an occurrence has " + std::to_string(row.Int(5)) + " inbox rows");
            out.push_back({row.Int(0), row.Int(1), row.Int(2), row.Int(6)});
            return Status::Ok();
          });
    });
    if (!st.ok()) Fail("read runs", st);
    if (static_cast<int64_t>(out.size()) != n) {
      Wrong(std::to_string(out.size()) + " run rows for " + std::to_string(n) + " due occurrences");
    }
    return out;
  }

  void Run() {
    spdlog::set_level(spdlog::level::warn);  // stdout is the report
    dir = args.dir.empty() ? std::filesystem::temp_directory_path() / "dsh-loop-bench"
                           : std::filesystem::path(args.dir);
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    threads = args.threads ? args.threads : std::max(2u, std::min(4u, std::thread::hardware_concurrency()));
    std::fflush(stdout);

    pid_t child = ::fork();
    if (child < 0) Fail("fork", Status("io", std::strerror(errno)));
    if (child == 0) {
      Create();
      std::fflush(stdout);
      std::_Exit(0);
    }
    int wstatus = 0;
    ::waitpid(child, &wstatus, 0);
    if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
      std::fprintf(stderr, "the creation phase failed\n");
      std::exit(1);
    }

    double empty_rss = EmptyRss();
    if (args.webhooks) SetUpWebhooks();

    // ---- 3. start to first dispatch ----
    const int64_t total = args.loops + args.service;
    auto open_started = std::chrono::steady_clock::now();
    auto host = OpenHost(dir / "profile", !args.no_outcomes, webhooks_patch);
    double open_s = SecondsSince(open_started);
    const int64_t first_loop = 0;
    MakeDue(*host, first_loop, 1, [](int64_t) { return WallMs(); });
    const std::string first_session = SessionId(first_loop % args.sessions);
    const int64_t start_ms = WallMs();
    auto start_began = std::chrono::steady_clock::now();
    if (Status st = host->Start(threads); !st.ok()) Fail("start", st);
    double start_call_s = SecondsSince(start_began);
    int64_t first_inbox_at = 0;
    std::string like = "loop:" + LoopId(first_loop) + ":%";
    for (auto deadline = std::chrono::steady_clock::now() + 60s; first_inbox_at == 0;) {
      first_inbox_at =
          CountSync(*host, "SELECT MIN(created_at) FROM inbox WHERE session_id = ? AND key LIKE ?",
                    {std::string_view(first_session), std::string_view(like)});
      if (first_inbox_at) break;
      if (std::chrono::steady_clock::now() > deadline) Wrong("the due loop was not delivered within 60 s");
      std::this_thread::sleep_for(2ms);
    }
    AwaitDelivered(*host, first_loop, 1, 30s);
    double loaded_rss = RssMb();

    // ---- 4. lateness at ~1,000 due per second, into live sessions ----
    std::vector<std::string> ids;
    for (int64_t k = 0; k < args.sessions; ++k) ids.push_back(SessionId(k));
    auto live_started = std::chrono::steady_clock::now();
    {
      Countdown resumed(ids.size());
      for (const auto& id : ids) {
        host->agents().Resume(id, [&](Status st) {
          if (!st.ok()) Fail("resume", st);
          resumed.Done();
        });
      }
      if (!resumed.Wait(300s)) Fail("resume", Status("timeout", "sessions were not resumed in time"));
      Countdown idle(ids.size());
      for (const auto& id : ids) {
        host->agents().WhenIdle(id, [&](Status st) {
          if (!st.ok()) Fail("when idle", st);
          idle.Done();
        });
      }
      if (!idle.Wait(300s)) Fail("when idle", Status("timeout", "agents did not go idle in time"));
    }
    double live_s = SecondsSince(live_started);

    const int64_t late_first = 1;
    const int64_t n_late = std::min(args.late, args.loops - 1);
    const int64_t span_ms = args.late_seconds * 1000;
    const int64_t t0 = WallMs() + 2000;
    MakeDue(*host, late_first, n_late, [&](int64_t k) { return t0 + k * span_ms / n_late; });
    AwaitDelivered(*host, late_first, n_late, std::chrono::seconds(args.late_seconds + 120));
    auto late_runs = Deliveries(*host, late_first, n_late);
    std::vector<double> late_ms, inbox_late_ms, claim_late_ms;
    for (const auto& d : late_runs) {
      if (d.nominal < t0 || d.nominal >= t0 + span_ms) Wrong("an occurrence with an unexpected nominal time");
      late_ms.push_back(static_cast<double>(d.delivered - d.nominal));
      inbox_late_ms.push_back(static_cast<double>(d.inbox_created - d.nominal));
      claim_late_ms.push_back(static_cast<double>(d.claimed - d.nominal));
    }

    // ---- 5. throughput: many due at once ----
    const int64_t burst_first = late_first + n_late;
    const int64_t n_burst = std::min(args.burst, args.loops - burst_first);
    // A little ahead, as a real schedule is: the scheduler arms its timer
    // for it instead of noticing the change at its next max_wait re-check.
    const int64_t burst_at = WallMs() + 2000;
    MakeDue(*host, burst_first, n_burst, [&](int64_t) { return burst_at; });
    AwaitDelivered(*host, burst_first, n_burst, 600s);
    const int64_t burst_delivered_ms = WallMs();
    auto burst_runs = Deliveries(*host, burst_first, n_burst);
    int64_t first_claim = INT64_MAX, last_delivery = 0;
    for (const auto& d : burst_runs) {
      if (d.nominal != burst_at) Wrong("a burst occurrence with an unexpected nominal time");
      first_claim = std::min(first_claim, d.claimed);
      last_delivery = std::max(last_delivery, d.delivered);
    }
    double burst_s = static_cast<double>(last_delivery - first_claim) / 1000.0;
    double from_due_s = static_cast<double>(last_delivery - burst_at) / 1000.0;

    // Nothing else ran; the first loop ran once.
    int64_t runs = CountSync(*host, "SELECT COUNT(*) FROM loop_runs");
    if (runs != 1 + n_late + n_burst) Wrong(std::to_string(runs) + " run rows in all");
    int64_t loop_inbox = CountSync(*host, "SELECT COUNT(*) FROM inbox WHERE key LIKE 'loop:%'");
    if (loop_inbox != runs)
      Wrong(std::to_string(loop_inbox) + " <loop> inbox rows for " + std::to_string(runs) + " runs");
    auto live_now = host->agents().LiveSessions();

    // Webhooks: every run's turn has ended and its message was received.
    WebhookPhase hooks_late, hooks_burst;
    double drain_s = 0;
    if (args.webhooks) {
      AwaitOutboxDrained(*host, static_cast<size_t>(runs), 300s);
      drain_s = static_cast<double>(WallMs() - burst_delivered_ms) / 1000.0;
      std::tie(hooks_late, hooks_burst) =
          CheckWebhooks(*host, runs, late_first, n_late, burst_first, n_burst);
    }

    const double late_p50 = Percentile(late_ms, 0.5), late_p99 = Percentile(late_ms, 0.99),
                 late_max = late_ms.back();
    const double inbox_p50 = Percentile(inbox_late_ms, 0.5), inbox_p99 = Percentile(inbox_late_ms, 0.99),
                 inbox_max = inbox_late_ms.back();
    const double claim_p50 = Percentile(claim_late_ms, 0.5), claim_p99 = Percentile(claim_late_ms, 0.99),
                 claim_max = claim_late_ms.back();
    std::printf(
        "## %lld active loops, %lld sessions (%zu live at the end), %u io threads, outcomes %s, %s\n\n",
        static_cast<long long>(total), static_cast<long long>(args.sessions), live_now.size(), threads,
        args.no_outcomes ? "not recorded" : "recorded",
        args.webhooks ? "webhooks: one `standard` endpoint on loopback" : "no webhooks");
    std::printf("| figure | value |\n|---|---:|\n");
    std::printf("| Host::Open (migrations, config) | %.3f s |\n", open_s);
    std::printf("| **Host::Start → first `<loop>` inbox row** | **%lld ms** |\n",
                static_cast<long long>(first_inbox_at - start_ms));
    std::printf("| (Host::Start call itself) | %.0f ms |\n", start_call_s * 1000);
    std::printf("| RSS empty host | %.1f MiB |\n", empty_rss);
    std::printf("| RSS with %lld loops after start + first dispatch | %.1f MiB |\n",
                static_cast<long long>(total), loaded_rss);
    std::printf("| **memory beyond an empty host** | **%.1f MiB** |\n", loaded_rss - empty_rss);
    std::printf("| making %lld sessions live | %.1f s |\n", static_cast<long long>(args.sessions), live_s);
    std::printf(
        "| lateness, %lld occurrences over %lld s (%.0f/s): delivered_at − nominal p50 / p99 / max | **%.0f "
        "/ %.0f** / %.0f ms |\n",
        static_cast<long long>(n_late), static_cast<long long>(args.late_seconds),
        static_cast<double>(n_late) / static_cast<double>(args.late_seconds), late_p50, late_p99, late_max);
    std::printf("| lateness, inbox created_at − nominal p50 / p99 / max | %.0f / %.0f / %.0f ms |\n",
                inbox_p50, inbox_p99, inbox_max);
    std::printf(
        "| part: claimed_at − nominal (negative: claimed ahead, within the lookahead) p50 / p99 / max | %.0f / %.0f / "
        "%.0f ms |\n",
        claim_p50, claim_p99, claim_max);
    std::printf(
        "| **burst of %lld due at once into %lld live sessions: first claim → last delivery** | %.2f s, "
        "**%.0f /s** |\n",
        static_cast<long long>(n_burst), static_cast<long long>(args.sessions), burst_s,
        static_cast<double>(n_burst) / burst_s);
    std::printf("| same, from the nominal time (includes the wake-up) | %.2f s, %.0f /s |\n", from_due_s,
                static_cast<double>(n_burst) / from_due_s);
    if (args.webhooks) {
      auto print_phase = [](const char* name, WebhookPhase& p) {
        const double span_s = static_cast<double>(p.last_us - p.first_us) / 1e6;
        const double p50 = Percentile(p.lag_ms, 0.5), p99 = Percentile(p.lag_ms, 0.99);
        const double max = p.lag_ms.empty() ? 0 : p.lag_ms.back();
        std::printf("| webhooks, %s: messages received | %zu |\n", name, p.received);
        std::printf("| webhooks, %s: **outbox throughput**, first → last receipt | %.2f s, **%.0f /s** |\n",
                    name, span_s, span_s > 0 ? static_cast<double>(p.received - 1) / span_s : 0.0);
        std::printf(
            "| webhooks, %s: **lag, receipt − data.ended_at** (end of the turn) p50 / p99 / max | **%.0f / "
            "%.0f** / "
            "%.0f ms |\n",
            name, p50, p99, max);
      };
      print_phase("lateness phase", hooks_late);
      print_phase("burst", hooks_burst);
      std::printf("| webhooks: burst's last delivery → outbox drained (every message received) | %.2f s |\n",
                  drain_s);
      std::printf("| webhooks: connections the sender opened to the receiver | %zu |\n",
                  receiver->connections());
    }
    std::printf("\nChecked: %lld run rows, each delivered with exactly one `<loop>` inbox row%s.\n\n",
                static_cast<long long>(runs),
                args.webhooks ? "; each run's turn with exactly one signed loop.run.completed message at the "
                                "receiver (no webhook-id twice), delivered in one attempt"
                              : "");
    std::fflush(stdout);

    host->Close();
    host.reset();
    if (receiver) receiver->Stop();
    std::filesystem::remove_all(dir);
  }
};

}  // namespace

int main(int argc, char** argv) {
  Bench b;
  Args& args = b.args;
  using dsh::bench::AtLeast;
  CLI::App app("Load program for the loop plugin (docs/PERFORMANCE.md, \"Loops\").", "loop_bench");
  dsh::bench::UseBenchOptionDefaults(app);
  app.add_option("--dir", args.dir, "directory of the profile (default: a temporary one); emptied first");
  app.add_option("--loops", args.loops, "loops bulk-loaded through registry::Insert")
      ->check(AtLeast<int64_t>(10));
  app.add_option("--service", args.service, "more loops created through the loop_create tool")
      ->check(AtLeast<int64_t>(1));
  app.add_option("--sessions", args.sessions, "echo sessions the loops target")->check(AtLeast<int64_t>(1));
  app.add_option("--late", args.late, "loops made due over --late-seconds (lateness)")
      ->check(AtLeast<int64_t>(1));
  app.add_option("--late-seconds", args.late_seconds, "seconds the --late loops' occurrences spread over")
      ->check(AtLeast<int64_t>(1));
  app.add_option("--burst", args.burst, "loops made due at once (throughput)")->check(AtLeast<int64_t>(1));
  app.add_option("--threads", args.threads, "io threads of each host (default: as `dsh web` picks them)")
      ->check(AtLeast(1u))
      ->default_str("");
  app.add_flag("--quick", args.quick, "a short run (the smoke test)");
  app.add_flag("--no-outcomes", args.no_outcomes,
               "deliver without recording activity items and turn outcomes (what recording costs)");
  app.add_flag(
      "--webhooks", args.webhooks,
      "also compose the webhooks plugin, one endpoint for loop runs on a receiver on loopback (issue 34)");
  if (auto exit_code = dsh::bench::ParseCommandLine(app, argc, argv)) return *exit_code;
  if (args.webhooks && args.no_outcomes) {
    std::fprintf(stderr, "--webhooks needs the outcomes --no-outcomes leaves out\n");
    return 2;
  }
  if (args.quick) {
    args.loops = std::min<int64_t>(args.loops, 5'000);
    args.service = std::min<int64_t>(args.service, 200);
    args.sessions = std::min<int64_t>(args.sessions, 10);
    args.late = std::min<int64_t>(args.late, 300);
    args.late_seconds = std::min<int64_t>(args.late_seconds, 2);
    args.burst = std::min<int64_t>(args.burst, 600);
  }
  if (args.late + args.burst + 1 > args.loops) {
    std::fprintf(stderr, "--loops must exceed --late + --burst\n");
    return 2;
  }
  b.Run();
  return 0;
}
