#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "agent/tool.h"
#include "base/clock.h"
#include "base/status.h"
#include "plugins/loop/loop_registry.h"
#include "plugins/loop/loop_scheduler.h"
#include "session/session_store.h"
#include "store/database.h"

namespace dsh::plugins::loop {

// loop_create's arguments, decoded (spec 000 section 2.1).
struct CreateLoopRequest {
  std::string prompt;  // trimmed, non-empty
  std::optional<Schedule> schedule;
  std::optional<std::string> session_id;  // omitted | "self" | "new" | a session id
  std::optional<std::string> preset;      // only with "new"
  std::optional<int64_t> time_in_seconds;  // deprecated alias of {kind: every}
};

// The loop registry's operations for every surface (tools, HTTP, CLI).
// Holds references; everything must outlive it. Thread-safe; callbacks run
// on database threads, exactly once each.
class LoopService {
 public:
  LoopService(store::Database& db, session::SessionStore& sessions, LoopScheduler& scheduler, const Clock& clock)
      : db_(db), sessions_(sessions), scheduler_(scheduler), clock_(clock) {}

  // Validates everything, then stores the loop with its first occurrence and
  // wakes the scheduler. Errors: `invalid_arguments` naming the field (both
  // or neither of schedule/time_in_seconds, a reserved id used wrongly,
  // preset without "new" or not configured, no calling session for an
  // omitted session_id, "self" while the global interface is off),
  // `not_found` (an explicit session that does not exist), `invalid_cron`,
  // `cron_never_fires`, `invalid_time_zone`, storage errors.
  void Create(const agent::ToolContext& caller, CreateLoopRequest request,
              std::function<void(Result<LoopRecord>)> done);

  // Active loops: `selector` omitted = those targeting the calling session
  // (and "self" loops when it is the global interface session); "global" =
  // every active loop of the profile; a session id = those targeting it.
  void List(const agent::ToolContext& caller, std::optional<std::string> selector,
            std::function<void(Result<std::vector<LoopRecord>>)> done);

  // Completed loops (finished `after` loops) for the same selectors as List
  // ("global" or a session id; no calling-session default), newest first,
  // at most `limit`, last run before `before`.
  void ListFinished(std::string selector, int64_t limit, std::optional<int64_t> before,
                    std::function<void(Result<std::vector<LoopRecord>>)> done);

  // Deletes a loop by id from anywhere. Errors: `unknown_loop`.
  void Delete(std::string loop_id, std::function<void(Status)> done);

  // A loop's runs, newest first, at most `limit`; with `before`, only those
  // with nominal_at < before (an empty page past the oldest run is not an
  // error). Errors: `unknown_loop` when neither the loop nor any run of it
  // exists.
  void History(std::string loop_id, int64_t limit, std::optional<int64_t> before,
               std::function<void(Result<std::vector<registry::Run>>)> done);

  int64_t now() const { return ToUnixMillis(clock_.Now()); }

 private:
  void Insert(LoopRecord loop, std::function<void(Result<LoopRecord>)> done);
  // The targets a list selector names (empty = every loop); `invalid_arguments` for "self"/"new".
  Result<std::vector<std::string>> Targets(const std::string& selector) const;

  store::Database& db_;
  session::SessionStore& sessions_;
  LoopScheduler& scheduler_;
  const Clock& clock_;
};

}  // namespace dsh::plugins::loop
