// Crash-recovery load program for the loop scheduler (issue 23;
// docs/PERFORMANCE.md, "Loops"): the real `dsh web` binary, the real clock,
// the echo model, one SQLite profile, SIGKILLed again and again.
//
//   loop_crash_load [--dsh PATH] [--dir DIR] [--sessions 10] [--loops 300]
//                   [--kill-seconds 45] [--min-kill-ms 1500] [--max-kill-ms 6000]
//                   [--max-after 40] [--settle-seconds 12] [--seed N] [--quick]
//
// 1. Starts `dsh web` on a fresh profile, makes K live sessions
//    (POST /api/sessions) and N `after` loops through
//    POST /api/tools/loop_create, each with a random `after_seconds` in
//    3..min(max-after, kill-seconds − 5) and a random one of the sessions as
//    target. For a run of minutes, raise both --kill-seconds and --max-after.
// 2. For kill-seconds, SIGKILLs the host at random intervals in
//    [min-kill-ms, max-kill-ms] and starts it again at once on the profile.
// 3. settle-seconds after the last start, counts each loop's `<loop>`
//    messages in its session's events and reads its run history.
//
// Prints, per loop outcome: delivered once, lost (no message), duplicated
// (more than one), and late: delivered more than 2 s after it could have
// been — its nominal time when a host was up then and delivered it in that
// same run, else the start of the first host run that began after its
// nominal time (the restart after the crash that interrupted it). Also the
// lateness distribution and how many runs needed a takeover (attempts > 1).
// Exits 1 when anything was lost or duplicated (so `--quick` is a test);
// lateness is printed, never asserted.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "app/testing/dsh_process.h"
#include "base/json.h"
#include "bench_cli.h"
#include "server/http_client.h"

using namespace std::chrono_literals;
using dsh::Json;

namespace {

struct Args {
  std::string dsh = DSH_BINARY;
  std::string dir;
  int sessions = 10;
  int loops = 300;
  int kill_seconds = 45;
  int min_kill_ms = 1500;
  int max_kill_ms = 6000;
  int max_after = 40;
  int settle_seconds = 12;
  unsigned seed = std::random_device{}();
  bool quick = false;
};

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "loop_crash_load: %s\n", what.c_str());
  std::exit(1);
}

// One run of `dsh web` on the profile.
struct HostRun {
  std::unique_ptr<dsh::testing::DshProcess> process;
  std::string url;
  int64_t listening_at = 0;  // wall ms
  int64_t killed_at = 0;     // wall ms; 0 while it runs
};

class Driver {
 public:
  explicit Driver(const Args& args) : args_(args), home_(args.dir + "/home") {}

  void Start() {
    HostRun run;
    std::string log = args_.dir + "/web" + std::to_string(runs_.size()) + ".log";
    run.process = std::make_unique<dsh::testing::DshProcess>(
        args_.dsh, std::vector<std::string>{"web", "--home", home_, "--port", "0"}, log,
        std::map<std::string, std::string>{{"DSH_TOKEN", "t0ken"}});
    run.url = run.process->WaitListening();
    if (run.url.empty()) Die("dsh web did not start: " + run.process->Stderr());
    run.listening_at = WallMs();
    runs_.push_back(std::move(run));
  }
  void Kill() {
    HostRun& run = runs_.back();
    run.process->Signal(SIGKILL);
    run.killed_at = WallMs();
    if (run.process->Wait(10s) != 128 + SIGKILL) Die("the host did not die of SIGKILL");
  }

  Json Call(const std::string& method, const std::string& path, const Json& body = Json()) {
    auto r = dsh::server::HttpRequestSync(method, runs_.back().url + path, body.is_null() ? "" : body.dump(),
                                          {{"Authorization", "Bearer t0ken"}, {"Content-Type", "application/json"}});
    if (!r.ok()) Die(method + " " + path + ": " + r.status().ToString());
    if (r->status / 100 != 2) Die(method + " " + path + ": " + std::to_string(r->status) + " " + r->body);
    return Json::parse(r->body);
  }

