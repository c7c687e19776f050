// Several hosts on one profile database (SQLite file or PostgreSQL): each has its own Database handle,
// SessionStore, AgentManager (its own lease holder) and LoopScheduler; they
// share one fake wall clock and one io_context, so the schedule is stepped
// deterministically while the hosts' claims race for real.
#include <gtest/gtest.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <cstdio>
#include <future>
#include <map>
#include <thread>

#include "agent/agent_manager.h"
#include "agent/testing/event_waiter.h"
#include "agent/testing/scripted_model.h"
#include "base/testing/temp_dir.h"
#include "plugins/loop/loop_scheduler.h"
#include "plugins/loop/loop_service.h"
#include "plugins/loop/testing/echo_environment.h"
#include "store/testing/test_backend.h"

namespace dsh::plugins::loop {
namespace {

using namespace std::chrono_literals;

constexpr int64_t kStart = 1'767'225'600'000;  // FakeClock's default: 2026-01-01T00:00:00Z

struct Host {
  std::unique_ptr<store::Database> db;
  std::unique_ptr<session::EventHub> hub = std::make_unique<session::EventHub>();
  std::unique_ptr<session::SessionStore> sessions;
  std::unique_ptr<agent::AgentManager> agents;
  std::unique_ptr<LoopScheduler> scheduler;
  std::unique_ptr<LoopService> service;
};

class LoopMultiHostTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    work_.emplace(ioc_.get_executor());
    for (int i = 0; i < 3; ++i) threads_.emplace_back([this] { ioc_.run(); });
    for (int i = 0; i < 3; ++i) hosts_.push_back(OpenHost());
    for (auto& h : hosts_) h.scheduler->Start();
  }
  void TearDown() override {
    for (auto& h : hosts_) h.scheduler->Stop();
    for (auto& h : hosts_) h.agents->Stop();
    for (auto& h : hosts_) h.db->Close();
    work_.reset();
    for (auto& t : threads_) t.join();
    hosts_.clear();
  }

  Host OpenHost() {
    std::vector<store::Migration> migrations = session::SessionStore::Migrations();
    for (auto& m : agent::AgentManager::Migrations()) migrations.push_back(m);
    for (auto& m : Migrations()) migrations.push_back(m);
    Host h;
    auto db = store::Database::Open(backend_.Factory(), migrations);  // one database, a handle per host
    EXPECT_TRUE(db.ok()) << db.status().ToString();
    h.db = std::move(db).value();
    h.sessions = std::make_unique<session::SessionStore>(*h.db, clock_, h.hub.get());
    agent::AgentEnvironment agent_env;
    agent_env.preset = [](const std::optional<std::string>&) { return agent::PresetView{}; };
    agent::AgentManagerOptions agent_options;
    agent_options.generate_titles = false;
    agent_options.lease_ttl = 1h;  // the fake clock jumps by minutes; keep the sessions where they went live
    h.agents = std::make_unique<agent::AgentManager>(ioc_, *h.db, *h.sessions, router_, tools_, clock_, agent_env,
                                                     agent_options);
    h.agents->Start();
    LoopEnvironment env = loop::testing::EchoEnvironment();
    SchedulerOptions options;
    options.max_wait = max_wait_;  // how soon a loop another host created is noticed without a notice
    options.batch = 16;     // several claim transactions per period, so the hosts interleave
    h.scheduler = std::make_unique<LoopScheduler>(ioc_, *h.db, *h.sessions, *h.agents, clock_, env, options);
    h.service = std::make_unique<LoopService>(*h.db, *h.sessions, *h.scheduler, clock_);
    return h;
  }

  std::string NewSession() {
    auto h = hosts_[0].sessions->Create(session::NewSession{.route = {"echo", "echo", std::nullopt}});
    EXPECT_TRUE(h.ok()) << h.status().ToString();
    return h.ok() ? h->id : "";
  }

