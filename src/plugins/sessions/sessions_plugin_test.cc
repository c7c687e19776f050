#include <gtest/gtest.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <algorithm>
#include <cctype>
#include <mutex>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <future>
#include <thread>

#include "agent/agent_manager.h"
#include "agent/testing/event_waiter.h"
#include "agent/testing/scripted_model.h"
#include "base/testing/temp_dir.h"
#include "plugins/sessions/sessions_tools.h"
#include "session/event.h"
#include "store/sqlite_connection.h"
#include "store/testing/forwarding_connection.h"

namespace dsh::plugins::sessions {
namespace {

using agent::testing::ScriptedModel;
using namespace std::chrono_literals;
namespace et = session::event_types;

// Which session's title snapshot the database cannot read ("" = none).
struct TitleFaults {
  std::mutex mu;
  std::string unreadable;  // GUARDED_BY(mu)
};

// A SQLite connection whose reads of title snapshots fail whenever they touch
// the row of `TitleFaults::unreadable`, as a damaged page holding that row
// would make them fail (SQLITE_CORRUPT); every other statement runs as usual.
class TitleFaultConnection final : public store::testing::ForwardingConnection {
 public:
  TitleFaultConnection(std::unique_ptr<store::Connection> inner, std::shared_ptr<TitleFaults> faults)
      : ForwardingConnection(std::move(inner)), faults_(std::move(faults)) {}
  Status Query(std::string_view sql, std::span<const store::Value> params, const store::RowFn& on_row) override {
    if (sql.find("title_user") != std::string_view::npos && sql.starts_with("SELECT") && TouchesUnreadable(params)) {
      return Status(codes::kStorage, "injected fault: database disk image is malformed");
    }
    return ForwardingConnection::Query(sql, params, on_row);
  }

 private:
  bool TouchesUnreadable(std::span<const store::Value> params) {
    std::lock_guard lock(faults_->mu);
    if (faults_->unreadable.empty()) return false;
    return std::any_of(params.begin(), params.end(), [&](const store::Value& v) {
      const auto* text = std::get_if<std::string_view>(&v);
      return text != nullptr && *text == faults_->unreadable;
    });
  }

  std::shared_ptr<TitleFaults> faults_;
};

// A real store and AgentManager (scripted model, fake clock) with the
// sessions tools registered, as the host wires them.
class SessionsPluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<store::Migration> migrations = session::SessionStore::Migrations();
    for (auto& m : agent::AgentManager::Migrations()) migrations.push_back(m);
    store::SqliteOptions sqlite{.path = dir_.File("dsh.db")};
    auto db = store::Database::Open(
        std::make_unique<store::testing::WrappingFactory>(
            std::make_unique<store::SqliteConnectionFactory>(sqlite),
            [faults = title_faults_](std::unique_ptr<store::Connection> conn) {
              return std::unique_ptr<store::Connection>(
                  std::make_unique<TitleFaultConnection>(std::move(conn), faults));
            }),
        migrations);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(db).value();
    store_ = std::make_unique<session::SessionStore>(*db_, clock_, &hub_);
    work_.emplace(ioc_.get_executor());
    for (int i = 0; i < 2; ++i) threads_.emplace_back([this] { ioc_.run(); });
    agent::AgentManagerOptions options;
    options.sweep_interval = 20ms;
    options.generate_titles = false;
    // Leases are renewed every 20 min of fake time: no background write
    // lands between the before/after byte comparisons of the store.
    options.lease_ttl = 1h;
    agent::AgentEnvironment env;
    env.preset = [](const std::optional<std::string>& preset) {
      agent::PresetView v;
      v.system_prompt = "You are " + preset.value_or("nobody") + ".";
      return v;
    };
    manager_ = std::make_unique<agent::AgentManager>(ioc_, *db_, *store_, router_, tools_, clock_, env, options);
    manager_->Start();
    ASSERT_TRUE(RegisterSessionsTools(tools_, *store_, *manager_, TestEnvironment()).ok());
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

  // The deployment of these tests: presets default/reviewer/coder, models
  // scripted/{dflt,m1,m2} with efforts low/high, one workspace `proj`.
  CreateEnvironment TestEnvironment() {
    std::filesystem::create_directories(dir_.File("proj/sub"));
    CreateEnvironment env;
    env.defaults = [this] {
      session::NewSession s;
      s.route = default_route_;
      s.preset = default_preset_;
      return s;
    };
    env.preset_exists = [](const std::string& id) { return id == "default" || id == "reviewer" || id == "coder"; };
    env.validate_route = [](const session::ModelRoute& r) -> Status {
      if (r.provider != "scripted") return Status("unknown_provider", "unknown provider " + r.provider);
      if (r.model != "dflt" && r.model != "m1" && r.model != "m2") return Status("unknown_model", "unknown model " + r.model);
      if (r.reasoning_effort && *r.reasoning_effort != "low" && *r.reasoning_effort != "high") {
        return Status("invalid_reasoning_effort", "reasoning effort " + *r.reasoning_effort + " is not supported");
      }
      return Status::Ok();
    };
    env.workspaces = {{"proj", dir_.File("proj")}};
    return env;
  }

