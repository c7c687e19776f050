#include "plugins/schedule/schedule_service.h"

#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>

#include <algorithm>
#include <atomic>
#include <utility>

#include "plugins/schedule/schedule_request.h"

namespace dsh::plugins::schedule {

namespace {
constexpr int64_t kPage = 1000;  // events read per query while catching up with a log
constexpr int kMaxAttempts = 3;  // of a tool call whose append met another host's
}  // namespace

struct ScheduleService::Entry {
  Entry(boost::asio::io_context& ioc, std::string id) : session_id(std::move(id)), timer(ioc) {}

  const std::string session_id;

  // The queue (mu_).
  std::deque<Op> queue;
  bool running = false;

  // The log as last read: only the running operation touches these (the
  // queue hands them from one operation to the next under mu_).
  bool loaded = false;
  session::SessionHeader header;
  int64_t read_through = 0;             // the last seq read
  std::vector<session::Event> changes;  // its schedule/change events after seed_length

  // The owner (mu_).
  bool owner = false;
  int64_t generation = 0;        // bumped when the owner goes or comes
  bool recheck_queued = false;
  int64_t hold_until = 0;        // after a failed dispatch: not before this (Unix ms)
  int64_t active = 0;            // active reminders as of the owner's last fold
  boost::asio::steady_timer timer;
};

ScheduleService::ScheduleService(boost::asio::io_context& ioc, session::SessionStore& sessions,
                                 agent::AgentManager& agents, const Clock& clock, std::string host_zone,
                                 ScheduleOptions options)
    : ioc_(ioc),
      sessions_(sessions),
      agents_(agents),
      clock_(clock),
      host_zone_(std::move(host_zone)),
      options_(options) {
  options_.max_wait = std::clamp(options_.max_wait, std::chrono::milliseconds(1), std::chrono::milliseconds(60'000));
  if (options_.metrics != nullptr) {
    dispatched_ = &options_.metrics->AddCounter(
        "dsh_reminders_dispatched_total", "Reminders this host delivered to their session (the dispatch committed).");
  }
}

ScheduleService::~ScheduleService() { Stop(); }

int64_t ScheduleService::ActiveReminders() const {
  std::lock_guard lock(mu_);
  int64_t n = 0;
  for (const auto& [id, e] : entries_) {
    if (e->owner) n += e->active;
  }
  return n;
}

bool ScheduleService::HasActiveReminders(const std::string& session_id) const {
  std::lock_guard lock(mu_);
  auto it = entries_.find(session_id);
  return it != entries_.end() && it->second->owner && it->second->active > 0;
}

// ---- the per-session queue -------------------------------------------------

bool ScheduleService::Enqueue(const std::string& session_id, Op op) {
  std::shared_ptr<Entry> e;
  {
    std::lock_guard lock(mu_);
    if (stopped_) return false;
    auto& slot = entries_[session_id];
    if (!slot) slot = std::make_shared<Entry>(ioc_, session_id);
    e = slot;
    e->queue.push_back(std::move(op));
    if (e->running) return true;
    e->running = true;
    ++busy_;
  }
  RunNext(e);
  return true;
}

void ScheduleService::RunNext(const std::shared_ptr<Entry>& e) {
  Op op;
  {
    std::lock_guard lock(mu_);
    if (e->queue.empty()) {
      e->running = false;
      --busy_;
      cv_.notify_all();
      MaybeDropLocked(e);
      return;
    }
    op = std::move(e->queue.front());
    e->queue.pop_front();
  }
  auto self = shared_from_this();
  auto once = std::make_shared<std::atomic<bool>>(false);
  op(e, [self, e, once] {
    if (once->exchange(true)) return;
    boost::asio::post(self->ioc_, [self, e] { self->RunNext(e); });
  });
}

void ScheduleService::MaybeDropLocked(const std::shared_ptr<Entry>& e) {
  if (e->running || !e->queue.empty() || e->owner) return;
  auto it = entries_.find(e->session_id);
  if (it != entries_.end() && it->second == e) entries_.erase(it);
}

bool ScheduleService::SettleForTesting(std::chrono::milliseconds timeout) {
  std::vector<std::shared_ptr<Entry>> owners;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, e] : entries_) {
      if (e->owner) owners.push_back(e);
    }
  }
  for (const auto& e : owners) Recheck(e);
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return busy_ == 0; });
}

