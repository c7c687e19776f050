#include "plugins/loop/loop_service.h"

#include <memory>
#include <utility>

#include "base/ids.h"

namespace dsh::plugins::loop {

void LoopService::Create(const agent::ToolContext& caller, CreateLoopRequest req,
                         std::function<void(Result<LoopRecord>)> done) {
  if (req.schedule && req.time_in_seconds) {
    return done(InvalidArguments("give either `schedule` or the deprecated `time_in_seconds`, not both"));
  }
  if (!req.schedule && !req.time_in_seconds) {
    return done(InvalidArguments("`schedule` is required ({kind: \"every\" | \"after\" | \"cron\", ...})"));
  }
  Schedule schedule = req.schedule ? *req.schedule : Schedule{ScheduleKind::kEvery, *req.time_in_seconds, "", std::nullopt};
  const LoopEnvironment& env = scheduler_.environment();

  LoopRecord loop;
  loop.prompt = std::move(req.prompt);
  loop.schedule = schedule;
  loop.created_by = caller.session_id;
  loop.created_at = now();
  if (!req.session_id) {
    if (!caller.session_id) {
      return done(InvalidArguments(
          "`session_id` is required for a call without a calling session (\"self\", \"new\" or a session id)"));
    }
    loop.target = *caller.session_id;
  } else if (*req.session_id == kListGlobal) {
    return done(InvalidArguments("`session_id` \"global\" is a loop_list selector, not a target; use \"self\" for "
                                 "the global interface session"));
  } else {
    loop.target = *req.session_id;
  }
  if (req.preset) {
    if (loop.target != kTargetNew) {
      return done(InvalidArguments("`preset` is only accepted with `session_id` \"new\" (presets are chosen when a "
                                   "session starts)"));
    }
    if (!env.preset_exists(*req.preset)) {
      return done(InvalidArguments("`preset` names no configured preset: \"" + *req.preset + "\""));
    }
    loop.preset = req.preset;
  }
  if (loop.target == kTargetSelf && !env.global_session_id()) {
    return done(InvalidArguments(
        "`session_id` \"self\" needs the global interface session, which is turned off (interface.global_session)"));
  }
  auto timetable = scheduler_.TimetableOf(schedule);
  if (!timetable.ok()) return done(timetable.status());
  auto first = timetable->First(loop.created_at);
  if (!first.ok()) return done(first.status().WithContext("schedule"));
  loop.due_at = *first;
  loop.loop_id = NewId("loop_", clock_);

  bool explicit_session = loop.target != kTargetSelf && loop.target != kTargetNew && req.session_id.has_value();
  if (!explicit_session) return Insert(std::move(loop), std::move(done));
  std::string target = loop.target;
  sessions_.GetAsync(target, [this, target, loop = std::move(loop), done = std::move(done)](
                                 Result<session::SessionHeader> h) mutable {
    if (!h.ok()) {
      if (h.status().code() == codes::kNotFound) {
        return done(Status(codes::kNotFound, "`session_id`: no session " + target + " exists"));
      }
      return done(h.status());
    }
    Insert(std::move(loop), std::move(done));
  });
}

void LoopService::Insert(LoopRecord loop, std::function<void(Result<LoopRecord>)> done) {
  auto rec = std::make_shared<LoopRecord>(std::move(loop));
  db_.Write([rec](store::Tx& tx) { return registry::Insert(tx, *rec); },
            [this, rec, done = std::move(done)](Status st) {
              if (!st.ok()) return done(st);
              if (auto next = rec->next_at()) scheduler_.Expect(*next);
              scheduler_.AnnounceChange();
              done(*rec);
            });
}

Result<std::vector<std::string>> LoopService::Targets(const std::string& selector) const {
  std::vector<std::string> targets;
  if (selector == kTargetSelf || selector == kTargetNew) {
    return InvalidArguments("`session_id` \"" + selector +
                            "\" is a loop_create target, not a list selector; pass \"global\" or a session id");
  }
  if (selector != kListGlobal) targets.push_back(selector);
  // Loops created with "self" target the global interface session too.
  if (!targets.empty() && targets.front() == scheduler_.environment().global_session_id()) {
    targets.emplace_back(kTargetSelf);
  }
  return targets;
}

void LoopService::List(const agent::ToolContext& caller, std::optional<std::string> selector,
                       std::function<void(Result<std::vector<LoopRecord>>)> done) {
  if (!selector && !caller.session_id) {
    return done(InvalidArguments("loop_list({}) lists the calling session's loops and this call has none; pass "
                                 "`session_id` (\"global\" for every loop)"));
  }
  auto targets = Targets(selector ? *selector : *caller.session_id);
  if (!targets.ok()) return done(targets.status());
  auto out = std::make_shared<std::vector<LoopRecord>>();
  db_.Read(
      [targets = std::move(*targets), out](store::Tx& tx) -> Status {
        DSH_ASSIGN_OR_RETURN(*out, registry::ListActive(tx, targets));
        return Status::Ok();
      },
      [out, done = std::move(done)](Status st) {
        if (!st.ok()) return done(st);
        done(std::move(*out));
      });
}

void LoopService::ListFinished(std::string selector, int64_t limit, std::optional<int64_t> before,
                               std::function<void(Result<std::vector<LoopRecord>>)> done) {
  auto targets = Targets(selector);
  if (!targets.ok()) return done(targets.status());
  auto out = std::make_shared<std::vector<LoopRecord>>();
  db_.Read(
      [targets = std::move(*targets), limit, before, out](store::Tx& tx) -> Status {
        DSH_ASSIGN_OR_RETURN(*out, registry::ListFinished(tx, targets, limit, before));
        return Status::Ok();
      },
      [out, done = std::move(done)](Status st) {
        if (!st.ok()) return done(st);
        done(std::move(*out));
      });
}

void LoopService::Delete(std::string loop_id, std::function<void(Status)> done) {
  auto deleted = std::make_shared<bool>(false);
  db_.Write(
      [loop_id, deleted](store::Tx& tx) -> Status {
        DSH_ASSIGN_OR_RETURN(*deleted, registry::Delete(tx, loop_id));
        return Status::Ok();
      },
      [this, loop_id, deleted, done = std::move(done)](Status st) {
        if (!st.ok()) return done(st);
        if (!*deleted) return done(Status("unknown_loop", "no loop " + loop_id + " exists"));
        scheduler_.AnnounceChange();
        done(Status::Ok());
      });
}

void LoopService::History(std::string loop_id, int64_t limit, std::optional<int64_t> before,
                          std::function<void(Result<std::vector<registry::Run>>)> done) {
  auto out = std::make_shared<std::vector<registry::Run>>();
  auto exists = std::make_shared<bool>(false);
  db_.Read(
      [loop_id, limit, before, out, exists](store::Tx& tx) -> Status {
        DSH_ASSIGN_OR_RETURN(*out, registry::Runs(tx, loop_id, limit, before));
        DSH_ASSIGN_OR_RETURN(auto loop, registry::Get(tx, loop_id));
        *exists = loop.has_value() || !out->empty();
        if (!*exists && before) {
          // An empty page of a deleted loop: it exists if it has any run at all.
          DSH_ASSIGN_OR_RETURN(auto newest, registry::Runs(tx, loop_id, 1));
          *exists = !newest.empty();
        }
        return Status::Ok();
      },
      [loop_id, out, exists, done = std::move(done)](Status st) {
        if (!st.ok()) return done(st);
        if (!*exists) return done(Status("unknown_loop", "no loop " + loop_id + " exists"));
        done(std::move(*out));
      });
}

}  // namespace dsh::plugins::loop
