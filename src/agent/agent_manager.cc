#include "agent/agent_manager.h"

#include <boost/asio/post.hpp>
#include <spdlog/spdlog.h>

#include <future>
#include <set>
#include <spdlog/spdlog.h>

#include "agent/agent.h"
#include "base/ids.h"
#include "base/strings.h"

namespace dsh::agent {

std::string_view AgentStatusName(AgentStatus status) {
  switch (status) {
    case AgentStatus::kRunning:
      return "running";
    case AgentStatus::kIdle:
      return "idle";
    case AgentStatus::kCold:
      return "cold";
    case AgentStatus::kMissing:
      return "missing";
  }
  return "missing";
}

namespace {
int64_t MonoMillis(const Clock& clock) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(clock.MonotonicNow().time_since_epoch()).count();
}
}  // namespace

AgentManager::AgentManager(boost::asio::io_context& ioc, store::Database& db, session::SessionStore& sessions,
                           ModelRouter& models, const ToolRegistry& tools, const Clock& clock,
                           AgentEnvironment environment, AgentManagerOptions options)
    : ioc_(ioc),
      db_(db),
      sessions_(sessions),
      models_(models),
      tools_(tools),
      clock_(clock),
      environment_(std::move(environment)),
      options_(options),
      holder_(agent_store::NewLeaseHolder()),
      sweep_timer_(ioc) {
  if (metrics::Registry* m = options_.metrics) {
    turns_ = &m->AddCounterFamily("dsh_turns_total", "Turns this host's agents ended, by model route and result "
                                  "(completed or error).", {"route", "result"});
    turn_seconds_ = &m->AddHistogramFamily("dsh_turn_seconds", "How long turns took, from start to end, by route.",
                                           {"route"}, metrics::LatencyBuckets());
    model_calls_ = &m->AddCounterFamily("dsh_model_calls_total", "Model calls (turn steps and generated titles), "
                                        "by route and result (ok or the error code).", {"route", "result"});
    model_call_seconds_ = &m->AddHistogramFamily("dsh_model_call_seconds",
                                                 "How long model calls took, until the stream ended, by route.",
                                                 {"route"}, metrics::LatencyBuckets());
    model_tokens_ = &m->AddCounterFamily("dsh_model_tokens_total",
                                         "Tokens the provider counted, by route and direction (input or output); "
                                         "providers that report no usage add nothing.", {"route", "direction"});
    tool_calls_ = &m->AddCounterFamily("dsh_tool_calls_total", "Tool calls of this host's agents, by tool and result "
                                       "(ok or the error code: tool_denied, approval_timeout, ...).",
                                       {"tool", "result"});
  }
}

void AgentManager::CountToolCall(const std::string& tool, const std::string& result) {
  if (tool_calls_ != nullptr) tool_calls_->WithLabels({tool, result}).Inc();
}

void AgentManager::CountTurn(const std::string& route, bool completed, std::chrono::duration<double> took) {
  if (turns_ == nullptr) return;
  turns_->WithLabels({route, completed ? "completed" : "error"}).Inc();
  turn_seconds_->WithLabels({route}).Observe(took.count());
}

void AgentManager::CountModelCall(const std::string& route, const Result<ModelResponse>& result,
                                  std::chrono::duration<double> took) {
  if (model_calls_ == nullptr) return;
  model_calls_->WithLabels({route, result.ok() ? "ok" : result.status().code()}).Inc();
  model_call_seconds_->WithLabels({route}).Observe(took.count());
  if (!result.ok()) return;
  if (result->input_tokens) model_tokens_->WithLabels({route, "input"}).Inc(static_cast<uint64_t>(std::max<int64_t>(*result->input_tokens, 0)));
  if (result->output_tokens) model_tokens_->WithLabels({route, "output"}).Inc(static_cast<uint64_t>(std::max<int64_t>(*result->output_tokens, 0)));
}

AgentManager::~AgentManager() { Stop(); }

