#include "agent/agent.h"

#include <boost/asio/post.hpp>
#include <spdlog/spdlog.h>

#include "base/strings.h"
#include "session/titles.h"

namespace dsh::agent {
namespace {

namespace et = session::event_types;
using session::Event;
using session::EventDraft;

EventDraft Draft(std::string_view type, Json data) { return EventDraft{std::string(type), std::move(data)}; }

Json ErrorJson(const Status& st) { return Json{{"code", st.code()}, {"message", st.message()}}; }

bool IsBlankText(const Json& data) {
  auto text = data.find("text");
  return text == data.end() || !text->is_string() || text->get_ref<const std::string&>().find_first_not_of(" \t\r\n") == std::string::npos;
}

EventDraft ToolResultDraft(const ModelToolCall& call, const Result<Json>& r) {
  Json data = {{"call_id", call.id}, {"name", call.name}};
  if (r.ok()) {
    data["result"] = *r;
  } else {
    data["error"] = ErrorJson(r.status());
  }
  return Draft(et::kToolResult, std::move(data));
}

// The newest turn/start without a turn/end after it, as an index into
// `events`; npos when every turn ended.
size_t UnfinishedTurn(const std::vector<Event>& events) {
  for (size_t i = events.size(); i-- > 0;) {
    if (events[i].type == event_types::kTurnEnd) return std::string::npos;
    if (events[i].type == event_types::kTurnStart) return i;
  }
  return std::string::npos;
}

// Never 0, which idle_since_ms() reserves for "busy".
int64_t MonoMillis(const Clock& clock) {
  return std::max<int64_t>(
      1, std::chrono::duration_cast<std::chrono::milliseconds>(clock.MonotonicNow().time_since_epoch()).count());
}

std::string CleanTitle(std::string title) {
  auto trim = [](std::string& s) {
    const char* ws = " \t\r\n\"'`*#";
    s.erase(0, s.find_first_not_of(ws));
    auto last = s.find_last_not_of(ws);
    s.erase(last == std::string::npos ? 0 : last + 1);
  };
  trim(title);
  if (auto nl = title.find('\n'); nl != std::string::npos) title.resize(nl);
  trim(title);
  return session::FallbackTitle(title);  // the same length cap and whitespace rules
}

// `approval.requested` for each request among `stored`, in their transaction.
Status SendApprovalRequests(store::Tx& tx, outbox::SubscriptionSource& webhooks, const std::string& session_id,
                            const std::vector<Event>& stored, int64_t now) {
  auto subs = webhooks.Get();
  if (!subs || !subs->Wants("approval.requested")) return Status::Ok();
  for (const Event& e : stored) {
    if (e.type != event_types::kApprovalRequested) continue;
    std::string call_id = e.data.value("call_id", "");
    Json data = {{"session_id", session_id}, {"seq", e.seq},     {"call_id", call_id},
                 {"tool", e.data.value("name", "")}, {"summary", e.data.value("summary", "")}};
    outbox::Fact fact{"approval:" + session_id + ":" + call_id, "", std::nullopt, session_id};
    DSH_RETURN_IF_ERROR(outbox::Enqueue(tx, *subs, "approval.requested", fact, data, now));
  }
  return Status::Ok();
}

}  // namespace

Agent::Agent(AgentManager& manager, session::SessionHeader header, std::vector<Event> events)
    : manager_(manager),
      strand_(boost::asio::make_strand(manager.ioc_)),
      header_(std::move(header)),
      preset_(manager.environment_.preset ? manager.environment_.preset(header_.preset) : PresetView{}),
      events_(std::move(events)) {
  idle_since_ms_ = MonoMillis(manager_.clock_);
  for (const auto& e : events_) {
    if (e.type == event_types::kApproval && e.data.value("decision", "") == "allow_session") {
      granted_.insert(e.data.value("name", ""));
    }
  }
}

template <typename Arg, typename Fn>
std::function<void(Arg)> Agent::OnStrand(Fn fn) {
  ++outstanding_;
  auto self = shared_from_this();
  return [self, fn = std::move(fn)](Arg arg) mutable {
    boost::asio::post(self->strand_, [self, fn = std::move(fn), arg = std::move(arg)]() mutable {
      --self->outstanding_;
      if (self->Halted()) return;
      fn(std::move(arg));
    });
  };
}

bool Agent::Halted() {
  if (!stopping_) return false;
  if (outstanding_ == 0 && !stopped_) {
    stopped_ = true;
    for (auto& w : idle_waiters_) w(Status(codes::kShuttingDown, "the agent of " + header_.id + " stopped"));
    idle_waiters_.clear();
    manager_.AgentStopped(header_.id, this);
  }
  return true;
}

void Agent::Start(std::vector<InboxMessage> pending) {
  boost::asio::post(strand_, [self = shared_from_this(), pending = std::move(pending)]() mutable {
    size_t turn = UnfinishedTurn(self->events_);
    std::set<std::string> in_log;
    if (turn != std::string::npos) {
      for (size_t i = turn; i < self->events_.size(); ++i) {
        const auto& e = self->events_[i];
        if (e.type != et::kUserMessage) continue;
        if (auto it = e.data.find("message_id"); it != e.data.end() && it->is_string()) in_log.insert(it->get<std::string>());
      }
    }
    std::vector<InboxMessage> rest;
    for (auto& m : pending) {
      if (in_log.count(m.message_id)) {
        if (self->known_.insert(m.message_id).second) self->taken_.push_back({m.num, m.message_id});
      } else {
        rest.push_back(std::move(m));
      }
    }
    // Messages enqueued before Start ran may include the cut turn's own.
    for (auto it = self->pending_.begin(); it != self->pending_.end();) {
      if (in_log.count(it->message_id)) {
        self->taken_.push_back({it->num, it->message_id});
        it = self->pending_.erase(it);
      } else {
        ++it;
      }
    }
    self->started_ = true;
    if (turn != std::string::npos) self->ContinueInterruptedTurn();  // running_ from here: nothing else starts a turn
    self->Enqueue(std::move(rest));
    self->MaybeStartTurn();
  });
}

void Agent::Enqueue(std::vector<InboxMessage> messages) {
  boost::asio::post(strand_, [self = shared_from_this(), messages = std::move(messages)]() mutable {
    bool added = false;
    for (auto& m : messages) {
      if (!self->known_.insert(m.message_id).second) continue;
      auto at = std::upper_bound(self->pending_.begin(), self->pending_.end(), m.num,
                                 [](int64_t num, const InboxMessage& p) { return num < p.num; });
      self->pending_.insert(at, std::move(m));
      added = true;
    }
    if (added) self->MaybeStartTurn();
  });
}

void Agent::RunMaintenance(AgentManager::MaintenanceTask task, std::function<void(Status)> done) {
  boost::asio::post(strand_, [self = shared_from_this(), task = std::move(task), done = std::move(done)]() mutable {
    if (self->stopping_) return done(Status("not_live", "the agent of " + self->header_.id + " is stopping"));
    if (self->running_ || self->maintenance_) {
      return done(Status("agent_busy", "session " + self->header_.id + " is running a turn"));
    }
    self->maintenance_ = true;
    self->running_flag_ = false;
    auto finished = [self, done = std::move(done), once = std::make_shared<std::atomic<bool>>(false)]() {
      if (once->exchange(true)) return;
      boost::asio::post(self->strand_, [self, done] {
        self->maintenance_ = false;
        done(Status::Ok());
        self->MaybeStartTurn();
      });
    };
    task(std::move(finished));
  });
}

void Agent::WhenIdle(std::function<void(Status)> done) {
  boost::asio::post(strand_, [self = shared_from_this(), done = std::move(done)]() mutable {
    if (self->stopping_) return done(Status("not_live", "the agent of " + self->header_.id + " is stopping"));
    if (!self->running_ && !self->maintenance_) return done(Status::Ok());
    self->idle_waiters_.push_back(std::move(done));
  });
}

void Agent::Cancel() {
  boost::asio::post(strand_, [self = shared_from_this()] {
    if (self->cancel_) self->cancel_->Cancel();
  });
}

void Agent::Stop(bool only_if_idle, std::function<void(bool)> done) {
  boost::asio::post(strand_, [self = shared_from_this(), only_if_idle, done = std::move(done)] {
    if (self->stopping_) return done(false);
    if (only_if_idle && (self->running_ || self->maintenance_ || !self->pending_.empty() || self->outstanding_ > 0)) {
      return done(false);
    }
    self->StopNow();
    done(true);
    self->Halted();  // reports the stop once nothing is outstanding
  });
}

void Agent::StopNow() {
  stopping_ = true;
  if (early_answer_) {
    early_answer_->done(Status(codes::kShuttingDown, "the agent of " + header_.id + " stopped"));
    early_answer_.reset();
  }
  if (cancel_) cancel_->Cancel();
  if (title_cancel_) title_cancel_->Cancel();  // a stop never waits for a title
}

session::SessionStore::FenceFn Agent::LeaseFence() const {
  return [id = header_.id, holder = manager_.holder_](store::Tx& tx) {
    return agent_store::CheckLease(tx, id, holder);
  };
}

void Agent::LoseLease() {
  boost::asio::post(strand_, [self = shared_from_this()] { self->LeaseLost(); });
}

void Agent::LeaseLost() {
  if (stopping_) return;
  spdlog::warn("session {}: lease lost to another host; stopping its agent", header_.id);
  StopNow();
  Halted();
}

void Agent::LogFailedWrite(std::string_view what, const Status& status) const {
  // A lost lease was said once, by LeaseLost: the agent stops, and the
  // session's new owner carries the turn on.
  if (status.code() == agent_store::kLeaseLost) return;
  spdlog::error("session {}: could not {}: {}", header_.id, what, status.ToString());
}

void Agent::MaybeStartTurn() {
  if (!started_ || running_ || maintenance_ || stopping_) return;
  bool wake = false;
  for (const auto& m : pending_) wake = wake || m.wakeup;
  if (!wake) return;
  // The oldest message opens the turn; steers waiting with it join its first step.
  std::vector<InboxMessage> taken = {std::move(pending_.front())};
  pending_.pop_front();
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->mode == DeliveryMode::kSteer) {
      taken.push_back(std::move(*it));
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
  auto drafts = TurnStartDrafts(taken);
  BeginTurn(std::move(taken), std::move(drafts));
}

std::vector<EventDraft> Agent::TurnStartDrafts(const std::vector<InboxMessage>& taken) const {
  std::vector<EventDraft> drafts = {Draft(event_types::kTurnStart, Json::object())};
  bool first_prompt = std::none_of(events_.begin(), events_.end(), [](const Event& e) { return e.type == et::kUserMessage; });
  for (const auto& m : taken) drafts.push_back(UserDraft(m));
  if (first_prompt) {
    std::string title = session::FallbackTitle(taken.front().text);
    if (!title.empty()) drafts.push_back(Draft(et::kTitleFallback, {{"title", title}}));
  }
  return drafts;
}

void Agent::Deliver(InboxMessage message, std::optional<std::string> key, std::function<void(Result<Delivered>)> done) {
  boost::asio::post(strand_, [self = shared_from_this(), message = std::move(message), key = std::move(key),
                              done = std::move(done)]() mutable {
    if (!self->started_ || self->stopping_ || self->running_ || self->maintenance_ || !self->pending_.empty() ||
        !message.wakeup) {
      return self->manager_.Accept(std::move(message), std::move(key), std::move(done));
    }
    self->running_ = true;
    self->running_flag_ = true;
    self->idle_since_ms_ = 0;
    self->steps_ = 0;
    self->turn_started_ = self->manager_.clock_.MonotonicNow();
    auto msg = std::make_shared<InboxMessage>(std::move(message));
    // Known before it commits: a sweep that reads it back from the inbox
    // before our continuation runs must not queue it a second time.
    self->known_.insert(msg->message_id);
    auto first_id = std::make_shared<std::string>();
    // A used key rolls the whole job back (the turn never started) and
    // answers with the first message's id.
    auto activity_rows = std::make_shared<int64_t>(0);
    session::SessionStore::AlsoFn insert = [msg, key, first_id, activity_rows,
                                            webhooks = &self->manager_.webhooks_](
                                               store::Tx& tx, const Events& stored) -> Status {
      // Its user event is among `stored`: the activity item starts running.
      std::optional<activity::Started> started;
      for (const auto& e : stored) {
        if (e.type == et::kUserMessage) started = activity::Started{e.seq, e.at};
      }
      DSH_ASSIGN_OR_RETURN(auto inserted, agent_store::Insert(tx, *msg, key, started, webhooks));
      if (inserted.duplicate) {
        *first_id = inserted.message_id;
        return Status("duplicate_key", "the key was used before");
      }
      if (msg->activity) *activity_rows = 1;
      return Status::Ok();
    };
    // The caller gets its answer from the commit itself, even if this agent
    // stops before its own continuation runs.
    auto on_strand = self->OnStrand<Result<Events>>([self, msg, activity_rows](Result<Events> r) {
      if (r.ok()) {
        self->NoteActivity(*activity_rows);
        self->events_.insert(self->events_.end(), r->begin(), r->end());
        self->taken_.push_back({msg->num, msg->message_id});
        return self->Step();
      }
      self->running_ = false;
      self->running_flag_ = false;
      if (r.status().code() == agent_store::kLeaseLost) return self->LeaseLost();
      self->BecomeIdle();
    });
    self->manager_.sessions_.AppendWithAsync(
        self->header_.id, self->TurnStartDrafts({*msg}), std::move(insert),
        [self, msg, key = std::move(key), first_id, done = std::move(done), on_strand = std::move(on_strand)](
            Result<Events> r) mutable {
          if (r.ok()) {
            done(Delivered{msg->message_id, false});
          } else if (r.status().code() == "duplicate_key") {
            done(Delivered{*first_id, true});
          } else if (r.status().code() == agent_store::kLeaseLost) {
            // Nothing was written: the message waits in the inbox for the
            // session's new holder, as if it had come through another host.
            self->manager_.Accept(*msg, std::move(key), std::move(done));
          } else {
            done(r.status());
          }
          on_strand(std::move(r));
        },
        self->LeaseFence());
  });
}

void Agent::BeginTurn(std::vector<InboxMessage> taken, std::vector<EventDraft> drafts) {
  running_ = true;
  running_flag_ = true;
  idle_since_ms_ = 0;
  steps_ = 0;
  turn_refusal_.reset();
  turn_started_ = manager_.clock_.MonotonicNow();
  for (const auto& m : taken) taken_.push_back({m.num, m.message_id});
  Append(std::move(drafts), {}, [this, taken = std::move(taken)](Result<Events> r) mutable {
    if (!r.ok()) {
      LogFailedWrite("start a turn", r.status());
      // The messages are still pending in the inbox; a later wakeup retries them.
      taken_.clear();
      for (auto it = taken.rbegin(); it != taken.rend(); ++it) pending_.push_front(std::move(*it));
      running_ = false;
      running_flag_ = false;
      return BecomeIdle();
    }
    Step();
  });
}

void Agent::ContinueInterruptedTurn() {
  if (running_ || stopping_) return;
  running_ = true;
  running_flag_ = true;
  idle_since_ms_ = 0;
  steps_ = 0;
  turn_refusal_.reset();
  turn_started_ = manager_.clock_.MonotonicNow();
  // Tool calls the interruption left without a result get one; they are not
  // run again, since they may have had effects.
  size_t turn = UnfinishedTurn(events_);
  std::map<std::string, std::string> open_calls;
  for (size_t i = turn; i < events_.size(); ++i) {
    const auto& e = events_[i];
    std::string call_id = e.data.value("call_id", "");
    if (e.type == et::kToolCall) open_calls[call_id] = e.data.value("name", "");
    if (e.type == et::kToolResult) open_calls.erase(call_id);
  }
  std::vector<EventDraft> drafts;
  for (const auto& [id, name] : open_calls) {
    drafts.push_back(ToolResultDraft(ModelToolCall{id, name, ""},
                                     Status("interrupted", "the host stopped before this tool call finished; it was not run again")));
  }
  spdlog::info("session {}: continuing a turn a stop interrupted", header_.id);
  if (drafts.empty()) return Step();
  Append(std::move(drafts), {}, [this](Result<Events> r) {
    if (!r.ok()) return EndTurn(r.status());
    Step();
  });
}

std::vector<EventDraft> Agent::TakeSteers() {
  std::vector<EventDraft> drafts;
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->mode == DeliveryMode::kSteer) {
      drafts.push_back(UserDraft(*it));
      taken_.push_back({it->num, it->message_id});
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
  return drafts;
}

EventDraft Agent::UserDraft(const InboxMessage& m) {
  Json data = {{"text", m.text}, {"message_id", m.message_id}, {"mode", DeliveryModeName(m.mode)}};
  if (!m.meta.empty()) data["meta"] = m.meta;
  return Draft(et::kUserMessage, std::move(data));
}

void Agent::Step() {
  if (cancel_ && cancel_->cancelled()) return EndTurn(Status(codes::kCancelled, "the turn was cancelled"));
  if (steps_ >= manager_.options_.max_steps) {
    return EndTurn(Status("step_limit", "the turn stopped after " + std::to_string(steps_) +
                                            " model calls (the limit is agents.max_steps)"));
  }
  auto steers = TakeSteers();
  auto call = [this] {
    ++steps_;
    auto adapter = manager_.models_.AdapterFor(header_.route.provider);
    if (!adapter.ok()) return EndTurn(adapter.status());
    cancel_ = std::make_shared<CancelToken>();
    // The answer's pieces go to live viewers as they come (not stored; the
    // committed events replace them), and are kept for a stop.
    streamed_ = std::make_shared<Streamed>();
    ModelAdapter::OnDelta deltas = [hub = manager_.sessions_.hub(), streamed = streamed_, id = header_.id,
                                    after = events_.empty() ? 0 : events_.back().seq](const ModelDelta& d) {
      const bool reasoning = d.kind == ModelDelta::Kind::kReasoning;
      {
        std::lock_guard lock(streamed->mu);
        (reasoning ? streamed->reasoning : streamed->text) += d.text;
      }
      if (hub) hub->PublishDelta(id, {after, reasoning ? "reasoning" : "text", d.text});
    };
    MonoTime started = manager_.clock_.MonotonicNow();
    (*adapter)->Stream(BuildRequest(), cancel_, std::move(deltas),
                       OnStrand<Result<ModelResponse>>([this, started](Result<ModelResponse> r) {
                         manager_.CountModelCall(RouteName(), r, manager_.clock_.MonotonicNow() - started);
                         OnModel(std::move(r));
                       }));
  };
  if (steers.empty()) return call();
  Append(std::move(steers), {}, [this, call](Result<Events> r) {
    if (!r.ok()) return EndTurn(r.status());
    call();
  });
}

void Agent::OnModel(Result<ModelResponse> r) {
  auto streamed = std::move(streamed_);
  if (!r.ok()) {
    // Stopped by the person: what was written stays, marked partial, and the
    // model reads it on the next turn as its own text (docs/AGENTS.md).
    if (cancel_ && cancel_->cancelled() && streamed) return EndTurn(r.status(), PartialAnswer(*streamed));
    return EndTurn(r.status());
  }
  if (r->input_tokens) turn_input_tokens_ = turn_input_tokens_.value_or(0) + *r->input_tokens;
  if (r->output_tokens) turn_output_tokens_ = turn_output_tokens_.value_or(0) + *r->output_tokens;
  std::vector<EventDraft> drafts;
  if (!r->reasoning.empty()) drafts.push_back(Draft(et::kReasoning, {{"text", r->reasoning}}));
  if (!r->text.empty() || r->tool_calls.empty()) drafts.push_back(Draft(et::kAssistantMessage, {{"text", r->text}}));
  for (const auto& c : r->tool_calls) {
    auto parsed = ParseJson(c.arguments);
    drafts.push_back(Draft(et::kToolCall, {{"call_id", c.id}, {"name", c.name},
                                           {"arguments", parsed.ok() ? *parsed : Json(c.arguments)}}));
  }
  if (r->tool_calls.empty()) return EndTurn(Status::Ok(), std::move(drafts));
  if (steps_ >= manager_.options_.max_steps) {
    Status limit("step_limit", "the turn stopped after " + std::to_string(steps_) +
                                   " model calls (the limit is agents.max_steps); these tool calls were not run");
    for (const auto& c : r->tool_calls) drafts.push_back(ToolResultDraft(c, limit));
    return EndTurn(limit, std::move(drafts));
  }
  Append(std::move(drafts), {}, [this, calls = std::move(r->tool_calls)](Result<Events> stored) mutable {
    if (!stored.ok()) return EndTurn(stored.status());
    RunTools(std::move(calls), 0, {});
  });
}

std::vector<EventDraft> Agent::PartialAnswer(Streamed& streamed) {
  std::lock_guard lock(streamed.mu);  // the call ended: no delta comes any more
  std::vector<EventDraft> drafts;
  if (!streamed.reasoning.empty()) {
    drafts.push_back(Draft(et::kReasoning, {{"text", streamed.reasoning}, {"partial", true}}));
  }
  if (!IsBlank(streamed.text)) {
    drafts.push_back(Draft(et::kAssistantMessage, {{"text", streamed.text}, {"partial", true}}));
  }
  return drafts;
}

void Agent::RunTools(std::vector<ModelToolCall> calls, size_t index, std::vector<EventDraft> results) {
  if (index == calls.size()) {
    return Append(std::move(results), {}, [this](Result<Events> r) {
      if (!r.ok()) return EndTurn(r.status());
      Step();
    });
  }
  const ModelToolCall& call = calls[index];
  auto fail = [&](Status st) { ToolDone(std::move(calls), index, std::move(results), std::move(st)); };
  if (cancel_ && cancel_->cancelled()) return fail(Status(codes::kCancelled, "the turn was cancelled before this tool ran"));
  if (!ToolAllowed(call.name)) return fail(Status(codes::kUnknownTool, "no tool named '" + call.name + "' is available"));
  auto args = ParseJson(call.arguments.empty() ? "{}" : call.arguments);
  if (!args.ok()) {
    return fail(Status(codes::kInvalidJson, "the arguments of " + call.name + " are not valid JSON: " + args.status().message()));
  }
  switch (PermissionOf(call.name)) {
    case Permission::kAllow:
      return InvokeTool(std::move(calls), index, std::move(results), std::move(*args));
    case Permission::kAsk:
      return AskApproval(std::move(calls), index, std::move(results), std::move(*args));
    case Permission::kDeny:
      return fail(Status("tool_denied", "the preset '" + header_.preset.value_or("default") + "' does not allow " +
                                            call.name + "; say so to the person instead of trying another way"));
  }
}

void Agent::ToolDone(std::vector<ModelToolCall> calls, size_t index, std::vector<EventDraft> results,
                     Result<Json> result) {
  manager_.CountToolCall(calls[index].name, result.ok() ? std::string("ok") : result.status().code());
  results.push_back(ToolResultDraft(calls[index], result));
  RunTools(std::move(calls), index + 1, std::move(results));
}

void Agent::InvokeTool(std::vector<ModelToolCall> calls, size_t index, std::vector<EventDraft> results, Json args) {
  std::string name = calls[index].name;
  manager_.tools_.Invoke(name, MakeToolContext(), args,
                         OnStrand<Result<Json>>([this, calls = std::move(calls), index,
                                                 results = std::move(results)](Result<Json> r) mutable {
                           ToolDone(std::move(calls), index, std::move(results), std::move(r));
                         }));
}

Permission Agent::PermissionOf(const std::string& tool) const {
  if (granted_.count(tool)) return Permission::kAllow;
  if (auto it = preset_.permissions.find(tool); it != preset_.permissions.end()) return it->second;
  std::shared_ptr<const Tool> t = manager_.tools_.Find(tool);
  return t ? t->default_permission() : Permission::kDeny;
}

void Agent::AskApproval(std::vector<ModelToolCall> calls, size_t index, std::vector<EventDraft> results, Json args) {
  const ModelToolCall& call = calls[index];
  std::shared_ptr<const Tool> tool = manager_.tools_.Find(call.name);
  Json request = tool ? tool->DescribeCall(args) : Json::object();
  request["call_id"] = call.id;
  request["name"] = call.name;
  request["timeout_seconds"] =
      std::chrono::duration_cast<std::chrono::seconds>(manager_.options_.approval_timeout).count();
  // The results of the calls before it are logged with the request.
  results.push_back(Draft(event_types::kApprovalRequested, std::move(request)));
  asking_ = call.id;
  // Set before the request commits, so that whoever the change feed sends
  // to read the session's status then sees it waiting.
  waiting_flag_ = true;
  Append(std::move(results), {},
         [this, calls = std::move(calls), index, args = std::move(args)](Result<Events> r) mutable {
           asking_.reset();
           auto early = std::move(early_answer_);
           early_answer_.reset();
           if (!r.ok()) {
             waiting_flag_ = false;
             if (early) early->done(r.status());
             return EndTurn(r.status());
           }
           auto timer = std::make_unique<boost::asio::steady_timer>(strand_, manager_.options_.approval_timeout);
           timer->async_wait(OnStrand<boost::system::error_code>([this](boost::system::error_code ec) {
             if (!ec && waiting_) Decide("timeout", {});
           }));
           std::string call_id = calls[index].id;
           waiting_ = Waiting{std::move(calls), index, std::move(args), std::move(timer)};
           waiting_flag_ = true;
           // Stopping the turn (or the host) ends the wait; the weak pointer
           // because the token outlives nothing of ours but may hold this.
           if (cancel_) {
             cancel_->OnCancel([weak = weak_from_this(), call_id] {
               auto self = weak.lock();
               if (!self) return;
               boost::asio::post(self->strand_, [self, call_id] {
                 if (!self->waiting_ || self->waiting_->calls[self->waiting_->index].id != call_id) return;
                 Waiting w = std::move(*self->waiting_);
                 self->waiting_.reset();
                 self->waiting_flag_ = false;
                 w.timer->cancel();
                 if (self->Halted()) return;
                 self->ToolDone(std::move(w.calls), w.index, {},
                                Status(codes::kCancelled, "the turn was stopped while this call waited for approval"));
               });
             });
           }
           if (early) Decide(early->decision, std::move(early->done));
         });
}

void Agent::AnswerApproval(const std::string& call_id, const std::string& decision, std::function<void(Status)> done) {
  boost::asio::post(strand_, [self = shared_from_this(), call_id, decision, done = std::move(done)]() mutable {
    // Seen before its request committed (the change feed tells of it as it
    // commits): decided once it did.
    if (self->asking_ == call_id && !self->early_answer_ && !self->stopping_) {
      self->early_answer_ = EarlyAnswer{decision, std::move(done)};
      return;
    }
    if (!self->waiting_ || self->waiting_->calls[self->waiting_->index].id != call_id || self->stopping_) {
      return done(Status(codes::kConflict, "no tool call " + call_id + " waits for approval in session " +
                                               self->header_.id + " (it was answered, timed out or its turn ended)"));
    }
    self->Decide(decision, std::move(done));
  });
}

void Agent::Decide(const std::string& decision, std::function<void(Status)> done) {
  Waiting w = std::move(*waiting_);
  waiting_.reset();
  waiting_flag_ = false;
  w.timer->cancel();
  const ModelToolCall& call = w.calls[w.index];
  Json data = {{"call_id", call.id}, {"name", call.name}, {"decision", decision},
               {"by", decision == "timeout" ? "timeout" : "person"}};
  Append({Draft(event_types::kApproval, std::move(data))}, {},
         [this, calls = std::move(w.calls), index = w.index, args = std::move(w.args), decision,
          done = std::move(done)](Result<Events> r) mutable {
           if (done) done(r.status());
           if (!r.ok()) return EndTurn(r.status());
           std::string name = calls[index].name;
           if (decision == "allow_session") granted_.insert(name);
           if (decision == "allow_once" || decision == "allow_session") {
             return InvokeTool(std::move(calls), index, {}, std::move(args));
           }
           Status refused = decision == "deny"
                                ? Status("tool_denied", "the person denied this call of " + name +
                                                            "; ask them what to do instead")
                                : Status("approval_timeout",
                                         "no one answered the approval request for this call of " + name + " within " +
                                             std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                                                                manager_.options_.approval_timeout)
                                                                .count()) +
                                             " s (tools.approval_timeout); it was not run");
           turn_refusal_ = refused;  // the turn's outcome says a call was not approved
           ToolDone(std::move(calls), index, {}, std::move(refused));
         });
}