  // The time an occurrence due at `nominal` and delivered at `delivered`
  // could have arrived (see the file comment).
  int64_t ReadyAt(int64_t nominal, int64_t delivered) const {
    for (const HostRun& run : runs_) {
      bool up_at_nominal = run.listening_at <= nominal && (run.killed_at == 0 || nominal < run.killed_at);
      bool delivered_here = run.listening_at <= delivered && (run.killed_at == 0 || delivered < run.killed_at);
      if (up_at_nominal && delivered_here) return nominal;
    }
    for (const HostRun& run : runs_) {
      if (run.listening_at > nominal) return run.listening_at;
    }
    return nominal;
  }

  const Args& args_;
  std::string home_;
  std::vector<HostRun> runs_;
};

}  // namespace

int main(int argc, char** argv) {
  Args args;
  using dsh::bench::AtLeast;
  CLI::App app("Crash-recovery load program for the loop scheduler (docs/PERFORMANCE.md, \"Loops\").",
               "loop_crash_load");
  dsh::bench::UseBenchOptionDefaults(app);
  app.add_option("--dsh", args.dsh, "the dsh binary to run as `dsh web`");
  app.add_option("--dir", args.dir,
                 "directory of the profile and the hosts' logs (default: a temporary one)");
  app.add_option("--sessions", args.sessions, "live sessions the loops target")->check(AtLeast(1));
  app.add_option("--loops", args.loops, "`after` loops created")->check(AtLeast(1));
  app.add_option("--kill-seconds", args.kill_seconds, "how long the host is SIGKILLed and restarted")
      ->check(AtLeast(8));
  app.add_option("--min-kill-ms", args.min_kill_ms, "shortest interval between kills")->check(AtLeast(100));
  app.add_option("--max-kill-ms", args.max_kill_ms, "longest interval between kills; at least --min-kill-ms");
  app.add_option("--max-after", args.max_after,
                 "longest after_seconds of a loop (at most --kill-seconds - 5)");
  app.add_option("--settle-seconds", args.settle_seconds,
                 "seconds to wait after the last start before counting");
  app.add_option("--seed", args.seed, "seed of the random choices")->default_str("random");
  app.add_flag("--quick", args.quick, "a short run (the smoke test)");
  if (auto exit_code = dsh::bench::ParseCommandLine(app, argc, argv)) return *exit_code;
  if (args.quick) {
    args.sessions = 3;
    args.loops = 30;
    args.kill_seconds = 12;
    args.settle_seconds = 6;
  }
  if (args.max_kill_ms < args.min_kill_ms) {
    std::fprintf(stderr, "loop_crash_load: --max-kill-ms must be at least --min-kill-ms\n");
    return 2;
  }
  if (args.dir.empty()) args.dir = std::filesystem::temp_directory_path() / ("loop-crash-load-" + std::to_string(getpid()));
  std::filesystem::remove_all(args.dir);
  std::filesystem::create_directories(args.dir);
  std::mt19937 rng(args.seed);
  const int max_after = std::max(3, std::min(args.max_after, args.kill_seconds - 5));
  std::printf("loop_crash_load: seed %u, %d sessions, %d after loops (3..%d s), kills every %d..%d ms for %d s\n",
              args.seed, args.sessions, args.loops, max_after, args.min_kill_ms, args.max_kill_ms, args.kill_seconds);

  Driver d(args);
  d.Start();
  std::vector<std::string> sessions;
  for (int i = 0; i < args.sessions; ++i) sessions.push_back(d.Call("POST", "/api/sessions", Json::object())["session"]["id"]);
  struct Loop {
    std::string id, session;
  };
  std::vector<Loop> loops;
  std::uniform_int_distribution<int> after(3, max_after);
  std::uniform_int_distribution<size_t> pick(0, sessions.size() - 1);
  for (int i = 0; i < args.loops; ++i) {
    std::string target = sessions[pick(rng)];
    Json view = d.Call("POST", "/api/tools/loop_create",
                       {{"args",
                         {{"prompt", "crash load " + std::to_string(i)},
                          {"schedule", {{"kind", "after"}, {"after_seconds", after(rng)}}},
                          {"session_id", target}}}})["result"];
    loops.push_back({view["loop_id"], target});
  }

  std::uniform_int_distribution<int> gap(args.min_kill_ms, args.max_kill_ms);
  auto kills_end = std::chrono::steady_clock::now() + std::chrono::seconds(args.kill_seconds);
  int kills = 0;
  for (;;) {
    auto at = std::chrono::steady_clock::now() + std::chrono::milliseconds(gap(rng));
    if (at > kills_end) break;
    std::this_thread::sleep_until(at);
    d.Kill();
    d.Start();
    ++kills;
  }
  std::printf("%d kills; settling %d s after the last start\n", kills, args.settle_seconds);
  std::this_thread::sleep_until(std::chrono::steady_clock::now() + std::chrono::seconds(args.settle_seconds));

  // Each session's `<loop>` messages, with their append time.
  std::map<std::string, std::vector<std::pair<std::string, int64_t>>> messages;  // loop id -> (text, at)
  for (const std::string& s : sessions) {
    int64_t after_seq = 0;
    for (;;) {
      Json page = d.Call("GET", "/api/sessions/" + s + "/events?after=" + std::to_string(after_seq) + "&limit=1000");
      for (const Json& e : page["events"]) {
        after_seq = e["seq"];
        if (e["type"] != "message/user") continue;
        std::string text = e["data"].value("text", "");
        auto b = text.find("<loop_id>");
        auto end = text.find("</loop_id>");
        if (b == std::string::npos || end == std::string::npos) continue;
        messages[text.substr(b + 9, end - b - 9)].emplace_back(text, e["at"].get<int64_t>());
      }
      if (page["events"].empty() || after_seq >= page["last_seq"].get<int64_t>()) break;
    }
  }

  int once = 0, lost = 0, duplicated = 0, late = 0, taken_over = 0;
  std::vector<int64_t> lateness;
  for (const Loop& l : loops) {
    const auto& got = messages[l.id];
    if (got.empty()) {
      ++lost;
      std::printf("lost: %s\n", l.id.c_str());
      continue;
    }
    if (got.size() > 1) {
      ++duplicated;
      std::printf("duplicated: %s (%zu messages)\n", l.id.c_str(), got.size());
    } else {
      ++once;
    }
    Json runs = d.Call("GET", "/api/loops/" + l.id + "/runs")["runs"];
    if (runs.size() != 1) Die(l.id + ": expected one run, got " + runs.dump());
    if (runs[0]["attempts"].get<int64_t>() > 1) ++taken_over;
    int64_t nominal = runs[0]["nominal_at"];
    int64_t delivered = got.front().second;
    int64_t ms = delivered - d.ReadyAt(nominal, delivered);
    lateness.push_back(ms);
    if (ms > 2000) {
      ++late;
      std::printf("late: %s by %lld ms (nominal %lld, delivered %lld, attempts %lld)\n", l.id.c_str(),
                  static_cast<long long>(ms), static_cast<long long>(nominal), static_cast<long long>(delivered),
                  static_cast<long long>(runs[0]["attempts"].get<int64_t>()));
    }
  }
  d.Kill();
  std::sort(lateness.begin(), lateness.end());
  auto pct = [&](double p) {
    if (lateness.empty()) return int64_t{0};
    return lateness[std::min(lateness.size() - 1, static_cast<size_t>(p * static_cast<double>(lateness.size())))];
  };
  std::printf("loops %d: delivered once %d, lost %d, duplicated %d, late (> 2 s) %d; taken over after a crash %d\n",
              args.loops, once, lost, duplicated, late, taken_over);
  std::printf("lateness ms: p50 %lld, p90 %lld, p99 %lld, max %lld\n", static_cast<long long>(pct(0.5)),
              static_cast<long long>(pct(0.9)), static_cast<long long>(pct(0.99)),
              static_cast<long long>(lateness.empty() ? 0 : lateness.back()));
  std::filesystem::remove_all(args.dir);
  return lost == 0 && duplicated == 0 ? 0 : 1;
}
