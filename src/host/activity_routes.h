#pragma once

#include <vector>

#include "host/http_route.h"
#include "session/event_hub.h"
#include "session/session_store.h"
#include "store/database.h"

namespace dsh::host {

// The activity list's routes (docs/API.md, "Activity"), over the
// agent layer's `activity` table:
//   GET  /api/activity?filter=all|unread|failed&limit=N&before=ID
//        -> {"items": [item…], "unread": N, "next": ID?}, newest first
//   POST /api/activity/read  {"ids": [ID…]} | {"all": true} | {"session_id": "…"}
//        -> {"marked": n, "unread": N}
//   GET  /api/activity/unread -> {"total": N, "sessions": {"ses_…": n}}
// Marking announces `activity` on the change feed through `hub` (may be null).
// The borrowed services must outlive the routes.
std::vector<HttpRoute> ActivityRoutes(store::Database& db, session::SessionStore& sessions, session::EventHub* hub);

inline constexpr int64_t kDefaultActivityLimit = 50;
inline constexpr int64_t kMaxActivityLimit = 500;

}  // namespace dsh::host
