// Load program for tool calls through a stdio MCP server (issue 21;
// docs/PERFORMANCE.md, "MCP tool calls").
//
//   mcp_bench [--root DIR] [--calls N] [--warmup W] [--server-warmup S]
//             [--inflight C] [--concurrent-calls M] [--quick]
//
// One agent::ToolRegistry holds two tools doing the same work:
//
// - `echo_builtin`: a TypedTool with one string field, `message`, answering
//   "Echo: <message>" in the calling thread (an in-process function call);
// - `ev__echo`: the `echo` tool of `@modelcontextprotocol/server-everything`
//   (node_modules of the repository, `npm ci`), run as the stdio MCP server
//   `ev` by mcp::McpServers the way `dsh web` runs `mcp.servers` — a child
//   process speaking newline-delimited JSON-RPC on its stdin/stdout.
//
// Both are called through ToolRegistry::Invoke with a root context, so the
// MCP figure includes the argument check against the server's JSON Schema,
// the JSON-RPC round trip over the pipes (McpClient's thread, the transport's
// poll thread, node) and the conversion of the result for the model.
//
// 0. The server's first N calls after it started, one after another, apart:
//    node compiles its hot paths during the first few thousand calls, so
//    these are slower. Then S more calls (default 5,000) warm it up, unmeasured.
// 1. Sequential: N calls one after another (default 2,000, after W = 200
//    warm-up calls); latency is Invoke → done callback.
// 2. Concurrent: C callers (default 16), each one call at a time, M calls in
//    all (default 16,000); calls/s over the wall time, and each call's latency.
// 3. For the breakdown (sequential, MCP only): the same call through
//    McpClient::CallTool, without the registry, the schema check and the
//    result conversion.
//
// CPU per call of this process (getrusage) and of the node child
// (/proc/PID/stat) is printed beside each figure.
//
// Every call has its own message (with a quote, a backslash and non-ASCII
// text, so JSON escaping is exercised) and its answer must be exactly
// "Echo: <message>"; an error, a wrong answer or an invalid argument that is
// not rejected makes the program exit with 1 after it stopped the server, so
// the `--quick` smoke test fails on wrong behaviour. Timings are printed,
// never asserted.
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <latch>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/tool.h"
#include "agent/tool_registry.h"
#include "base/json.h"
#include "base/schema.h"
#include "bench_cli.h"
#include "bench_util.h"
#include "mcp/mcp_tools.h"

#ifndef DSH_SOURCE_DIR_FALLBACK
#define DSH_SOURCE_DIR_FALLBACK "."
#endif

using namespace dsh;
using dsh::bench::Countdown;
using dsh::bench::NowNs;
using dsh::bench::Percentile;
using namespace std::chrono_literals;

namespace {

struct Args {
  std::string root = DSH_SOURCE_DIR_FALLBACK;
  int calls = 2'000;
  int warmup = 200;
  int server_warmup = 5'000;
  int inflight = 16;
  int concurrent_calls = 16'000;
  bool quick = false;
};

constexpr const char* kBuiltin = "echo_builtin";
constexpr const char* kServer = "ev";
constexpr const char* kMcpTool = "ev__echo";
constexpr const char* kServerScript = "node_modules/@modelcontextprotocol/server-everything/dist/index.js";

struct EchoArgs {
  std::string message;
};

// What server-everything's `echo` does, as a built-in tool.
class BuiltinEcho final : public agent::TypedTool<EchoArgs> {
 public:
  BuiltinEcho()
      : TypedTool(kBuiltin, ObjectSchema<EchoArgs>("Echoes back the input string")
                                .Field("message", &EchoArgs::message, "Message to echo")) {}

