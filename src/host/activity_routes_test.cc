#include "host/activity_routes.h"

#include <gtest/gtest.h>

#include <future>

#include "agent/activity_store.h"
#include "agent/agent_manager.h"
#include "agent/testing/deliver.h"
#include "base/clock.h"
#include "store/testing/test_backend.h"

namespace dsh::host {
namespace {

namespace activity = agent::activity;

class ActivityRoutesTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::vector<store::Migration> migrations = session::SessionStore::Migrations();
    for (auto& m : agent::AgentManager::Migrations()) migrations.push_back(m);
    auto db = store::Database::Open(backend_.Factory(), migrations);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(db).value();
    sessions_ = std::make_unique<session::SessionStore>(*db_, clock_, &hub_);
    routes_ = ActivityRoutes(*db_, *sessions_, &hub_);
    changes_ = hub_.SubscribeChanges([this](const session::EventHub::Change& c) {
      if (c.topic == "activity") ++announced_;
    });
  }

  std::string Session(const std::string& title) {
    session::NewSession s;
    s.route = {"echo", "echo", std::nullopt};
    auto h = sessions_->Create(s);
    EXPECT_TRUE(h.ok());
    EXPECT_TRUE(sessions_->Append(h->id, {{"title/fallback", {{"title", title}}}}).ok());
    return h->id;
  }
  void Deliver(const std::string& session_id, const std::string& message_id, const std::string& kind = "agent_message") {
    ASSERT_TRUE(db_->WriteSync([&](store::Tx& tx) {
                   return agent::testing::Deliver(tx, activity::Source{kind, {}, {}, {}}, session_id, message_id,
                                                  std::nullopt, 1000);
                 }).ok());
  }
  void End(const std::string& message_id, const std::string& status, const std::string& summary) {
    activity::TurnEnd end{status, {}, {}, 2000, 10, 5, summary};
    if (status == "error") {
      end.error_code = "model_error";
      end.error_message = summary;
    }
    ASSERT_TRUE(db_->WriteSync([&](store::Tx& tx) { return activity::TurnEnded(tx, agent::testing::Refs(tx, {message_id}), 2000, end).status(); }).ok());
  }

  Result<HttpRouteResponse> Call(const std::string& method, const std::string& pattern,
                                 std::map<std::string, std::string> query = {}, std::string body = "") {
    for (const auto& route : routes_) {
      if (route.pattern != pattern || route.method != method) continue;
      for (const auto& [key, value] : query) {
        EXPECT_NE(std::find(route.query_keys.begin(), route.query_keys.end(), key), route.query_keys.end()) << key;
      }
      std::promise<Result<HttpRouteResponse>> p;
      route.handler(HttpRouteRequest{{}, std::move(query), std::move(body)},
                    [&](Result<HttpRouteResponse> r) { p.set_value(std::move(r)); });
      return p.get_future().get();
    }
    ADD_FAILURE() << "no route " << method << " " << pattern;
    return Status("test", "no route");
  }
  Json Get(std::map<std::string, std::string> query = {}) {
    auto r = Call("GET", "/api/activity", std::move(query));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->body : Json();
  }

  store::testing::TestBackend backend_{GetParam(), /*fast=*/true};
  FakeClock clock_;
  session::EventHub hub_;
  std::unique_ptr<store::Database> db_;
  std::unique_ptr<session::SessionStore> sessions_;
  std::vector<HttpRoute> routes_;
  std::atomic<int> announced_{0};
  std::unique_ptr<session::EventHub::Subscription> changes_;
};
INSTANTIATE_TEST_SUITE_P(Backends, ActivityRoutesTest, store::testing::BackendNames(), store::testing::BackendTestName);