void Agent::EndTurn(Status error, std::vector<EventDraft> drafts) {
  activity::TurnEnd outcome = TurnOutcome(error, drafts);
  Json end = {{"status", error.ok() ? "completed" : "error"}};
  if (!error.ok()) end["error"] = ErrorJson(error);
  if (turn_input_tokens_ || turn_output_tokens_) {
    end["usage"] = {{"input_tokens", turn_input_tokens_.value_or(0)}, {"output_tokens", turn_output_tokens_.value_or(0)}};
  }
  turn_input_tokens_.reset();
  turn_output_tokens_.reset();
  drafts.push_back(Draft(event_types::kTurnEnd, std::move(end)));
  auto consume = std::move(taken_);
  taken_.clear();
  bool completed = error.ok();
  manager_.CountTurn(RouteName(), completed, manager_.clock_.MonotonicNow() - turn_started_);
  auto next = [this, completed](Result<Events> r) {
    if (!r.ok()) LogFailedWrite("record the end of a turn", r.status());
    cancel_.reset();
    running_ = false;
    running_flag_ = false;
    BecomeIdle();
    if (completed && r.ok()) MaybeGenerateTitle();
  };
  Append(std::move(drafts), std::move(consume), std::move(next), std::move(outcome));
}

activity::TurnEnd Agent::TurnOutcome(const Status& error, const std::vector<EventDraft>& drafts) const {
  activity::TurnEnd end;
  end.ended_at = ToUnixMillis(manager_.clock_.Now());
  end.input_tokens = turn_input_tokens_;
  end.output_tokens = turn_output_tokens_;
  if (!error.ok()) {
    end.status = std::string(error.code() == codes::kCancelled ? activity::kCancelled : activity::kError);
    end.error_code = error.code();
    end.error_message = error.message();
    end.summary = activity::Summary(error.message());
    return end;
  }
  end.status = std::string(activity::kCompleted);
  if (turn_refusal_) {  // completed, but without a call no one approved
    end.error_code = turn_refusal_->code();
    end.error_message = turn_refusal_->message();
  }
  // The turn's last assistant text: in the drafts, else logged since its turn/start.
  for (auto it = drafts.rbegin(); it != drafts.rend(); ++it) {
    if (it->type == et::kAssistantMessage && !IsBlankText(it->data)) {
      end.summary = activity::Summary(it->data.value("text", ""));
      return end;
    }
  }
  for (size_t i = events_.size(); i-- > 0;) {
    if (events_[i].type == event_types::kTurnStart) break;
    if (events_[i].type == et::kAssistantMessage && !IsBlankText(events_[i].data)) {
      end.summary = activity::Summary(events_[i].data.value("text", ""));
      break;
    }
  }
  return end;
}