 protected:
  void Run(const agent::ToolContext&, EchoArgs args, Done done) override {
    done(Json("Echo: " + args.message));
  }
};

// Wrong answers and errors, counted from any thread; the run goes on and the
// program exits with 1 at the end (after the server is stopped).
class Failures {
 public:
  void Add(const std::string& what) {
    std::lock_guard lock(mu_);
    if (++count_ <= 5) std::fprintf(stderr, "wrong: %s\n", what.c_str());
  }
  int64_t count() const {
    std::lock_guard lock(mu_);
    return count_;
  }

 private:
  mutable std::mutex mu_;
  int64_t count_ = 0;
};

// CPU time so far, in µs: this process, and the node child (0 when unknown).
struct Cpu {
  double self_us = 0;
  double server_us = 0;
};

double TimevalUs(const timeval& t) {
  return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_usec);
}

// The pids of this process's children (the MCP server is spawned directly).
std::vector<pid_t> Children() {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    size_t paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream rest(stat.substr(paren + 2));
    char state = 0;
    long ppid = 0;
    rest >> state >> ppid;
    if (ppid == static_cast<long>(getpid())) out.push_back(static_cast<pid_t>(std::atol(name.c_str())));
  }
  return out;
}

// utime + stime of `pid` in µs (clock-tick resolution), 0 when it is gone.
double ProcessCpuUs(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return 0;
  std::istringstream rest(stat.substr(paren + 2));
  std::string field;
  // After the command: state(3) ... utime is field 14, stime field 15.
  for (int i = 3; i < 14; ++i) rest >> field;
  unsigned long long utime = 0, stime = 0;
  rest >> utime >> stime;
  return static_cast<double>(utime + stime) * 1e6 / static_cast<double>(sysconf(_SC_CLK_TCK));
}

struct Figures {
  std::string tool, mode;
  std::vector<double> us;  // latency of each measured call
  double wall_s = 0;
  Cpu cpu;  // per call
};

struct Bench {
  Args args;
  agent::ToolRegistry registry;
  std::unique_ptr<mcp::McpServers> servers;
  pid_t server_pid = 0;
  Failures failures;
  std::atomic<int64_t> next_message{0};

  Cpu CpuNow() const {
    rusage self{};
    getrusage(RUSAGE_SELF, &self);
    return {TimevalUs(self.ru_utime) + TimevalUs(self.ru_stime), server_pid ? ProcessCpuUs(server_pid) : 0};
  }

  // A message no other call of this run sends.
  std::string NextMessage(const std::string& label) {
    int64_t n = next_message.fetch_add(1);
    return "call " + std::to_string(n) + " of " + label + ": \"quoted\" back\\slash, café ✓";
  }

  // One call, Invoke → done, from the calling thread; checks the answer
  // (outside the timing) and returns the latency in µs.
  double CallOne(const std::string& tool, const std::string& label) {
    const std::string message = NextMessage(label);
    const Json call_args = {{"message", message}};
    Countdown done(1);
    int64_t end_ns = 0;
    Result<Json> result = Status("unset", "");
    agent::ToolContext ctx;  // a root call, as POST /api/tools without session_id
    int64_t start_ns = NowNs();
    registry.Invoke(tool, ctx, call_args, [&](Result<Json> r) {
      end_ns = NowNs();
      result = std::move(r);
      done.Done();
    });
    if (!done.Wait(60s)) {
      std::fprintf(stderr, "%s: no answer in 60 s\n", tool.c_str());
      std::exit(1);  // a hung call: nothing after it would mean anything
    }
    if (!result.ok()) {
      failures.Add(tool + ": " + result.status().ToString());
    } else if (!result->is_string() || result->get<std::string>() != "Echo: " + message) {
      failures.Add(tool + " answered " + result->dump() + " to " + Json(message).dump());
    }
    return static_cast<double>(end_ns - start_ns) / 1e3;
  }

