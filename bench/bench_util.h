#pragma once

// Helpers shared by the load programs in bench/.

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "base/allocator.h"
#include "base/status.h"
#include "store/database.h"

namespace dsh::bench {

// A load program stops at the first failure: its figures would mean nothing.
[[noreturn]] inline void Fail(const char* what, const Status& st) {
  std::fprintf(stderr, "%s: %s\n", what, st.ToString().c_str());
  std::exit(1);
}

// The database writer's time per transaction that reached its COMMIT,
// between two Database::stats() taken `seconds` apart, in µs: running the
// jobs, the COMMIT, the callbacks, and waiting for work (the rest).
struct WriterTime {
  double jobs = 0, commit = 0, callbacks = 0, waiting = 0;
};
inline WriterTime WriterPerCommit(const store::Database::Stats& before, const store::Database::Stats& after,
                                  double seconds) {
  const double n =
      static_cast<double>(after.commits + after.failed_commits - before.commits - before.failed_commits);
  if (n <= 0) return {};
  WriterTime t{static_cast<double>(after.run_us - before.run_us) / n,
               static_cast<double>(after.commit_us - before.commit_us) / n,
               static_cast<double>(after.callbacks_us - before.callbacks_us) / n, 0};
  t.waiting = std::max(0.0, seconds * 1e6 / n - t.jobs - t.commit - t.callbacks);
  return t;
}

// Resident set size in bytes, after the allocator handed its free memory
// back to the system, so that the figure counts memory in use.
inline int64_t ResidentInUse() {
  ReleaseFreeMemory();
  return ResidentBytes();
}

inline int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Waits for `n` completions of asynchronous calls.
class Countdown {
 public:
  explicit Countdown(size_t n) : left_(n) {}
  void Done() {
    std::lock_guard lock(mu_);
    if (--left_ == 0) cv_.notify_all();
  }
  bool Wait(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return left_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  size_t left_;
};

// The value below which a fraction `p` of `v` lies (sorts `v`); 0 when empty.
inline double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(static_cast<double>(v.size()) * p))];
}

}  // namespace dsh::bench
