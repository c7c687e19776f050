#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent/agent.h"
#include "session/event.h"
#include "session/event_hub.h"

namespace dsh::agent::testing {

// Collects every committed event of a hub and lets a test wait for a
// condition on a session's log without sleeping.
class EventWaiter {
 public:
  explicit EventWaiter(session::EventHub& hub)
      : sub_(hub.SubscribeAll([this](const std::string& id, const std::vector<session::Event>& events) {
          std::lock_guard lock(mu_);
          auto& log = logs_[id];
          log.insert(log.end(), events.begin(), events.end());
          cv_.notify_all();
        })) {}

  // Waits until `pred(log)` holds; returns the log then (or fails the test).
  std::vector<session::Event> WaitFor(const std::string& id,
                                      const std::function<bool(const std::vector<session::Event>&)>& pred,
                                      std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock lock(mu_);
    bool ok = cv_.wait_for(lock, timeout, [&] { return pred(logs_[id]); });
    EXPECT_TRUE(ok) << "timed out waiting on the log of " << id;
    return logs_[id];
  }
  std::vector<session::Event> WaitForTurnEnds(const std::string& id, size_t n) {
    return WaitFor(id, [&](const std::vector<session::Event>& log) {
      return Count(log, agent::event_types::kTurnEnd) >= n;
    });
  }
  static size_t Count(const std::vector<session::Event>& log, std::string_view type) {
    return std::count_if(log.begin(), log.end(), [&](const session::Event& e) { return e.type == type; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::vector<session::Event>> logs_;
  std::unique_ptr<session::EventHub::Subscription> sub_;
};

}  // namespace dsh::agent::testing