void ScheduleService::Stop() {
  std::unique_lock lock(mu_);
  if (stopped_) return;
  stopped_ = true;
  for (auto& [id, e] : entries_) {
    e->owner = false;
    ++e->generation;
    e->timer.cancel();
  }
  cv_.wait(lock, [&] { return busy_ == 0; });
}

// ---- reading and appending -------------------------------------------------

void ScheduleService::Refresh(const std::shared_ptr<Entry>& e, std::function<void(Result<ScheduleState>)> done) {
  auto self = shared_from_this();
  if (!e->loaded) {
    sessions_.GetAsync(e->session_id, [self, e, done = std::move(done)](Result<session::SessionHeader> h) mutable {
      if (!h.ok()) return done(h.status());
      e->header = std::move(h).value();
      e->read_through = e->header.seed_length;  // a fork's prefix is its parent's: never folded
      e->changes.clear();
      e->loaded = true;
      self->Refresh(e, std::move(done));
    });
    return;
  }
  sessions_.ReadEventsAsync(e->session_id, e->read_through, kPage,
                            [self, e, done = std::move(done)](Result<std::vector<session::Event>> r) mutable {
                              if (!r.ok()) return done(r.status());
                              for (session::Event& ev : *r) {
                                e->read_through = ev.seq;
                                if (ev.type == kScheduleChange) e->changes.push_back(std::move(ev));
                              }
                              if (static_cast<int64_t>(r->size()) == kPage) return self->Refresh(e, std::move(done));
                              done(Fold(e->session_id, e->header.seed_length, e->changes));
                            });
}

void ScheduleService::AppendChange(const std::shared_ptr<Entry>& e, session::EventDraft draft,
                                   std::function<void(Status)> done) {
  int64_t since = e->read_through;
  std::string id = e->session_id;
  // In the append's transaction: nothing of schedule/change between what
  // this host read and this event (another host serving the same session).
  auto unchanged = [since, id](store::Tx& tx, const std::vector<session::Event>& stored) -> Status {
    int64_t first = stored.front().seq;
    if (first <= since + 1) return Status::Ok();
    DSH_ASSIGN_OR_RETURN(auto between, session::SessionStore::ReadEventsIn(tx, id, since, first - since - 1));
    for (const session::Event& ev : between) {
      if (ev.type == kScheduleChange) {
        return Status(dsh::codes::kConflict, "the reminders of session " + id + " changed meanwhile (event " +
                                                 std::to_string(ev.seq) + ")");
      }
    }
    return Status::Ok();
  };
  sessions_.AppendWithAsync(id, {std::move(draft)}, std::move(unchanged),
                            [done = std::move(done)](Result<std::vector<session::Event>> r) { done(r.status()); });
}

// ---- the tools -------------------------------------------------------------

void ScheduleService::RunTool(const agent::ToolContext& ctx, const std::string& tool, ToolBody body, Done done,
                              int attempt) {
  if (!ctx.session_id) {
    return done(InvalidArguments(tool + ": reminders belong to one session: call it with a calling session (session_id)"));
  }
  auto self = shared_from_this();
  bool queued = Enqueue(*ctx.session_id, [self, ctx, tool, body, done, attempt](const std::shared_ptr<Entry>& e,
                                                                               Finished finished) {
    // Runs the call again after a conflict; answers otherwise. Either way
    // the operation ends after the answer.
    Done answer = [self, ctx, tool, body, done, attempt, finished](Result<Json> r) {
      if (!r.ok() && r.status().code() == dsh::codes::kConflict && attempt < kMaxAttempts) {
        self->RunTool(ctx, tool, body, done, attempt + 1);
      } else {
        done(std::move(r));
      }
      finished();
    };
    self->Refresh(e, [self, e, tool, body, answer](Result<ScheduleState> state) {
      if (!state.ok()) return answer(state.status().WithContext(tool));
      if (e->header.delegation_depth > 0) {
        // Root sessions only (spec 004): a delegated session has no such tool.
        return answer(Status(dsh::codes::kUnknownTool, "no tool named '" + tool + "'"));
      }
      body(e, std::move(state).value(), answer);
      self->Recheck(e);  // a successful preflight lets the owner recompute
    });
  });
  if (!queued) done(Status(dsh::codes::kShuttingDown, tool + ": the host is stopping"));
}

