#include "plugins/loop/loop_scheduler.h"

#include <spdlog/spdlog.h>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <memory>
#include <utility>

#include "base/ids.h"

namespace dsh::plugins::loop {
namespace {

std::string XmlEscape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

registry::Outcome Failed(std::string error, std::optional<std::string> note = std::nullopt) {
  registry::Outcome o;
  o.error = std::move(error);
  o.note = std::move(note);
  return o;
}

}  // namespace

std::string LoopMessage(const std::string& loop_id, const std::string& prompt) {
  return "<loop>\n  <loop_id>" + XmlEscape(loop_id) + "</loop_id>\n  <prompt>" + XmlEscape(prompt) +
         "</prompt>\n</loop>";
}

LoopScheduler::LoopScheduler(boost::asio::io_context& ioc, store::Database& db, session::SessionStore& sessions,
                             agent::AgentManager& agents, const Clock& clock, LoopEnvironment env,
                             SchedulerOptions options)
    : ioc_(ioc),
      db_(db),
      sessions_(sessions),
      agents_(agents),
      clock_(clock),
      env_(std::move(env)),
      options_(options),
      strand_(boost::asio::make_strand(ioc)),
      timer_(strand_) {
  if (metrics::Registry* m = options_.metrics) {
    auto& events = m->AddCounterFamily(
        "dsh_loop_occurrences_total",
        "Loop occurrences by event: claimed (by this host, retries included), delivered (the inbox accepted "
        "it), failed (a delivery attempt failed; it is retried), skipped (not delivered by the anti-burst rule "
        "after downtime).",
        {"event"});
    claimed_ = &events.WithLabels({"claimed"});
    delivered_ = &events.WithLabels({"delivered"});
    failed_ = &events.WithLabels({"failed"});
    skipped_ = &events.WithLabels({"skipped"});
    lateness_ = &m->AddHistogram("dsh_loop_delivery_lateness_seconds",
                                 "From an occurrence's nominal time until its inbox delivery was accepted.",
                                 metrics::LatencyBuckets());
  }
  options_.max_wait = std::clamp(options_.max_wait, std::chrono::milliseconds(1), std::chrono::milliseconds(60'000));
  options_.lookahead = std::clamp(options_.lookahead, std::chrono::milliseconds(0), options_.claim_ttl / 4);
}

LoopScheduler::~LoopScheduler() { Stop(); }

void LoopScheduler::Start() {
  {
    std::lock_guard lock(mu_);
    if (started_ || stopped_) return;
    started_ = true;
  }
  notices_ = db_.Subscribe(std::string(kLoopsChannel), [this](std::string_view payload) {
    int64_t next_at = 0;
    auto [end, ec] = std::from_chars(payload.data(), payload.data() + payload.size(), next_at);
    if (ec == std::errc() && end == payload.data() + payload.size() && !payload.empty()) Expect(next_at);
    AnnounceChange();
  });
  boost::asio::post(strand_, [this] { Tick(); });
}

void LoopScheduler::Stop() {
  notices_.reset();
  std::unique_lock lock(mu_);
  if (stopped_) return;
  stopped_ = true;
  if (!started_) return;
  // Runs after everything already queued on the strand: nothing queued
  // before it can touch this object after Stop returns.
  bool flushed = false;
  boost::asio::post(strand_, [this, &flushed] {
    timer_.cancel();
    std::lock_guard inner(mu_);
    flushed = true;
    cv_.notify_all();
  });
  cv_.wait(lock, [&] { return flushed && !in_tick_ && in_flight_ == 0 && pending_handlers_ == 0; });
}

void LoopScheduler::Poke() {
  boost::asio::post(strand_, [this] {
    if (ticking_) {
      poked_ = true;  // the tick in progress runs again when it ends
      return;
    }
    Tick();
  });
}

void LoopScheduler::Expect(int64_t next_at) {
  boost::asio::post(strand_, [this, next_at] {
    if (ticking_) {
      // The tick's claim may have read the loops before this one existed.
      expected_ = expected_ ? std::min(*expected_, next_at) : next_at;
      return;
    }
    if (next_at - options_.lookahead.count() <= ToUnixMillis(clock_.Now())) return Tick();
    {
      std::lock_guard lock(mu_);
      if (!started_ || stopped_) return;
    }
    if (!armed_at_ || next_at < *armed_at_) Arm(next_at);
  });
}

bool LoopScheduler::SettleForTesting(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  int64_t target = ticks_started_ + 1;
  lock.unlock();
  Poke();
  lock.lock();
  return cv_.wait_for(lock, timeout, [&] { return (ticks_finished_ >= target && in_flight_ == 0) || stopped_; }) &&
         !stopped_;
}

void LoopScheduler::Tick() {
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    if (in_flight_ >= options_.max_in_flight) {
      awaiting_room_ = true;  // Recorded() ticks again once there is room
      return;
    }
    in_tick_ = true;
    ++ticks_started_;
  }
  ticking_ = true;
  poked_ = false;
  timer_.cancel();
  armed_at_.reset();
  int64_t now = ToUnixMillis(clock_.Now());
  struct Batch {
    std::vector<registry::Claim> claims;
    std::optional<int64_t> next_wake;
  };
  auto batch = std::make_shared<Batch>();
  db_.Write(
      [this, now, batch](store::Tx& tx) -> Status {
        registry::ClaimOptions o{now, now + options_.lookahead.count(), agents_.holder(), options_.claim_ttl.count(),
                                 options_.batch};
        batch->next_wake.reset();  // may run again after it succeeded (store::JobRerun)
        DSH_ASSIGN_OR_RETURN(
            batch->claims, registry::ClaimDue(
                               tx, o, [this](const Schedule& s) { return TimetableOf(s); },
                               [this] { return NewId("ses_", clock_); }));
        // The next wake-up as of this claim, without another round trip.
        if (static_cast<int>(batch->claims.size()) < options_.batch) {
          DSH_ASSIGN_OR_RETURN(batch->next_wake, registry::NextWake(tx));
        }
        return batch->claims.empty() ? Status::Ok() : tx.Notify(kLoopsChannel, "");
      },
      [this, batch](Status st) {
        if (!st.ok()) {
          if (st.code() != codes::kShuttingDown) spdlog::warn("loop scheduler: claiming due loops failed: {}", st.ToString());
          return boost::asio::post(strand_, [this] { FinishTick(false, std::nullopt); });
        }
        bool full = static_cast<int>(batch->claims.size()) >= options_.batch;
        if (!batch->claims.empty()) AnnounceChange();
        if (claimed_ != nullptr) {
          claimed_->Inc(batch->claims.size());
          for (const registry::Claim& claim : batch->claims) {
            if (claim.attempts == 1 && claim.skipped > 0) skipped_->Inc(static_cast<uint64_t>(claim.skipped));
          }
        }
        {
          std::lock_guard lock(mu_);
          in_flight_ += static_cast<int64_t>(batch->claims.size());
        }
        if (options_.on_step) {
          for (const registry::Claim& claim : batch->claims) options_.on_step(SchedulerStep::kClaimCommitted, claim);
        }
        int64_t now = ToUnixMillis(clock_.Now());
        for (const registry::Claim& claim : batch->claims) {
          if (claim.deliver_at <= now) {
            DeliverAndRecord(claim);
            continue;
          }
          // Claimed ahead: wait (monotonic) for its time.
          auto timer = std::make_shared<boost::asio::steady_timer>(ioc_, std::chrono::milliseconds(claim.deliver_at - now));
          timer->async_wait([this, timer, claim](const boost::system::error_code&) { DeliverAndRecord(claim); });
        }
        // The next claim need not wait for these deliveries. Last: once the
        // tick has finished, Stop() may return and this object go (the
        // claims above keep it, counted in in_flight_).
        boost::asio::post(strand_, [this, full, next = batch->next_wake] { FinishTick(full, next); });
      },
      store::JobIsolation::kSavepoint, store::JobRerun::kAlsoAfterSuccess);
}

void LoopScheduler::DeliverAndRecord(const registry::Claim& claim) {
  Deliver(claim, [this, claim](registry::Outcome out) {
    if (out.delivered && options_.on_step) options_.on_step(SchedulerStep::kDeliveryAccepted, claim);
    int64_t at = ToUnixMillis(clock_.Now());
    if (delivered_ != nullptr) {
      (out.delivered ? delivered_ : failed_)->Inc();
      if (out.delivered) lateness_->Observe(static_cast<double>(std::max<int64_t>(at - claim.nominal, 0)) / 1000);
    }
    db_.Write(
        [claim, out, at, webhooks = &agents_.webhooks()](store::Tx& tx) -> Status {
          DSH_RETURN_IF_ERROR(registry::Record(tx, claim, out, at, webhooks));
          return tx.Notify(kLoopsChannel, "");
        },
              [this, claim, failed = !out.delivered](Status st) {
                if (st.ok()) AnnounceChange();
                // A failed delivery is an item of the activity list.
                if (st.ok() && failed) {
                  if (session::EventHub* hub = sessions_.hub()) hub->PublishChange({"activity", ""});
                }
                if (st.ok() && options_.on_step) options_.on_step(SchedulerStep::kRecordCommitted, claim);
                if (!st.ok() && st.code() != codes::kShuttingDown) {
                  spdlog::warn("loop {}: recording the occurrence {} failed (it is retried): {}", claim.loop.loop_id,
                               claim.nominal, st.ToString());
                }
                Recorded();
              },
              store::JobIsolation::kSavepoint, store::JobRerun::kAlsoAfterSuccess);
  });
}

void LoopScheduler::AnnounceChange() {
  if (session::EventHub* hub = sessions_.hub()) hub->PublishChange({"loops", ""});
}

void LoopScheduler::Recorded() {
  {
    std::lock_guard lock(mu_);
    bool room_again = in_flight_-- == options_.max_in_flight;
    if (room_again) ++pending_handlers_;  // counted before Stop() can see in_flight_ drop
    cv_.notify_all();
    if (!room_again) return;
  }
  PostCounted([this] {
    if (!awaiting_room_ || ticking_) return;
    awaiting_room_ = false;
    Tick();
  });
}

void LoopScheduler::FinishTick(bool again, std::optional<int64_t> next_at) {
  ticking_ = false;
  if (again || poked_) {
    Queue([this] { Tick(); });
  } else {
    if (expected_) {
      next_at = next_at ? std::min(*next_at, *expected_) : *expected_;
      expected_.reset();
    }
    Arm(next_at);
  }
  // Last: once in_tick_ is false, Stop() may return and this object go.
  std::lock_guard lock(mu_);
  ticks_finished_ = ticks_started_;
  in_tick_ = false;
  cv_.notify_all();
}

void LoopScheduler::Queue(std::function<void()> fn) {
  {
    std::lock_guard lock(mu_);
    ++pending_handlers_;
  }
  PostCounted(std::move(fn));
}

void LoopScheduler::PostCounted(std::function<void()> fn) {
  boost::asio::post(strand_, [this, fn = std::move(fn)] {
    fn();
    std::lock_guard lock(mu_);
    --pending_handlers_;
    cv_.notify_all();
  });
}

void LoopScheduler::Arm(std::optional<int64_t> next_at) {
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
  }
  int64_t now = ToUnixMillis(clock_.Now());
  auto wait = options_.max_wait;
  if (next_at) {
    int64_t until = *next_at - options_.lookahead.count() - now;  // claim it ahead of its time
    wait = std::min(wait, std::chrono::milliseconds(std::max<int64_t>(until, 0)));
  }
  armed_at_ = now + wait.count();
  timer_.expires_after(wait);  // a wait still pending ends with operation_aborted
  {
    std::lock_guard lock(mu_);
    ++pending_handlers_;
  }
  timer_.async_wait(boost::asio::bind_executor(strand_, [this](const boost::system::error_code& ec) {
    if (!ec && !ticking_) Tick();
    // Stop() returns only once every wait's handler has run.
    std::lock_guard lock(mu_);
    --pending_handlers_;
    cv_.notify_all();
  }));
}

agent::Delivery LoopScheduler::MakeDelivery(const std::string& session_id, const registry::Claim& claim) const {
  agent::Delivery d;
  d.session_id = session_id;
  d.text = LoopMessage(claim.loop.loop_id, claim.loop.prompt);
  d.mode = agent::DeliveryMode::kSteer;  // idle: the next turn; running: the next step boundary
  d.wakeup = true;
  d.key = OccurrenceKey(claim.loop.loop_id, claim.nominal);
  d.meta = {{"origin", "loop"}, {"loop_id", claim.loop.loop_id}, {"nominal_at", claim.nominal}};
  d.activity = agent::activity::Source{"loop_run", claim.loop.loop_id, claim.nominal, std::nullopt};
  return d;
}

void LoopScheduler::Deliver(const registry::Claim& claim, std::function<void(registry::Outcome)> done) {
  const std::string& target = claim.loop.target;
  if (target == kTargetSelf) {
    auto global = env_.global_session_id();
    if (!global) return done(Failed("the global interface session is turned off (interface.global_session)"));
    return DeliverTo(*global, claim, std::nullopt, std::move(done));
  }
  if (target == kTargetNew) return DeliverNew(claim, std::move(done));
  DeliverTo(target, claim, std::nullopt, std::move(done));
}

void LoopScheduler::DeliverTo(const std::string& session_id, const registry::Claim& claim,
                              std::optional<std::string> note, std::function<void(registry::Outcome)> done) {
  agents_.Deliver(MakeDelivery(session_id, claim),
                  [session_id, note = std::move(note), done = std::move(done)](Result<agent::Delivered> r) {
                    if (!r.ok()) {
                      if (r.status().code() == codes::kNotFound) {
                        return done(Failed("the target session " + session_id + " does not exist", note));
                      }
                      return done(Failed("delivery to session " + session_id + " failed: " + r.status().message(), note));
                    }
                    registry::Outcome o;
                    o.delivered = true;
                    o.target_session_id = session_id;
                    o.message_id = r->message_id;
                    o.note = note;
                    done(std::move(o));
                  });
}

void LoopScheduler::DeliverNew(const registry::Claim& claim, std::function<void(registry::Outcome)> done) {
  if (!claim.new_session_id) return done(Failed("no session id was chosen for this occurrence"));
  // The inheritance source: the creating session, else the global interface.
  std::optional<std::string> source = claim.loop.created_by;
  if (!source) source = env_.global_session_id();
  auto create = [this, claim, done = std::move(done)](std::optional<session::SessionHeader> src,
                                                       std::optional<std::string> note) mutable {
    session::NewSession s = env_.defaults();
    s.id = claim.new_session_id;
    s.origin = "loop";
    if (src) {
      s.route = src->route;
      s.preset = src->preset;
      s.cwd = src->cwd;
    }
    if (claim.loop.preset) {
      if (env_.preset_exists(*claim.loop.preset)) {
        s.preset = claim.loop.preset;
      } else {
        note = "the preset " + *claim.loop.preset + " no longer exists; the default preset was used";
        s.preset = env_.defaults().preset;
      }
    }
    std::string id = *claim.new_session_id;
    agents_.CreateWith(std::move(s), MakeDelivery(id, claim),
                       [this, claim, id, note, done = std::move(done)](Result<agent::Created> r) mutable {
                         if (r.ok()) {
                           registry::Outcome o;
                           o.delivered = true;
                           o.target_session_id = id;
                           o.message_id = r->message_id;
                           o.note = note;
                           return done(std::move(o));
                         }
                         // A retried occurrence whose session was made before: the key finds its message.
                         if (r.status().code() == codes::kAlreadyExists) return DeliverTo(id, claim, note, std::move(done));
                         done(Failed("creating a fresh session failed: " + r.status().message(), note));
                       });
  };
  if (!source) {
    return create(std::nullopt, "there is no source session to inherit from; the profile defaults were used");
  }
  sessions_.GetAsync(*source, [source = *source, create = std::move(create)](Result<session::SessionHeader> h) mutable {
    if (h.ok()) return create(*h, std::nullopt);
    create(std::nullopt, "the source session " + source + " is unavailable (" + h.status().message() +
                             "); the profile default preset and model were used");
  });
}

}  // namespace dsh::plugins::loop