void Agent::NoteActivity(int64_t rows) const {
  if (rows > 0) manager_.NoteActivity(header_.id);
}

void Agent::BecomeIdle() {
  idle_since_ms_ = MonoMillis(manager_.clock_);
  auto waiters = std::move(idle_waiters_);
  idle_waiters_.clear();
  for (auto& w : waiters) w(Status::Ok());
  MaybeStartTurn();
}

void Agent::MaybeGenerateTitle() {
  if (!manager_.options_.generate_titles || title_requested_ || header_.route.provider == "echo") return;
  for (const auto& e : events_) {
    if (e.type == et::kTitleGenerated || e.type == et::kTitleUser) return;
  }
  std::string first;
  for (const auto& e : events_) {
    if (e.type == et::kUserMessage) {
      first = e.data.value("text", "");
      break;
    }
  }
  if (first.empty()) return;
  auto adapter = manager_.models_.AdapterFor(header_.route.provider);
  if (!adapter.ok()) return;
  title_requested_ = true;
  ModelRequest req;
  req.model = header_.route.model;
  req.messages.push_back({ModelMessage::Role::kSystem,
                          "Write a short title (at most six words) for a conversation that starts with the user's "
                          "message below. Answer with the title only, without quotes.",
                          {}, "", ""});
  req.messages.push_back({ModelMessage::Role::kUser, first, {}, "", ""});
  title_cancel_ = std::make_shared<CancelToken>();
  MonoTime started = manager_.clock_.MonotonicNow();
  (*adapter)->Stream(std::move(req), title_cancel_, nullptr,
                     OnStrand<Result<ModelResponse>>([this, started](Result<ModelResponse> r) {
                       manager_.CountModelCall(RouteName(), r, manager_.clock_.MonotonicNow() - started);
                       if (!r.ok()) {
                         spdlog::info("session {}: no generated title: {}", header_.id, r.status().ToString());
                         return;
                       }
                       std::string title = CleanTitle(r->text);
                       if (title.empty()) return;
                       Append({Draft(et::kTitleGenerated, {{"title", title}})}, {}, [](Result<Events>) {});
                     }));
}