  int64_t Count(const std::string& sql) {
    auto r = hosts_[0].db->ReadValue<int64_t>([&](store::Tx& tx) -> Result<int64_t> {
      int64_t n = 0;
      DSH_RETURN_IF_ERROR(tx.Query(sql, {}, [&](const store::Row& row) {
        n = row.Int(0);
        return Status::Ok();
      }));
      return n;
    });
    EXPECT_TRUE(r.ok()) << sql << ": " << r.status().ToString();
    return r.ok() ? *r : -1;
  }

  // Settles the given hosts' schedulers at once (their ticks race), again
  // and again until a round claims nothing more: a settle waits for one
  // tick, and a tick that filled its batch goes on in the next one.
  void SettleAll(const std::vector<size_t>& which) {
    for (int round = 0; round < 1000; ++round) {
      int64_t before = Count("SELECT COUNT(*) FROM loop_runs");
      std::vector<std::future<bool>> settled;
      for (size_t i : which) {
        settled.push_back(std::async(std::launch::async, [this, i] { return hosts_[i].scheduler->SettleForTesting(); }));
      }
      for (auto& f : settled) ASSERT_TRUE(f.get());
      if (Count("SELECT COUNT(*) FROM loop_runs") == before &&
          Count("SELECT COUNT(*) FROM loop_runs WHERE result IS NULL") == 0) {
        return;
      }
    }
    FAIL() << "the schedulers never settled";
  }

  store::testing::TestBackend backend_{GetParam()};  // outlives the hosts
  std::chrono::milliseconds max_wait_ = 1s;
  FakeClock clock_;
  std::unique_ptr<agent::ModelAdapter> echo_ = agent::MakeEchoModel();
  agent::testing::SingleModelRouter router_{*echo_};
  agent::ToolRegistry tools_;
  boost::asio::io_context ioc_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
  std::vector<Host> hosts_;
};

INSTANTIATE_TEST_SUITE_P(Backends, LoopMultiHostTest, store::testing::BackendNames(), store::testing::BackendTestName);

// Schedulers that look for loops they were not told of only every minute:
// what they claim sooner, they heard of by notice (PostgreSQL only).
class LoopNoticeTest : public LoopMultiHostTest {
 protected:
  void SetUp() override {
    max_wait_ = 60s;
    LoopMultiHostTest::SetUp();
  }
};

INSTANTIATE_TEST_SUITE_P(Postgres, LoopNoticeTest, ::testing::Values(std::string("postgres")),
                         store::testing::BackendTestName);

TEST_P(LoopNoticeTest, ALoopWrittenThroughOneHostIsClaimedAtOnceByAnother) {
  std::string target = NewSession();
  hosts_[0].scheduler->Stop();
  hosts_[2].scheduler->Stop();  // only B schedules; it started with nothing to do and waits a minute
  agent::testing::EventWaiter waiter(*hosts_[1].hub);
  ASSERT_TRUE(hosts_[0].db->WriteSync([&](store::Tx& tx) {
                LoopRecord l{.loop_id = "loop_now", .prompt = "due now"};
                l.schedule = Schedule{ScheduleKind::kEvery, 60, "", std::nullopt};
                l.target = target;
                l.created_at = kStart;
                l.due_at = kStart;
                return registry::Insert(tx, l);
              }).ok());
  auto log = waiter.WaitForTurnEnds(target, 1);  // 10 s at most: far sooner than B's minute
  ASSERT_EQ(agent::testing::EventWaiter::Count(log, agent::event_types::kTurnEnd), 1u);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM loop_runs WHERE result = 'delivered' AND claimed_by = '" +
                  hosts_[1].agents->holder() + "'"),
            1);
}