void AgentManager::Start() {
  last_renewed_ok_ms_ = MonoMillis(clock_);
  // A message another host accepted for a session live here: take it now
  // rather than at the next sweep.
  inbox_notices_ = db_.Subscribe("inbox", [this](std::string_view session_id) {
    if (auto agent = Find(std::string(session_id))) ReloadPending(agent);
  });
  {
    // The first sweep is posted, not timed: Stop() waits for it as for an
    // armed timer, so that it never runs on a destroyed manager.
    std::lock_guard lock(mu_);
    timer_armed_ = true;
  }
  boost::asio::post(ioc_, [this] { Sweep(); });
}

void AgentManager::Stop() {
  inbox_notices_.reset();
  std::vector<std::shared_ptr<Agent>> agents;
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    if (timer_armed_) sweep_timer_.cancel();
    for (auto& [id, slot] : live_) {
      if (slot.agent) agents.push_back(slot.agent);
    }
  }
  StopAgents(std::move(agents), /*only_if_idle=*/false);
  {
    std::unique_lock lock(mu_);
    settled_cv_.wait(lock, [&] { return live_.empty() && !sweeping_ && !timer_armed_ && stopping_observed_ == 0; });
  }
  Status st = db_.WriteSync([this](store::Tx& tx) {
    return tx.Exec("DELETE FROM session_leases WHERE holder = ?", {std::string_view(holder_)}).status();
  });
  if (!st.ok() && st.code() != codes::kShuttingDown) spdlog::warn("could not release session leases: {}", st.ToString());
}

std::shared_ptr<Agent> AgentManager::Find(const std::string& session_id) const {
  std::lock_guard lock(mu_);
  auto it = live_.find(session_id);
  return it == live_.end() ? nullptr : it->second.agent;
}

std::optional<AgentStatus> AgentManager::LiveStatus(const std::string& session_id) const {
  auto agent = Find(session_id);
  if (!agent) return std::nullopt;
  return agent->status();
}

std::vector<std::pair<std::string, AgentStatus>> AgentManager::LiveSessions() const {
  std::vector<std::pair<std::string, AgentStatus>> out;
  std::lock_guard lock(mu_);
  for (const auto& [id, slot] : live_) {
    if (slot.agent) out.emplace_back(id, slot.agent->status());
  }
  return out;
}

void AgentManager::GetStatus(const std::string& session_id, std::function<void(AgentStatus)> done) {
  if (auto live = LiveStatus(session_id)) return done(*live);
  sessions_.GetAsync(session_id, [done = std::move(done)](Result<session::SessionHeader> h) {
    done(h.ok() ? AgentStatus::kCold : AgentStatus::kMissing);
  });
}

void AgentManager::Resume(const std::string& session_id, std::function<void(Status)> done) {
  ResumeWith(session_id, {}, std::move(done));
}