namespace {

// The model messages one logged event contributes to the conversation.
void AppendModelMessages(const session::Event& e, std::vector<ModelMessage>& out) {
  if (e.type == et::kUserMessage) {
    out.push_back({ModelMessage::Role::kUser, e.data.value("text", ""), {}, "", ""});
  } else if (e.type == et::kAssistantMessage) {
    out.push_back({ModelMessage::Role::kAssistant, e.data.value("text", ""), {}, "", ""});
  } else if (e.type == et::kToolCall) {
    // A step's tool calls follow its text (if any) in the log: one assistant message.
    bool joins = !out.empty() && out.back().role == ModelMessage::Role::kAssistant;
    if (!joins) out.push_back({ModelMessage::Role::kAssistant, "", {}, "", ""});
    const Json& args = e.data.contains("arguments") ? e.data["arguments"] : Json::object();
    out.back().tool_calls.push_back(
        {e.data.value("call_id", ""), e.data.value("name", ""), args.is_string() ? args.get<std::string>() : DumpJson(args)});
  } else if (e.type == et::kToolResult) {
    Json content = e.data.contains("error") ? Json{{"error", e.data["error"]}} : e.data.value("result", Json());
    out.push_back({ModelMessage::Role::kTool, content.is_string() ? content.get<std::string>() : DumpJson(content), {},
                   e.data.value("call_id", ""), e.data.value("name", "")});
  }
}

}  // namespace

