#pragma once

#include <chrono>
#include <condition_variable>
#include <algorithm>
#include <deque>
#include <mutex>
#include <vector>

#include "agent/model.h"

namespace dsh::agent::testing {

// An in-process model for tests: replies from a script, records every
// request, and can hold a reply until the test releases it (a turn that is
// "running" for as long as the test wants). With an empty script it answers
// like echo. Thread-safe.
class ScriptedModel final : public ModelAdapter {
 public:
  struct Reply {
    Result<ModelResponse> result = ModelResponse{};
    bool hold = false;  // complete only on Release()
    std::vector<ModelDelta> deltas;  // streamed before it completes (or is held)
  };

  static Reply Text(std::string text) {
    ModelResponse r;
    r.text = std::move(text);
    r.finish_reason = "stop";
    return Reply{r};
  }
  static Reply ToolCalls(std::vector<ModelToolCall> calls) {
    ModelResponse r;
    r.tool_calls = std::move(calls);
    r.finish_reason = "tool_calls";
    return Reply{r};
  }
  static Reply Error(std::string code, std::string message) { return Reply{Status(std::move(code), std::move(message))}; }
  static Reply Hold(Reply r) {
    r.hold = true;
    return r;
  }
  static Reply Streaming(std::vector<ModelDelta> deltas, Reply r) {
    r.deltas = std::move(deltas);
    return r;
  }

  void Push(Reply reply) {
    std::lock_guard lock(mu_);
    script_.push_back(std::move(reply));
  }

  void Stream(ModelRequest request, std::shared_ptr<CancelToken> cancel, OnDelta on_delta, Done done) override {
    Reply reply;
    uint64_t held_id = 0;
    {
      std::lock_guard lock(mu_);
      if (script_.empty()) {
        std::string last;
        for (const auto& m : request.messages) {
          if (m.role == ModelMessage::Role::kUser) last = m.text;
        }
        reply = Text("echo: " + last);
      } else {
        reply = std::move(script_.front());
        script_.pop_front();
      }
      requests_.push_back(std::move(request));
      if (reply.hold) {
        held_id = next_held_++;
        held_.push_back({held_id, std::move(reply.result), cancel, std::move(done)});
      }
    }
    if (on_delta) {
      for (const ModelDelta& d : reply.deltas) on_delta(d);
    }
    {
      std::lock_guard lock(mu_);  // a waiter sees the request once its deltas went out
      ++streamed_;
      cv_.notify_all();
    }
    if (held_id == 0) return done(std::move(reply.result));
    // Like a real adapter, a cancelled call completes at once.
    if (cancel) cancel->OnCancel([this, held_id] { Complete(held_id); });
  }

  std::string Describe(const std::string& model) const override { return "scripted " + model; }

  // Completes the oldest held call. False when none is held.
  bool Release() {
    uint64_t id = 0;
    {
      std::lock_guard lock(mu_);
      if (held_.empty()) return false;
      id = held_.front().id;
    }
    Complete(id);
    return true;
  }

  std::vector<ModelRequest> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }
  // Waits until at least `n` requests arrived.
  bool WaitForRequests(size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return streamed_ >= n; });
  }

 private:
  // Completes a held call (with `cancelled` if its token was cancelled);
  // nothing when it completed already.
  void Complete(uint64_t id) {
    Held h;
    {
      std::lock_guard lock(mu_);
      auto it = std::find_if(held_.begin(), held_.end(), [&](const Held& x) { return x.id == id; });
      if (it == held_.end()) return;
      h = std::move(*it);
      held_.erase(it);
    }
    if (h.cancel && h.cancel->cancelled()) return h.done(Status(codes::kCancelled, "cancelled"));
    h.done(std::move(h.result));
  }

  struct Held {
    uint64_t id = 0;
    Result<ModelResponse> result = ModelResponse{};
    std::shared_ptr<CancelToken> cancel;
    Done done;
  };
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Reply> script_;
  std::vector<ModelRequest> requests_;
  size_t streamed_ = 0;  // requests whose deltas were all passed on
  std::deque<Held> held_;
  uint64_t next_held_ = 1;
};

// Routes every provider to one adapter.
class SingleModelRouter final : public ModelRouter {
 public:
  explicit SingleModelRouter(ModelAdapter& model) : model_(model) {}
  Result<ModelAdapter*> AdapterFor(const std::string&) override { return &model_; }

 private:
  ModelAdapter& model_;
};

}  // namespace dsh::agent::testing
