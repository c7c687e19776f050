#include "plugins/loop/loop_routes.h"

#include <string>
#include <utility>

#include "agent/tool.h"

namespace dsh::plugins::loop {

std::vector<host::HttpRoute> LoopRoutes(std::shared_ptr<LoopService> service) {
  std::vector<host::HttpRoute> routes;
  routes.push_back(host::HttpRoute{
      .method = "GET",
      .pattern = "/api/loops",
      .query_keys = {"session_id"},
      .handler =
          [service](host::HttpRouteRequest req, host::HttpRouteDone done) {
            auto it = req.query.find("session_id");
            if (it == req.query.end() || it->second.empty()) {
              return done(InvalidArguments(
                  "query parameter `session_id` is required: \"global\" or a session id"));
            }
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
      .query_keys = {"limit"},
      .handler =
          [service](host::HttpRouteRequest req, host::HttpRouteDone done) {
            auto limit = host::QueryInt(req, "limit", kDefaultRunsLimit, 1, kMaxRunsLimit);
            if (!limit.ok()) return done(limit.status());
            service->History(req.path_params.at("id"), *limit,
                             [done = std::move(done)](Result<std::vector<registry::Run>> r) {
                               if (!r.ok()) return done(r.status());
                               Json list = Json::array();
                               for (const auto& run : *r) list.push_back(registry::RunJson(run));
                               done(host::HttpRouteResponse{200, Json{{"runs", std::move(list)}}});
                             });
          },
  });
  return routes;
}

}  // namespace dsh::plugins::loop