ModelRequest Agent::BuildRequest() {
  ModelRequest req;
  req.model = header_.route.model;
  req.reasoning_effort = header_.route.reasoning_effort;
  std::string system = preset_.system_prompt;
  std::optional<std::string> client_zone = TurnClientZone();
  for (const auto& ctx : manager_.environment_.context) {
    std::string part = ctx(header_, client_zone);
    if (part.empty()) continue;
    system += (system.empty() ? "" : "\n\n") + part;
  }
  // The conversation grows with the log; only events new since the last
  // call are converted.
  for (; conversation_upto_ < events_.size(); ++conversation_upto_) {
    AppendModelMessages(events_[conversation_upto_], conversation_);
  }
  req.messages.reserve(conversation_.size() + 1);
  if (!system.empty()) req.messages.push_back({ModelMessage::Role::kSystem, system, {}, "", ""});
  req.messages.insert(req.messages.end(), conversation_.begin(), conversation_.end());
  for (const auto& t : manager_.tools_.List()) {
    if (ToolAllowed(t->name())) req.tools.push_back({t->name(), t->description(), t->parameters()});
  }
  return req;
}

bool Agent::ToolAllowed(const std::string& name) const {
  std::shared_ptr<const Tool> tool = manager_.tools_.Find(name);
  if (tool == nullptr) return false;
  if (tool->root_only() && header_.delegation_depth > 0) return false;
  if (tool->needs_cwd() && (!header_.cwd || header_.cwd->empty())) return false;
  if (preset_.all_tools) return true;
  std::string group = manager_.tools_.GroupOf(name);
  return std::find(preset_.tool_groups.begin(), preset_.tool_groups.end(), group) != preset_.tool_groups.end();
}

