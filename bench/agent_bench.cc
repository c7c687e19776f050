// Load program for the agent runtime (docs/PERFORMANCE.md, "Agent runtime").
//
//   agent_bench [--dir DIR] [--sessions N] [--seconds S] [--inflight K]
//               [--wait turn|ack] [--sync full|normal] [--threads T]
//               [--prompt-bytes B] [--gather US] [--checkpoints background|writer] [--quick]
//
// 1. Memory per idle live agent: N sessions each get a short conversation
//    (one delivered message answered by the echo model: turn/start,
//    message/user, title/fallback, message/assistant, turn/end); then a fresh
//    AgentManager resumes all of them (lease, log, Agent) and they sit idle.
//    Heap bytes in use (HeapBytesInUse) and RSS before and after
//    the resume, per agent, next to what the cached conversations alone cost.
// 2. End-to-end deliveries into the N live echo sessions for S seconds: K
//    deliveries in flight, round-robin over the sessions. A delivery is
//    complete when the turn that took its message ended (its turn/end
//    committed, together with the inbox consumption), seen through the
//    EventHub. `--wait turn` (default) issues the next delivery of a slot when
//    its message completed; `--wait ack` as soon as Deliver acknowledged it
//    (open loop: the inbox may build a backlog, drained after the window).
//    Reports completions/s, acknowledgements/s, deliver→ack and
//    deliver→turn/end latency, Database::stats() and CPU time per thread kind.
#include <sys/syscall.h>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "agent/agent.h"
#include "agent/agent_manager.h"
#include "agent/model.h"
#include "agent/tool_registry.h"
#include "bench_cli.h"
#include "bench_util.h"
#include "session/event_hub.h"
#include "session/session_store.h"
#include "store/sqlite_connection.h"

using namespace dsh;
using dsh::bench::Countdown;
using dsh::bench::Fail;
using dsh::bench::NowNs;
using dsh::bench::Percentile;
using dsh::bench::WriterPerCommit;
using dsh::bench::WriterTime;
using Steady = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

struct Args {
  std::string dir;
  int sessions = 1000;
  double seconds = 5;
  int inflight = 64;
  bool wait_ack = false;
  bool sync_full = true;
  int threads = 2;
  size_t prompt_bytes = 0;
  int gather_us = 300;                 // DatabaseOptions::max_gather; 0: off
  bool background_checkpoints = true;  // SqliteOptions::checkpoints.background
  bool quick = false;
};

pid_t ThreadId() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

// CPU time (user + system) of every thread of the process, by thread id.
std::map<pid_t, double> ThreadCpuSeconds() {
  std::map<pid_t, double> out;
  const double tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream in(entry.path() / "stat");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto close = text.rfind(')');  // the name may contain spaces
    if (close == std::string::npos) continue;
    std::vector<std::string> fields;
    size_t pos = close + 2;
    while (pos < text.size()) {
      size_t end = text.find(' ', pos);
      if (end == std::string::npos) end = text.size();
      fields.push_back(text.substr(pos, end - pos));
      pos = end + 1;
    }
    if (fields.size() < 13) continue;  // fields[11], [12] = utime, stime (fields 14, 15 of stat)
    out[std::stoi(entry.path().filename().string())] = (std::stod(fields[11]) + std::stod(fields[12])) / tick;
  }
  return out;
}

std::string Kib(double bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f KiB", bytes / 1024.0);
  return buf;
}

std::string Mib(double bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / (1024.0 * 1024.0));
  return buf;
}

// The event's size the way the issue counts it: the struct, its type string
// when it does not fit the small-string buffer, and its data as JSON text.
size_t ApproxEventBytes(const session::Event& e) {
  size_t bytes = sizeof(session::Event) + DumpJson(e.data).size();
  if (e.type.size() >= sizeof(std::string)) bytes += e.type.size() + 1;
  return bytes;
}

class EchoRouter final : public agent::ModelRouter {
 public:
  Result<agent::ModelAdapter*> AdapterFor(const std::string&) override { return echo_.get(); }

 private:
  std::unique_ptr<agent::ModelAdapter> echo_ = agent::MakeEchoModel();
};