void AgentManager::ResumeWith(const std::string& session_id, std::vector<InboxMessage> extra,
                              std::function<void(Status)> done, std::optional<session::ModelRoute> route) {
  {
    // `done` never runs under mu_: it may ask the manager (LiveStatus).
    std::unique_lock lock(mu_);
    if (stopped_) {
      lock.unlock();
      return done(Status(codes::kShuttingDown, "the host is stopping"));
    }
    auto [it, fresh] = live_.try_emplace(session_id);
    Slot& slot = it->second;
    if (slot.agent) {
      if (!extra.empty()) slot.agent->Enqueue(std::move(extra));
      lock.unlock();
      return done(Status::Ok());
    }
    for (auto& m : extra) slot.early.push_back(std::move(m));
    slot.waiters.push_back(std::move(done));
    if (route && !slot.route) slot.route = std::move(route);
    if (!fresh) return;  // a resume is already under way; it reads slot.route once the lease is held
  }
  // Lease first, then the log and the pending messages, then go live. The
  // time is read when the job runs, not when it was queued: a takeover that
  // waited for a frozen holder's open write (seconds) would otherwise make a
  // lease that has already run out, and the woken holder would take it back.
  auto acquired = std::make_shared<bool>(false);
  db_.Write(
      [this, session_id, acquired](store::Tx& tx) -> Status {
        const int64_t now = ToUnixMillis(clock_.Now());
        const int64_t expires = now + options_.lease_ttl.count();
        bool exists = false;
        DSH_RETURN_IF_ERROR(tx.Query("SELECT 1 FROM sessions WHERE id = ?", {std::string_view(session_id)},
                                     [&](const store::Row&) {
                                       exists = true;
                                       return Status::Ok();
                                     }));
        if (!exists) return Status(codes::kNotFound, "no session " + session_id);
        DSH_ASSIGN_OR_RETURN(*acquired, agent_store::AcquireLease(tx, session_id, holder_, now, expires));
        return Status::Ok();
      },
      [this, session_id, acquired](Status st) {
        if (st.ok() && !*acquired) st = Status("session_busy", "session " + session_id + " is live in another host");
        if (!st.ok()) return FinishResume(session_id, st);
        sessions_.GetAsync(session_id, [this, session_id](Result<session::SessionHeader> header) {
          if (!header.ok()) return FinishResume(session_id, header.status());
          // A delivery that raced a sweep's resume has set it by now: its
          // callback ran on the writer thread before this lease commit's.
          {
            std::lock_guard lock(mu_);
            auto it = live_.find(session_id);
            if (it != live_.end() && it->second.route) header->route = *it->second.route;
          }
          sessions_.ReadEventsAsync(
              session_id, 0, std::numeric_limits<int64_t>::max(),
              [this, session_id, header = *header](Result<std::vector<session::Event>> events) {
                if (!events.ok()) return FinishResume(session_id, events.status());
                auto pending = std::make_shared<std::vector<InboxMessage>>();
                db_.Read(
                    [session_id, pending](store::Tx& tx) -> Status {
                      DSH_ASSIGN_OR_RETURN(*pending, agent_store::Pending(tx, session_id));
                      return Status::Ok();
                    },
                    [this, session_id, header, events = std::move(events).value(), pending](Status st) mutable {
                      if (!st.ok()) return FinishResume(session_id, st);
                      Activate(std::move(header), std::move(events), std::move(*pending));
                    });
              });
        });
      },
      store::JobIsolation::kSavepoint, store::JobRerun::kAlsoAfterSuccess);
}

void AgentManager::Activate(session::SessionHeader header, std::vector<session::Event> events,
                            std::vector<InboxMessage> pending) {
  std::string id = header.id;
  std::optional<session::SessionHeader> observed;  // the agent's own copy is strand state
  if (!observers_.empty()) observed = header;
  auto agent = std::make_shared<Agent>(*this, std::move(header), std::move(events));
  for (const InboxMessage& m : pending) agent->NoteLoaded(m.num);  // a full read, before `early` joins it
  std::vector<std::function<void(Status)>> waiters;
  bool live = false;
  {
    std::lock_guard lock(mu_);
    auto it = live_.find(id);
    if (it == live_.end()) return;  // cannot happen: the slot stays until the resume finished
    waiters = std::move(it->second.waiters);
    if (stopped_) {
      live_.erase(it);
      settled_cv_.notify_all();
    } else {
      live = true;
      it->second.agent = agent;
      for (auto& m : it->second.early) pending.push_back(std::move(m));
      it->second.early.clear();
    }
  }
  Status st = Status::Ok();
  if (live) {
    agent->Start(std::move(pending));
    for (const AgentObserver& o : observers_) {
      if (o.live) o.live(*observed);
    }
    if (session::EventHub* hub = sessions_.hub()) hub->PublishChange({"session", id});
  } else {
    st = Status(codes::kShuttingDown, "the host is stopping");
  }
  for (auto& w : waiters) w(st);
}

