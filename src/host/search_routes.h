#pragma once

#include <cstdint>
#include <vector>

#include "host/http_route.h"
#include "session/search_index.h"

namespace dsh::host {

// Full-text search over the profile's sessions (docs/API.md, "Search"):
//   GET /api/search?q=TEXT&limit=N&before=CURSOR
//       -> {"results": [{session_id, title, seq, at, snippet, archived}], "next": CURSOR?}
// `index` must outlive the routes.
std::vector<HttpRoute> SearchRoutes(session::SearchIndex& index);

inline constexpr int64_t kDefaultSearchLimit = 20;
inline constexpr int64_t kMaxSearchLimit = 100;

}  // namespace dsh::host