ToolContext Agent::MakeToolContext() const {
  ToolContext ctx;
  ctx.session_id = header_.id;
  ctx.delegation_depth = header_.delegation_depth;
  ctx.provider = header_.route.provider;
  ctx.model = header_.route.model;
  ctx.reasoning_effort = header_.route.reasoning_effort;
  ctx.preset = header_.preset;
  ctx.cwd = header_.cwd;
  ctx.agent_call = true;
  ctx.client_time_zone = TurnClientZone();
  ctx.cancel = cancel_;
  return ctx;
}

std::optional<std::string> Agent::TurnClientZone() const {
  // Back to the running turn's turn/start; its first user message follows.
  for (size_t i = events_.size(); i-- > 0;) {
    if (events_[i].type != event_types::kTurnStart) continue;
    for (size_t j = i + 1; j < events_.size(); ++j) {
      if (events_[j].type != et::kUserMessage) continue;
      const Json& data = events_[j].data;
      auto meta = data.find("meta");
      if (meta == data.end() || !meta->is_object()) return std::nullopt;
      auto zone = meta->find("client_time_zone");
      if (zone == meta->end() || !zone->is_string()) return std::nullopt;
      return zone->get<std::string>();
    }
    return std::nullopt;
  }
  return std::nullopt;
}