// What the delivery phase tracks. The hub runs listeners one at a time (on
// the database writer thread), so `sessions` and `latencies_ms` need no lock
// of their own while deliveries run; they are read after the drain.
struct Tracker {
  struct Open {
    int64_t sent_ns;
    int slot;
  };
  std::unordered_map<std::string, std::vector<Open>> sessions;  // messages whose turn has not ended
  std::vector<double> latencies_ms;                              // deliver → turn/end
  std::atomic<bool> active{false};
  std::atomic<bool> measuring{false};  // within the timed window
  std::atomic<int64_t> turn_ends{0};   // every phase
  std::atomic<int64_t> completed{0};   // delivery phase: messages whose turn ended
  std::atomic<pid_t> publisher{0};     // the thread the hub publishes on
  // Pauses between consecutive publications while deliveries run: time in
  // which no append committed (COMMIT waits, compaction, checkpoints, ...).
  int64_t last_publish_ns = 0;
  int64_t stalls = 0;  // pauses of at least kStallMs
  double stalled_ms = 0;
  double longest_stall_ms = 0;
  static constexpr double kStallMs = 20;
};

struct Bench {
  Args args;
  std::string path;
  session::EventHub hub;
  Tracker tracker;
  std::unique_ptr<session::EventHub::Subscription> subscription;
  std::unique_ptr<store::Database> db;
  std::unique_ptr<session::SessionStore> sessions;
  boost::asio::io_context ioc;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  std::set<pid_t> io_tids;
  std::mutex io_tids_mu;
  EchoRouter router;
  agent::ToolRegistry tools;
  std::vector<std::string> ids;

  void Open() {
    std::vector<store::Migration> migrations = session::SessionStore::Migrations();
    for (auto& m : agent::AgentManager::Migrations()) migrations.push_back(m);
    store::SqliteOptions sqlite{.path = path};
    sqlite.synchronous = args.sync_full ? store::SqliteOptions::Synchronous::kFull : store::SqliteOptions::Synchronous::kNormal;
    sqlite.checkpoints.background = args.background_checkpoints;
    auto opened = store::Database::Open(std::make_unique<store::SqliteConnectionFactory>(sqlite), migrations,
                                        store::DatabaseOptions{.max_gather = std::chrono::microseconds(args.gather_us)});
    if (!opened.ok()) Fail("open", opened.status());
    db = std::move(opened).value();
    sessions = std::make_unique<session::SessionStore>(*db, RealClock(), &hub);
    subscription = hub.SubscribeAll([this](const std::string& id, const std::vector<session::Event>& events) {
      OnEvents(id, events);
    });
    work.emplace(ioc.get_executor());
    for (int i = 0; i < args.threads; ++i) {
      threads.emplace_back([this] {
        {
          std::lock_guard lock(io_tids_mu);
          io_tids.insert(ThreadId());
        }
        ioc.run();
      });
    }
  }

  void Close() {
    subscription.reset();
    db->Close();
    work.reset();
    for (auto& t : threads) t.join();
    sessions.reset();
    db.reset();
  }

  std::unique_ptr<agent::AgentManager> MakeManager() {
    agent::AgentManagerOptions options;
    options.idle_eviction = std::chrono::hours(24);  // nothing is evicted during the run
    options.generate_titles = false;
    agent::AgentEnvironment env;
    std::string prompt(args.prompt_bytes, 'p');
    env.preset = [prompt](const std::optional<std::string>&) {
      agent::PresetView view;
      view.system_prompt = prompt;
      return view;
    };
    return std::make_unique<agent::AgentManager>(ioc, *db, *sessions, router, tools, RealClock(), std::move(env),
                                                 options);
  }

