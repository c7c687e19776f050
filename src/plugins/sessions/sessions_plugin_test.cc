#include <gtest/gtest.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <cctype>
#include <future>
#include <thread>

#include "agent/agent_manager.h"
#include "agent/testing/scripted_model.h"
#include "base/testing/temp_dir.h"
#include "plugins/sessions/sessions_tools.h"
#include "session/event.h"
#include "store/sqlite_connection.h"

namespace dsh::plugins::sessions {
namespace {

using agent::testing::ScriptedModel;
using namespace std::chrono_literals;
namespace et = session::event_types;

// A real store and AgentManager (scripted model, fake clock) with the
// sessions tools registered, as the host wires them.
class SessionsPluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<store::Migration> migrations = session::SessionStore::Migrations();
    for (auto& m : agent::AgentManager::Migrations()) migrations.push_back(m);
    store::SqliteOptions sqlite{.path = dir_.File("dsh.db")};
    auto db = store::Database::Open(std::make_unique<store::SqliteConnectionFactory>(sqlite), migrations);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(db).value();
    store_ = std::make_unique<session::SessionStore>(*db_, clock_, &hub_);
    work_.emplace(ioc_.get_executor());
    for (int i = 0; i < 2; ++i) threads_.emplace_back([this] { ioc_.run(); });
    agent::AgentManagerOptions options;
    options.sweep_interval = 20ms;
    options.generate_titles = false;
    agent::AgentEnvironment env;
    env.preset = [](const std::optional<std::string>&) { return agent::PresetView{}; };
    manager_ = std::make_unique<agent::AgentManager>(ioc_, *db_, *store_, router_, tools_, clock_, env, options);
    manager_->Start();
    ASSERT_TRUE(RegisterSessionsTools(tools_, *store_, *manager_).ok());
  }

  void TearDown() override {
    while (model_.Release()) {
    }
    manager_->Stop();
    db_->Close();
    work_.reset();
    for (auto& t : threads_) t.join();
    manager_.reset();
    store_.reset();
    db_.reset();
  }

  Result<Json> Call(const std::string& tool, const Json& args) {
    std::promise<Result<Json>> p;
    tools_.Invoke(tool, agent::ToolContext{}, args, [&](Result<Json> r) { p.set_value(std::move(r)); });
    return p.get_future().get();
  }
  Json Ok(const std::string& tool, const Json& args) {
    auto r = Call(tool, args);
    EXPECT_TRUE(r.ok()) << tool << " " << args.dump() << ": " << r.status().ToString();
    return r.ok() ? *r : Json();
  }

  // A persisted (cold) session, updated one second after the previous one.
  std::string Cold() {
    clock_.Advance(1s);
    session::NewSession s;
    s.route = {"scripted", "m1", std::nullopt};
    auto h = store_->Create(s);
    EXPECT_TRUE(h.ok()) << h.status().ToString();
    return h.ok() ? h->id : "";
  }
  // A session live (idle) in the agent manager.
  std::string Live() {
    clock_.Advance(1s);
    session::NewSession s;
    s.route = {"scripted", "m1", std::nullopt};
    std::promise<Result<session::SessionHeader>> p;
    manager_->Create(s, [&](Result<session::SessionHeader> r) { p.set_value(std::move(r)); });
    auto h = p.get_future().get();
    EXPECT_TRUE(h.ok()) << h.status().ToString();
    return h.ok() ? h->id : "";
  }
  void Append(const std::string& id, std::vector<session::EventDraft> events) {
    auto r = store_->Append(id, std::move(events));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }

