// Child process of crash_test.cc. Appends event groups to one session from
// many threads until killed, printing one line per acknowledged append:
//   ack THREAD INDEX FIRST_SEQ COUNT
// Usage: session_crash_child DB SESSION_ID THREADS ROUND
// (DB: a SQLite file, or "postgres:" and a conninfo; TestBackend::Location)
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "session/session_store.h"
#include "store/testing/location.h"

using namespace dsh;

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s DB_PATH SESSION_ID THREADS ROUND\n", argv[0]);
    return 2;
  }
  std::string path = argv[1], session_id = argv[2];
  int threads = std::atoi(argv[3]);
  int round = std::atoi(argv[4]);
  auto db = store::Database::Open(store::testing::FactoryForLocation(path), session::SessionStore::Migrations());
  if (!db.ok()) {
    std::fprintf(stderr, "open: %s\n", db.status().ToString().c_str());
    return 3;
  }
  session::SessionStore store(**db, RealClock());
  std::mutex out_mu;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0;; ++i) {
        int n = 1 + i % 3;
        std::vector<session::EventDraft> drafts;
        for (int k = 0; k < n; ++k) {
          drafts.push_back({"test/crash", {{"r", round}, {"t", t}, {"i", i}, {"k", k}, {"n", n}, {"pad", std::string(200, 'x')}}});
        }
        auto r = store.Append(session_id, std::move(drafts));
        if (!r.ok()) {
          std::fprintf(stderr, "append: %s\n", r.status().ToString().c_str());
          std::_Exit(4);
        }
        std::string line = "ack " + std::to_string(t) + " " + std::to_string(i) + " " +
                           std::to_string(r->front().seq) + " " + std::to_string(n) + "\n";
        std::lock_guard lock(out_mu);
        if (write(STDOUT_FILENO, line.data(), line.size()) != static_cast<ssize_t>(line.size())) std::_Exit(5);
      }
    });
  }
  for (auto& w : workers) w.join();
  return 0;
}