  // Runs on the writer thread, one call at a time.
  void OnEvents(const std::string& id, const std::vector<session::Event>& events) {
    tracker.publisher = ThreadId();
    bool active = tracker.active.load(std::memory_order_acquire);
    if (tracker.measuring.load(std::memory_order_relaxed)) {
      int64_t now = NowNs();
      double gap_ms = tracker.last_publish_ns ? static_cast<double>(now - tracker.last_publish_ns) / 1e6 : 0.0;
      tracker.last_publish_ns = now;
      if (gap_ms >= Tracker::kStallMs) {
        tracker.stalls++;
        tracker.stalled_ms += gap_ms;
        tracker.longest_stall_ms = std::max(tracker.longest_stall_ms, gap_ms);
      }
    }
    for (const auto& e : events) {
      if (e.type == agent::event_types::kTurnEnd) tracker.turn_ends.fetch_add(1, std::memory_order_relaxed);
      if (!active) continue;
      auto& open = tracker.sessions[id];
      if (e.type == session::event_types::kUserMessage) {
        auto meta = e.data.find("meta");
        if (meta == e.data.end() || !meta->contains("sent_ns")) continue;
        open.push_back({(*meta)["sent_ns"].get<int64_t>(), (*meta)["slot"].get<int>()});
      } else if (e.type == agent::event_types::kTurnEnd) {
        int64_t now = NowNs();
        for (const auto& o : open) {
          tracker.latencies_ms.push_back(static_cast<double>(now - o.sent_ns) / 1e6);
          tracker.completed.fetch_add(1, std::memory_order_relaxed);
          if (on_complete) on_complete(o.slot);
        }
        open.clear();
      }
    }
  }
  std::function<void(int slot)> on_complete;  // set before tracker.active

  // Creates the sessions and gives each one turn with the echo model.
  void CreateConversations() {
    auto manager = MakeManager();
    manager->Start();
    ids.resize(static_cast<size_t>(args.sessions));
    {
      Countdown created(ids.size());
      for (size_t i = 0; i < ids.size(); ++i) {
        session::NewSession s;
        s.route = {"echo", "echo", std::nullopt};
        manager->Create(s, [&, i](Result<session::SessionHeader> h) {
          if (!h.ok()) Fail("create", h.status());
          ids[i] = h->id;
          created.Done();
        });
      }
      if (!created.Wait(120s)) Fail("create", Status("timeout", "sessions were not created in time"));
    }
    int64_t ends_before = tracker.turn_ends.load();
    {
      Countdown delivered(ids.size());
      for (const auto& id : ids) {
        manager->Deliver(agent::Delivery{id, "hello, how are you today?", agent::DeliveryMode::kSteer, true,
                                         std::nullopt, Json::object()},
                         [&](Result<agent::Delivered> r) {
                           if (!r.ok()) Fail("deliver", r.status());
                           delivered.Done();
                         });
      }
      if (!delivered.Wait(120s)) Fail("deliver", Status("timeout", "deliveries were not acknowledged in time"));
    }
    auto deadline = Steady::now() + 120s;
    while (tracker.turn_ends.load() - ends_before < static_cast<int64_t>(ids.size())) {
      if (Steady::now() > deadline) Fail("first turns", Status("timeout", "the first turns did not end in time"));
      std::this_thread::sleep_for(5ms);
    }
    manager->Stop();
  }

  // Reads every session's header and log through the reader pool, twice, so
  // SQLite's page caches hold what the resume will read.
  void WarmReaders() {
    for (int pass = 0; pass < 2; ++pass) {
      Countdown read(ids.size() * 2);
      for (const auto& id : ids) {
        sessions->GetAsync(id, [&](Result<session::SessionHeader>) { read.Done(); });
        sessions->ReadEventsAsync(id, 0, 1'000'000, [&](Result<std::vector<session::Event>>) { read.Done(); });
      }
      read.Wait(120s);
    }
  }

  struct Conversation {
    double measured_bytes;  // heap the logs take when loaded the way an agent holds them
    double approx_bytes;    // ApproxEventBytes summed
    double events;
  };
  Conversation MeasureConversations() {
    std::vector<std::vector<session::Event>> logs(ids.size());
    int64_t before = HeapBytesInUse();
    for (size_t i = 0; i < ids.size(); ++i) {
      auto r = sessions->ReadEvents(ids[i], 0, 1'000'000);
      if (!r.ok()) Fail("read events", r.status());
      logs[i] = std::move(r).value();
    }
    int64_t after = HeapBytesInUse();
    double approx = 0, events = 0;
    for (const auto& log : logs) {
      events += static_cast<double>(log.size());
      for (const auto& e : log) approx += static_cast<double>(ApproxEventBytes(e));
    }
    double n = static_cast<double>(ids.size());
    return {static_cast<double>(after - before - static_cast<int64_t>(sizeof(logs[0]) * logs.size())) / n, approx / n,
            events / n};
  }

