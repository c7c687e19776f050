// Kills a process that appends from many threads with SIGKILL at a random
// moment, then checks that every acknowledged event survived with contiguous
// seqs and that no append is half-visible.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <tuple>

#include "base/testing/temp_dir.h"
#include "session/session_store.h"
#include "store/testing/test_backend.h"

extern char** environ;

namespace dsh::session {
namespace {

struct Ack {
  int64_t first_seq;
  int n;
};

std::unique_ptr<store::Database> OpenDb(const std::string& path) {
  auto db = store::Database::Open(store::testing::FactoryForLocation(path), SessionStore::Migrations());
  EXPECT_TRUE(db.ok()) << db.status().ToString();
  return std::move(db).value();
}

// Runs the child until `run_for` after its first acknowledgement, kills it,
// and returns the acknowledged appends.
std::map<std::pair<int, int>, Ack> RunAndKill(const std::string& db_path, const std::string& session_id, int round,
                                              std::chrono::milliseconds run_for) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  std::string threads = "16", round_text = std::to_string(round);
  const char* argv[] = {DSH_CRASH_CHILD, db_path.c_str(), session_id.c_str(), threads.c_str(), round_text.c_str(),
                        nullptr};
  pid_t pid = 0;
  EXPECT_EQ(posix_spawn(&pid, DSH_CRASH_CHILD, &actions, nullptr, const_cast<char**>(argv), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);

  std::string output;
  char buf[65536];
  // `run_for` counts from the child's first acknowledgement: starting (and
  // opening the database) may take long under a sanitizer, and a kill before
  // any append tests nothing.
  const auto started = std::chrono::steady_clock::now();
  std::optional<std::chrono::steady_clock::time_point> deadline;
  bool killed = false;
  for (;;) {
    auto now = std::chrono::steady_clock::now();
    if (!killed && !deadline && now - started >= std::chrono::seconds(60)) {
      ADD_FAILURE() << "the child acknowledged nothing in 60 s";
      deadline = now;
    }
    if (!killed && deadline && now >= *deadline) {
      kill(pid, SIGKILL);
      killed = true;
    }
    int timeout_ms = killed || !deadline
                         ? 1000
                         : static_cast<int>(
                               std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - now).count()) + 1;
    pollfd p{fds[0], POLLIN, 0};
    int ready = poll(&p, 1, timeout_ms);
    if (ready > 0) {
      ssize_t n = read(fds[0], buf, sizeof buf);
      if (n <= 0) break;  // EOF: the child is gone
      output.append(buf, static_cast<size_t>(n));
      if (!deadline) deadline = std::chrono::steady_clock::now() + run_for;
    }
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "child exited early, status " << status;

  std::map<std::pair<int, int>, Ack> acks;
  std::istringstream lines(output);
  std::string word;
  int t, i, n;
  int64_t first;
  while (lines >> word >> t >> i >> first >> n) {
    EXPECT_EQ(word, "ack");
    acks[{t, i}] = Ack{first, n};
  }
  return acks;
}

class SessionStoreCrash : public ::testing::TestWithParam<std::string> {
 protected:
  store::testing::TestBackend backend_{GetParam()};
};

INSTANTIATE_TEST_SUITE_P(Backends, SessionStoreCrash, store::testing::BackendNames(), store::testing::BackendTestName);

TEST_P(SessionStoreCrash, SigkillLosesNoAcknowledgedEventAndLeavesNoHalfAppend) {
  std::string path = backend_.Location();
  std::string session_id;
  {
    auto db = OpenDb(path);
    SessionStore store(*db, RealClock());
    auto h = store.Create(NewSession{.route = {"echo", "echo"}});
    ASSERT_TRUE(h.ok());
    session_id = h->id;
  }
  std::mt19937 rng(std::random_device{}());
  constexpr int kRounds = 5;
  size_t total_acks = 0;
  for (int round = 0; round < kRounds; ++round) {
    auto run_for = std::chrono::milliseconds(std::uniform_int_distribution<int>(80, 400)(rng));
    auto acks = RunAndKill(path, session_id, round, run_for);
    total_acks += acks.size();

    auto db = OpenDb(path);
    SessionStore store(*db, RealClock());
    auto header = store.Get(session_id);
    ASSERT_TRUE(header.ok());
    std::vector<Event> all;
    int64_t after = 0;
    for (;;) {
      auto window = store.ReadEvents(session_id, after, 5000);
      ASSERT_TRUE(window.ok()) << window.status().ToString();
      if (window->empty()) break;
      after = window->back().seq;
      for (auto& e : *window) all.push_back(std::move(e));
    }
    ASSERT_EQ(static_cast<int64_t>(all.size()), header->last_seq) << "round " << round;
    for (size_t k = 0; k < all.size(); ++k) ASSERT_EQ(all[k].seq, static_cast<int64_t>(k) + 1) << "seqs have a gap";

    // Every stored group is whole and consecutive; no group appears twice.
    std::map<std::tuple<int, int, int>, int64_t> groups;
    for (size_t k = 0; k < all.size();) {
      const Json& d = all[k].data;
      int n = d["n"].get<int>();
      std::tuple<int, int, int> key{d["r"].get<int>(), d["t"].get<int>(), d["i"].get<int>()};
      ASSERT_EQ(d["k"], 0) << "a group starts mid-way at seq " << all[k].seq;
      ASSERT_LE(k + static_cast<size_t>(n), all.size()) << "a half-visible append at the end of the log";
      for (int part = 0; part < n; ++part) {
        const Json& p = all[k + part].data;
        ASSERT_EQ(p["r"], std::get<0>(key));
        ASSERT_EQ(p["t"], std::get<1>(key));
        ASSERT_EQ(p["i"], std::get<2>(key));
        ASSERT_EQ(p["k"], part);
      }
      ASSERT_TRUE(groups.emplace(key, all[k].seq).second) << "append stored twice";
      k += static_cast<size_t>(n);
    }
    // Every acknowledged append is there, at the seqs it was acknowledged with.
    for (const auto& [key, ack] : acks) {
      auto it = groups.find({round, key.first, key.second});
      ASSERT_NE(it, groups.end()) << "acknowledged append " << key.first << "/" << key.second << " was lost";
      EXPECT_EQ(it->second, ack.first_seq);
    }
  }
  EXPECT_GT(total_acks, 0u) << "the child never acknowledged anything";
}

}  // namespace
}  // namespace dsh::session
