#include "plugins/loop/loop_routes.h"

#include <optional>
#include <string>
#include <utility>

#include "agent/tool.h"
#include "base/schema.h"

namespace dsh::plugins::loop {

namespace {

// The optional `before` query parameter of the paged routes (an integer >= 0).
Result<std::optional<int64_t>> Before(const host::HttpRouteRequest& req) {
  if (!req.query.contains("before")) return std::optional<int64_t>();
  auto value = host::QueryInt(req, "before", 0, 0, kMaxSafeInteger);
  if (!value.ok()) return value.status();
  return std::optional<int64_t>(*value);
}

// GET /api/loops?finished=true: completed loops, newest first, paged by the
// last run's time (`next` is the `before` of the next page).
void ListFinished(LoopService& service, const host::HttpRouteRequest& req, const std::string& selector,
                  host::HttpRouteDone done) {
  auto limit = host::QueryInt(req, "limit", kDefaultRunsLimit, 1, kMaxRunsLimit);
  if (!limit.ok()) return done(limit.status());
  auto before = Before(req);
  if (!before.ok()) return done(before.status());
  service.ListFinished(selector, *limit, *before,
                       [now = service.now(), limit = *limit, done = std::move(done)](Result<std::vector<LoopRecord>> r) {
                         if (!r.ok()) return done(r.status());
                         Json list = Json::array();
                         for (const auto& l : *r) list.push_back(LoopViewJson(l, now));
                         Json body = {{"loops", std::move(list)}};
                         if (static_cast<int64_t>(r->size()) == limit) {
                           body["next"] = r->back().last_run_at.value_or(r->back().created_at);
                         }
                         done(host::HttpRouteResponse{200, std::move(body)});
                       });
}

}  // namespace

std::vector<host::HttpRoute> LoopRoutes(std::shared_ptr<LoopService> service) {
  std::vector<host::HttpRoute> routes;
  routes.push_back(host::HttpRoute{
      .method = "GET",
      .pattern = "/api/loops",
      .query_keys = {"session_id", "finished", "limit", "before"},
      .handler =
          [service](host::HttpRouteRequest req, host::HttpRouteDone done) {
            auto it = req.query.find("session_id");
            if (it == req.query.end() || it->second.empty()) {
              return done(InvalidArguments(
                  "query parameter `session_id` is required: \"global\" or a session id"));
            }
            bool finished = false;
            if (auto f = req.query.find("finished"); f != req.query.end()) {
              if (f->second != "true" && f->second != "false") {
                return done(InvalidArguments("query parameter `finished` must be true or false, got \"" + f->second +
                                             "\""));
              }
              finished = f->second == "true";
            }
            if (!finished && (req.query.contains("limit") || req.query.contains("before"))) {
              return done(InvalidArguments("query parameters `limit` and `before` page the finished loops: use them "
                                           "with finished=true"));
            }
            if (finished) return ListFinished(*service, req, it->second, std::move(done));
            // A root call: the selector always names what to list.
            service->List(agent::ToolContext{}, it->second,
                          [service, done = std::move(done)](Result<std::vector<LoopRecord>> r) {
                            if (!r.ok()) return done(r.status());
                            int64_t now = service->now();
                            Json list = Json::array();
                            for (const auto& l : *r) list.push_back(LoopViewJson(l, now));
                            done(host::HttpRouteResponse{200, Json{{"loops", std::move(list)}}});
                          });
          },
  });
  routes.push_back(host::HttpRoute{
      .method = "GET",
      .pattern = "/api/loops/{id}/runs",
      .query_keys = {"limit", "before"},
      .handler =
          [service](host::HttpRouteRequest req, host::HttpRouteDone done) {
            auto limit = host::QueryInt(req, "limit", kDefaultRunsLimit, 1, kMaxRunsLimit);
            if (!limit.ok()) return done(limit.status());
            auto before = Before(req);
            if (!before.ok()) return done(before.status());
            service->History(req.path_params.at("id"), *limit, *before,
                             [limit = *limit, done = std::move(done)](Result<std::vector<registry::Run>> r) {
                               if (!r.ok()) return done(r.status());
                               Json list = Json::array();
                               for (const auto& run : *r) list.push_back(registry::RunJson(run));
                               Json body = {{"runs", std::move(list)}};
                               // A full page may have older runs behind it.
                               if (static_cast<int64_t>(r->size()) == limit) {
                                 body["next_before"] = r->back().nominal_at;
                               }
                               done(host::HttpRouteResponse{200, std::move(body)});
                             });
          },
  });
  return routes;
}

}  // namespace dsh::plugins::loop