  // The same call straight through McpClient::CallTool: no registry, no
  // schema check, the raw CallToolResult.
  double CallClient(mcp::McpClient& client) {
    const std::string message = NextMessage("McpClient::CallTool");
    Countdown done(1);
    int64_t end_ns = 0;
    Result<Json> result = Status("unset", "");
    int64_t start_ns = NowNs();
    client.CallTool("echo", {{"message", message}}, nullptr, [&](Result<Json> r) {
      end_ns = NowNs();
      result = std::move(r);
      done.Done();
    });
    if (!done.Wait(60s)) {
      std::fprintf(stderr, "McpClient::CallTool: no answer in 60 s\n");
      std::exit(1);
    }
    const Json want = {{"content", {{{"type", "text"}, {"text", "Echo: " + message}}}}};
    if (!result.ok()) {
      failures.Add("McpClient::CallTool: " + result.status().ToString());
    } else if (*result != want) {
      failures.Add("McpClient::CallTool answered " + result->dump());
    }
    return static_cast<double>(end_ns - start_ns) / 1e3;
  }

  Figures Sequential(const std::string& tool, const std::string& mode, const std::function<double()>& call,
                     int warmup) {
    for (int i = 0; i < warmup; ++i) call();
    Figures f{tool, mode, {}, 0, {}};
    f.us.reserve(static_cast<size_t>(args.calls));
    Cpu before = CpuNow();
    auto started = std::chrono::steady_clock::now();
    for (int i = 0; i < args.calls; ++i) f.us.push_back(call());
    f.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    Cpu after = CpuNow();
    f.cpu = {(after.self_us - before.self_us) / args.calls,
             (after.server_us - before.server_us) / args.calls};
    return f;
  }

  Figures Concurrent(const std::string& tool) {
    const int callers = args.inflight;
    const int calls = args.concurrent_calls;
    const std::string label = tool + ", " + std::to_string(callers) + " callers";
    for (int i = 0; i < args.warmup; ++i) CallOne(tool, label);
    Figures f{"`" + tool + "`",
              std::to_string(callers) + (callers == 1 ? " caller" : " concurrent callers"),
              {},
              0,
              {}};
    std::vector<std::vector<double>> per(static_cast<size_t>(callers));
    std::latch ready(callers + 1);
    std::vector<std::thread> threads;
    threads.reserve(static_cast<size_t>(callers));
    for (int c = 0; c < callers; ++c) {
      threads.emplace_back([&, c] {
        auto& mine = per[static_cast<size_t>(c)];
        mine.reserve(static_cast<size_t>(calls / callers) + 1);
        ready.arrive_and_wait();
        for (int i = c; i < calls; i += callers) mine.push_back(CallOne(tool, label));
      });
    }
    Cpu before = CpuNow();
    auto started = std::chrono::steady_clock::now();
    ready.arrive_and_wait();
    for (auto& t : threads) t.join();
    f.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    Cpu after = CpuNow();
    f.cpu = {(after.self_us - before.self_us) / calls, (after.server_us - before.server_us) / calls};
    for (auto& v : per) f.us.insert(f.us.end(), v.begin(), v.end());
    return f;
  }

  // Arguments the schema forbids are refused before anything runs, by both
  // tools (for the MCP tool: by the check against the server's JSON Schema).
  void CheckRejects(const std::string& tool) {
    for (const Json& bad : {Json{{"message", 5}}, Json::object()}) {
      Countdown done(1);
      Result<Json> result = Status("unset", "");
      registry.Invoke(tool, agent::ToolContext{}, bad, [&](Result<Json> r) {
        result = std::move(r);
        done.Done();
      });
      if (!done.Wait(60s)) {
        std::fprintf(stderr, "%s: no answer in 60 s to %s\n", tool.c_str(), bad.dump().c_str());
        std::exit(1);
      }
      if (result.ok() || result.status().code() != codes::kInvalidArguments) {
        failures.Add(tool + " did not reject " + bad.dump() + " with invalid_arguments: " +
                     (result.ok() ? result->dump() : result.status().ToString()));
      }
    }
  }