TEST_P(LoopMultiHostTest, ThreeHostsRunAThousandOccurrencesOfAHundredLoopsEachDeliveredExactlyOnce) {
  std::vector<std::string> targets;
  for (int i = 0; i < 10; ++i) targets.push_back(NewSession());
  ASSERT_TRUE(hosts_[0].db->WriteSync([&](store::Tx& tx) -> Status {
                for (int i = 0; i < 100; ++i) {
                  LoopRecord l{.loop_id = "loop_" + std::to_string(i), .prompt = "p" + std::to_string(i)};
                  l.schedule = Schedule{ScheduleKind::kEvery, 60, "", std::nullopt};
                  l.target = targets[i % targets.size()];
                  l.created_at = kStart;
                  l.due_at = kStart + 60'000;
                  DSH_RETURN_IF_ERROR(registry::Insert(tx, l));
                }
                return Status::Ok();
              }).ok());
  for (int period = 0; period < 10; ++period) {
    clock_.Advance(60s);
    SettleAll({0, 1, 2});
  }
  EXPECT_EQ(Count("SELECT COUNT(*) FROM inbox WHERE key LIKE 'loop:%'"), 1000);
  EXPECT_EQ(Count("SELECT COUNT(DISTINCT key) FROM inbox WHERE key LIKE 'loop:%'"), 1000);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM (SELECT key FROM inbox WHERE key LIKE 'loop:%' GROUP BY key"
                  " HAVING COUNT(*) > 1) AS dup"),
            0)
      << "an occurrence was delivered twice";
  EXPECT_EQ(Count("SELECT COUNT(*) FROM loop_runs WHERE result = 'delivered' AND skipped = 0"), 1000);
  EXPECT_EQ(Count("SELECT COUNT(DISTINCT loop_id) FROM loop_runs"), 100);
  EXPECT_EQ(Count("SELECT COUNT(DISTINCT nominal_at) FROM loop_runs"), 10);
  // Every run's message is in the inbox under its own key: no occurrence lost.
  EXPECT_EQ(Count("SELECT COUNT(*) FROM loop_runs r JOIN inbox i ON i.key = 'loop:' || r.loop_id || ':' ||"
                  " r.nominal_at AND i.session_id = r.target_session_id"),
            1000);
  // How the work was shared (informational: which host wins a race is not deterministic).
  auto shares = hosts_[0].db->ReadValue<std::map<std::string, int64_t>>(
      [](store::Tx& tx) -> Result<std::map<std::string, int64_t>> {
        std::map<std::string, int64_t> out;
        DSH_RETURN_IF_ERROR(tx.Query("SELECT claimed_by, COUNT(*) FROM loop_runs GROUP BY claimed_by", {},
                                     [&](const store::Row& row) {
                                       out[row.String(0)] = row.Int(1);
                                       return Status::Ok();
                                     }));
        return out;
      });
  ASSERT_TRUE(shares.ok());
  for (const auto& [holder, n] : *shares) std::printf("  %s claimed %lld occurrences\n", holder.c_str(), static_cast<long long>(n));
}

TEST_P(LoopMultiHostTest, ALoopCreatedThroughOneHostIsDeliveredByAnotherWhileTheFirstIsStopped) {
  std::string target = NewSession();
  hosts_[0].scheduler->Stop();  // host A's scheduler is gone; only B's runs
  hosts_[2].scheduler->Stop();
  std::promise<Result<LoopRecord>> created;
  agent::ToolContext caller;
  caller.session_id = target;
  CreateLoopRequest request;
  request.prompt = "from A";
  request.schedule = Schedule{ScheduleKind::kEvery, 60, "", std::nullopt};
  hosts_[0].service->Create(caller, request, [&](Result<LoopRecord> r) { created.set_value(std::move(r)); });
  auto loop = created.get_future().get();
  ASSERT_TRUE(loop.ok()) << loop.status().ToString();
  // B notices it on its next tick, at most max_wait (1 s) later; the settle
  // stands in for that wake-up.
  SettleAll({1});
  EXPECT_EQ(Count("SELECT COUNT(*) FROM inbox WHERE key LIKE 'loop:%'"), 0) << "not due yet";
  clock_.Advance(60s);
  SettleAll({1});
  EXPECT_EQ(Count("SELECT COUNT(*) FROM inbox WHERE key = '" + OccurrenceKey(loop->loop_id, kStart + 60'000) +
                  "' AND session_id = '" + target + "'"),
            1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM loop_runs WHERE result = 'delivered' AND claimed_by = '" +
                  hosts_[1].agents->holder() + "'"),
            1)
      << "host B claimed and delivered it";
}

}  // namespace
}  // namespace dsh::plugins::loop
