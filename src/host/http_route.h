#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/json.h"
#include "base/status.h"

namespace dsh::host {

// An HTTP route a plugin contributes to the JSON API, in terms that do not
// depend on the server layer. The server matches it after its built-in
// routes, with the same token auth and error envelope (docs/API.md), and
// refuses query parameters not listed in `query_keys` before calling the
// handler.

struct HttpRouteRequest {
  // The pattern's `{name}` segments, e.g. {"id": "loop_1"}.
  std::map<std::string, std::string, std::less<>> path_params;
  std::map<std::string, std::string> query;  // only keys from query_keys
  std::string body;                          // raw (POST routes)
};

struct HttpRouteResponse {
  int status = 200;
  Json body;
};

// Called exactly once, from any thread. An error becomes
// `{"error": {"code", "message"}}` with the status for its code.
using HttpRouteDone = std::function<void(Result<HttpRouteResponse>)>;

struct HttpRoute {
  std::string method;   // "GET", "POST", "PUT" or "DELETE"
  std::string pattern;  // "/api/loops/{id}/runs": `{x}` matches one non-empty segment
  std::vector<std::string> query_keys;
  std::function<void(HttpRouteRequest, HttpRouteDone)> handler;
};

// The query parameter `name` of `query` as an integer in [min, max];
// `fallback` when absent. `invalid_arguments` naming it otherwise. Shared by
// the built-in routes and plugin routes.
Result<int64_t> QueryInt(const std::map<std::string, std::string>& query, std::string_view name, int64_t fallback,
                         int64_t min, int64_t max);
inline Result<int64_t> QueryInt(const HttpRouteRequest& req, std::string_view name, int64_t fallback, int64_t min,
                                int64_t max) {
  return QueryInt(req.query, name, fallback, min, max);
}

}  // namespace dsh::host