  // Every header, title snapshot and event of the store, and the live set:
  // equal before and after means nothing was written or resumed.
  std::string Snapshot() {
    auto headers = store_->ListRecent(1'000'000);
    EXPECT_TRUE(headers.ok());
    Json out = Json::array();
    std::vector<std::string> ids;
    for (const auto& h : *headers) {
      auto events = store_->ReadEvents(h.id, 0, 1'000'000);
      EXPECT_TRUE(events.ok());
      Json ev = Json::array();
      for (const auto& e : *events) ev.push_back(session::EventToJson(e));
      out.push_back({{"header", session::HeaderToJson(h)}, {"events", ev}});
      ids.push_back(h.id);
    }
    auto titles = store_->ReadTitles(ids);
    EXPECT_TRUE(titles.ok());
    for (const auto& [id, t] : *titles) out.push_back({id, t.user.value_or("-"), t.generated.value_or("-"), t.fallback.value_or("-")});
    for (const auto& [id, st] : manager_->LiveSessions()) out.push_back({id, std::string(agent::AgentStatusName(st))});
    return out.dump();
  }

  static std::vector<std::string> Ids(const Json& result) {
    std::vector<std::string> ids;
    for (const auto& row : result["sessions"]) ids.push_back(row["session_id"]);
    return ids;
  }
  static Json RowOf(const Json& result, const std::string& id) {
    for (const auto& row : result["sessions"]) {
      if (row["session_id"] == id) return row;
    }
    return Json();
  }

  // Expects `invalid_arguments` naming `field`, and an unchanged store.
  void ExpectRejected(const std::string& tool, const Json& args, const std::string& field) {
    std::string before = Snapshot();
    auto r = Call(tool, args);
    ASSERT_FALSE(r.ok()) << tool << " accepted " << args.dump();
    EXPECT_EQ(r.status().code(), codes::kInvalidArguments) << args.dump();
    EXPECT_NE(r.status().message().find(field), std::string::npos)
        << tool << " " << args.dump() << ": " << r.status().message();
    EXPECT_EQ(Snapshot(), before) << tool << " " << args.dump();
  }

  dsh::testing::TempDir dir_;
  FakeClock clock_;
  session::EventHub hub_;
  ScriptedModel model_;
  agent::testing::SingleModelRouter router_{model_};
  agent::ToolRegistry tools_;
  std::unique_ptr<store::Database> db_;
  std::unique_ptr<session::SessionStore> store_;
  boost::asio::io_context ioc_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
  std::unique_ptr<agent::AgentManager> manager_;
};

TEST_F(SessionsPluginTest, RegistersTheReadOnlyToolsInTheSessionsGroup) {
  for (const char* name : {"session_status", "session_read", "list_sessions", "check_session_status"}) {
    ASSERT_NE(tools_.Find(name), nullptr) << name;
    EXPECT_EQ(tools_.GroupOf(name), "sessions");
    EXPECT_EQ(tools_.Find(name)->parameters()["additionalProperties"], false);
  }
}

TEST_F(SessionsPluginTest, ReturnsLiveIdleSessions) {
  std::string id = Live();
  Json r = Ok("session_status", Json::object());
  EXPECT_EQ(RowOf(r, id)["status"], "idle");
}

TEST_F(SessionsPluginTest, ReturnsLiveRunningSessions) {
  std::string id = Live();
  model_.Push(ScriptedModel::Hold(ScriptedModel::Text("later")));
  std::promise<Result<agent::Delivered>> p;
  manager_->Deliver(agent::Delivery{id, "work", agent::DeliveryMode::kSteer, true, std::nullopt, Json::object()},
                    [&](Result<agent::Delivered> r) { p.set_value(std::move(r)); });
  ASSERT_TRUE(p.get_future().get().ok());
  ASSERT_TRUE(model_.WaitForRequests(1));
  EXPECT_EQ(RowOf(Ok("session_status", Json::object()), id)["status"], "running");
  EXPECT_EQ(Ok("session_status", {{"session_id", id}})["sessions"][0]["status"], "running");
  EXPECT_EQ(Ok("check_session_status", {{"session_id", id}})["status"], "running");
}

TEST_F(SessionsPluginTest, ReturnsColdPersistedSessions) {
  std::string id = Cold();
  Json row = RowOf(Ok("session_status", Json::object()), id);
  EXPECT_EQ(row["status"], "cold");
  EXPECT_EQ(row["updated_at"], "2026-01-01T00:00:01.000Z");
  EXPECT_FALSE(manager_->LiveStatus(id).has_value()) << "listing must not resume a cold session";
}