void AgentManager::FinishResume(const std::string& session_id, const Status& status) {
  std::vector<std::function<void(Status)>> waiters;
  {
    std::lock_guard lock(mu_);
    auto it = live_.find(session_id);
    if (it == live_.end()) return;
    waiters = std::move(it->second.waiters);
    live_.erase(it);
    settled_cv_.notify_all();
  }
  for (auto& w : waiters) w(status);
}

void AgentManager::Create(session::NewSession session, std::function<void(Result<session::SessionHeader>)> done) {
  sessions_.CreateAsync(std::move(session), [this, done = std::move(done)](Result<session::SessionHeader> h) {
    if (!h.ok()) return done(h.status());
    ResumeWith(h->id, {}, [done, header = *h](Status st) {
      if (!st.ok()) return done(st);
      done(header);
    });
  });
}

void AgentManager::CreateWith(session::NewSession session, Delivery first, std::function<void(Result<Created>)> done) {
  if (IsBlank(first.text)) return done(InvalidArguments("the first message must not be empty"));
  if (!first.meta.is_object()) return done(InvalidArguments("delivery meta must be a JSON object"));
  {
    std::lock_guard lock(mu_);
    if (stopped_) return done(Status(codes::kShuttingDown, "the host is stopping"));
  }
  if (!session.id) session.id = NewId("ses_", clock_);
  auto msg = std::make_shared<InboxMessage>();
  msg->message_id = NewId("msg_", clock_);
  msg->session_id = *session.id;
  msg->mode = first.mode;
  msg->wakeup = true;
  msg->text = std::move(first.text);
  msg->meta = std::move(first.meta);
  msg->created_at = ToUnixMillis(clock_.Now());
  if (options_.record_activity) msg->activity = std::move(first.activity);
  sessions_.CreateWithAsync(
      std::move(session),
      [this, msg, key = std::move(first.key)](store::Tx& tx, const session::SessionHeader&) {
        return agent_store::Insert(tx, *msg, key, std::nullopt, &webhooks_).status();
      },
      [this, msg, done = std::move(done)](Result<session::SessionHeader> h) {
        if (!h.ok()) return done(h.status());
        if (msg->activity) NoteActivity(msg->session_id);
        // Going live reads the pending first message and starts its turn.
        ResumeWith(h->id, {}, [done, created = Created{*h, msg->message_id}](Status st) {
          if (!st.ok()) {
            spdlog::warn("session {}: created, but it could not go live yet (its first message stays pending): {}",
                         created.header.id, st.ToString());
          }
          done(created);
        });
      });
}

void AgentManager::Deliver(Delivery d, std::function<void(Result<Delivered>)> done) {
  if (IsBlank(d.text)) return done(InvalidArguments("`message` must not be empty"));
  if (!d.meta.is_object()) return done(InvalidArguments("delivery meta must be a JSON object"));
  {
    std::lock_guard lock(mu_);
    if (stopped_) return done(Status(codes::kShuttingDown, "the host is stopping"));
  }
  auto msg = std::make_shared<InboxMessage>();
  msg->message_id = NewId("msg_", clock_);
  msg->session_id = std::move(d.session_id);
  msg->mode = d.mode;
  msg->wakeup = d.wakeup;
  msg->text = std::move(d.text);
  msg->meta = std::move(d.meta);
  msg->created_at = ToUnixMillis(clock_.Now());
  if (options_.record_activity) msg->activity = std::move(d.activity);
  // A live agent here may take the message straight into a new turn, in the
  // same transaction that accepts it; otherwise it goes to the inbox alone.
  if (auto agent = Find(msg->session_id)) return agent->Deliver(std::move(*msg), std::move(d.key), std::move(done));
  Accept(std::move(*msg), std::move(d.key), std::move(done), std::move(d.resume_route));
}

