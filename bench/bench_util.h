#pragma once

// Helpers shared by the load programs in bench/ (agent_bench, sessions_bench).

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "base/status.h"

namespace dsh::bench {

// A load program stops at the first failure: its figures would mean nothing.
[[noreturn]] inline void Fail(const char* what, const Status& st) {
  std::fprintf(stderr, "%s: %s\n", what, st.ToString().c_str());
  std::exit(1);
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
