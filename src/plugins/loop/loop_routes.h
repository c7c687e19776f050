#pragma once

#include <memory>
#include <vector>

#include "host/http_route.h"
#include "plugins/loop/loop_service.h"

namespace dsh::plugins::loop {

// The automation panel's read routes (docs/API.md "Loops"):
//
//   GET /api/loops?session_id=global|ID
//       200 {"loops": [LoopView…]} — loop_list's semantics for the selector
//       ("global" = every active loop of the profile, an id = the loops
//       targeting that session); without session_id 400 invalid_arguments.
//   GET /api/loops/{id}/runs?limit=N&before=NOMINAL_MS
//       200 {"runs": [Run…], "next_before"?: MS} newest first
//       (registry::RunJson); limit 1..1000, default 50; before (optional,
//       integer >= 0) keeps runs with nominal_at < before; next_before, the
//       last run's nominal_at, only when the page is full (exactly `limit`
//       runs); 404 unknown_loop.
//
// The handlers share `service`'s thread-safety and answer from database
// threads.
std::vector<host::HttpRoute> LoopRoutes(std::shared_ptr<LoopService> service);

inline constexpr int64_t kDefaultRunsLimit = 50;
inline constexpr int64_t kMaxRunsLimit = 1000;

}  // namespace dsh::plugins::loop