void AgentManager::Accept(InboxMessage message, std::optional<std::string> key,
                          std::function<void(Result<Delivered>)> done, std::optional<session::ModelRoute> resume_route) {
  auto msg = std::make_shared<InboxMessage>(std::move(message));
  auto inserted = std::make_shared<agent_store::Inserted>();
  db_.Write(
      [this, msg, key = std::move(key), inserted](store::Tx& tx) -> Status {
        DSH_ASSIGN_OR_RETURN(*inserted, agent_store::Insert(tx, *msg, key, std::nullopt, &webhooks_));
        // The session may be live on another host (docs/STORAGE.md, "Notices").
        if (!inserted->duplicate) return tx.Notify("inbox", msg->session_id);
        return Status::Ok();
      },
      [this, msg, inserted, done = std::move(done), resume_route = std::move(resume_route)](Status st) {
        if (!st.ok()) return done(st);
        if (!inserted->duplicate && msg->activity) NoteActivity(msg->session_id);
        if (!inserted->duplicate) Route(*msg, resume_route);
        done(Delivered{inserted->message_id, inserted->duplicate});
      },
      store::JobIsolation::kSavepoint, store::JobRerun::kAlsoAfterSuccess);
}

void AgentManager::NoteActivity(const std::string& session_id) const {
  if (session::EventHub* hub = sessions_.hub()) hub->PublishChange({"activity", session_id});
}

void AgentManager::Route(const InboxMessage& msg, std::optional<session::ModelRoute> resume_route) {
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    auto it = live_.find(msg.session_id);
    if (it != live_.end()) {
      if (it->second.agent) {
        it->second.agent->Enqueue({msg});
      } else {
        it->second.early.push_back(msg);
        // A resume (an inbox sweep's) is under way: it runs with this route.
        if (resume_route && !it->second.route) it->second.route = std::move(resume_route);
      }
      return;
    }
  }
  // Else it waits in the inbox for the next turn.
  if (msg.wakeup) ResumeForPending(msg.session_id, std::move(resume_route));
}

void AgentManager::ResumeForPending(const std::string& session_id, std::optional<session::ModelRoute> route) {
  // Resuming reads the session's pending messages.
  ResumeWith(session_id, {}, [session_id](Status st) {
    if (!st.ok() && st.code() != "session_busy" && st.code() != codes::kShuttingDown) {
      spdlog::warn("session {}: could not resume it for a delivered message (the next sweep retries): {}", session_id,
                   st.ToString());
    }
  }, std::move(route));
}

void AgentManager::RunMaintenance(const std::string& session_id, MaintenanceTask task, std::function<void(Status)> done) {
  auto agent = Find(session_id);
  if (!agent) return done(Status("not_live", "session " + session_id + " is not live in this host"));
  agent->RunMaintenance(std::move(task), std::move(done));
}

void AgentManager::WhenIdle(const std::string& session_id, std::function<void(Status)> done) {
  auto agent = Find(session_id);
  if (!agent) return done(Status("not_live", "session " + session_id + " is not live in this host"));
  agent->WhenIdle(std::move(done));
}

bool AgentManager::AwaitingApproval(const std::string& session_id) const {
  auto agent = Find(session_id);
  return agent && agent->waiting_for_approval();
}

void AgentManager::Cancel(const std::string& session_id) {
  if (auto agent = Find(session_id)) agent->Cancel();
}

void AgentManager::AnswerApproval(const std::string& session_id, const std::string& call_id,
                                  const std::string& decision, std::function<void(Status)> done) {
  if (decision != "allow_once" && decision != "allow_session" && decision != "deny") {
    return done(InvalidArguments("decision must be \"allow_once\", \"allow_session\" or \"deny\""));
  }
  auto agent = Find(session_id);
  if (!agent) return done(Status("not_live", "session " + session_id + " is not live in this host"));
  agent->AnswerApproval(call_id, decision, std::move(done));
}