TEST_F(SessionsPluginTest, MergesALiveAndPersistedRepresentationWithoutDuplicates) {
  std::string cold = Cold();
  std::string live = Live();  // persisted too: its header is in the store
  Json r = Ok("session_status", Json::object());
  EXPECT_EQ(Ids(r), (std::vector<std::string>{live, cold}));
  EXPECT_EQ(RowOf(r, live)["status"], "idle");
  EXPECT_EQ(RowOf(r, cold)["status"], "cold");
}

TEST_F(SessionsPluginTest, IncludesTheLatestDurableTitleWhenAvailable) {
  std::string id = Cold();
  Append(id, {{std::string(et::kTitleGenerated), {{"title", "First"}}}});
  Append(id, {{std::string(et::kTitleGenerated), {{"title", "Second"}}}});
  EXPECT_EQ(RowOf(Ok("session_status", Json::object()), id)["title"], "Second");
  EXPECT_EQ(Ok("check_session_status", {{"session_id", id}})["title"], "Second");
  EXPECT_EQ(RowOf(Ok("list_sessions", Json::object()), id)["title"], "Second");
}

TEST_F(SessionsPluginTest, PreservesThePrecedenceOfUserProviderAndDeterministicFallbackTitleEvents) {
  std::string fallback_only = Cold();
  Append(fallback_only, {{std::string(et::kTitleFallback), {{"title", "fallback"}}}});
  std::string generated = Cold();
  Append(generated, {{std::string(et::kTitleFallback), {{"title", "fallback"}}},
                     {std::string(et::kTitleGenerated), {{"title", "generated"}}}});
  std::string user = Cold();
  // The user rename wins even when a generated title came after it.
  Append(user, {{std::string(et::kTitleUser), {{"title", "renamed"}}},
                {std::string(et::kTitleGenerated), {{"title", "generated"}}},
                {std::string(et::kTitleFallback), {{"title", "fallback"}}}});
  Json r = Ok("session_status", Json::object());
  EXPECT_EQ(RowOf(r, fallback_only)["title"], "fallback");
  EXPECT_EQ(RowOf(r, generated)["title"], "generated");
  EXPECT_EQ(RowOf(r, user)["title"], "renamed");
}

TEST_F(SessionsPluginTest, FallsBackToTheStableSessionIdWhenNoTitleExists) {
  std::string id = Cold();
  Json row = RowOf(Ok("session_status", Json::object()), id);
  EXPECT_EQ(row["session_id"], id);
  EXPECT_FALSE(row.contains("title")) << row.dump();
}

TEST_F(SessionsPluginTest, OrdersByMostRecentUpdate) {
  std::string a = Cold();
  std::string b = Live();
  std::string c = Cold();
  clock_.Advance(1s);
  Append(a, {{std::string(et::kUserMessage), {{"text", "bump"}}}});  // a is now the newest
  Json r = Ok("session_status", Json::object());
  EXPECT_EQ(Ids(r), (std::vector<std::string>{a, c, b}));
  EXPECT_EQ(Ids(Ok("list_sessions", Json::object())), Ids(r));
}

TEST_F(SessionsPluginTest, AppliesLimitAfterMergingAndOrdering) {
  Live();
  std::string b = Cold();
  std::string c = Live();
  std::string d = Cold();
  EXPECT_EQ(Ids(Ok("session_status", {{"recent_n", 2}})), (std::vector<std::string>{d, c}));
  Json three = Ok("list_sessions", {{"limit", 3}});
  EXPECT_EQ(Ids(three), (std::vector<std::string>{d, c, b}));
  EXPECT_EQ(RowOf(three, c)["status"], "idle");
}

