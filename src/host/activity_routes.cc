#include "host/activity_routes.h"

#include <memory>
#include <set>
#include <utility>

#include "agent/activity_store.h"
#include "base/schema.h"

namespace dsh::host {
namespace {

namespace activity = agent::activity;

// What POST /api/activity/read marks: exactly one of the three forms.
struct ReadRequest {
  std::vector<int64_t> ids;
  bool all = false;
  std::optional<std::string> session_id;
};

Result<ReadRequest> ParseReadRequest(const std::string& body) {
  auto json = ParseJson(body);
  if (!json.ok() || !json->is_object()) {
    return InvalidArguments("the body must be a JSON object: {\"ids\": [...]}, {\"all\": true} or {\"session_id\": \"...\"}");
  }
  ReadRequest r;
  int forms = 0;
  for (const auto& [key, value] : json->items()) {
    if (key == "ids") {
      ++forms;
      if (!value.is_array() || value.empty()) return InvalidArguments("`ids` must be a non-empty array of item ids");
      if (value.size() > 1000) return InvalidArguments("`ids` may name at most 1000 items");
      for (const auto& id : value) {
        if (!id.is_number_integer() || id.get<int64_t>() <= 0 || id.get<int64_t>() > kMaxSafeInteger) {
          return InvalidArguments("`ids` must hold positive integer item ids, got " + DumpJson(id));
        }
        r.ids.push_back(id.get<int64_t>());
      }
    } else if (key == "all") {
      ++forms;
      if (value != Json(true)) return InvalidArguments("`all` must be true");
      r.all = true;
    } else if (key == "session_id") {
      ++forms;
      if (!value.is_string() || value.get_ref<const std::string&>().empty()) {
        return InvalidArguments("`session_id` must be a non-empty string");
      }
      r.session_id = value.get<std::string>();
    } else {
      return InvalidArguments("unknown property `" + key + "`: expected one of ids, all, session_id");
    }
  }
  if (forms != 1) return InvalidArguments("give exactly one of `ids`, `all` or `session_id`");
  return r;
}

void Announce(session::EventHub* hub) {
  if (hub != nullptr) hub->PublishChange({"activity", ""});
}

}  // namespace

std::vector<HttpRoute> ActivityRoutes(store::Database& db, session::SessionStore& sessions, session::EventHub* hub) {
  std::vector<HttpRoute> routes;
  routes.push_back(HttpRoute{
      .method = "GET",
      .pattern = "/api/activity",
      .query_keys = {"filter", "limit", "before"},
      .handler =
          [&db, &sessions](HttpRouteRequest req, HttpRouteDone done) {
            activity::Filter filter = activity::Filter::kAll;
            if (auto f = req.query.find("filter"); f != req.query.end()) {
              auto parsed = activity::ParseFilter(f->second);
              if (!parsed) {
                return done(InvalidArguments("query parameter `filter` must be all, unread or failed, got \"" +
                                             f->second + "\""));
              }
              filter = *parsed;
            }
            auto limit = QueryInt(req, "limit", kDefaultActivityLimit, 1, kMaxActivityLimit);
            if (!limit.ok()) return done(limit.status());
            std::optional<int64_t> before;
            if (req.query.contains("before")) {
              auto value = QueryInt(req, "before", 0, 1, kMaxSafeInteger);
              if (!value.ok()) return done(value.status());
              before = *value;
            }
            struct Read {
              activity::Page page;
              int64_t unread = 0;
              std::map<std::string, Json> receipts;  // by item key
            };
            auto read = std::make_shared<Read>();
            db.Read(
                [read, filter, limit = *limit, before](store::Tx& tx) -> Status {
                  DSH_ASSIGN_OR_RETURN(read->page, activity::List(tx, filter, limit, before));
                  DSH_ASSIGN_OR_RETURN(read->unread, activity::CountUnreadTotal(tx));
                  std::vector<std::string> keys;
                  for (const auto& item : read->page.items) keys.push_back(item.key);
                  DSH_ASSIGN_OR_RETURN(read->receipts, agent::outbox::Receipts(tx, keys));
                  return Status::Ok();
                },
                [&sessions, read, done = std::move(done)](Status st) mutable {
                  if (!st.ok()) return done(st);
                  std::set<std::string> ids;
                  for (const auto& item : read->page.items) {
                    if (item.outcome.session_id) ids.insert(*item.outcome.session_id);
                  }
                  sessions.ReadTitlesAsync(
                      {ids.begin(), ids.end()},
                      [read, done = std::move(done)](Result<std::map<std::string, session::Titles>> titles) {
                        if (!titles.ok()) return done(titles.status());
                        Json items = Json::array();
                        for (const auto& item : read->page.items) {
                          std::optional<std::string> title;
                          if (item.outcome.session_id) {
                            if (auto t = titles->find(*item.outcome.session_id); t != titles->end()) {
                              title = t->second.Effective();
                            }
                          }
                          Json j = activity::ItemJson(item, title);
                          if (auto r = read->receipts.find(item.key); r != read->receipts.end()) {
                            j["notifications"] = r->second;
                          }
                          items.push_back(std::move(j));
                        }
                        Json body = {{"items", std::move(items)}, {"unread", read->unread}};
                        if (read->page.next) body["next"] = *read->page.next;
                        done(HttpRouteResponse{200, std::move(body)});
                      });
                });
          },
  });
  routes.push_back(HttpRoute{
      .method = "POST",
      .pattern = "/api/activity/read",
      .query_keys = {},
      .handler =
          [&db, hub](HttpRouteRequest req, HttpRouteDone done) {
            auto request = ParseReadRequest(req.body);
            if (!request.ok()) return done(request.status());
            struct Marked {
              int64_t marked = 0;
              int64_t unread = 0;
            };
            auto marked = std::make_shared<Marked>();
            db.Write(
                [request = std::move(*request), marked](store::Tx& tx) -> Status {
                  if (request.all) {
                    DSH_ASSIGN_OR_RETURN(marked->marked, activity::MarkAllRead(tx));
                  } else if (request.session_id) {
                    DSH_ASSIGN_OR_RETURN(marked->marked, activity::MarkSessionRead(tx, *request.session_id));
                  } else {
                    DSH_ASSIGN_OR_RETURN(marked->marked, activity::MarkRead(tx, request.ids));
                  }
                  DSH_ASSIGN_OR_RETURN(marked->unread, activity::CountUnreadTotal(tx));
                  return Status::Ok();
                },
                [hub, marked, done = std::move(done)](Status st) {
                  if (!st.ok()) return done(st);
                  if (marked->marked > 0) Announce(hub);
                  done(HttpRouteResponse{200, Json{{"marked", marked->marked}, {"unread", marked->unread}}});
                });
          },
  });
  routes.push_back(HttpRoute{
      .method = "GET",
      .pattern = "/api/activity/unread",
      .query_keys = {},
      .handler =
          [&db](HttpRouteRequest, HttpRouteDone done) {
            auto unread = std::make_shared<activity::Unread>();
            db.Read(
                [unread](store::Tx& tx) -> Status {
                  DSH_ASSIGN_OR_RETURN(*unread, activity::CountUnread(tx));
                  return Status::Ok();
                },
                [unread, done = std::move(done)](Status st) {
                  if (!st.ok()) return done(st);
                  Json sessions = Json::object();
                  for (const auto& [id, n] : unread->sessions) sessions[id] = n;
                  done(HttpRouteResponse{200, Json{{"total", unread->total}, {"sessions", std::move(sessions)}}});
                });
          },
  });
  return routes;
}

}  // namespace dsh::host