void AgentManager::AgentStopped(const std::string& session_id, Agent* agent) {
  bool release = false;
  {
    std::lock_guard lock(mu_);
    auto it = live_.find(session_id);
    release = it != live_.end() && it->second.agent.get() == agent && !stopped_;  // Stop() releases all at once
  }
  // Queued before the agent leaves the map, so a resume that sees it gone
  // (here or in a test) takes the lease only after it was released.
  if (release) {
    db_.Write([this, session_id](store::Tx& tx) { return agent_store::ReleaseLease(tx, session_id, holder_); },
              [session_id](Status st) {
                if (!st.ok() && st.code() != codes::kShuttingDown) {
                  spdlog::warn("session {}: could not release its lease (it expires by itself): {}", session_id,
                               st.ToString());
                }
              },
              store::JobIsolation::kSavepoint, store::JobRerun::kAlsoAfterSuccess);
  }
  bool was_live = false;
  {
    std::lock_guard lock(mu_);
    auto it = live_.find(session_id);
    if (it != live_.end() && it->second.agent.get() == agent) {
      live_.erase(it);
      was_live = true;
      ++stopping_observed_;
    }
    settled_cv_.notify_all();
  }
  if (!was_live) return;
  for (const AgentObserver& o : observers_) {
    if (o.stopped) o.stopped(session_id);
  }
  if (session::EventHub* hub = sessions_.hub()) hub->PublishChange({"session", session_id});
  std::lock_guard lock(mu_);
  --stopping_observed_;
  settled_cv_.notify_all();
}

void AgentManager::StopAgents(std::vector<std::shared_ptr<Agent>> agents, bool only_if_idle) {
  for (auto& a : agents) a->Stop(only_if_idle, [](bool) {});
}

bool AgentManager::WaitUntilNotLive(const std::string& session_id, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return settled_cv_.wait_for(lock, timeout, [&] { return live_.count(session_id) == 0 && stopping_observed_ == 0; });
}

void AgentManager::EvictIdleForTesting() {
  std::vector<std::shared_ptr<Agent>> idle;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, slot] : live_) {
      if (slot.agent && slot.agent->status() == AgentStatus::kIdle) idle.push_back(slot.agent);
    }
  }
  std::vector<std::shared_ptr<Agent>> stopping;
  std::mutex stopping_mu;
  std::promise<void> answered;
  auto remaining = std::make_shared<std::atomic<size_t>>(idle.size());
  if (idle.empty()) return;
  for (auto& a : idle) {
    a->Stop(true, [&, a, remaining](bool is_stopping) {
      if (is_stopping) {
        std::lock_guard lock(stopping_mu);
        stopping.push_back(a);
      }
      if (remaining->fetch_sub(1) == 1) answered.set_value();
    });
  }
  answered.get_future().wait();
  std::unique_lock lock(mu_);
  settled_cv_.wait(lock, [&] {
    return std::none_of(stopping.begin(), stopping.end(), [&](const std::shared_ptr<Agent>& a) {
      auto it = live_.find(a->session_id());
      return it != live_.end() && it->second.agent == a;
    });
  });
}