TEST_P(ActivityRoutesTest, ListsItemsNewestFirstWithTitlesOutcomesAndFilters) {
  std::string a = Session("Disk report");
  std::string b = Session("<loop> <loop_id>loop_01kdvdna008p7ptbknga2p5gk7</loop_id>…");
  Deliver(a, "m1");
  End("m1", "completed", "All disks below 80%.");
  Deliver(b, "m2", "loop_run");
  End("m2", "error", "connection refused");
  Deliver(a, "m3");

  Json all = Get();
  ASSERT_EQ(all["items"].size(), 3u) << all.dump();
  EXPECT_EQ(all["unread"], 3);
  EXPECT_FALSE(all.contains("next"));
  const Json& newest = all["items"][0];
  EXPECT_EQ(newest["outcome"], (Json{{"status", "pending"}}));
  EXPECT_EQ(newest["title"], "Disk report");
  const Json& failed = all["items"][1];
  EXPECT_EQ(failed["kind"], "loop_run");
  EXPECT_EQ(failed["title"], "Loop run") << "no view shows <loop> markup as a title";
  EXPECT_EQ(failed["outcome"]["status"], "error");
  EXPECT_EQ(failed["outcome"]["error"], (Json{{"code", "model_error"}, {"message", "connection refused"}}));
  const Json& done = all["items"][2];
  EXPECT_EQ(done["summary"], "All disks below 80%.");
  EXPECT_EQ(done["tokens"], (Json{{"input_tokens", 10}, {"output_tokens", 5}}));
  EXPECT_EQ(done["session_id"], a);
  EXPECT_EQ(done["read"], false);

  Json only_failed = Get({{"filter", "failed"}});
  ASSERT_EQ(only_failed["items"].size(), 1u);
  EXPECT_EQ(only_failed["items"][0]["id"], failed["id"]);

  Json page = Get({{"limit", "2"}});
  ASSERT_EQ(page["items"].size(), 2u);
  ASSERT_TRUE(page.contains("next"));
  Json rest = Get({{"limit", "2"}, {"before", std::to_string(page["next"].get<int64_t>())}});
  ASSERT_EQ(rest["items"].size(), 1u);
  EXPECT_EQ(rest["items"][0]["id"], done["id"]);

  for (auto bad : std::vector<std::map<std::string, std::string>>{
           {{"filter", "nope"}}, {{"limit", "0"}}, {{"limit", "501"}}, {{"before", "-1"}}, {{"limit", "x"}}}) {
    auto r = Call("GET", "/api/activity", bad);
    ASSERT_FALSE(r.ok()) << bad.begin()->first;
    EXPECT_EQ(r.status().code(), codes::kInvalidArguments);
    EXPECT_NE(r.status().message().find(bad.begin()->first), std::string::npos) << r.status().message();
  }
}

TEST_P(ActivityRoutesTest, MarksReadByIdsSessionOrAllAndCountsUnreadPerSession) {
  std::string a = Session("a");
  std::string b = Session("b");
  Deliver(a, "m1");
  Deliver(a, "m2");
  Deliver(b, "m3");
  auto unread = Call("GET", "/api/activity/unread");
  ASSERT_TRUE(unread.ok());
  EXPECT_EQ(unread->body, (Json{{"total", 3}, {"sessions", {{a, 2}, {b, 1}}}}));

  int64_t first = Get()["items"][2]["id"];
  auto by_id = Call("POST", "/api/activity/read", {}, Json{{"ids", {first}}}.dump());
  ASSERT_TRUE(by_id.ok()) << by_id.status().ToString();
  EXPECT_EQ(by_id->body, (Json{{"marked", 1}, {"unread", 2}}));
  EXPECT_EQ(announced_.load(), 1);
  EXPECT_EQ(Get({{"filter", "unread"}})["items"].size(), 2u);

  auto by_session = Call("POST", "/api/activity/read", {}, Json{{"session_id", a}}.dump());
  EXPECT_EQ(by_session->body, (Json{{"marked", 1}, {"unread", 1}}));
  EXPECT_EQ(Call("GET", "/api/activity/unread")->body, (Json{{"total", 1}, {"sessions", {{b, 1}}}}));

  // Bad bodies change nothing.
  for (const std::string bad : {"", "[]", R"({})", R"({"ids": []})", R"({"ids": [0]})", R"({"ids": ["1"]})",
                                R"({"all": false})", R"({"all": true, "session_id": "x"})", R"({"everything": true})",
                                R"({"session_id": ""})"}) {
    auto r = Call("POST", "/api/activity/read", {}, bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), codes::kInvalidArguments) << bad;
  }
  EXPECT_EQ(Get()["unread"], 1);

  auto all = Call("POST", "/api/activity/read", {}, R"({"all": true})");
  EXPECT_EQ(all->body, (Json{{"marked", 1}, {"unread", 0}}));
  EXPECT_EQ(Call("GET", "/api/activity/unread")->body, (Json{{"total", 0}, {"sessions", Json::object()}}));
  int before = announced_.load();
  EXPECT_EQ(Call("POST", "/api/activity/read", {}, R"({"all": true})")->body, (Json{{"marked", 0}, {"unread", 0}}));
  EXPECT_EQ(announced_.load(), before) << "nothing changed, nothing announced";
}

}  // namespace
}  // namespace dsh::host