  static std::string CommandOutput(const std::string& command) {
    std::string out;
    if (FILE* p = popen(command.c_str(), "r")) {
      char buf[256];
      while (fgets(buf, sizeof buf, p) != nullptr) out += buf;
      pclose(p);
    }
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    return out.empty() ? "unknown" : out;
  }

  static std::string LoadAverage() {
    double load[3] = {0, 0, 0};
    if (getloadavg(load, 3) != 3) return "unknown";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.2f, %.2f, %.2f", load[0], load[1], load[2]);
    return buf;
  }

  static void Row(Figures f) {
    const double p50 = Percentile(f.us, 0.50), p90 = Percentile(f.us, 0.90), p99 = Percentile(f.us, 0.99);
    const double max = f.us.empty() ? 0.0 : f.us.back();  // sorted by Percentile
    std::printf("| %s | %s | %zu | %.2f | %.2f | %.2f | %.2f | %.0f | %.1f | %.1f |\n", f.tool.c_str(),
                f.mode.c_str(), f.us.size(), p50, p90, p99, max, static_cast<double>(f.us.size()) / f.wall_s,
                f.cpu.self_us, f.cpu.server_us);
  }

  int Run() {
    spdlog::set_level(spdlog::level::warn);  // stdout is the report
    const std::filesystem::path script = std::filesystem::path(args.root) / kServerScript;
    if (!std::filesystem::exists(script)) {
      std::fprintf(stderr,
                   "%s is missing: run `npm ci` in %s (or pass --root with the repository that has "
                   "node_modules)\n",
                   script.string().c_str(), args.root.c_str());
      return 1;
    }
    if (Status st = registry.Register(std::make_shared<BuiltinEcho>()); !st.ok()) {
      std::fprintf(stderr, "register %s: %s\n", kBuiltin, st.ToString().c_str());
      return 1;
    }
    mcp::ServerSpec spec;
    spec.name = kServer;
    spec.command = {"node", script.string(), "stdio"};
    std::vector<mcp::ServerSpec> specs;
    specs.push_back(std::move(spec));
    servers = std::make_unique<mcp::McpServers>(registry, std::move(specs), "mcp_bench");

    const std::string load_before = LoadAverage();
    auto start_began = std::chrono::steady_clock::now();
    servers->Start();  // returns once the server is ready (or failed)
    const double start_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_began).count();
    mcp::McpClient* client = servers->Find(kServer);
    if (client == nullptr || client->state() != mcp::McpClient::State::kReady ||
        registry.Find(kMcpTool) == nullptr) {
      std::fprintf(stderr, "MCP server %s is not ready (is `node` on PATH?): %s\n", kServer,
                   servers->Describe().dump().c_str());
      servers->Stop();
      return 1;
    }
    std::vector<pid_t> children = Children();
    if (children.size() == 1) server_pid = children[0];

    CheckRejects(kBuiltin);
    CheckRejects(kMcpTool);

    const std::string mcp_tool = kMcpTool;
    Figures cold = Sequential(
        "`" + mcp_tool + "`", "sequential, the server's first " + std::to_string(args.calls) + " calls",
        [&] { return CallOne(mcp_tool, "the server's first calls"); }, 0);
    for (int i = 0; i < args.server_warmup; ++i) CallOne(mcp_tool, "the server's warm-up");

    std::vector<Figures> rows;
    for (const char* tool : {kBuiltin, kMcpTool}) {
      const std::string t = tool;
      rows.push_back(Sequential(
          "`" + t + "`", "sequential", [&] { return CallOne(t, t + ", sequential"); }, args.warmup));
    }
    for (const char* tool : {kBuiltin, kMcpTool}) rows.push_back(Concurrent(tool));
    Figures part = Sequential(
        "part: `echo` via `McpClient::CallTool`", "sequential", [&] { return CallClient(*client); },
        args.warmup);
    const std::string load_after = LoadAverage();