// Once per sweep_interval: evict agents idle for too long, renew leases (and
// stop agents whose lease was lost), and pick up pending messages this host
// does not know about (delivered through another host, or left by a crash).
void AgentManager::Sweep() {
  std::vector<std::shared_ptr<Agent>> idle;
  {
    std::lock_guard lock(mu_);
    timer_armed_ = false;
    if (stopped_) {
      settled_cv_.notify_all();
      return;
    }
    sweeping_ = true;
    int64_t mono = MonoMillis(clock_);
    for (auto& [id, slot] : live_) {
      if (!slot.agent || slot.agent->status() != AgentStatus::kIdle) continue;
      int64_t since = slot.agent->idle_since_ms();
      if (since > 0 && mono - since >= options_.idle_eviction.count()) idle.push_back(slot.agent);
    }
  }
  // A session with a pending reminder stays live (docs/REMINDERS.md).
  std::erase_if(idle, [this](const std::shared_ptr<Agent>& a) {
    return std::any_of(observers_.begin(), observers_.end(), [&](const AgentObserver& o) {
      return o.keep_live && o.keep_live(a->session_id());
    });
  });
  StopAgents(std::move(idle), /*only_if_idle=*/true);
  int64_t mono = MonoMillis(clock_);
  bool renew = !renewed_once_ || mono - last_renewal_ms_ >= options_.lease_ttl.count() / 3;
  if (!renew) return PollInbox();
  renewed_once_ = true;
  last_renewal_ms_ = mono;
  auto lost = std::make_shared<std::vector<std::shared_ptr<Agent>>>();
  db_.Write(
      [this, lost](store::Tx& tx) -> Status {
        // From when it runs, however long it was queued (as AcquireLease).
        const int64_t expires = ToUnixMillis(clock_.Now()) + options_.lease_ttl.count();
        DSH_ASSIGN_OR_RETURN(auto held, agent_store::RenewLeases(tx, holder_, expires));
        std::set<std::string> held_set(held.begin(), held.end());
        std::vector<std::shared_ptr<Agent>> gone;
        std::lock_guard lock(mu_);
        for (auto& [id, slot] : live_) {
          if (slot.agent && !held_set.count(id)) gone.push_back(slot.agent);
        }
        *lost = std::move(gone);  // by assignment: the job may run again (store::JobRerun)
        return Status::Ok();
      },
      [this, lost, renewed_at = mono](Status st) {
        if (!st.ok()) {
          spdlog::warn("could not renew session leases: {}", st.ToString());
          // Past the lease time another host may own them: stop them all.
          if (MonoMillis(clock_) - last_renewed_ok_ms_ >= options_.lease_ttl.count()) {
            std::vector<std::shared_ptr<Agent>> all;
            {
              std::lock_guard lock(mu_);
              for (auto& [id, slot] : live_) {
                if (slot.agent) all.push_back(slot.agent);
              }
            }
            if (!all.empty()) spdlog::error("session leases expired without renewal; stopping {} agents", all.size());
            StopAgents(std::move(all), /*only_if_idle=*/false);
          }
        } else {
          last_renewed_ok_ms_ = renewed_at;
          for (auto& a : *lost) a->LoseLease();
        }
        PollInbox();
      },
      store::JobIsolation::kSavepoint, store::JobRerun::kAlsoAfterSuccess);
}

void AgentManager::PollInbox() {
  int64_t now = ToUnixMillis(clock_.Now());
  auto found = std::make_shared<std::vector<agent_store::PendingSession>>();
  db_.Read(
      [this, now, found](store::Tx& tx) -> Status {
        DSH_ASSIGN_OR_RETURN(*found, agent_store::PendingSessions(tx, holder_, now));
        return Status::Ok();
      },
      [this, found](Status st) {
        if (!st.ok() && st.code() != codes::kShuttingDown) spdlog::warn("inbox sweep failed: {}", st.ToString());
        for (const auto& p : *found) {
          auto agent = Find(p.session_id);
          if (agent && p.newest_num <= agent->loaded_num()) continue;
          if (agent) {
            ReloadPending(agent);
          } else {
            ResumeForPending(p.session_id);
          }
        }
        std::lock_guard lock(mu_);
        sweeping_ = false;
        settled_cv_.notify_all();
        if (stopped_) return;
        timer_armed_ = true;
        sweep_timer_.expires_after(options_.sweep_interval);
        sweep_timer_.async_wait([this](const boost::system::error_code& ec) {
          if (ec) {
            std::lock_guard lock(mu_);
            timer_armed_ = false;
            settled_cv_.notify_all();
            return;
          }
          Sweep();
        });
      });
}

void AgentManager::ReloadPending(std::shared_ptr<Agent> agent) {
  auto pending = std::make_shared<std::vector<InboxMessage>>();
  std::string id = agent->session_id();
  db_.Read(
      [id, pending](store::Tx& tx) -> Status {
        DSH_ASSIGN_OR_RETURN(*pending, agent_store::Pending(tx, id));
        return Status::Ok();
      },
      [agent, pending](Status st) {
        if (!st.ok()) return;
        for (const InboxMessage& m : *pending) agent->NoteLoaded(m.num);
        agent->Enqueue(std::move(*pending));
      });
}

}  // namespace dsh::agent