  void MemoryPhase(agent::AgentManager& manager) {
    WarmReaders();
    Conversation conv = MeasureConversations();
    int64_t heap_before = HeapBytesInUse();
    int64_t rss_before = bench::ResidentInUse();
    Countdown resumed(ids.size());
    for (const auto& id : ids) {
      manager.Resume(id, [&](Status st) {
        if (!st.ok()) Fail("resume", st);
        resumed.Done();
      });
    }
    if (!resumed.Wait(120s)) Fail("resume", Status("timeout", "sessions were not resumed in time"));
    // Each agent has started (Start posts to its strand) once it answers WhenIdle.
    Countdown idle(ids.size());
    for (const auto& id : ids) {
      manager.WhenIdle(id, [&](Status st) {
        if (!st.ok()) Fail("when idle", st);
        idle.Done();
      });
    }
    idle.Wait(120s);
    std::this_thread::sleep_for(100ms);  // callbacks of the resume finish returning
    int64_t heap_after = HeapBytesInUse();
    int64_t rss_after = bench::ResidentInUse();
    double n = static_cast<double>(ids.size());
    double heap_per = static_cast<double>(heap_after - heap_before) / n;
    double rss_per = static_cast<double>(rss_after - rss_before) / n;
    std::printf("## Memory per idle live agent (%d sessions, %.0f events each, system prompt %zu bytes)\n\n",
                args.sessions, conv.events, args.prompt_bytes);
    std::printf("| | heap in use | RSS |\n|---|---:|---:|\n");
    std::printf("| before the resume | %s | %s |\n", Mib(static_cast<double>(heap_before)).c_str(),
                Mib(static_cast<double>(rss_before)).c_str());
    std::printf("| %d agents live and idle | %s | %s |\n", args.sessions, Mib(static_cast<double>(heap_after)).c_str(),
                Mib(static_cast<double>(rss_after)).c_str());
    std::printf("| per agent | %s | %s |\n", Kib(heap_per).c_str(), Kib(rss_per).c_str());
    std::printf("| cached conversation per agent (heap measured; approx. type + JSON text + struct: %s) | %s | |\n",
                Kib(conv.approx_bytes).c_str(), Kib(conv.measured_bytes).c_str());
    std::printf("| **beyond the conversation, per agent** (target <= 64 KiB) | **%s** | %s |\n\n",
                Kib(heap_per - conv.measured_bytes).c_str(), Kib(rss_per - conv.measured_bytes).c_str());
    std::fflush(stdout);
  }