  Result<Json> CallAs(const agent::ToolContext& ctx, const std::string& tool, const Json& args) {
    std::promise<Result<Json>> p;
    tools_.Invoke(tool, ctx, args, [&](Result<Json> r) { p.set_value(std::move(r)); });
    return p.get_future().get();
  }
  Result<Json> Call(const std::string& tool, const Json& args) { return CallAs(agent::ToolContext{}, tool, args); }
  // What an agent of session `id` passes to its tool calls.
  static agent::ToolContext AgentCaller(const session::SessionHeader& h) {
    agent::ToolContext ctx;
    ctx.session_id = h.id;
    ctx.delegation_depth = h.delegation_depth;
    ctx.provider = h.route.provider;
    ctx.model = h.route.model;
    ctx.reasoning_effort = h.route.reasoning_effort;
    ctx.preset = h.preset;
    ctx.cwd = h.cwd;
    ctx.agent_call = true;
    return ctx;
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
    auto pending = db_->ReadValue<int64_t>([](store::Tx& tx) -> Result<int64_t> {
      int64_t n = 0;
      DSH_RETURN_IF_ERROR(tx.Query("SELECT COUNT(*) FROM inbox", {}, [&](const store::Row& row) {
        n = row.Int(0);
        return Status::Ok();
      }));
      return n;
    });
    out.push_back({"inbox rows", pending.ok() ? *pending : -1});
    // And the bytes of the database files: nothing was written at all.
    for (const char* file : {"dsh.db", "dsh.db-wal"}) {
      std::ifstream in(dir_.File(file), std::ios::binary);
      out.push_back({file, std::hash<std::string>{}(std::string(std::istreambuf_iterator<char>(in), {}))});
    }
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
    ExpectRejectedAs(agent::ToolContext{}, tool, args, field);
  }
  // The same for a caller `ctx`, with the expected error code.
  void ExpectRejectedAs(const agent::ToolContext& ctx, const std::string& tool, const Json& args,
                        const std::string& field, const std::string& code = codes::kInvalidArguments) {
    std::string before = Snapshot();
    auto r = CallAs(ctx, tool, args);
    ASSERT_FALSE(r.ok()) << tool << " accepted " << args.dump();
    EXPECT_EQ(r.status().code(), code) << args.dump() << ": " << r.status().ToString();
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
  std::shared_ptr<TitleFaults> title_faults_ = std::make_shared<TitleFaults>();
  std::unique_ptr<store::Database> db_;
  std::unique_ptr<session::SessionStore> store_;
  boost::asio::io_context ioc_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
  std::unique_ptr<agent::AgentManager> manager_;
  agent::testing::EventWaiter waiter_{hub_};
  session::ModelRoute default_route_{"scripted", "dflt", std::nullopt};
  std::optional<std::string> default_preset_ = "default";
};

TEST_F(SessionsPluginTest, RegistersTheToolsInTheSessionsGroup) {
  for (const char* name :
       {"session_status", "session_read", "session_send", "session_create", "list_sessions", "check_session_status"}) {
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

TEST_F(SessionsPluginTest, RowsSayWhetherTheSessionIsArchivedAndStillListIt) {
  std::string kept = Cold();
  std::string archived = Cold();
  EXPECT_EQ(RowOf(Ok("session_status", Json::object()), archived)["archived"], false);
  // What PATCH /api/sessions/{id} appends: archiving is an event, not a deletion.
  Append(archived, {{"session/archived", {{"archived", true}}}});
  Json r = Ok("session_status", Json::object());
  EXPECT_EQ(Ids(r).size(), 2u) << "an archived session is still listed: " << r.dump();
  EXPECT_EQ(RowOf(r, archived)["archived"], true);
  EXPECT_EQ(RowOf(r, kept)["archived"], false);
  EXPECT_EQ(RowOf(Ok("list_sessions", Json::object()), archived)["archived"], true);
  EXPECT_EQ(Ok("session_status", {{"session_id", archived}})["sessions"][0]["archived"], true);
  EXPECT_EQ(Ok("check_session_status", {{"session_id", archived}})["archived"], true);
  Append(archived, {{"session/archived", {{"archived", false}}}});
  EXPECT_EQ(RowOf(Ok("session_status", Json::object()), archived)["archived"], false);
  EXPECT_EQ(Ok("check_session_status", {{"session_id", archived}})["archived"], false);
}

TEST_F(SessionsPluginTest, RowsSayWhereTheTitleCameFromSoAPersonsRenameCanBeUndone) {
  std::string id = Cold();
  auto source = [&] {
    Json listed = RowOf(Ok("session_status", Json::object()), id);
    EXPECT_EQ(RowOf(Ok("list_sessions", Json::object()), id)["title_source"], listed["title_source"]);
    EXPECT_EQ(Ok("session_status", {{"session_id", id}})["sessions"][0]["title_source"], listed["title_source"]);
    EXPECT_EQ(Ok("check_session_status", {{"session_id", id}})["title_source"], listed["title_source"]);
    return listed["title_source"];
  };
  EXPECT_EQ(source(), nullptr) << "no title yet";
  Append(id, {{std::string(et::kTitleFallback), {{"title", "first prompt"}}}});
  EXPECT_EQ(source(), "fallback");
  Append(id, {{std::string(et::kTitleGenerated), {{"title", "Generated"}}}});
  EXPECT_EQ(source(), "generated");
  // What PATCH /api/sessions/{id} appends for a rename, and for its undoing.
  Append(id, {{std::string(et::kTitleUser), {{"title", "Weekly report"}}}});
  EXPECT_EQ(source(), "user");
  EXPECT_EQ(RowOf(Ok("session_status", Json::object()), id)["title"], "Weekly report");
  Append(id, {{std::string(et::kTitleUser), {{"title", nullptr}}}});
  EXPECT_EQ(source(), "generated");
  EXPECT_EQ(RowOf(Ok("session_status", Json::object()), id)["title"], "Generated");
}

TEST_F(SessionsPluginTest, RowsOfAForkNameTheSessionItWasForkedFrom) {
  std::string parent = Cold();
  session::NewSession child_session;
  child_session.route = {"scripted", "m1", std::nullopt};
  auto child = store_->Fork(parent, 0, child_session);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  Json listed = Ok("session_status", Json::object());
  EXPECT_EQ(RowOf(listed, child->id)["parent_id"], parent);
  EXPECT_EQ(RowOf(listed, parent)["parent_id"], nullptr);
  EXPECT_EQ(RowOf(Ok("list_sessions", Json::object()), child->id)["parent_id"], parent);
  EXPECT_EQ(Ok("session_status", {{"session_id", child->id}})["sessions"][0]["parent_id"], parent);
  EXPECT_EQ(Ok("check_session_status", {{"session_id", child->id}})["parent_id"], parent);
  EXPECT_FALSE(Ok("check_session_status", {{"session_id", "ses_missing"}}).contains("parent_id"))
      << "a missing session has no header to name a parent";
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

TEST_F(SessionsPluginTest, AnUnreadableTitleDropsOnlyThatRowsTitleAndTheListingSucceeds) {
  std::string before = Cold();
  Append(before, {{std::string(et::kTitleUser), {{"title", "kept before"}}}});
  std::string unreadable = Cold();
  Append(unreadable, {{std::string(et::kTitleGenerated), {{"title", "cannot be read"}}}});
  std::string after = Live();
  Append(after, {{std::string(et::kTitleFallback), {{"title", "kept after"}}}});
  std::string untitled = Cold();
  {
    std::lock_guard lock(title_faults_->mu);
    title_faults_->unreadable = unreadable;
  }

  for (const char* tool : {"session_status", "list_sessions"}) {
    Json r = Ok(tool, Json::object());
    EXPECT_EQ(Ids(r), (std::vector<std::string>{untitled, after, unreadable, before})) << tool;
    EXPECT_EQ(RowOf(r, before)["title"], "kept before") << tool << ": " << r.dump();
    EXPECT_EQ(RowOf(r, after)["title"], "kept after") << tool << ": " << r.dump();
    EXPECT_EQ(RowOf(r, after)["status"], "idle") << tool;
    EXPECT_FALSE(RowOf(r, unreadable).contains("title")) << tool << ": " << r.dump();
    EXPECT_EQ(RowOf(r, unreadable)["status"], "cold") << tool << ": the row stays, selectable by its id";
    EXPECT_FALSE(RowOf(r, untitled).contains("title")) << tool;
  }
  Json exact = Ok("session_status", {{"session_id", unreadable}});
  ASSERT_EQ(exact["sessions"].size(), 1u) << exact.dump();
  EXPECT_EQ(exact["sessions"][0]["status"], "cold");
  EXPECT_FALSE(exact["sessions"][0].contains("title")) << exact.dump();
  EXPECT_EQ(Ok("check_session_status", {{"session_id", before}})["title"], "kept before");

  // Once the row reads again, so does its title: nothing was lost or written.
  {
    std::lock_guard lock(title_faults_->mu);
    title_faults_->unreadable.clear();
  }
  EXPECT_EQ(RowOf(Ok("session_status", Json::object()), unreadable)["title"], "cannot be read");
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
  EXPECT_EQ(c["sessions"][0], (Json{{"session_id", cold}, {"status", "cold"}, {"updated_at", "2026-01-01T00:00:01.000Z"}, {"archived", false}, {"title_source", nullptr}, {"parent_id", nullptr}}));
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
            (Json{{"session_id", cold}, {"status", "cold"}, {"updated_at", "2026-01-01T00:00:01.000Z"}, {"archived", false}, {"title_source", nullptr}, {"parent_id", nullptr}}));
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


// session_send and session_create: the writing half.
class SessionWriteTest : public SessionsPluginTest {
 protected:
  // A session (cold unless `live`) with this preset, route and cwd.
  session::SessionHeader Make(std::optional<std::string> preset, session::ModelRoute route,
                              std::optional<std::string> cwd = std::nullopt, bool live = false) {
    clock_.Advance(1s);
    session::NewSession s;
    s.preset = std::move(preset);
    s.route = std::move(route);
    s.cwd = std::move(cwd);
    if (!live) {
      auto h = store_->Create(s);
      EXPECT_TRUE(h.ok()) << h.status().ToString();
      return h.ok() ? *h : session::SessionHeader{};
    }
    std::promise<Result<session::SessionHeader>> p;
    manager_->Create(s, [&](Result<session::SessionHeader> r) { p.set_value(std::move(r)); });
    auto h = p.get_future().get();
    EXPECT_TRUE(h.ok()) << h.status().ToString();
    return h.ok() ? *h : session::SessionHeader{};
  }
  session::SessionHeader Header(const std::string& id) {
    auto h = store_->Get(id);
    EXPECT_TRUE(h.ok()) << h.status().ToString();
    return h.ok() ? *h : session::SessionHeader{};
  }
  std::vector<std::string> UserTexts(const std::string& id) {
    std::vector<std::string> out;
    auto events = store_->ReadEvents(id, 0, 10'000);
    for (const auto& e : *events) {
      if (e.type == et::kUserMessage) out.push_back(e.data.value("text", ""));
    }
    return out;
  }
  static std::vector<std::string> RequestUserTexts(const agent::ModelRequest& r) {
    std::vector<std::string> out;
    for (const auto& m : r.messages) {
      if (m.role == agent::ModelMessage::Role::kUser) out.push_back(m.text);
    }
    return out;
  }
  // Creates through the tool as `ctx`; returns the new session's header once
  // its first turn ended.
  session::SessionHeader Created(const agent::ToolContext& ctx, const Json& args) {
    auto r = CallAs(ctx, "session_create", args);
    EXPECT_TRUE(r.ok()) << args.dump() << ": " << r.status().ToString();
    if (!r.ok()) return {};
    std::string id = (*r)["session_id"];
    waiter_.WaitForTurnEnds(id, 1);
    std::promise<Status> idle;  // the agent has taken in the end of its turn
    manager_->WhenIdle(id, [&](Status st) { idle.set_value(st); });
    EXPECT_TRUE(idle.get_future().get().ok());
    return Header(id);
  }
  session::ModelRoute Route(const char* model, std::optional<std::string> effort = std::nullopt) {
    return {"scripted", model, std::move(effort)};
  }
};

TEST_F(SessionWriteTest, SessionSendDefaultsToSteerAndDispatchesTheMatchingAgentMethod) {
  auto h = Make("default", Route("m1"), std::nullopt, /*live=*/true);
  // A running turn: its first model call answers with a tool call, so the
  // turn has a step boundary after it.
  model_.Push(ScriptedModel::Hold(ScriptedModel::ToolCalls({{"c1", "session_status", R"({"recent_n":1})"}})));
  model_.Push(ScriptedModel::Text("done"));
  ASSERT_TRUE(Call("session_send", {{"session_id", h.id}, {"message", "first"}}).ok());
  ASSERT_TRUE(model_.WaitForRequests(1));
  // No mode: a steer, taken at the running turn's next step.
  auto steer = Call("session_send", {{"session_id", h.id}, {"message", "steer me"}});
  ASSERT_TRUE(steer.ok()) << steer.status().ToString();
  EXPECT_TRUE((*steer)["message_id"].get<std::string>().starts_with("msg_"));
  EXPECT_EQ(steer->size(), 1u) << steer->dump();
  // followup: its own next turn.
  ASSERT_TRUE(Call("session_send", {{"session_id", h.id}, {"message", "later"}, {"mode", "followup"}}).ok());
  ASSERT_TRUE(model_.Release());
  auto log = waiter_.WaitForTurnEnds(h.id, 2);
  auto requests = model_.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(RequestUserTexts(requests[1]), (std::vector<std::string>{"first", "steer me"}));
  EXPECT_EQ(RequestUserTexts(requests[2]), (std::vector<std::string>{"first", "steer me", "later"}));
  EXPECT_EQ(agent::testing::EventWaiter::Count(log, agent::event_types::kTurnStart), 2u);
}

TEST_F(SessionWriteTest, SessionSendWakesIdleAgentsInBothSteerAndFollowupModes) {
  for (const char* mode : {"steer", "followup"}) {
    auto h = Make("default", Route("m1"), std::nullopt, /*live=*/true);
    ASSERT_EQ(manager_->LiveStatus(h.id), agent::AgentStatus::kIdle);
    ASSERT_TRUE(Call("session_send", {{"session_id", h.id}, {"message", std::string("wake ") + mode}, {"mode", mode}}).ok());
    waiter_.WaitForTurnEnds(h.id, 1);
    EXPECT_EQ(UserTexts(h.id), std::vector<std::string>{std::string("wake ") + mode});
  }
}

TEST_F(SessionWriteTest, SessionSendResumesAColdSessionWithItsPresetAndAnAgentCallersRoute) {
  auto caller = Make("coder", Route("m2", "high"), std::nullopt, /*live=*/true);
  auto cold = Make("reviewer", Route("m1"));
  ASSERT_TRUE(CallAs(AgentCaller(caller), "session_send", {{"session_id", cold.id}, {"message", "from an agent"}}).ok());
  waiter_.WaitForTurnEnds(cold.id, 1);
  auto req = model_.requests().at(0);
  EXPECT_EQ(req.model, "m2");
  EXPECT_EQ(req.reasoning_effort, std::optional<std::string>("high"));
  EXPECT_EQ(req.messages.at(0).text, "You are reviewer.");
  EXPECT_EQ(Header(cold.id).route, Route("m1")) << "the resume route is not persisted";
  // A root call resumes with the persisted route.
  auto other = Make("reviewer", Route("m1"));
  ASSERT_TRUE(Call("session_send", {{"session_id", other.id}, {"message", "from a person"}}).ok());
  waiter_.WaitForTurnEnds(other.id, 1);
  EXPECT_EQ(model_.requests().at(1).model, "m1");
}

TEST_F(SessionWriteTest, SessionSendToAMissingSessionIsAnErrorAndCreatesNothing) {
  ExpectRejectedAs(agent::ToolContext{}, "session_send", {{"session_id", "ses_missing"}, {"message", "hi"}},
                   "ses_missing", codes::kNotFound);
  EXPECT_TRUE(store_->ListRecent(10)->empty());
}

TEST_F(SessionWriteTest, SessionSendRejectsEveryInvalidArgumentNamingTheField) {
  auto h = Make("default", Route("m1"));
  ExpectRejected("session_send", {{"message", "hi"}}, "session_id");
  ExpectRejected("session_send", {{"session_id", ""}, {"message", "hi"}}, "session_id");
  ExpectRejected("session_send", {{"session_id", h.id}}, "message");
  ExpectRejected("session_send", {{"session_id", h.id}, {"message", ""}}, "message");
  ExpectRejected("session_send", {{"session_id", h.id}, {"message", " \n\t"}}, "message");
  ExpectRejected("session_send", {{"session_id", h.id}, {"message", 5}}, "message");
  ExpectRejected("session_send", {{"session_id", h.id}, {"message", "hi"}, {"mode", "now"}}, "mode");
  ExpectRejected("session_send", {{"session_id", h.id}, {"message", "hi"}, {"mode", ""}}, "mode");
  ExpectRejected("session_send", {{"session_id", h.id}, {"message", "hi"}, {"key", "k"}}, "key");
  EXPECT_FALSE(manager_->LiveStatus(h.id).has_value());
}

TEST_F(SessionWriteTest, SessionCreateQueuesAnInitialPromptAndReturnsAQueuedResult) {
  model_.Push(ScriptedModel::Hold(ScriptedModel::Text("working on it")));
  auto r = Call("session_create", {{"prompt", "Summarize the logs"}});
  // It answered while the model call is still held: it does not wait for generation.
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::string id = (*r)["session_id"];
  EXPECT_EQ(*r, (Json{{"session_id", id}, {"accepted", true}, {"status", "queued"}}));
  ASSERT_TRUE(model_.WaitForRequests(1));
  EXPECT_EQ(manager_->LiveStatus(id), agent::AgentStatus::kRunning);
  EXPECT_EQ(RequestUserTexts(model_.requests().at(0)), std::vector<std::string>{"Summarize the logs"});
  ASSERT_TRUE(model_.Release());
  waiter_.WaitForTurnEnds(id, 1);
  auto h = Header(id);
  EXPECT_EQ(h.origin, "session_create");
  EXPECT_EQ(h.delegation_depth, 0);
  EXPECT_FALSE(h.cwd.has_value());
}

TEST_F(SessionWriteTest, ASessionCreatedForAPersonTakesTheirZone) {
  agent::ToolContext from_browser;
  from_browser.client_time_zone = "Asia/Shanghai";
  auto r = CallAs(from_browser, "session_create", {{"prompt", "hello"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::string id = (*r)["session_id"];
  waiter_.WaitForTurnEnds(id, 1);
  EXPECT_EQ(Header(id).time_zone, "Asia/Shanghai");
  auto plain = Call("session_create", {{"prompt", "hello"}});
  ASSERT_TRUE(plain.ok());
  std::string other = (*plain)["session_id"];
  waiter_.WaitForTurnEnds(other, 1);
  EXPECT_NE(Header(other).time_zone, "Asia/Shanghai") << "without a client zone: the default";
}

TEST_F(SessionWriteTest, AChildCreatedWithoutExplicitPresetOrModelInheritsTheCallersPresetAndRouteARootCreateUsesDefaults) {
  auto parent = Make("reviewer", Route("m2", "high"), "/tmp", /*live=*/true);
  auto child = Created(AgentCaller(parent), {{"prompt", "child work"}});
  EXPECT_EQ(child.preset, std::optional<std::string>("reviewer"));
  EXPECT_EQ(child.route, Route("m2", "high")) << "an explicitly recorded effort is carried";
  EXPECT_EQ(child.cwd, std::optional<std::string>("/tmp"));
  EXPECT_EQ(child.delegation_depth, parent.delegation_depth + 1);
  auto grandchild = Created(AgentCaller(child), {{"prompt", "deeper"}});
  EXPECT_EQ(grandchild.delegation_depth, 2);
  auto root = Created(agent::ToolContext{}, {{"prompt", "root work"}});
  EXPECT_EQ(root.preset, std::optional<std::string>("default"));
  EXPECT_EQ(root.route, Route("dflt"));
  EXPECT_EQ(root.delegation_depth, 0);
}

TEST_F(SessionWriteTest, SessionCreateResolvesModelAndPresetIndependentlyForAllFourCombinations) {
  auto parent = Make("reviewer", Route("m2"), std::nullopt, /*live=*/true);
  Json model = {{"provider", "scripted"}, {"model", "m1"}};
  struct Case {
    bool agent;
    Json args;
    std::optional<std::string> preset;
    session::ModelRoute route;
  };
  std::vector<Case> cases = {
      // Child (session-agent) calls.
      {true, {{"prompt", "p"}}, "reviewer", Route("m2")},
      {true, {{"prompt", "p"}, {"model", model}}, "reviewer", Route("m1")},
      {true, {{"prompt", "p"}, {"preset", "coder"}}, "coder", Route("m2")},
      {true, {{"prompt", "p"}, {"model", model}, {"preset", "coder"}}, "coder", Route("m1")},
      // Root calls.
      {false, {{"prompt", "p"}}, "default", Route("dflt")},
      {false, {{"prompt", "p"}, {"model", model}}, "default", Route("m1")},
      {false, {{"prompt", "p"}, {"preset", "coder"}}, "coder", Route("dflt")},
      {false, {{"prompt", "p"}, {"model", model}, {"preset", "coder"}}, "coder", Route("m1")},
  };
  for (const auto& c : cases) {
    auto h = Created(c.agent ? AgentCaller(parent) : agent::ToolContext{}, c.args);
    EXPECT_EQ(h.preset, c.preset) << (c.agent ? "child " : "root ") << c.args.dump();
    EXPECT_EQ(h.route, c.route) << (c.agent ? "child " : "root ") << c.args.dump();
  }
}

TEST_F(SessionWriteTest, AChildWhoseCallerHasNoComposedPresetFallsBackToTheDefaultPreset) {
  auto parent = Make(std::nullopt, Route("m1"), std::nullopt, /*live=*/true);
  EXPECT_EQ(Created(AgentCaller(parent), {{"prompt", "p"}}).preset, std::optional<std::string>("default"));
  // With no default preset configured, the new session has none.
  default_preset_ = std::nullopt;
  EXPECT_EQ(Created(AgentCaller(parent), {{"prompt", "p"}}).preset, std::nullopt);
  EXPECT_EQ(Created(agent::ToolContext{}, {{"prompt", "p"}}).preset, std::nullopt);
}

TEST_F(SessionWriteTest, ACreateWithCwdCanonicalizesTheDirectoryAndReportsItsRegisteredWorkspace) {
  std::string canonical = std::filesystem::canonical(dir_.File("proj/sub")).string();
  std::filesystem::create_symlink(dir_.File("proj"), dir_.File("link"));
  auto r = Call("session_create", {{"prompt", "p"}, {"cwd", dir_.File("link/sub/../sub/")}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)["cwd"], canonical);
  EXPECT_EQ((*r)["workspace_id"], "proj");
  EXPECT_EQ(Header((*r)["session_id"]).cwd, std::optional<std::string>(canonical));
  // Outside every workspace: the cwd alone.
  auto outside = Call("session_create", {{"prompt", "p"}, {"cwd", dir_.path()}});
  ASSERT_TRUE(outside.ok());
  EXPECT_EQ((*outside)["cwd"], std::filesystem::canonical(dir_.path()).string());
  EXPECT_FALSE(outside->contains("workspace_id"));
  // A child without cwd inherits its caller's, and its workspace.
  auto parent = Header((*r)["session_id"]);
  waiter_.WaitForTurnEnds(parent.id, 1);
  auto child = Call("session_create", {{"prompt", "p"}});
  ASSERT_TRUE(child.ok());
  EXPECT_FALSE(child->contains("cwd")) << "a root call without cwd stays ungrouped";
  auto inherited = CallAs(AgentCaller(parent), "session_create", {{"prompt", "p"}});
  ASSERT_TRUE(inherited.ok());
  EXPECT_EQ((*inherited)["cwd"], canonical);
  EXPECT_EQ((*inherited)["workspace_id"], "proj");
}

TEST_F(SessionWriteTest, AChildExplicitlyNamingTheSamePresetAsItsCallerJoinsTheCallersStandingComposition) {
  auto parent = Make("reviewer", Route("m1"), std::nullopt, /*live=*/true);
  auto child = Created(AgentCaller(parent), {{"prompt", "p"}, {"preset", "reviewer"}});
  EXPECT_EQ(child.preset, std::optional<std::string>("reviewer"));
  // One composition: the same system prompt and tools as the caller's preset,
  // nothing mounted twice.
  auto req = model_.requests().at(0);
  EXPECT_EQ(req.messages.at(0).text, "You are reviewer.");
  std::vector<std::string> names;
  for (const auto& t : req.tools) names.push_back(t.name);
  std::vector<std::string> unique = names;
  std::sort(unique.begin(), unique.end());
  unique.erase(std::unique(unique.begin(), unique.end()), unique.end());
  EXPECT_EQ(unique.size(), names.size());
  EXPECT_EQ(names.size(), tools_.List().size());
}

TEST_F(SessionWriteTest, AnExplicitReasoningEffortIsValidatedBeforeSessionCreationAndAppliedToTheFirstModelRequest) {
  ExpectRejectedAs(agent::ToolContext{}, "session_create",
                   {{"prompt", "p"}, {"model", {{"provider", "scripted"}, {"model", "m1"}, {"reasoningEffort", "max"}}}},
                   "max", "invalid_reasoning_effort");
  auto h = Created(agent::ToolContext{},
                   {{"prompt", "p"}, {"model", {{"provider", "scripted"}, {"model", "m1"}, {"reasoningEffort", "low"}}}});
  EXPECT_EQ(h.route, Route("m1", "low"));
  EXPECT_EQ(model_.requests().at(0).reasoning_effort, std::optional<std::string>("low"));
  // An explicit model without an effort does not inherit the caller's.
  auto parent = Make("default", Route("m2", "high"), std::nullopt, /*live=*/true);
  EXPECT_EQ(Created(AgentCaller(parent), {{"prompt", "p"}, {"model", {{"provider", "scripted"}, {"model", "m1"}}}}).route,
            Route("m1"));
}

TEST_F(SessionWriteTest, ACommandOrHttpCallFromASessionInheritsFromThatSession) {
  auto current = Make("coder", Route("m2"), "/tmp");
  agent::ToolContext ctx;
  ctx.session_id = current.id;  // agent_call false: /sessions create or POST /api/tools with session_id
  auto h = Created(ctx, {{"prompt", "p"}});
  EXPECT_EQ(h.preset, std::optional<std::string>("coder"));
  EXPECT_EQ(h.route, Route("m2"));
  EXPECT_EQ(h.cwd, std::optional<std::string>("/tmp"));
  EXPECT_EQ(h.delegation_depth, 1);
  ctx.session_id = "ses_gone";
  ExpectRejectedAs(ctx, "session_create", {{"prompt", "p"}}, "ses_gone", codes::kNotFound);
}

TEST_F(SessionWriteTest, ARootCreateWithoutADefaultModelFails) {
  default_route_ = {};
  ExpectRejectedAs(agent::ToolContext{}, "session_create", {{"prompt", "p"}}, "model", "no_default_model");
  // An explicit model still works.
  EXPECT_EQ(Created(agent::ToolContext{}, {{"prompt", "p"}, {"model", {{"provider", "scripted"}, {"model", "m1"}}}}).route,
            Route("m1"));
}

TEST_F(SessionWriteTest, SessionCreateRejectsEveryInvalidArgumentAndLeavesTheStoreUnchanged) {
  auto parent = Make("default", Route("m1"));
  std::ofstream(dir_.File("a_file")) << "x";
  Json model = {{"provider", "scripted"}, {"model", "m1"}};
  ExpectRejected("session_create", Json::object(), "prompt");
  ExpectRejected("session_create", {{"prompt", ""}}, "prompt");
  ExpectRejected("session_create", {{"prompt", "  \n "}}, "prompt");
  ExpectRejected("session_create", {{"prompt", 3}}, "prompt");
  ExpectRejected("session_create", {{"prompt", "p"}, {"preset", ""}}, "preset");
  ExpectRejected("session_create", {{"prompt", "p"}, {"preset", "nope"}}, "preset");
  ExpectRejected("session_create", {{"prompt", "p"}, {"model", "scripted/m1"}}, "model");
  ExpectRejected("session_create", {{"prompt", "p"}, {"model", {{"model", "m1"}}}}, "model.provider");
  ExpectRejected("session_create", {{"prompt", "p"}, {"model", {{"provider", ""}, {"model", "m1"}}}}, "model.provider");
  ExpectRejected("session_create", {{"prompt", "p"}, {"model", {{"provider", "scripted"}}}}, "model.model");
  ExpectRejected("session_create", {{"prompt", "p"}, {"model", {{"provider", "scripted"}, {"model", ""}}}}, "model.model");
  ExpectRejected("session_create",
                 {{"prompt", "p"}, {"model", {{"provider", "scripted"}, {"model", "m1"}, {"reasoningEffort", ""}}}},
                 "model.reasoningEffort");
  ExpectRejected("session_create", {{"prompt", "p"}, {"model", {{"provider", "scripted"}, {"model", "m1"}, {"effort", "low"}}}},
                 "effort");
  ExpectRejectedAs(agent::ToolContext{}, "session_create", {{"prompt", "p"}, {"model", {{"provider", "x"}, {"model", "m1"}}}},
                   "x", "unknown_provider");
  ExpectRejectedAs(agent::ToolContext{}, "session_create", {{"prompt", "p"}, {"model", {{"provider", "scripted"}, {"model", "m9"}}}},
                   "m9", "unknown_model");
  ExpectRejected("session_create", {{"prompt", "p"}, {"cwd", ""}}, "cwd");
  ExpectRejected("session_create", {{"prompt", "p"}, {"cwd", "relative/dir"}}, "cwd");
  ExpectRejected("session_create", {{"prompt", "p"}, {"cwd", dir_.File("missing")}}, "cwd");
  ExpectRejected("session_create", {{"prompt", "p"}, {"cwd", dir_.File("a_file")}}, "cwd");
  ExpectRejected("session_create", {{"prompt", "p"}, {"workspace_id", "proj"}}, "workspace_id");
  ExpectRejected("session_create", {{"prompt", "p"}, {"model", model}, {"extra", true}}, "extra");
  // The same checks hold for agent callers.
  ExpectRejectedAs(AgentCaller(parent), "session_create", {{"prompt", "p"}, {"preset", "nope"}}, "preset");
  EXPECT_EQ(store_->ListRecent(10)->size(), 1u);
}

}  // namespace
}  // namespace dsh::plugins::sessions
