// Child process of loop_crash_test.cc: one host's loop scheduler on a fake
// wall clock, killed with SIGKILL at a chosen step of an occurrence.
//
// It opens the profile at DB_PATH (session, agent and loop migrations), runs
// an AgentManager with the echo model and a LoopScheduler on a FakeClock set
// to START_MS, settles once (recovery of what a previous run left), then
// STEPS times advances the clock by PERIOD_S seconds and settles. With POINT
// claim|deliver|record it raises SIGKILL on itself at the Nth time any claim
// reaches that step (LoopScheduler's on_step hook); with POINT none it stops
// cleanly and exits 0.
// Usage: loop_crash_child DB START_MS PERIOD_S STEPS POINT N
// (DB: a SQLite file, or "postgres:" and a conninfo; TestBackend::Location)
#include <signal.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/agent_manager.h"
#include "agent/testing/scripted_model.h"
#include "plugins/loop/loop_scheduler.h"
#include "plugins/loop/testing/echo_environment.h"
#include "store/testing/location.h"

using namespace dsh;
using namespace std::chrono_literals;
namespace loop = dsh::plugins::loop;

namespace {

std::optional<loop::SchedulerStep> ParsePoint(const std::string& s, bool& ok) {
  ok = true;
  if (s == "claim") return loop::SchedulerStep::kClaimCommitted;
  if (s == "deliver") return loop::SchedulerStep::kDeliveryAccepted;
  if (s == "record") return loop::SchedulerStep::kRecordCommitted;
  ok = s == "none";
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: %s DB_PATH START_MS PERIOD_S STEPS POINT N\n", argv[0]);
    return 2;
  }
  std::string path = argv[1];
  int64_t start_ms = std::atoll(argv[2]);
  int64_t period_s = std::atoll(argv[3]);
  int steps = std::atoi(argv[4]);
  bool point_ok = false;
  std::optional<loop::SchedulerStep> point = ParsePoint(argv[5], point_ok);
  int crash_at = std::atoi(argv[6]);
  if (!point_ok || period_s <= 0 || steps < 0 || (point && crash_at <= 0)) {
    std::fprintf(stderr, "bad arguments\n");
    return 2;
  }

  std::vector<store::Migration> migrations = session::SessionStore::Migrations();
  for (auto& m : agent::AgentManager::Migrations()) migrations.push_back(m);
  for (auto& m : loop::Migrations()) migrations.push_back(m);
  auto db = store::Database::Open(store::testing::FactoryForLocation(path), migrations);
  if (!db.ok()) {
    std::fprintf(stderr, "open: %s\n", db.status().ToString().c_str());
    return 3;
  }
  FakeClock clock(FromUnixMillis(start_ms));
  session::SessionStore sessions(**db, clock);

  boost::asio::io_context ioc;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work(ioc.get_executor());
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) threads.emplace_back([&] { ioc.run(); });

  auto echo = agent::MakeEchoModel();
  agent::testing::SingleModelRouter router(*echo);
  agent::ToolRegistry tools;
  agent::AgentEnvironment agent_env;
  agent_env.preset = [](const std::optional<std::string>&) { return agent::PresetView{}; };
  agent::AgentManagerOptions agent_options;
  agent_options.generate_titles = false;
  agent::AgentManager agents(ioc, **db, sessions, router, tools, clock, agent_env, agent_options);
  agents.Start();

  loop::LoopEnvironment env = loop::testing::EchoEnvironment();
  loop::SchedulerOptions options;
  options.claim_ttl = 30s;
  std::atomic<int> hits{0};
  if (point) {
    options.on_step = [&hits, want = *point, crash_at](loop::SchedulerStep step, const loop::registry::Claim&) {
      if (step == want && ++hits == crash_at) raise(SIGKILL);
    };
  }
  loop::LoopScheduler scheduler(ioc, **db, sessions, agents, clock, env, options);
  scheduler.Start();
  int failed = 0;
  if (!scheduler.SettleForTesting()) ++failed;
  for (int i = 0; i < steps; ++i) {
    clock.Advance(std::chrono::seconds(period_s));
    if (!scheduler.SettleForTesting()) ++failed;
  }
  scheduler.Stop();
  agents.Stop();
  (*db)->Close();
  work.reset();
  for (auto& t : threads) t.join();
  if (failed) {
    std::fprintf(stderr, "%d settles timed out\n", failed);
    return 4;
  }
  return 0;
}