  void DeliveryPhase(agent::AgentManager& manager) {
    const int slots = args.inflight;
    std::atomic<bool> stop{false};
    std::atomic<int64_t> acked{0};
    std::atomic<int64_t> issued{0};
    std::atomic<int> in_flight{0};  // slots with a delivery not yet complete (turn mode) or acked (ack mode)
    std::atomic<uint64_t> next_session{0};
    std::mutex ack_mu;
    std::vector<double> ack_ms;
    std::function<void(int)> deliver;  // outlives every delivery in flight
    auto finish_slot = [&](int slot) {
      if (stop.load(std::memory_order_relaxed)) {
        in_flight.fetch_sub(1);
        in_flight.notify_all();
        return;
      }
      boost::asio::post(ioc, [&deliver, slot] { deliver(slot); });
    };
    deliver = [&](int slot) {
      size_t i = next_session.fetch_add(1, std::memory_order_relaxed) % ids.size();
      int64_t sent = NowNs();
      issued.fetch_add(1, std::memory_order_relaxed);
      manager.Deliver(agent::Delivery{ids[i], "a typical short user message of about this length, with some words",
                                      agent::DeliveryMode::kSteer, true, std::nullopt,
                                      Json{{"origin", "bench"}, {"sent_ns", sent}, {"slot", slot}}},
                      [&, sent, slot](Result<agent::Delivered> r) {
                        if (!r.ok()) Fail("deliver", r.status());
                        acked.fetch_add(1, std::memory_order_relaxed);
                        {
                          std::lock_guard lock(ack_mu);
                          ack_ms.push_back(static_cast<double>(NowNs() - sent) / 1e6);
                        }
                        if (args.wait_ack) finish_slot(slot);
                      });
    };
    on_complete = args.wait_ack ? std::function<void(int)>() : std::function<void(int)>(finish_slot);
    for (const auto& id : ids) tracker.sessions[id];  // the map's shape is fixed from now on
    tracker.active.store(true, std::memory_order_release);

    auto cpu_before = ThreadCpuSeconds();
    auto stats_before = db->stats();
    auto start = Steady::now();
    tracker.measuring = true;
    in_flight = slots;
    for (int s = 0; s < slots; ++s) boost::asio::post(ioc, [&deliver, s] { deliver(s); });
    std::this_thread::sleep_for(std::chrono::duration<double>(args.seconds));
    stop = true;
    tracker.measuring = false;
    int64_t completed_at_end = tracker.completed.load();
    int64_t acked_at_end = acked.load();
    double elapsed = std::chrono::duration<double>(Steady::now() - start).count();
    auto stats_after = db->stats();
    auto cpu_after = ThreadCpuSeconds();

    // Drain: every slot stops, then every accepted message completes.
    auto drain_start = Steady::now();
    for (int left = in_flight.load(); left > 0; left = in_flight.load()) in_flight.wait(left);
    auto deadline = Steady::now() + 120s;
    while (tracker.completed.load() < acked.load() && Steady::now() < deadline) std::this_thread::sleep_for(2ms);
    double drain_s = std::chrono::duration<double>(Steady::now() - drain_start).count();
    int64_t backlog = acked_at_end - completed_at_end;
    tracker.active = false;
    std::this_thread::sleep_for(50ms);  // the last callbacks return before their captures go away

    // CPU time by kind of thread.
    double cpu_io = 0, cpu_writer = 0, cpu_other = 0;
    pid_t writer = tracker.publisher.load();
    for (const auto& [tid, after] : cpu_after) {
      double used = after - (cpu_before.count(tid) ? cpu_before.at(tid) : 0.0);
      if (io_tids.count(tid)) cpu_io += used;
      else if (tid == writer) cpu_writer += used;
      else cpu_other += used;
    }
    double completions = static_cast<double>(completed_at_end);
    uint64_t commits = stats_after.commits - stats_before.commits;
    uint64_t jobs = stats_after.jobs - stats_before.jobs;
    double p50_ack = Percentile(ack_ms, 0.50), p99_ack = Percentile(ack_ms, 0.99);
    auto& lat = tracker.latencies_ms;
    double p50 = Percentile(lat, 0.50), p99 = Percentile(lat, 0.99), max = lat.empty() ? 0 : lat.back();

    std::printf("## End-to-end deliveries (%d live echo sessions, %d in flight, next delivery after the %s, "
                "synchronous=%s, %d io threads, %.1f s)\n\n",
                args.sessions, slots, args.wait_ack ? "acknowledgement" : "turn ended", args.sync_full ? "FULL" : "NORMAL",
                args.threads, elapsed);
    std::printf("| figure | value |\n|---|---:|\n");
    std::printf("| **completed deliveries/s** (turn/end committed with the inbox consumption) | **%.0f** |\n",
                completions / elapsed);
    std::printf("| acknowledged Deliver calls/s | %.0f |\n", static_cast<double>(acked_at_end) / elapsed);
    std::printf("| deliver → turn/end p50 / p99 / max | %.2f / %.2f / %.2f ms |\n", p50, p99, max);
    std::printf("| deliver → acknowledgement p50 / p99 | %.2f / %.2f ms |\n", p50_ack, p99_ack);
    std::printf("| backlog at the end of the window (acknowledged, turn not ended) | %lld (drained in %.2f s) |\n",
                static_cast<long long>(backlog), drain_s);
    std::printf("| pauses of >= %.0f ms without a commit: count / total / longest | %lld / %.0f ms / %.0f ms |\n",
                Tracker::kStallMs, static_cast<long long>(tracker.stalls), tracker.stalled_ms, tracker.longest_stall_ms);
    std::printf("| commits/s; write jobs per commit | %.0f; %.1f |\n", static_cast<double>(commits) / elapsed,
                commits ? static_cast<double>(jobs) / static_cast<double>(commits) : 0.0);
    WriterTime writer_time = WriterPerCommit(stats_before, stats_after, elapsed);
    std::printf("| writer per commit: jobs / COMMIT / callbacks / waiting | %.0f / %.0f / %.0f / %.0f µs |\n",
                writer_time.jobs, writer_time.commit, writer_time.callbacks, writer_time.waiting);
    std::printf("| write jobs per completed delivery; commits per completed delivery | %.2f; %.3f |\n",
                completions > 0 ? static_cast<double>(jobs) / completions : 0.0,
                completions > 0 ? static_cast<double>(commits) / completions : 0.0);
    std::printf("| CPU per completed delivery: io threads (agents, Deliver) / db writer / other (readers, main) "
                "| %.1f / %.1f / %.1f µs |\n",
                completions > 0 ? cpu_io / completions * 1e6 : 0.0, completions > 0 ? cpu_writer / completions * 1e6 : 0.0,
                completions > 0 ? cpu_other / completions * 1e6 : 0.0);
    std::printf("| CPU busy: io threads / db writer / other (of %.1f s wall) | %.2f / %.2f / %.2f s |\n", elapsed,
                cpu_io, cpu_writer, cpu_other);
    std::printf("\n");
    std::fflush(stdout);
  }
};

}  // namespace