namespace {
// The answer when an append's commit has an unknown outcome.
Status Uncertain(const Status& st, const std::string& tool, const std::string& operation, const std::string& id) {
  if (st.code() != dsh::codes::kPersistenceUncertain) return st.WithContext(tool);
  return Status(dsh::codes::kPersistenceUncertain,
                tool + ": operation " + operation + " of " + id + ": the outcome of its commit is unknown (" +
                    st.message() + "); schedule_list tells whether it took effect");
}
}  // namespace

void ScheduleService::Create(const agent::ToolContext& ctx, const Json& args, Done done) {
  auto self = shared_from_this();
  RunTool(ctx, "schedule_create",
          [self, args, client_zone = ctx.client_time_zone](const std::shared_ptr<Entry>& e, ScheduleState state,
                                                           Done answer) {
            int64_t now = self->NowMs();
            auto record = ResolveScheduleCreate(args, {now, e->header.time_zone, client_zone, self->host_zone_});
            if (!record.ok()) return answer(record.status());
            record->id = FormatScheduleId(state.next_id);
            Record made = *record;
            self->AppendChange(e, CreateEvent(made), [self, made, now, answer](Status st) {
              if (!st.ok()) return answer(Uncertain(st, "schedule_create", "create", made.id));
              answer(RecordView(made, now));
            });
          },
          std::move(done));
}

void ScheduleService::List(const agent::ToolContext& ctx, const Json& args, Done done) {
  if (Status st = DecodeScheduleList(args); !st.ok()) return done(st);
  auto self = shared_from_this();
  RunTool(ctx, "schedule_list",
          [self](const std::shared_ptr<Entry>&, ScheduleState state, Done answer) {
            int64_t now = self->NowMs();
            Json views = Json::array();
            for (const Record& r : state.active) views.push_back(RecordView(r, now));
            answer(Json{{"schedules", std::move(views)}});
          },
          std::move(done));
}

void ScheduleService::Delete(const agent::ToolContext& ctx, const Json& args, Done done) {
  auto id = DecodeScheduleDelete(args);
  if (!id.ok()) return done(id.status());
  auto self = shared_from_this();
  RunTool(ctx, "schedule_delete",
          [self, id = *id](const std::shared_ptr<Entry>& e, ScheduleState state, Done answer) {
            if (state.Find(id) == nullptr) {
              return answer(Json{{"id", id}, {"deleted", false}, {"code", "schedule_not_found"}});
            }
            self->AppendChange(e, DeleteEvent(id), [id, answer](Status st) {
              if (!st.ok()) return answer(Uncertain(st, "schedule_delete", "delete", id));
              answer(Json{{"id", id}, {"deleted", true}});
            });
          },
          std::move(done));
}

// ---- the owner -------------------------------------------------------------

void ScheduleService::OnLive(const session::SessionHeader& header) {
  if (header.delegation_depth > 0) return;  // root agents only
  std::shared_ptr<Entry> e;
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    // The agent may have stopped again already: then its stopped hook ran
    // (or runs after this and drops the owner).
    if (!agents_.LiveStatus(header.id)) return;
    auto& slot = entries_[header.id];
    if (!slot) slot = std::make_shared<Entry>(ioc_, header.id);
    e = slot;
    e->owner = true;
    ++e->generation;
    e->hold_until = 0;
  }
  Recheck(e);
}

void ScheduleService::OnStopped(const std::string& session_id) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(session_id);
  if (it == entries_.end()) return;
  std::shared_ptr<Entry> e = it->second;
  e->owner = false;
  ++e->generation;
  e->timer.cancel();
  MaybeDropLocked(e);
}

void ScheduleService::ArmLocked(const std::shared_ptr<Entry>& e, int64_t wake_at_ms) {
  int64_t wait = std::clamp<int64_t>(wake_at_ms - NowMs(), 0, options_.max_wait.count());
  e->timer.expires_after(std::chrono::milliseconds(wait));
  auto self = shared_from_this();
  int64_t generation = e->generation;
  e->timer.async_wait([self, e, generation](const boost::system::error_code& ec) {
    if (ec) return;
    {
      std::lock_guard lock(self->mu_);
      if (e->generation != generation) return;
    }
    self->Recheck(e);
  });
}

