// Kills the process running the loop scheduler with SIGKILL right after an
// occurrence's claim committed, right after its `<loop>` message was accepted
// by the inbox, and right after its outcome was recorded — many times on one
// profile — then lets a scheduler recover and checks that no claimed
// occurrence was lost and none was delivered twice.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <set>

#include "agent/agent_manager.h"
#include "base/testing/temp_dir.h"
#include "plugins/loop/loop_registry.h"
#include "plugins/loop/loop_scheduler.h"
#include "session/session_store.h"
#include "store/testing/test_backend.h"

extern char** environ;

namespace dsh::plugins::loop {
namespace {

constexpr int64_t kStart = 1'767'225'600'000;  // 2026-01-01T00:00:00Z
constexpr int64_t kPeriodS = 60;
constexpr int64_t kPeriodMs = kPeriodS * 1000;
constexpr int64_t kClaimTtlMs = 30'000;  // the child's SchedulerOptions::claim_ttl

std::unique_ptr<store::Database> OpenDb(const std::string& path) {
  std::vector<store::Migration> migrations = session::SessionStore::Migrations();
  for (auto& m : agent::AgentManager::Migrations()) migrations.push_back(m);
  for (auto& m : Migrations()) migrations.push_back(m);
  auto db = store::Database::Open(store::testing::FactoryForLocation(path), migrations);
  EXPECT_TRUE(db.ok()) << db.status().ToString();
  return db.ok() ? std::move(db).value() : nullptr;
}

// Runs the child to its end; returns its wait status.
int RunChild(const std::string& db_path, int64_t start_ms, int steps, const std::string& point, int n) {
  std::string start = std::to_string(start_ms), period = std::to_string(kPeriodS), steps_text = std::to_string(steps),
              n_text = std::to_string(n);
  const char* argv[] = {DSH_LOOP_CRASH_CHILD, db_path.c_str(), start.c_str(), period.c_str(), steps_text.c_str(),
                        point.c_str(),        n_text.c_str(),  nullptr};
  pid_t pid = 0;
  EXPECT_EQ(posix_spawn(&pid, DSH_LOOP_CRASH_CHILD, nullptr, nullptr, const_cast<char**>(argv), environ), 0);
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  return status;
}

struct RunRow {
  std::string loop_id;
  int64_t nominal = 0;
  int64_t claimed_at = 0;
  int64_t attempts = 0;
  int64_t skipped = 0;
  std::optional<std::string> result;
  std::optional<std::string> target;
};

std::vector<RunRow> AllRuns(store::Database& db) {
  auto r = db.ReadValue<std::vector<RunRow>>([](store::Tx& tx) -> Result<std::vector<RunRow>> {
    std::vector<RunRow> out;
    DSH_RETURN_IF_ERROR(tx.Query(
        "SELECT loop_id, nominal_at, claimed_at, attempts, skipped, result, target_session_id FROM loop_runs"
        " ORDER BY loop_id, nominal_at",
        {}, [&](const store::Row& row) {
          RunRow run{row.String(0), row.Int(1), row.Int(2), row.Int(3), row.Int(4), std::nullopt, std::nullopt};
          if (!row.IsNull(5)) run.result = row.String(5);
          if (!row.IsNull(6)) run.target = row.String(6);
          out.push_back(std::move(run));
          return Status::Ok();
        }));
    return out;
  });
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::vector<RunRow>{};
}

// key -> (number of inbox rows with that key, the session of the last one)
std::map<std::string, std::pair<int64_t, std::string>> LoopInbox(store::Database& db) {
  using Out = std::map<std::string, std::pair<int64_t, std::string>>;
  auto r = db.ReadValue<Out>([](store::Tx& tx) -> Result<Out> {
    Out out;
    DSH_RETURN_IF_ERROR(tx.Query("SELECT key, COUNT(*), MAX(session_id) FROM inbox WHERE key LIKE 'loop:%' GROUP BY key",
                                 {}, [&](const store::Row& row) {
                                   out[row.String(0)] = {row.Int(1), row.String(2)};
                                   return Status::Ok();
                                 }));
    return out;
  });
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : Out{};
}

// The clock a new run starts at: past every claim the killed run left (so
// they expire and are taken over in the first settle) and before the next
// occurrence (so nothing is skipped).
int64_t NextStart(store::Database& db) {
  auto runs = AllRuns(db);
  int64_t last = kStart;
  for (const auto& r : runs) last = std::max(last, r.claimed_at);
  return runs.empty() ? kStart : last + kClaimTtlMs;
}

// What is asserted, after every crash has been recovered by a clean run:
// - every occurrence ever claimed (a loop_runs row) ended `delivered`;
// - none was lost: each loop's claimed occurrences are the consecutive
//   nominal instants created_at + k * period, k = 1..K, with nothing skipped
//   (each run of the child starts its clock at the last claim + claim_ttl,
//   before the next occurrence, so anti-burst never legitimately skips one);
// - none was delivered twice: exactly one inbox row per `loop:ID:NOMINAL`
//   key, one key per run row and no other key, in the run's target session;
// - target "new": every occurrence has its own session, chosen at claim time,
//   so a retried delivery found the session it had already made;
// - recovery really happened: some occurrences needed a second attempt.
class LoopSchedulerCrash : public ::testing::TestWithParam<std::string> {
 protected:
  store::testing::TestBackend backend_{GetParam()};
};

INSTANTIATE_TEST_SUITE_P(Backends, LoopSchedulerCrash, store::testing::BackendNames(), store::testing::BackendTestName);

TEST_P(LoopSchedulerCrash, SigkillAfterClaimDeliveryOrRecordLosesNoOccurrenceAndDeliversNoneTwice) {
  std::string path = backend_.Location();
  std::vector<std::string> explicit_loops = {"loop_s1", "loop_s2"};
  std::vector<std::string> new_loops = {"loop_n1", "loop_n2"};
  std::map<std::string, std::string> explicit_target;
  {
    auto db = OpenDb(path);
    ASSERT_NE(db, nullptr);
    FakeClock clock(FromUnixMillis(kStart));
    session::SessionStore sessions(*db, clock);
    std::vector<LoopRecord> loops;
    for (const auto& id : explicit_loops) {
      auto h = sessions.Create(session::NewSession{.route = {"echo", "echo", std::nullopt}});
      ASSERT_TRUE(h.ok()) << h.status().ToString();
      explicit_target[id] = h->id;
      loops.push_back(LoopRecord{.loop_id = id, .prompt = "p " + id, .target = h->id});
    }
    for (const auto& id : new_loops) loops.push_back(LoopRecord{.loop_id = id, .prompt = "p " + id, .target = kTargetNew});
    for (auto& l : loops) {
      l.schedule = Schedule{ScheduleKind::kEvery, kPeriodS, "", std::nullopt};
      l.created_at = kStart;
      l.due_at = kStart + kPeriodMs;
    }
    ASSERT_TRUE(db->WriteSync([&](store::Tx& tx) -> Status {
                    for (const auto& l : loops) DSH_RETURN_IF_ERROR(registry::Insert(tx, l));
                    return Status::Ok();
                  }).ok());
    db->Close();
  }

  // Four claims reach each step per period; three periods give twelve hits,
  // more than the largest N, so every run is killed (some while recovering
  // what the previous one left: the first settle counts too).
  struct Crash {
    const char* point;
    int n;
  };
  const std::vector<Crash> crashes = {{"claim", 1},   {"deliver", 2}, {"record", 1}, {"claim", 6},
                                      {"deliver", 5}, {"record", 3},  {"claim", 3},  {"deliver", 8},
                                      {"record", 6},  {"claim", 8},   {"deliver", 1}, {"record", 8}};
  for (size_t i = 0; i < crashes.size(); ++i) {
    int64_t start = 0;
    {
      auto db = OpenDb(path);
      ASSERT_NE(db, nullptr);
      start = NextStart(*db);
      db->Close();
    }
    int status = RunChild(path, start, 3, crashes[i].point, crashes[i].n);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "run " << i << " (" << crashes[i].point << " #" << crashes[i].n << ") was not killed, status " << status;
  }
  // Recovery: a clean run on the same profile.
  {
    auto db = OpenDb(path);
    ASSERT_NE(db, nullptr);
    int64_t start = NextStart(*db);
    db->Close();
    int status = RunChild(path, start, 1, "none", 0);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the recovery run failed, status " << status;
  }

  auto db = OpenDb(path);
  ASSERT_NE(db, nullptr);
  auto runs = AllRuns(*db);
  auto inbox = LoopInbox(*db);
  std::map<std::string, std::vector<RunRow>> by_loop;
  for (const auto& r : runs) by_loop[r.loop_id].push_back(r);
  ASSERT_EQ(by_loop.size(), 4u);
  size_t retried = 0;
  std::set<std::string> keys;
  for (const auto& [loop_id, loop_runs] : by_loop) {
    ASSERT_GT(loop_runs.size(), 3u) << loop_id;
    for (size_t k = 0; k < loop_runs.size(); ++k) {
      const RunRow& r = loop_runs[k];
      EXPECT_EQ(r.nominal, kStart + static_cast<int64_t>(k + 1) * kPeriodMs) << loop_id << ": occurrence " << k + 1 << " was lost";
      EXPECT_EQ(r.skipped, 0) << loop_id << " at " << r.nominal;
      EXPECT_EQ(r.result, std::optional<std::string>("delivered")) << loop_id << " at " << r.nominal;
      if (r.attempts > 1) ++retried;
      std::string key = OccurrenceKey(loop_id, r.nominal);
      keys.insert(key);
      auto it = inbox.find(key);
      ASSERT_NE(it, inbox.end()) << key << " is recorded delivered but has no inbox message";
      EXPECT_EQ(it->second.first, 1) << key << " was delivered " << it->second.first << " times";
      ASSERT_TRUE(r.target.has_value()) << key;
      EXPECT_EQ(it->second.second, *r.target) << key << " went to another session than its run row says";
      if (explicit_target.count(loop_id)) {
        EXPECT_EQ(*r.target, explicit_target[loop_id]) << key;
      }
    }
  }
  EXPECT_EQ(inbox.size(), keys.size()) << "an inbox message of an occurrence that has no run row";
  EXPECT_EQ(inbox.size(), runs.size());
  for (const auto& id : new_loops) {
    std::set<std::string> made;
    for (const auto& r : by_loop[id]) made.insert(r.target.value_or(""));
    EXPECT_EQ(made.size(), by_loop[id].size()) << id << ": two occurrences share a fresh session";
  }
  // Each made session exists and is the loop's, and no stray one was made.
  auto origins = db->ReadValue<int64_t>([](store::Tx& tx) -> Result<int64_t> {
    int64_t n = 0;
    DSH_RETURN_IF_ERROR(tx.Query("SELECT COUNT(*) FROM sessions WHERE origin = 'loop'", {}, [&](const store::Row& row) {
      n = row.Int(0);
      return Status::Ok();
    }));
    return n;
  });
  ASSERT_TRUE(origins.ok()) << origins.status().ToString();
  EXPECT_EQ(static_cast<size_t>(*origins), by_loop[new_loops[0]].size() + by_loop[new_loops[1]].size());
  std::printf("  %zu occurrences, %zu of them taken over after a kill\n", runs.size(), retried);
  EXPECT_GT(retried, 0u) << "no occurrence was ever taken over: the crashes tested nothing";
  db->Close();
}

}  // namespace
}  // namespace dsh::plugins::loop