int main(int argc, char** argv) {
  Bench b;
  Args& args = b.args;
  CLI::App app("Load program for the agent runtime (docs/PERFORMANCE.md, \"Agent runtime\").", "agent_bench");
  dsh::bench::UseBenchOptionDefaults(app);
  app.add_option("--dir", args.dir, "directory of the database (default: a temporary one); emptied first");
  app.add_option("--sessions", args.sessions, "live echo sessions")->check(dsh::bench::AtLeast(1));
  app.add_option("--seconds", args.seconds, "length of the delivery window");
  app.add_option("--inflight", args.inflight, "deliveries in flight")->check(dsh::bench::AtLeast(1));
  app.add_option_function<std::string>(
         "--wait", [&](const std::string& v) { args.wait_ack = v == "ack"; },
         "a slot's next delivery: once its turn ended, or once Deliver acknowledged (open loop)")
      ->check(CLI::IsMember({"turn", "ack"}))
      ->default_str("turn");
  app.add_option_function<std::string>(
         "--sync", [&](const std::string& v) { args.sync_full = v == "full"; }, "SQLite synchronous mode")
      ->check(CLI::IsMember({"full", "normal"}))
      ->default_str("full");
  app.add_option("--threads", args.threads, "threads running the io_context")->check(dsh::bench::AtLeast(1));
  app.add_option("--prompt-bytes", args.prompt_bytes, "bytes of preset prompt per agent")
      ->check(dsh::bench::AtLeast<size_t>(0));
  app.add_option("--gather", args.gather_us, "DatabaseOptions::max_gather in µs; 0: off")
      ->check(dsh::bench::AtLeast(0));
  app.add_option_function<std::string>(
         "--checkpoints", [&](const std::string& v) { args.background_checkpoints = v == "background"; },
         "who runs WAL checkpoints (SqliteOptions::checkpoints)")
      ->check(CLI::IsMember({"background", "writer"}))
      ->default_str("background");
  app.add_flag("--quick", args.quick, "a short run (the smoke test)");
  if (auto exit_code = dsh::bench::ParseCommandLine(app, argc, argv)) return *exit_code;
  if (args.quick) {
    args.sessions = std::min(args.sessions, 50);
    args.seconds = std::min(args.seconds, 0.3);
    args.inflight = std::min(args.inflight, 8);
  }
  std::filesystem::path dir =
      args.dir.empty() ? std::filesystem::temp_directory_path() / "dsh-agent-bench" : std::filesystem::path(args.dir);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  b.path = (dir / "bench.db").string();

  b.Open();
  b.CreateConversations();
  {
    auto manager = b.MakeManager();  // fresh: holds nothing but what the resume builds
    manager->Start();
    b.MemoryPhase(*manager);
    b.DeliveryPhase(*manager);
    manager->Stop();
  }
  b.Close();
  std::filesystem::remove_all(dir);
  return 0;
}