void ScheduleService::Recheck(const std::shared_ptr<Entry>& e) {
  int64_t generation;
  {
    std::lock_guard lock(mu_);
    if (stopped_ || !e->owner || e->recheck_queued) return;
    e->recheck_queued = true;
    generation = e->generation;
  }
  auto self = shared_from_this();
  Enqueue(e->session_id, [self, generation](const std::shared_ptr<Entry>& e, Finished finished) {
    {
      std::lock_guard lock(self->mu_);
      e->recheck_queued = false;
      if (!e->owner || e->generation != generation) return finished();
    }
    self->Refresh(e, [self, e, generation, finished](Result<ScheduleState> state) {
      std::unique_lock lock(self->mu_);
      if (!e->owner || e->generation != generation) return finished();
      if (!state.ok()) {
        spdlog::warn("session {}: reminders: {} (tried again in {} s)", e->session_id, state.status().ToString(),
                     self->options_.max_wait.count() / 1000);
        self->ArmLocked(e, self->NowMs() + self->options_.max_wait.count());
        return finished();
      }
      e->active = static_cast<int64_t>(state->active.size());
      const Record* next = state->Earliest();
      if (next == nullptr) {
        e->timer.cancel();
        return finished();
      }
      int64_t due = std::max(next->scheduled_at, e->hold_until);
      if (due > self->NowMs()) {
        self->ArmLocked(e, due);
        return finished();
      }
      lock.unlock();
      self->Dispatch(e, *next, finished);
    });
  });
}

void ScheduleService::Dispatch(const std::shared_ptr<Entry>& e, Record record, Finished finished) {
  auto self = shared_from_this();
  // A failure leaves the record active; the owner tries again after max_wait
  // (the inbox key keeps a retry from queueing the reminder twice).
  auto failed = [self, e](const std::string& what, const Status& st) {
    spdlog::warn("session {}: reminder: {}: {} (tried again in {} s)", e->session_id, what, st.ToString(),
                 self->options_.max_wait.count() / 1000);
    std::lock_guard lock(self->mu_);
    e->hold_until = self->NowMs() + self->options_.max_wait.count();
  };
  agents_.RunMaintenance(
      e->session_id,
      [self, e, record, failed](std::function<void()> release) {
        // The agent is idle and held: fold again (a delete that won the
        // race wins), queue the followup, then record the dispatch.
        self->Refresh(e, [self, e, record, failed, release](Result<ScheduleState> state) {
          if (!state.ok()) {
            failed("reading the log", state.status());
            return release();
          }
          if (state->Find(record.id) == nullptr) return release();
          agent::Delivery d;
          d.session_id = e->session_id;
          d.text = ReminderFrame(record);
          d.mode = agent::DeliveryMode::kFollowup;
          d.wakeup = true;
          d.key = ReminderKey(e->session_id, record.id);
          d.meta = {{"origin", "schedule"},
                    {"schedule_id", record.id},
                    {"occurrence_at", RecordView(record, record.scheduled_at)["scheduled_at"]}};
          d.activity = agent::activity::Source{"reminder", std::nullopt, std::nullopt, record.id};
          self->agents_.Deliver(std::move(d), [self, e, record, failed, release](Result<agent::Delivered> r) {
            if (!r.ok()) {
              failed("queueing " + record.id, r.status());
              return release();
            }
            self->AppendChange(e, DispatchEvent(record.id), [self, record, failed, release](Status st) {
              if (!st.ok()) failed("recording the dispatch of " + record.id, st);
              if (st.ok() && self->dispatched_ != nullptr) self->dispatched_->Inc();
              release();
            });
          });
        });
      },
      [self, e, finished](Status st) {
        finished();
        if (st.code() == "agent_busy") {
          // A turn runs: try again once the agent is idle.
          return self->agents_.WhenIdle(e->session_id, [self, e](Status idle) {
            if (idle.ok()) self->Recheck(e);
          });
        }
        if (st.ok()) self->Recheck(e);  // the next reminder, or the retry of this one
        // not_live: the agent stopped; its owner goes with it.
      });
}

}  // namespace dsh::plugins::schedule