TEST_F(SessionsPluginTest, RejectsInvalidLimitsAndUnknownProperties) {
  Cold();
  for (const Json& bad : {Json(0), Json(-1), Json(1.5), Json(9'007'199'254'740'992.0), Json("5"), Json(nullptr)}) {
    ExpectRejected("session_status", {{"recent_n", bad}}, "recent_n");
    ExpectRejected("list_sessions", {{"limit", bad}}, "limit");
  }
  ExpectRejected("session_status", {{"recent", 5}}, "recent");
  ExpectRejected("list_sessions", {{"recent_n", 5}}, "recent_n");
  ExpectRejected("check_session_status", {{"session_id", "x"}, {"extra", 1}}, "extra");
  ExpectRejected("session_read", {{"session_id", "x"}, {"line_numbers", true}}, "line_numbers");
  ExpectRejected("session_status", Json::array(), "arguments");
}

TEST_F(SessionsPluginTest, DoesNotMutateSessionPersistenceOrAgentState) {
  std::string cold = Cold();
  Append(cold, {{std::string(et::kUserMessage), {{"text", "hello"}}}});
  std::string live = Live();
  std::string before = Snapshot();
  Ok("session_status", Json::object());
  Ok("session_status", {{"session_id", cold}});
  Ok("session_status", {{"session_id", "ses_nope"}});
  Ok("session_read", {{"session_id", cold}});
  Ok("session_read", {{"session_id", live}});
  Ok("list_sessions", Json::object());
  Ok("check_session_status", {{"session_id", cold}});
  EXPECT_EQ(Snapshot(), before);
  EXPECT_FALSE(manager_->LiveStatus(cold).has_value());
  EXPECT_EQ(manager_->LiveStatus(live), agent::AgentStatus::kIdle);
  EXPECT_TRUE(model_.requests().empty()) << "no model call (title generation or turn) may start";
}

TEST_F(SessionsPluginTest, SessionStatusWithNoArgumentsReturnsThe50MostRecentlyUpdatedSessionsByDefault) {
  std::vector<std::string> created;
  for (int i = 0; i < 55; ++i) created.push_back(Cold());
  Json r = Ok("session_status", Json::object());
  std::vector<std::string> expected(created.rbegin(), created.rbegin() + 50);
  EXPECT_EQ(Ids(r), expected);
  EXPECT_EQ(Ids(Ok("list_sessions", Json::object())), expected);
}

TEST_F(SessionsPluginTest, SessionStatusRecentNAppliesTheSamePositiveIntegerValidation) {
  for (int i = 0; i < 3; ++i) Cold();
  EXPECT_EQ(Ok("session_status", {{"recent_n", 1}})["sessions"].size(), 1u);
  EXPECT_EQ(Ok("session_status", {{"recent_n", 9'007'199'254'740'991LL}})["sessions"].size(), 3u);
  ExpectRejected("session_status", {{"recent_n", 0}}, "recent_n");
  ExpectRejected("session_status", {{"recent_n", -3}}, "recent_n");
  ExpectRejected("session_status", {{"recent_n", 2.5}}, "recent_n");
  ExpectRejected("session_status", {{"recent_n", 9'007'199'254'740'992LL}}, "recent_n");
}

TEST_F(SessionsPluginTest, SessionStatusWithSessionIdReturnsOneExactStatusRowIncludingMissing) {
  std::string cold = Cold();
  std::string live = Live();
  Json c = Ok("session_status", {{"session_id", cold}});
  ASSERT_EQ(c["sessions"].size(), 1u);
  EXPECT_EQ(c["sessions"][0], (Json{{"session_id", cold}, {"status", "cold"}, {"updated_at", "2026-01-01T00:00:01.000Z"}}));
  Json l = Ok("session_status", {{"session_id", live}, {"recent_n", 7}});
  ASSERT_EQ(l["sessions"].size(), 1u);
  EXPECT_EQ(l["sessions"][0]["status"], "idle");
  Json m = Ok("session_status", {{"session_id", "ses_missing"}});
  EXPECT_EQ(m, (Json{{"sessions", Json::array({Json{{"session_id", "ses_missing"}, {"status", "missing"}}})}}));
  ExpectRejected("session_status", {{"session_id", ""}}, "session_id");
  ExpectRejected("session_status", {{"session_id", 5}}, "session_id");
}

TEST_F(SessionsPluginTest, CheckSessionStatusReturnsOneViewAndNeverResumes) {
  std::string cold = Cold();
  EXPECT_EQ(Ok("check_session_status", {{"session_id", cold}}),
            (Json{{"session_id", cold}, {"status", "cold"}, {"updated_at", "2026-01-01T00:00:01.000Z"}}));
  EXPECT_EQ(Ok("check_session_status", {{"session_id", "ses_missing"}}),
            (Json{{"session_id", "ses_missing"}, {"status", "missing"}}));
  EXPECT_FALSE(manager_->LiveStatus(cold).has_value());
  ExpectRejected("check_session_status", Json::object(), "session_id");
  ExpectRejected("check_session_status", {{"session_id", ""}}, "session_id");
}

TEST_F(SessionsPluginTest, ListSessionsReturnsBothLiveAndColdSessions) {
  std::string cold = Cold();
  std::string live = Live();
  Json r = Ok("list_sessions", Json::object());
  EXPECT_EQ(Ids(r), (std::vector<std::string>{live, cold}));
  EXPECT_EQ(RowOf(r, live)["status"], "idle");
  EXPECT_EQ(RowOf(r, cold)["status"], "cold");
  for (const auto& row : r["sessions"]) EXPECT_TRUE(row.contains("updated_at")) << row.dump();
}

TEST_F(SessionsPluginTest, ListSessionsReturnsDurableTitlesWithoutTriggeringTitleGeneration) {
  std::string titled = Cold();
  Append(titled, {{std::string(et::kUserMessage), {{"text", "a prompt"}}},
                  {std::string(et::kTitleFallback), {{"title", "a prompt"}}}});
  std::string untitled = Live();
  Json r = Ok("list_sessions", Json::object());
  EXPECT_EQ(RowOf(r, titled)["title"], "a prompt");
  EXPECT_FALSE(RowOf(r, untitled).contains("title"));
  EXPECT_TRUE(model_.requests().empty());
}

// A conversation with a tool round trip and trace-only events between.
class SessionReadTest : public SessionsPluginTest {
 protected:
  std::string Conversation() {
    std::string id = Cold();
    Append(id, {{std::string(et::kUserMessage), {{"text", "what time is it?"}}},
                {"turn/start", Json::object()},
                {std::string(et::kToolCall), {{"call_id", "c1"}, {"name", "clock"}, {"arguments", {{"zone", "UTC"}}}}},
                {std::string(et::kToolResult), {{"call_id", "c1"}, {"name", "clock"}, {"result", {{"now", "noon"}}}}},
                {std::string(et::kAssistantMessage), {{"text", "It is noon."}}},
                {"turn/end", Json::object()}});
    return id;
  }
};

TEST_F(SessionReadTest, ShowsToolCallsAsAssistantBlocksAndToolResultsAsToolBlocks) {
  std::string id = Conversation();
  Json r = Ok("session_read", {{"session_id", id}});
  EXPECT_EQ(r["session_id"], id);
  EXPECT_EQ(r["offset"], 1);
  EXPECT_EQ(r["total_messages"], 4);
  ASSERT_EQ(r["messages"].size(), 4u) << r.dump(2);
  EXPECT_EQ(r["messages"][0], (Json{{"role", "user"}, {"content", "what time is it?"}}));
  EXPECT_EQ(r["messages"][1]["role"], "assistant");
  EXPECT_EQ(r["messages"][1]["tool_calls"][0]["name"], "clock");
  EXPECT_EQ(r["messages"][1]["tool_calls"][0]["arguments"], (Json{{"zone", "UTC"}}));
  EXPECT_EQ(r["messages"][2]["role"], "tool");
  EXPECT_EQ(r["messages"][2]["name"], "clock");
  EXPECT_EQ(r["messages"][3], (Json{{"role", "assistant"}, {"content", "It is noon."}}));
  EXPECT_EQ(r["footer"], "(Showing messages 1-4 of 4)");
}

TEST_F(SessionReadTest, SessionReadDoesNotPrefixMessagesWithGeneratedLineNumbers) {
  std::string id = Conversation();
  Json r = Ok("session_read", {{"session_id", id}, {"offset", 2}});
  for (const auto& m : r["messages"]) {
    EXPECT_FALSE(m.contains("line") || m.contains("index") || m.contains("n")) << m.dump();
    if (m["content"].is_string() && !m["content"].get<std::string>().empty()) {
      EXPECT_FALSE(std::isdigit(static_cast<unsigned char>(m["content"].get<std::string>()[0]))) << m.dump();
    }
  }
  EXPECT_EQ(r["messages"][0]["role"], "assistant");
}

TEST_F(SessionReadTest, ReturnsTheRequestedWindowWithItsFooter) {
  std::string id = Cold();
  std::vector<session::EventDraft> events;
  for (int i = 1; i <= 45; ++i) events.push_back({std::string(et::kUserMessage), {{"text", "m" + std::to_string(i)}}});
  Append(id, std::move(events));
  Json r = Ok("session_read", {{"session_id", id}, {"limit", 20}});
  EXPECT_EQ(r["footer"], "(Showing messages 1-20 of 45)");
  EXPECT_EQ(r["messages"].size(), 20u);
  Json tail = Ok("session_read", {{"session_id", id}, {"offset", 41}, {"limit", 20}});
  EXPECT_EQ(tail["footer"], "(Showing messages 41-45 of 45)");
  EXPECT_EQ(tail["offset"], 41);
  EXPECT_EQ(tail["messages"][0]["content"], "m41");
  EXPECT_EQ(Ok("session_read", {{"session_id", id}, {"offset", 45}})["messages"].size(), 1u);
}

TEST_F(SessionReadTest, LimitDefaultsToAndIsCappedAt200) {
  std::string id = Cold();
  std::vector<session::EventDraft> events;
  for (int i = 1; i <= 250; ++i) events.push_back({std::string(et::kUserMessage), {{"text", "m" + std::to_string(i)}}});
  Append(id, std::move(events));
  Json r = Ok("session_read", {{"session_id", id}});
  EXPECT_EQ(r["messages"].size(), 200u);
  EXPECT_EQ(r["footer"], "(Showing messages 1-200 of 250)");
  EXPECT_EQ(Ok("session_read", {{"session_id", id}, {"limit", 200}})["messages"].size(), 200u);
  ExpectRejected("session_read", {{"session_id", id}, {"limit", 201}}, "limit");
}

TEST_F(SessionReadTest, RejectsAnOffsetBeyondANonEmptySession) {
  std::string id = Conversation();
  std::string before = Snapshot();
  auto r = Call("session_read", {{"session_id", id}, {"offset", 5}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), codes::kInvalidArguments);
  EXPECT_NE(r.status().message().find("`offset` 5 is beyond"), std::string::npos) << r.status().message();
  EXPECT_EQ(Snapshot(), before);
}

TEST_F(SessionReadTest, AnEmptySessionReadsAsNoMessages) {
  std::string id = Cold();
  Json r = Ok("session_read", {{"session_id", id}, {"offset", 3}});
  EXPECT_EQ(r["messages"], Json::array());
  EXPECT_EQ(r["total_messages"], 0);
  EXPECT_EQ(r["footer"], "(Showing messages 0-0 of 0)");
}

TEST_F(SessionReadTest, AnUnknownSessionIsNotFoundAndNothingIsCreated) {
  std::string before = Snapshot();
  auto r = Call("session_read", {{"session_id", "ses_missing"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), codes::kNotFound);
  EXPECT_EQ(Snapshot(), before);
}

TEST_F(SessionReadTest, RejectsEveryInvalidArgumentNamingTheField) {
  std::string id = Conversation();
  ExpectRejected("session_read", Json::object(), "session_id");
  ExpectRejected("session_read", {{"session_id", ""}}, "session_id");
  ExpectRejected("session_read", {{"session_id", nullptr}}, "session_id");
  for (const Json& bad : {Json(0), Json(-1), Json(1.5), Json(9'007'199'254'740'992.0), Json("1")}) {
    ExpectRejected("session_read", {{"session_id", id}, {"offset", bad}}, "offset");
    ExpectRejected("session_read", {{"session_id", id}, {"limit", bad}}, "limit");
  }
}

}  // namespace
}  // namespace dsh::plugins::sessions
