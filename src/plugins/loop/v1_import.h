#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/json.h"
#include "base/status.h"
#include "session/event.h"
#include "session/session_store.h"
#include "store/database.h"

namespace dsh::plugins::loop {

// v1 compatibility (spec 000 section 10). v1 kept a session's loops in its
// own log as `loop/change` events:
//   create   {id, prompt, time_in_seconds, next_at?}
//   delete   {id}
//   dispatch {id, next_at}
// (an explicit `action`/`op`/`kind` of "create", "delete" or "dispatch" is
// honoured; without one the fields tell them apart). `next_at` is Unix
// milliseconds or an RFC 3339 string. The events stay in the log and keep
// reading (they are not conversation); the loops that are still active are
// imported into the registry.
inline constexpr const char* kV1EventType = "loop/change";

struct V1Loop {
  std::string id;
  std::string prompt;
  int64_t time_in_seconds = 0;
  std::optional<int64_t> next_at;  // Unix ms
  int64_t created_at = 0;          // `at` of the create event
};

// The loops a v1 log leaves active, in creation order. Events that do not
// decode are skipped with a warning naming session and seq, never fatal.
std::vector<V1Loop> FoldV1Loops(const std::string& session_id, const std::vector<session::Event>& events);

struct V1ImportReport {
  int64_t sessions = 0;  // sessions with v1 loop events
  int64_t imported = 0;  // loops added to the registry by this run
  bool already_done = false;
};

// Imports every active v1 loop of the profile into the registry as
// {prompt, schedule: {kind: every, every_seconds: time_in_seconds},
// session_id: the session}, keeping its next occurrence (a past one is
// caught up once by the scheduler). Exactly once: each (session, v1 id) is
// recorded in loop_v1_imports in the transaction that inserts its loop, and
// the whole scan is skipped after a `v1_import` marker commits. Safe to run
// from several hosts at once and after a crash part-way.
Result<V1ImportReport> ImportV1Loops(store::Database& db, session::SessionStore& sessions, const Clock& clock);

}  // namespace dsh::plugins::loop
