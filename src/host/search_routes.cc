#include "host/search_routes.h"

#include <utility>

#include "time/rfc3339.h"

namespace dsh::host {

std::vector<HttpRoute> SearchRoutes(session::SearchIndex& index) {
  HttpRoute search{
      .method = "GET",
      .pattern = "/api/search",
      .query_keys = {"q", "limit", "before"},
      .handler =
          [&index](HttpRouteRequest req, HttpRouteDone done) {
            session::SearchQuery q;
            auto text = req.query.find("q");
            if (text == req.query.end()) return done(InvalidArguments("`q` is required: the words to search for"));
            q.text = text->second;
            auto limit = QueryInt(req, "limit", kDefaultSearchLimit, 1, kMaxSearchLimit);
            if (!limit.ok()) return done(limit.status());
            q.limit = *limit;
            if (auto b = req.query.find("before"); b != req.query.end()) q.before = b->second;
            index.SearchAsync(std::move(q), [done = std::move(done)](Result<session::SearchPage> page) {
              if (!page.ok()) return done(page.status());
              Json results = Json::array();
              for (const auto& r : page->results) {
                results.push_back({{"session_id", r.session_id},
                                   {"title", r.title ? Json(*r.title) : Json(nullptr)},
                                   {"seq", r.seq},
                                   {"at", FormatRfc3339Utc(FromUnixMillis(r.at))},
                                   {"snippet", r.snippet},
                                   {"archived", r.archived}});
              }
              Json body = {{"results", std::move(results)}};
              if (page->next) body["next"] = *page->next;
              done(HttpRouteResponse{200, std::move(body)});
            });
          },
  };
  return {std::move(search)};
}

}  // namespace dsh::host