void Agent::Append(std::vector<EventDraft> drafts, std::vector<MessageRef> consume,
                   std::function<void(Result<Events>)> next, std::optional<activity::TurnEnd> end) {
  bool record = manager_.options_.record_activity;
  bool starts = record && std::any_of(drafts.begin(), drafts.end(),
                                      [](const EventDraft& d) { return d.type == et::kUserMessage; });
  if (!record) end.reset();
  outbox::SubscriptionSource* webhooks = &manager_.webhooks_;
  bool asks = std::any_of(drafts.begin(), drafts.end(),
                          [](const EventDraft& d) { return d.type == event_types::kApprovalRequested; });
  session::SessionStore::AlsoFn also;
  auto activity_rows = std::make_shared<int64_t>(0);
  if (!consume.empty() || starts || asks) {
    int64_t now = ToUnixMillis(manager_.clock_.Now());
    // The messages of the user events among the drafts are among those
    // the turn took.
    std::vector<MessageRef> starting = starts ? taken_ : std::vector<MessageRef>{};
    also = [consume = std::move(consume), now, starting = std::move(starting), end = std::move(end), activity_rows,
            webhooks, asks, session_id = header_.id](store::Tx& tx, const Events& stored) -> Status {
      // Assigned once at the end: a contended job runs again (store::Database).
      int64_t rows = 0;
      if (!starting.empty()) {
        DSH_ASSIGN_OR_RETURN(rows, activity::TurnStarted(tx, stored, starting));
      }
      if (!consume.empty() && end) {
        DSH_ASSIGN_OR_RETURN(int64_t ended, activity::TurnEnded(tx, consume, now, *end, webhooks));
        rows += ended;
      } else if (!consume.empty()) {
        DSH_RETURN_IF_ERROR(agent_store::Consume(tx, consume, now));
      }
      if (asks) DSH_RETURN_IF_ERROR(SendApprovalRequests(tx, *webhooks, session_id, stored, now));
      *activity_rows = rows;
      return Status::Ok();
    };
  }
  AppendWith(std::move(drafts), std::move(also), [this, activity_rows, next = std::move(next)](Result<Events> r) {
    if (r.ok()) NoteActivity(*activity_rows);
    next(std::move(r));
  });
}

void Agent::AppendWith(std::vector<EventDraft> drafts, session::SessionStore::AlsoFn also,
                       std::function<void(Result<Events>)> next) {
  auto done = OnStrand<Result<Events>>([this, next = std::move(next)](Result<Events> r) mutable {
    if (r.ok()) events_.insert(events_.end(), r->begin(), r->end());
    if (!r.ok() && r.status().code() == agent_store::kLeaseLost) LeaseLost();
    next(std::move(r));
  });
  manager_.sessions_.AppendWithAsync(header_.id, std::move(drafts), std::move(also), std::move(done), LeaseFence());
}

}  // namespace dsh::agent