    std::printf("## A tool call through a stdio MCP server against a built-in tool\n\n");
    const std::string package = (std::filesystem::path(args.root) /
                                 "node_modules/@modelcontextprotocol/server-everything/package.json")
                                    .string();
    const std::string server_version =
        CommandOutput("node -p \"require('" + package + "').version\" 2>/dev/null");
    std::printf(
        "Machine: %u cores, load average %s before, %s after; node %s, server-everything %s (`node %s "
        "stdio`, protocol %s), ready %.0f ms after Start.\n\n",
        std::thread::hardware_concurrency(), load_before.c_str(), load_after.c_str(),
        CommandOutput("node --version").c_str(), server_version.c_str(), kServerScript,
        client->protocol_version().c_str(), start_ms);
    std::printf(
        "ToolRegistry::Invoke → done callback, µs; %d warm-up calls before each figure, and %d calls to warm "
        "the server up after its first %d (last row). CPU per call: this process (getrusage) and the node "
        "server (/proc, %ld ticks/s).\n\n",
        args.warmup, args.server_warmup, args.calls, sysconf(_SC_CLK_TCK));
    std::printf(
        "| tool | mode | calls | p50 µs | p90 µs | p99 µs | max µs | calls/s | CPU/call, dsh µs | CPU/call, "
        "node µs |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    std::vector<double> p50s, rates;
    for (auto& f : rows) {
      std::vector<double> copy = f.us;
      p50s.push_back(Percentile(copy, 0.50));
      rates.push_back(static_cast<double>(f.us.size()) / f.wall_s);
      Row(std::move(f));
    }
    Row(std::move(part));
    Row(std::move(cold));
    std::printf(
        "\nMCP ÷ built-in: p50 %.1f× sequential, %.1f× with %d callers; calls/s %.4f× sequential (1 / %.0f), "
        "%.4f× with %d callers (1 / %.0f).\n\n",
        p50s[1] / p50s[0], p50s[3] / p50s[2], args.inflight, rates[1] / rates[0], rates[0] / rates[1],
        rates[3] / rates[2], args.inflight, rates[2] / rates[3]);
    std::fflush(stdout);

    servers->Stop();
    servers.reset();
    if (int64_t n = failures.count(); n > 0) {
      std::fprintf(stderr, "%lld wrong answers or errors\n", static_cast<long long>(n));
      return 1;
    }
    return 0;
  }
};

}  // namespace

int main(int argc, char** argv) {
  Bench b;
  Args& args = b.args;
  using dsh::bench::AtLeast;
  CLI::App app(
      "Load program for tool calls through a stdio MCP server (docs/PERFORMANCE.md, \"MCP tool calls\").",
      "mcp_bench");
  dsh::bench::UseBenchOptionDefaults(app);
  app.add_option("--root", args.root, "the repository, whose node_modules hold server-everything");
  app.add_option("--calls", args.calls, "measured sequential calls per tool")->check(AtLeast(1));
  app.add_option("--warmup", args.warmup, "unmeasured calls before each sequential and concurrent figure")
      ->check(AtLeast(0));
  app.add_option("--server-warmup", args.server_warmup,
                 "unmeasured calls warming up the server after its first --calls")
      ->check(AtLeast(0));
  app.add_option("--inflight", args.inflight, "concurrent callers, each one call at a time")
      ->check(AtLeast(1));
  app.add_option("--concurrent-calls", args.concurrent_calls, "calls in all in the concurrent figure")
      ->check(AtLeast(1));
  app.add_flag("--quick", args.quick, "a short run (the smoke test)");
  if (auto exit_code = dsh::bench::ParseCommandLine(app, argc, argv)) return *exit_code;
  if (args.quick) {
    args.calls = std::min(args.calls, 100);
    args.warmup = std::min(args.warmup, 20);
    args.server_warmup = std::min(args.server_warmup, 200);
    args.inflight = std::min(args.inflight, 4);
    args.concurrent_calls = std::min(args.concurrent_calls, 400);
  }
  return b.Run();
}
