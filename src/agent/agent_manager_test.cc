#include "agent/agent_manager.h"

#include <gtest/gtest.h>

#include <boost/asio/executor_work_guard.hpp>

#include <future>
#include <mutex>
#include <set>
#include <thread>

#include "agent/agent.h"
#include "agent/agent_store.h"
#include "agent/testing/event_waiter.h"
#include "agent/testing/fake_chat_server.h"
#include "agent/testing/scripted_model.h"
#include "base/testing/temp_dir.h"
#include "store/testing/test_backend.h"
#include "store/pruner.h"

namespace dsh::agent {
namespace {

using session::Event;
using testing::EventWaiter;
using testing::ScriptedModel;
namespace et = session::event_types;
using namespace std::chrono_literals;

// A tool that records who called it and answers with its arguments.
struct EchoArgs {
  std::string text;
};
class EchoTool final : public TypedTool<EchoArgs> {
 public:
  EchoTool()
      : TypedTool("echo_args",
                  ObjectSchema<EchoArgs>("Answers with its argument.").Field("text", &EchoArgs::text, "what to say")) {}
  std::vector<ToolContext> calls() {
    std::lock_guard lock(mu_);
    return calls_;
  }

 protected:
  void Run(const ToolContext& ctx, EchoArgs args, Done done) override {
    {
      std::lock_guard lock(mu_);
      calls_.push_back(ctx);
    }
    done(Json{{"said", args.text}});
  }

 private:
  std::mutex mu_;
  std::vector<ToolContext> calls_;
};

// Offered to root sessions only.
class RootOnlyTool final : public TypedTool<EchoArgs> {
 public:
  RootOnlyTool()
      : TypedTool("root_echo", ObjectSchema<EchoArgs>("Root only.").Field("text", &EchoArgs::text, "what to say")) {}
  bool root_only() const override { return true; }

 protected:
  void Run(const ToolContext&, EchoArgs args, Done done) override { done(Json{{"said", args.text}}); }
};

class AgentTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { Open(); }
  void TearDown() override { Close(); }

  void Open() {
    std::vector<store::Migration> migrations = session::SessionStore::Migrations();
    for (auto& m : AgentManager::Migrations()) migrations.push_back(m);
    auto db = store::Database::Open(backend_.Factory(), migrations);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(db).value();
    sessions_ = std::make_unique<session::SessionStore>(*db_, clock_, &hub_);
    work_.emplace(ioc_.get_executor());
    for (int i = 0; i < 2; ++i) threads_.emplace_back([this] { ioc_.run(); });
    manager_ = MakeManager();
    manager_->Start();
  }

  std::unique_ptr<AgentManager> MakeManager(AgentManagerOptions options = {}) {
    return MakeManager(*db_, *sessions_, options);
  }
  std::unique_ptr<AgentManager> MakeManager(store::Database& db, session::SessionStore& sessions,
                                            AgentManagerOptions options = {}) {
    options.sweep_interval = sweep_interval_;
    options.generate_titles = generate_titles_;
    options.max_steps = max_steps_;
    options.approval_timeout = approval_timeout_;
    AgentEnvironment env;
    env.preset = [](const std::optional<std::string>& preset) {
      PresetView v;
      v.system_prompt = "You are " + preset.value_or("default") + ".";
      if (preset == std::optional<std::string>("no_tools")) v.all_tools = false;
      if (preset == std::optional<std::string>("asker")) v.permissions["echo_args"] = Permission::kAsk;
      if (preset == std::optional<std::string>("denier")) v.permissions["echo_args"] = Permission::kDeny;
      return v;
    };
    env.context.push_back([this](const session::SessionHeader& h, const std::optional<std::string>& zone) {
      std::lock_guard lock(context_mu_);
      context_zones_.push_back(zone);
      return "Session: " + h.id;
    });
    return std::make_unique<AgentManager>(ioc_, db, sessions, *router_ptr_, tools_, clock_, env, options);
  }

  void Close() {
    if (!db_) return;
    for (auto* m : {manager_.get(), second_.get()}) {
      if (m) m->Stop();
    }
    db_->Close();
    work_.reset();
    for (auto& t : threads_) t.join();
    threads_.clear();
    manager_.reset();
    second_.reset();
    sessions_.reset();
    db_.reset();
    ioc_.restart();
  }

  std::string CreateSession(AgentManager& m, std::optional<std::string> preset = std::nullopt) {
    session::NewSession s;
    s.route = {"scripted", "m1", std::nullopt};
    s.preset = std::move(preset);
    std::promise<Result<session::SessionHeader>> p;
    m.Create(s, [&](Result<session::SessionHeader> r) { p.set_value(std::move(r)); });
    auto r = p.get_future().get();
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->id : "";
  }
  std::string CreateSession() { return CreateSession(*manager_); }

  Result<Delivered> Deliver(AgentManager& m, const std::string& id, const std::string& text,
                            DeliveryMode mode = DeliveryMode::kSteer, std::optional<std::string> key = std::nullopt) {
    std::promise<Result<Delivered>> p;
    m.Deliver(Delivery{id, text, mode, true, std::move(key), Json::object()},
              [&](Result<Delivered> r) { p.set_value(std::move(r)); });
    return p.get_future().get();
  }
  Result<Delivered> Deliver(const std::string& id, const std::string& text, DeliveryMode mode = DeliveryMode::kSteer,
                            std::optional<std::string> key = std::nullopt) {
    return Deliver(*manager_, id, text, mode, std::move(key));
  }

  // Sends `text` to a new session whose model holds the call (push a held
  // reply first), stops the turn once the model was called, and waits until
  // the agent is idle again. The session's id.
  std::string StopWhileTheModelAnswers(const std::string& text) {
    std::string id = CreateSession();
    EXPECT_TRUE(Deliver(id, text).ok());
    EXPECT_TRUE(model_.WaitForRequests(1));
    std::promise<Status> idle;
    manager_->WhenIdle(id, [&](Status st) { idle.set_value(st); });
    manager_->Cancel(id);
    EXPECT_TRUE(idle.get_future().get().ok());
    return id;
  }

  std::vector<Event> Log(const std::string& id) {
    auto r = sessions_->ReadEvents(id, 0, 10'000);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : std::vector<Event>{};
  }
  static std::vector<std::string> Texts(const std::vector<Event>& log, std::string_view type) {
    std::vector<std::string> out;
    for (const auto& e : log) {
      if (e.type == type) out.push_back(e.data.value("text", ""));
    }
    return out;
  }
  static std::vector<std::string> UserTexts(const ModelRequest& r) {
    std::vector<std::string> out;
    for (const auto& m : r.messages) {
      if (m.role == ModelMessage::Role::kUser) out.push_back(m.text);
    }
    return out;
  }

  // Waits until the agent has processed the end of its turn.
  void WaitIdle(const std::string& id) {
    std::promise<Status> idle;
    manager_->WhenIdle(id, [&](Status st) { idle.set_value(st); });
    ASSERT_TRUE(idle.get_future().get().ok());
  }

  Status Resume(AgentManager& m, const std::string& id) {
    std::promise<Status> p;
    m.Resume(id, [&](Status st) { p.set_value(st); });
    return p.get_future().get();
  }

  int64_t PendingRows() {
    auto r = db_->ReadValue<int64_t>([](store::Tx& tx) -> Result<int64_t> {
      int64_t n = 0;
      DSH_RETURN_IF_ERROR(tx.Query("SELECT COUNT(*) FROM inbox WHERE consumed_at IS NULL", {}, [&](const store::Row& row) {
        n = row.Int(0);
        return Status::Ok();
      }));
      return n;
    });
    return r.ok() ? *r : -1;
  }

  store::testing::TestBackend backend_{GetParam(), /*fast=*/true};  // outlives the database
  FakeClock clock_;
  session::EventHub hub_;
  EventWaiter waiter_{hub_};
  ScriptedModel model_;
  testing::SingleModelRouter router_{model_};
  ModelRouter* router_ptr_ = &router_;
  ToolRegistry tools_;
  int max_steps_ = 50;
  std::chrono::milliseconds approval_timeout_ = std::chrono::minutes(15);
  bool generate_titles_ = false;
  std::chrono::milliseconds sweep_interval_ = 20ms;
  std::unique_ptr<store::Database> db_;
  std::unique_ptr<session::SessionStore> sessions_;
  boost::asio::io_context ioc_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
  std::unique_ptr<AgentManager> manager_;
  std::unique_ptr<AgentManager> second_;
  std::mutex context_mu_;
  std::vector<std::optional<std::string>> context_zones_;  // GUARDED_BY(context_mu_) per model request
};

INSTANTIATE_TEST_SUITE_P(Backends, AgentTest, store::testing::BackendNames(), store::testing::BackendTestName);

TEST_P(AgentTest, DeliveredMessageToIdleAgentRunsATurn) {
  std::string id = CreateSession();
  EXPECT_EQ(manager_->LiveStatus(id), AgentStatus::kIdle);
  auto d = Deliver(id, "hello");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_FALSE(d->duplicate);
  auto log = waiter_.WaitForTurnEnds(id, 1);
  EXPECT_EQ(Texts(log, et::kUserMessage), std::vector<std::string>{"hello"});
  EXPECT_EQ(Texts(log, et::kAssistantMessage), std::vector<std::string>{"echo: hello"});
  EXPECT_EQ(log.front().type, event_types::kTurnStart);
  EXPECT_EQ(log.back().data["status"], "completed");
  // The user event names the inbox message; the fallback title came with it.
  auto user = std::find_if(log.begin(), log.end(), [](const Event& e) { return e.type == et::kUserMessage; });
  EXPECT_EQ(user->data["message_id"], d->message_id);
  EXPECT_EQ(EventWaiter::Count(log, et::kTitleFallback), 1u);
  EXPECT_EQ(PendingRows(), 0);
  // The request had the preset's prompt and the plugin context as system message.
  auto req = model_.requests().at(0);
  ASSERT_FALSE(req.messages.empty());
  EXPECT_EQ(req.messages[0].role, ModelMessage::Role::kSystem);
  EXPECT_EQ(req.messages[0].text, "You are default.\n\nSession: " + id);
  EXPECT_EQ(req.model, "m1");
}

TEST_P(AgentTest, CountsTurnsModelCallsAndTokensByRoute) {
  metrics::Registry registry;  // outlives the manager: it is stopped below
  manager_->Stop();
  manager_ = MakeManager(AgentManagerOptions{.metrics = &registry});
  manager_->Start();
  std::string id = CreateSession();
  ModelResponse counted;
  counted.text = "hi";
  counted.finish_reason = "stop";
  counted.input_tokens = 30;
  counted.output_tokens = 7;
  model_.Push(ScriptedModel::Reply{counted});
  model_.Push(ScriptedModel::Error("model_timeout", "no progress"));
  ASSERT_TRUE(Deliver(id, "one").ok());
  waiter_.WaitForTurnEnds(id, 1);
  ASSERT_TRUE(Deliver(id, "two").ok());
  waiter_.WaitForTurnEnds(id, 2);
  manager_->Stop();
  std::string text = registry.Render();
  for (const char* want : {
           "dsh_turns_total{route=\"scripted/m1\",result=\"completed\"} 1\n",
           "dsh_turns_total{route=\"scripted/m1\",result=\"error\"} 1\n",
           "dsh_turn_seconds_count{route=\"scripted/m1\"} 2\n",
           "dsh_model_calls_total{route=\"scripted/m1\",result=\"ok\"} 1\n",
           "dsh_model_calls_total{route=\"scripted/m1\",result=\"model_timeout\"} 1\n",
           "dsh_model_call_seconds_count{route=\"scripted/m1\"} 2\n",
           "dsh_model_tokens_total{route=\"scripted/m1\",direction=\"input\"} 30\n",
           "dsh_model_tokens_total{route=\"scripted/m1\",direction=\"output\"} 7\n",
       }) {
    EXPECT_NE(text.find(want), std::string::npos) << want << " in:\n" << text;
  }
}

TEST_P(AgentTest, ToolCallRunsAndItsResultReachesTheNextRequest) {
  auto tool = std::make_unique<EchoTool>();
  EchoTool* echo = tool.get();
  ASSERT_TRUE(tools_.Register(std::move(tool), "test").ok());
  model_.Push(ScriptedModel::ToolCalls({{"call_1", "echo_args", R"({"text":"pong"})"}}));
  model_.Push(ScriptedModel::Text("done"));
  std::string id = CreateSession();
  ASSERT_TRUE(Deliver(id, "use the tool").ok());
  auto log = waiter_.WaitForTurnEnds(id, 1);
  ASSERT_EQ(model_.requests().size(), 2u);
  auto second = model_.requests()[1];
  // The assistant tool call, then the tool message with the result.
  ASSERT_GE(second.messages.size(), 4u);
  const auto& call_msg = second.messages[second.messages.size() - 2];
  ASSERT_EQ(call_msg.role, ModelMessage::Role::kAssistant);
  ASSERT_EQ(call_msg.tool_calls.size(), 1u);
  EXPECT_EQ(call_msg.tool_calls[0].id, "call_1");
  const auto& result_msg = second.messages.back();
  EXPECT_EQ(result_msg.role, ModelMessage::Role::kTool);
  EXPECT_EQ(result_msg.tool_call_id, "call_1");
  EXPECT_EQ(ParseJson(result_msg.text).value(), (Json{{"said", "pong"}}));
  ASSERT_EQ(second.tools.size(), 1u);
  EXPECT_EQ(second.tools[0].name, "echo_args");
  // The tool knew its caller.
  ASSERT_EQ(echo->calls().size(), 1u);
  EXPECT_EQ(echo->calls()[0].session_id, id);
  EXPECT_TRUE(echo->calls()[0].agent_call);
  EXPECT_EQ(echo->calls()[0].model, "m1");
  EXPECT_EQ(Texts(log, et::kAssistantMessage).back(), "done");
}

TEST_P(AgentTest, TheClientZoneOfTheMessageThatStartedATurnReachesItsToolsAndContext) {
  auto tool = std::make_unique<EchoTool>();
  EchoTool* echo = tool.get();
  ASSERT_TRUE(tools_.Register(std::move(tool), "test").ok());
  model_.Push(ScriptedModel::ToolCalls({{"call_1", "echo_args", R"({"text":"a"})"}}));
  model_.Push(ScriptedModel::Text("done"));
  model_.Push(ScriptedModel::ToolCalls({{"call_2", "echo_args", R"({"text":"b"})"}}));
  model_.Push(ScriptedModel::Text("done"));
  std::string id = CreateSession();
  std::promise<Result<Delivered>> p;
  manager_->Deliver(Delivery{id, "from the browser", DeliveryMode::kSteer, true, std::nullopt,
                             Json{{"origin", "api"}, {"client_time_zone", "Asia/Shanghai"}}},
                    [&](Result<Delivered> r) { p.set_value(std::move(r)); });
  ASSERT_TRUE(p.get_future().get().ok());
  waiter_.WaitForTurnEnds(id, 1);
  ASSERT_TRUE(Deliver(id, "from the CLI").ok());
  waiter_.WaitForTurnEnds(id, 2);
  ASSERT_EQ(echo->calls().size(), 2u);
  EXPECT_EQ(echo->calls()[0].client_time_zone, std::optional<std::string>("Asia/Shanghai"));
  EXPECT_EQ(echo->calls()[1].client_time_zone, std::nullopt) << "a turn without a client zone has none";
  std::lock_guard lock(context_mu_);
  ASSERT_EQ(context_zones_.size(), 4u);
  EXPECT_EQ(context_zones_[0], std::optional<std::string>("Asia/Shanghai"));
  EXPECT_EQ(context_zones_[1], std::optional<std::string>("Asia/Shanghai")) << "every step of the turn";
  EXPECT_EQ(context_zones_[2], std::nullopt);
}

TEST_P(AgentTest, RootOnlyToolsAreOfferedToRootSessionsOnly) {
  ASSERT_TRUE(tools_.Register(std::make_unique<RootOnlyTool>(), "test").ok());
  std::string root = CreateSession();
  session::NewSession child;
  child.route = {"scripted", "m1", std::nullopt};
  child.delegation_depth = 1;
  std::promise<Result<session::SessionHeader>> made;
  manager_->Create(child, [&](Result<session::SessionHeader> r) { made.set_value(std::move(r)); });
  auto child_header = made.get_future().get();
  ASSERT_TRUE(child_header.ok()) << child_header.status().ToString();
  model_.Push(ScriptedModel::Text("root"));
  model_.Push(ScriptedModel::ToolCalls({{"c1", "root_echo", R"({"text":"x"})"}}));
  model_.Push(ScriptedModel::Text("child"));
  ASSERT_TRUE(Deliver(root, "hi").ok());
  waiter_.WaitForTurnEnds(root, 1);
  ASSERT_TRUE(Deliver(child_header->id, "hi").ok());
  auto log = waiter_.WaitForTurnEnds(child_header->id, 1);
  auto requests = model_.requests();
  ASSERT_EQ(requests.size(), 3u);
  ASSERT_EQ(requests[0].tools.size(), 1u);
  EXPECT_EQ(requests[0].tools[0].name, "root_echo");
  EXPECT_TRUE(requests[1].tools.empty()) << "a delegated session does not see it";
  std::vector<std::string> codes;
  for (const auto& e : log) {
    if (e.type == et::kToolResult) codes.push_back(e.data["error"]["code"]);
  }
  EXPECT_EQ(codes, std::vector<std::string>{"unknown_tool"}) << "nor can it call it";
}

TEST_P(AgentTest, ObserversSeeAgentsGoLiveAndStop) {
  std::mutex mu;
  std::vector<std::string> seen;
  std::vector<std::string> changes;  // the hub's, for views (the browser's sidebar)
  auto changes_sub = hub_.SubscribeChanges([&](const session::EventHub::Change& c) {
    std::lock_guard lock(mu);
    changes.push_back(c.topic + " " + c.id);
  });
  AgentObserver observer;
  observer.live = [&](const session::SessionHeader& h) {
    std::lock_guard lock(mu);
    seen.push_back("live " + h.id);
  };
  observer.stopped = [&](const std::string& id) {
    std::lock_guard lock(mu);
    seen.push_back("stopped " + id);
  };
  manager_->Stop();
  manager_ = MakeManager();
  manager_->AddObserver(observer);
  manager_->Start();
  std::string id = CreateSession();
  manager_->EvictIdleForTesting();
  ASSERT_TRUE(manager_->WaitUntilNotLive(id, 5s));
  ASSERT_TRUE(Resume(*manager_, id).ok());
  manager_->Stop();
  std::lock_guard lock(mu);
  EXPECT_EQ(seen, (std::vector<std::string>{"live " + id, "stopped " + id, "live " + id, "stopped " + id}));
  EXPECT_EQ(changes, std::vector<std::string>(4, "session " + id));
}

TEST_P(AgentTest, BadToolArgumentsReachTheModelAsAnError) {
  ASSERT_TRUE(tools_.Register(std::make_unique<EchoTool>(), "test").ok());
  model_.Push(ScriptedModel::ToolCalls({{"c1", "echo_args", R"({"text":""})"},
                                        {"c2", "echo_args", "{not json"},
                                        {"c3", "no_such_tool", "{}"}}));
  model_.Push(ScriptedModel::Text("ok"));
  std::string id = CreateSession();
  ASSERT_TRUE(Deliver(id, "go").ok());
  auto log = waiter_.WaitForTurnEnds(id, 1);
  std::vector<std::string> codes;
  for (const auto& e : log) {
    if (e.type == et::kToolResult) codes.push_back(e.data["error"]["code"]);
  }
  EXPECT_EQ(codes, (std::vector<std::string>{"invalid_arguments", "invalid_json", "unknown_tool"}));
  EXPECT_EQ(log.back().data["status"], "completed");
}

TEST_P(AgentTest, PresetToolGroupsLimitTheCatalog) {
  ASSERT_TRUE(tools_.Register(std::make_unique<EchoTool>(), "test").ok());
  std::string id = CreateSession(*manager_, "no_tools");
  ASSERT_TRUE(Deliver(id, "hi").ok());
  waiter_.WaitForTurnEnds(id, 1);
  EXPECT_TRUE(model_.requests().at(0).tools.empty());
  EXPECT_EQ(model_.requests().at(0).messages.at(0).text, "You are no_tools.\n\nSession: " + id);
}

TEST_P(AgentTest, SteerLandsAtTheNextStepBoundaryOfARunningTurn) {
  ASSERT_TRUE(tools_.Register(std::make_unique<EchoTool>(), "test").ok());
  model_.Push(ScriptedModel::Hold(ScriptedModel::ToolCalls({{"c1", "echo_args", R"({"text":"x"})"}})));
  model_.Push(ScriptedModel::Text("final"));
  std::string id = CreateSession();
  ASSERT_TRUE(Deliver(id, "first").ok());
  ASSERT_TRUE(model_.WaitForRequests(1));
  EXPECT_EQ(manager_->LiveStatus(id), AgentStatus::kRunning);
  ASSERT_TRUE(Deliver(id, "steer me", DeliveryMode::kSteer).ok());
  ASSERT_TRUE(model_.Release());
  auto log = waiter_.WaitForTurnEnds(id, 1);
  ASSERT_EQ(model_.requests().size(), 2u);
  // One turn; the second model call saw the steer after the tool result.
  EXPECT_EQ(EventWaiter::Count(log, event_types::kTurnStart), 1u);
  EXPECT_EQ(UserTexts(model_.requests()[1]), (std::vector<std::string>{"first", "steer me"}));
  EXPECT_EQ(model_.requests()[1].messages.back().role, ModelMessage::Role::kUser);
  EXPECT_EQ(PendingRows(), 0);
}

TEST_P(AgentTest, FollowupWaitsForTheTurnToEnd) {
  ASSERT_TRUE(tools_.Register(std::make_unique<EchoTool>(), "test").ok());
  model_.Push(ScriptedModel::Hold(ScriptedModel::ToolCalls({{"c1", "echo_args", R"({"text":"x"})"}})));
  model_.Push(ScriptedModel::Text("first done"));
  std::string id = CreateSession();
  ASSERT_TRUE(Deliver(id, "first").ok());
  ASSERT_TRUE(model_.WaitForRequests(1));
  ASSERT_TRUE(Deliver(id, "later", DeliveryMode::kFollowup).ok());
  ASSERT_TRUE(model_.Release());
  auto log = waiter_.WaitForTurnEnds(id, 2);
  ASSERT_EQ(model_.requests().size(), 3u);
  EXPECT_EQ(UserTexts(model_.requests()[1]), std::vector<std::string>{"first"});
  EXPECT_EQ(UserTexts(model_.requests()[2]), (std::vector<std::string>{"first", "later"}));
  EXPECT_EQ(EventWaiter::Count(log, event_types::kTurnStart), 2u);
  EXPECT_EQ(Texts(log, et::kAssistantMessage), (std::vector<std::string>{"first done", "echo: later"}));
}

TEST_P(AgentTest, FollowupWakesAnIdleAgent) {
  std::string id = CreateSession();
  ASSERT_TRUE(Deliver(id, "queued", DeliveryMode::kFollowup).ok());
  auto log = waiter_.WaitForTurnEnds(id, 1);
  EXPECT_EQ(Texts(log, et::kAssistantMessage), std::vector<std::string>{"echo: queued"});
}

TEST_P(AgentTest, MessageWithoutWakeupWaitsForTheNextTurn) {
  std::string id = CreateSession();
  std::promise<Result<Delivered>> p;
  manager_->Deliver(Delivery{id, "quiet", DeliveryMode::kFollowup, false, std::nullopt, Json::object()},
                    [&](Result<Delivered> r) { p.set_value(std::move(r)); });
  ASSERT_TRUE(p.get_future().get().ok());
  ASSERT_TRUE(Deliver(id, "loud", DeliveryMode::kFollowup).ok());
  auto log = waiter_.WaitForTurnEnds(id, 2);
  // The quiet one went first (it was older), once something woke the agent.
  EXPECT_EQ(Texts(log, et::kUserMessage), (std::vector<std::string>{"quiet", "loud"}));
}

TEST_P(AgentTest, DuplicateKeyDeliversOnce) {
  std::string id = CreateSession();
  auto first = Deliver(id, "once", DeliveryMode::kSteer, "k1");
  auto second = Deliver(id, "once again", DeliveryMode::kSteer, "k1");
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_FALSE(first->duplicate);
  EXPECT_TRUE(second->duplicate);
  EXPECT_EQ(first->message_id, second->message_id);
  ASSERT_TRUE(Deliver(id, "different key", DeliveryMode::kFollowup, "k2").ok());
  auto log = waiter_.WaitForTurnEnds(id, 2);
  EXPECT_EQ(Texts(log, et::kUserMessage), (std::vector<std::string>{"once", "different key"}));
  // The same key on another session is another message.
  std::string other = CreateSession();
  auto third = Deliver(other, "once", DeliveryMode::kSteer, "k1");
  ASSERT_TRUE(third.ok());
  EXPECT_FALSE(third->duplicate);
}

// Retention of consumed inbox rows (retention.inbox_days).
constexpr int64_t kDayMs = 86'400'000;

int64_t InboxRows(store::Database& db, const std::string& where) {
  auto r = db.ReadValue<int64_t>([&](store::Tx& tx) -> Result<int64_t> {
    int64_t n = 0;
    DSH_RETURN_IF_ERROR(tx.Query("SELECT COUNT(*) FROM inbox WHERE " + where, {}, [&](const store::Row& row) {
      n = row.Int(0);
      return Status::Ok();
    }));
    return n;
  });
  return r.ok() ? *r : -1;
}

// Rows written straight into the inbox (wakeup off, so no turn takes the
// pending ones): `consumed_at` nullopt leaves a row pending.
void PutRows(store::Database& db, const std::string& session, int n, const std::string& key_prefix,
             std::optional<int64_t> consumed_at, int64_t created_at) {
  ASSERT_TRUE(db.WriteSync([&](store::Tx& tx) -> Status {
                  for (int i = 0; i < n; ++i) {
                    InboxMessage m;
                    m.message_id = "msg_" + key_prefix + std::to_string(i);
                    m.session_id = session;
                    m.mode = DeliveryMode::kFollowup;
                    m.wakeup = false;
                    m.text = "t";
                    m.created_at = created_at;
                    DSH_RETURN_IF_ERROR(agent_store::Insert(tx, m, key_prefix + std::to_string(i)).status());
                    if (consumed_at) DSH_RETURN_IF_ERROR(agent_store::Consume(tx, {{m.num, m.message_id}}, *consumed_at));
                  }
                  return Status::Ok();
                }).ok());
}

TEST_P(AgentTest, RetentionPrunesOldConsumedRowsInBoundedSlicesAndNothingElse) {
  std::string id = CreateSession();
  int64_t now = ToUnixMillis(clock_.Now());
  PutRows(*db_, id, 250, "old-", now - 31 * kDayMs, now - 32 * kDayMs);     // consumed 31 days ago
  PutRows(*db_, id, 20, "recent-", now - 29 * kDayMs, now - 32 * kDayMs);   // inside the window
  PutRows(*db_, id, 5, "pending-", std::nullopt, now - 400 * kDayMs);       // never consumed
  PutRows(*db_, id, 2, "retained-", now - 60 * kDayMs, now - 61 * kDayMs);  // still retryable
  agent_store::RetainedKeys retained = [](store::Tx&) -> Result<std::vector<std::string>> {
    return std::vector<std::string>{"retained-0", "retained-1"};
  };
  store::Pruner pruner(*db_, clock_, {agent_store::InboxPruneTask(30, {retained})}, {.slice_rows = 100});
  auto round = pruner.RunRound();
  ASSERT_TRUE(round.ok()) << round.status().ToString();
  EXPECT_EQ(round->deleted, 250);
  EXPECT_EQ(round->max_slice, 100);  // 100, 100, 50: no slice larger than asked
  EXPECT_EQ(round->slices, 3);
  EXPECT_EQ(InboxRows(*db_, "key LIKE 'old-%'"), 0);
  EXPECT_EQ(InboxRows(*db_, "key LIKE 'recent-%'"), 20);
  EXPECT_EQ(InboxRows(*db_, "key LIKE 'pending-%' AND consumed_at IS NULL"), 5);
  EXPECT_EQ(InboxRows(*db_, "key LIKE 'retained-%'"), 2);

  // Two days on, the recent ones are 31 days old too; pending rows still stay.
  clock_.Advance(std::chrono::hours(48));
  round = pruner.RunRound();
  ASSERT_TRUE(round.ok());
  EXPECT_EQ(round->deleted, 20);
  EXPECT_EQ(InboxRows(*db_, "1 = 1"), 7);
  EXPECT_EQ(InboxRows(*db_, "consumed_at IS NULL"), 5);
}

// A key answers `duplicate` as long as its message is pending and for
// retention.inbox_days after it was consumed; after that it is a new key.
TEST_P(AgentTest, AnIdempotencyKeyHoldsForTheRetentionWindowAfterConsumption) {
  std::string id = CreateSession();
  auto first = Deliver(id, "once", DeliveryMode::kSteer, "k1");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  waiter_.WaitForTurnEnds(id, 1);
  ASSERT_EQ(PendingRows(), 0);
  store::Pruner pruner(*db_, clock_, {agent_store::InboxPruneTask(30, {})}, {.slice_rows = 10});

  clock_.Advance(std::chrono::hours(24 * 30 - 1));  // just inside the window
  auto round = pruner.RunRound();
  ASSERT_TRUE(round.ok()) << round.status().ToString();
  EXPECT_EQ(round->deleted, 0);
  auto again = Deliver(id, "once, retried", DeliveryMode::kSteer, "k1");
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->duplicate);
  EXPECT_EQ(again->message_id, first->message_id);

  clock_.Advance(std::chrono::hours(2));  // past it
  round = pruner.RunRound();
  ASSERT_TRUE(round.ok());
  EXPECT_EQ(round->deleted, 1);
  auto late = Deliver(id, "once, much later", DeliveryMode::kSteer, "k1");
  ASSERT_TRUE(late.ok());
  EXPECT_FALSE(late->duplicate);
  EXPECT_NE(late->message_id, first->message_id);
}

TEST_P(AgentTest, DeliveryToAMissingSessionFailsAndCreatesNothing) {
  auto r = Deliver("ses_missing", "hello");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), "not_found");
  EXPECT_EQ(PendingRows(), 0);
  auto listed = sessions_->ListRecent(10);
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty());
  EXPECT_EQ(Deliver(CreateSession(), "  \n").status().code(), "invalid_arguments");
}

TEST_P(AgentTest, DeliveryToAColdSessionResumesIt) {
  session::NewSession s;
  s.route = {"scripted", "m2", std::nullopt};
  s.preset = "reviewer";
  auto h = sessions_->Create(s);
  ASSERT_TRUE(h.ok());
  std::promise<AgentStatus> before;
  manager_->GetStatus(h->id, [&](AgentStatus st) { before.set_value(st); });
  EXPECT_EQ(before.get_future().get(), AgentStatus::kCold);
  ASSERT_TRUE(Deliver(h->id, "wake up").ok());
  waiter_.WaitForTurnEnds(h->id, 1);
  EXPECT_TRUE(manager_->LiveStatus(h->id).has_value());
  // Resumed with its persisted preset and route.
  EXPECT_EQ(model_.requests().at(0).model, "m2");
  EXPECT_EQ(model_.requests().at(0).messages.at(0).text, "You are reviewer.\n\nSession: " + h->id);
  std::promise<AgentStatus> missing;
  manager_->GetStatus("ses_nope", [&](AgentStatus st) { missing.set_value(st); });
  EXPECT_EQ(missing.get_future().get(), AgentStatus::kMissing);
}

TEST_P(AgentTest, AResumeRouteRunsAColdSessionWithItWithoutPersistingIt) {
  session::NewSession s;
  s.route = {"scripted", "m2", std::nullopt};
  auto h = sessions_->Create(s);
  ASSERT_TRUE(h.ok());
  Delivery d{h->id, "wake up", DeliveryMode::kSteer, true, std::nullopt, Json::object()};
  d.resume_route = session::ModelRoute{"scripted", "m3", "high"};
  std::promise<Result<Delivered>> p;
  manager_->Deliver(d, [&](Result<Delivered> r) { p.set_value(std::move(r)); });
  ASSERT_TRUE(p.get_future().get().ok());
  waiter_.WaitForTurnEnds(h->id, 1);
  EXPECT_EQ(model_.requests().at(0).model, "m3");
  EXPECT_EQ(model_.requests().at(0).reasoning_effort, std::optional<std::string>("high"));
  EXPECT_EQ(sessions_->Get(h->id)->route, s.route);  // the header keeps its own route
  // A live session ignores it.
  d.text = "again";
  d.resume_route = session::ModelRoute{"scripted", "m4", std::nullopt};
  std::promise<Result<Delivered>> again;
  manager_->Deliver(d, [&](Result<Delivered> r) { again.set_value(std::move(r)); });
  ASSERT_TRUE(again.get_future().get().ok());
  waiter_.WaitForTurnEnds(h->id, 2);
  EXPECT_EQ(model_.requests().at(1).model, "m3");
}

TEST_P(AgentTest, AnInboxSweepRacingADeliveryDoesNotResumeTheSessionWithoutItsResumeRoute) {
  // A sweep every millisecond finds the message the moment it commits; the
  // session must still run with the delivery's route, not its own.
  Close();
  sweep_interval_ = 1ms;
  Open();
  constexpr int kSessions = 40;
  for (int i = 0; i < kSessions; ++i) {
    session::NewSession s;
    s.route = {"scripted", "m2", std::nullopt};
    auto h = sessions_->Create(s);
    ASSERT_TRUE(h.ok());
    Delivery d{h->id, "wake up", DeliveryMode::kSteer, true, std::nullopt, Json::object()};
    d.resume_route = session::ModelRoute{"scripted", "m3", std::nullopt};
    std::promise<Result<Delivered>> p;
    manager_->Deliver(d, [&](Result<Delivered> r) { p.set_value(std::move(r)); });
    ASSERT_TRUE(p.get_future().get().ok());
    waiter_.WaitForTurnEnds(h->id, 1);
  }
  auto requests = model_.requests();
  ASSERT_EQ(requests.size(), static_cast<size_t>(kSessions));
  for (const auto& r : requests) EXPECT_EQ(r.model, "m3");
}

TEST_P(AgentTest, CreateWithAcceptsTheFirstMessageWithTheSessionAndRunsIt) {
  session::NewSession s;
  s.route = {"scripted", "m1", "low"};
  s.preset = "reviewer";
  std::promise<Result<Created>> p;
  manager_->CreateWith(s, Delivery{"ignored", "start here", DeliveryMode::kSteer, true, std::nullopt, {{"origin", "test"}}},
                       [&](Result<Created> r) { p.set_value(std::move(r)); });
  auto created = p.get_future().get();
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_TRUE(manager_->LiveStatus(created->header.id).has_value());
  auto log = waiter_.WaitForTurnEnds(created->header.id, 1);
  EXPECT_EQ(Texts(log, et::kUserMessage), std::vector<std::string>{"start here"});
  auto user = std::find_if(log.begin(), log.end(), [](const Event& e) { return e.type == et::kUserMessage; });
  EXPECT_EQ(user->data["message_id"], created->message_id);
  EXPECT_EQ(model_.requests().at(0).reasoning_effort, std::optional<std::string>("low"));
  EXPECT_EQ(model_.requests().at(0).messages.at(0).text, "You are reviewer.\n\nSession: " + created->header.id);
  // A blank first message creates nothing.
  std::promise<Result<Created>> blank;
  manager_->CreateWith(s, Delivery{"", " ", DeliveryMode::kSteer, true, std::nullopt, Json::object()},
                       [&](Result<Created> r) { blank.set_value(std::move(r)); });
  EXPECT_EQ(blank.get_future().get().status().code(), "invalid_arguments");
  EXPECT_EQ(sessions_->ListRecent(10)->size(), 1u);
}

TEST_P(AgentTest, ModelErrorEndsTheTurnAndTheNextMessageWorks) {
  model_.Push(ScriptedModel::Error("model_error", "HTTP 500: boom"));
  std::string id = CreateSession();
  ASSERT_TRUE(Deliver(id, "first").ok());
  auto log = waiter_.WaitForTurnEnds(id, 1);
  EXPECT_EQ(log.back().data["status"], "error");
  EXPECT_EQ(log.back().data["error"]["code"], "model_error");
  EXPECT_EQ(log.back().data["error"]["message"], "HTTP 500: boom");
  ASSERT_TRUE(Deliver(id, "second").ok());
  log = waiter_.WaitForTurnEnds(id, 2);
  EXPECT_EQ(Texts(log, et::kAssistantMessage), std::vector<std::string>{"echo: second"});
  EXPECT_EQ(PendingRows(), 0);
}

TEST_P(AgentTest, StepLimitEndsTheTurnWithAClearError) {
  Close();
  max_steps_ = 3;
  Open();
  ASSERT_TRUE(tools_.Register(std::make_unique<EchoTool>(), "test").ok());
  for (int i = 0; i < 5; ++i) model_.Push(ScriptedModel::ToolCalls({{"c" + std::to_string(i), "echo_args", R"({"text":"x"})"}}));
  std::string id = CreateSession();
  ASSERT_TRUE(Deliver(id, "loop forever").ok());
  auto log = waiter_.WaitForTurnEnds(id, 1);
  EXPECT_EQ(model_.requests().size(), 3u);
  EXPECT_EQ(log.back().data["error"]["code"], "step_limit");
  // The last step's calls were answered, not left dangling.
  EXPECT_EQ(EventWaiter::Count(log, et::kToolCall), EventWaiter::Count(log, et::kToolResult));
}

TEST_P(AgentTest, CancelEndsTheRunningTurn) {
  model_.Push(ScriptedModel::Hold(ScriptedModel::Text("never shown")));
  std::string id = StopWhileTheModelAnswers("slow");
  auto log = Log(id);
  EXPECT_EQ(log.back().data["error"]["code"], "cancelled");
  EXPECT_TRUE(Texts(log, et::kAssistantMessage).empty());
}

// Stop keeps what the person already read: the streamed text is appended,
// marked partial, before the turn's end, and the next turn's model call
// reads it as the assistant's own words.
TEST_P(AgentTest, AStoppedTurnKeepsItsPartialAnswer) {
  model_.Push(ScriptedModel::Hold(ScriptedModel::Streaming(
      {{ModelDelta::Kind::kReasoning, "Weighing "}, {ModelDelta::Kind::kText, "The answer "},
       {ModelDelta::Kind::kText, "is forty"}},
      ScriptedModel::Text("never shown"))));
  std::string id = StopWhileTheModelAnswers("slow");
  auto log = Log(id);
  ASSERT_GE(log.size(), 3u);
  const auto& end = log[log.size() - 1];
  const auto& answer = log[log.size() - 2];
  const auto& reasoning = log[log.size() - 3];
  EXPECT_EQ(end.type, "turn/end");
  EXPECT_EQ(end.data["error"]["code"], "cancelled");
  EXPECT_EQ(answer.type, et::kAssistantMessage);
  EXPECT_EQ(answer.data, (Json{{"text", "The answer is forty"}, {"partial", true}}));
  EXPECT_EQ(reasoning.type, et::kReasoning);
  EXPECT_EQ(reasoning.data, (Json{{"text", "Weighing "}, {"partial", true}}));

  ASSERT_TRUE(Deliver(id, "go on").ok());
  waiter_.WaitForTurnEnds(id, 2);
  auto requests = model_.requests();
  ASSERT_EQ(requests.size(), 2u);
  std::vector<std::string> assistant;
  for (const auto& m : requests[1].messages) {
    if (m.role == ModelMessage::Role::kAssistant) assistant.push_back(m.text);
  }
  EXPECT_EQ(assistant, std::vector<std::string>{"The answer is forty"});
}

// A failure that is not a stop keeps nothing of what was streamed.
TEST_P(AgentTest, AFailedModelCallKeepsNoPartialAnswer) {
  model_.Push(ScriptedModel::Streaming({{ModelDelta::Kind::kText, "half"}},
                                       ScriptedModel::Error("model_unavailable", "the server went away")));
  std::string id = CreateSession();
  ASSERT_TRUE(Deliver(id, "hello").ok());
  auto log = waiter_.WaitForTurnEnds(id, 1);
  EXPECT_EQ(log.back().data["error"]["code"], "model_unavailable");
  EXPECT_TRUE(Texts(log, et::kAssistantMessage).empty());
}

TEST_P(AgentTest, MaintenanceRunsOnlyWhileIdleAndHoldsTurnsBack) {
  model_.Push(ScriptedModel::Hold(ScriptedModel::Text("busy")));
  std::string id = CreateSession();
  ASSERT_TRUE(Deliver(id, "work").ok());
  ASSERT_TRUE(model_.WaitForRequests(1));
  std::promise<Status> busy;
  manager_->RunMaintenance(id, [](std::function<void()> finished) { finished(); }, [&](Status st) { busy.set_value(st); });
  EXPECT_EQ(busy.get_future().get().code(), "agent_busy");
  ASSERT_TRUE(model_.Release());
  waiter_.WaitForTurnEnds(id, 1);
  WaitIdle(id);

  // While a task holds the agent, a delivered message waits.
  std::promise<std::function<void()>> holding;
  std::promise<Status> ran;
  manager_->RunMaintenance(id, [&](std::function<void()> finished) { holding.set_value(finished); },
                           [&](Status st) { ran.set_value(st); });
  auto finished = holding.get_future().get();
  ASSERT_TRUE(Deliver(id, "after maintenance").ok());
  EXPECT_EQ(model_.requests().size(), 1u);
  EXPECT_EQ(manager_->LiveStatus(id), AgentStatus::kIdle);
  finished();
  EXPECT_TRUE(ran.get_future().get().ok());
  auto log = waiter_.WaitForTurnEnds(id, 2);
  EXPECT_EQ(Texts(log, et::kAssistantMessage).back(), "echo: after maintenance");
  std::promise<Status> not_live;
  manager_->RunMaintenance("ses_x", [](std::function<void()> f) { f(); }, [&](Status st) { not_live.set_value(st); });
  EXPECT_EQ(not_live.get_future().get().code(), "not_live");
}

TEST_P(AgentTest, IdleAgentsAreEvictedAndResumeWhenNeeded) {
  std::string id = CreateSession();
  ASSERT_TRUE(Deliver(id, "one").ok());
  waiter_.WaitForTurnEnds(id, 1);
  WaitIdle(id);
  clock_.Advance(9min);
  clock_.Advance(2min);  // past the default idle eviction of 10 minutes
  ASSERT_TRUE(manager_->WaitUntilNotLive(id, 10s));
  ASSERT_TRUE(Deliver(id, "two").ok());
  auto log = waiter_.WaitForTurnEnds(id, 2);
  EXPECT_EQ(Texts(log, et::kAssistantMessage), (std::vector<std::string>{"echo: one", "echo: two"}));
  // The resumed agent saw the whole conversation.
  EXPECT_EQ(UserTexts(model_.requests().back()), (std::vector<std::string>{"one", "two"}));
}

TEST_P(AgentTest, AnInterruptedTurnContinuesOnceWhenTheSessionIsNextLive) {
  model_.Push(ScriptedModel::Hold(ScriptedModel::Text("lost with the host")));
  std::string id = CreateSession();
  auto d = Deliver(id, "important");
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE(model_.WaitForRequests(1));
  // The host stops in the middle of the turn: nothing after the user message is durable.
  manager_->Stop();  // cancels the model call; the turn's end is never recorded
  EXPECT_EQ(PendingRows(), 1);
  second_ = MakeManager();
  second_->Start();  // its first sweep finds the pending message
  auto log = waiter_.WaitForTurnEnds(id, 1);
  EXPECT_EQ(Texts(log, et::kUserMessage), std::vector<std::string>{"important"});
  EXPECT_EQ(Texts(log, et::kAssistantMessage), std::vector<std::string>{"echo: important"});
  EXPECT_EQ(EventWaiter::Count(log, event_types::kTurnStart), 1u);
  EXPECT_EQ(PendingRows(), 0);
}

TEST_P(AgentTest, ACutTurnIsContinuedBeforeAMessageThatWaitedBehindItStartsTheNext) {
  model_.Push(ScriptedModel::Hold(ScriptedModel::Text("lost with the host")));
  std::string id = CreateSession();
  ASSERT_TRUE(Deliver(id, "important").ok());
  ASSERT_TRUE(model_.WaitForRequests(1));
  manager_->Stop();  // the turn is cut
  // Another message arrives while no host runs the session.
  ASSERT_TRUE(db_->WriteSync([&](store::Tx& tx) {
                InboxMessage later{.message_id = "msg_later", .session_id = id, .text = "later", .created_at = 1};
                return agent_store::Insert(tx, later, std::nullopt).status();
              }).ok());
  second_ = MakeManager();
  second_->Start();
  auto log = waiter_.WaitForTurnEnds(id, 2);
  // The cut turn ends first, then "later" runs in a turn of its own: no turn
  // starts inside another.
  std::vector<std::string> turns;
  for (const auto& e : log) {
    if (e.type == event_types::kTurnStart || e.type == event_types::kTurnEnd) turns.push_back(e.type);
  }
  const std::string start(event_types::kTurnStart), end(event_types::kTurnEnd);
  EXPECT_EQ(turns, (std::vector<std::string>{start, end, start, end}));
  EXPECT_EQ(Texts(log, et::kAssistantMessage), (std::vector<std::string>{"echo: important", "echo: later"}));
  EXPECT_EQ(Texts(log, et::kUserMessage), (std::vector<std::string>{"important", "later"}));
}

TEST_P(AgentTest, StoppingDoesNotWaitForATitleBeingGenerated) {
  Close();
  generate_titles_ = true;
  Open();
  model_.Push(ScriptedModel::Text("answer"));
  model_.Push(ScriptedModel::Hold(ScriptedModel::Text("A Title That Never Comes")));
  std::string id = CreateSession();
  ASSERT_TRUE(Deliver(id, "hello").ok());
  waiter_.WaitForTurnEnds(id, 1);
  ASSERT_TRUE(model_.WaitForRequests(2));  // the title request is in flight
  auto stopped = std::async(std::launch::async, [&] { manager_->Stop(); });
  EXPECT_EQ(stopped.wait_for(10s), std::future_status::ready);
  stopped.wait();
  EXPECT_EQ(EventWaiter::Count(Log(id), et::kTitleGenerated), 0u);
}

TEST_P(AgentTest, TwoHostsNeverRunTheSameSession) {
  second_ = MakeManager();
  second_->Start();
  std::string id = CreateSession();  // live in the first host
  Status st = Resume(*second_, id);
  EXPECT_EQ(st.code(), "session_busy");
  EXPECT_FALSE(second_->LiveStatus(id).has_value());
  // A message accepted by the second host is run by the owner.
  ASSERT_TRUE(Deliver(*second_, id, "via the other host").ok());
  auto log = waiter_.WaitForTurnEnds(id, 1);
  EXPECT_EQ(Texts(log, et::kAssistantMessage), std::vector<std::string>{"echo: via the other host"});
  EXPECT_FALSE(second_->LiveStatus(id).has_value());
  EXPECT_TRUE(manager_->LiveStatus(id).has_value());
  // Once the owner lets go, the other host may take it.
  WaitIdle(id);
  manager_->EvictIdleForTesting();
  ASSERT_FALSE(manager_->LiveStatus(id).has_value());
  EXPECT_TRUE(Resume(*second_, id).ok());
  EXPECT_TRUE(second_->LiveStatus(id).has_value());
  EXPECT_EQ(Resume(*manager_, id).code(), "session_busy");
}

TEST_P(AgentTest, AHostThatLosesItsLeaseStopsTheAgent) {
  std::string id = CreateSession();
  ASSERT_TRUE(db_->WriteSync([&](store::Tx& tx) {
                   return tx.Exec("UPDATE session_leases SET holder = 'elsewhere/1/x' WHERE session_id = ?",
                                  {std::string_view(id)})
                       .status();
                 }).ok());
  clock_.Advance(10s);  // the next sweep renews (a third of the 15 s lease passed)
  EXPECT_TRUE(manager_->WaitUntilNotLive(id, 10s));
}

// The lease fences the agent's writes: once another host holds it, the old
// holder appends nothing more to the session — not at its next renewal, at
// its next write (the new holder has read the log and runs the session).
TEST_P(AgentTest, AnAgentWhoseLeaseWasTakenWritesNothingMore) {
  auto take_lease = [&](const std::string& id) {
    ASSERT_TRUE(db_->WriteSync([&](store::Tx& tx) {
                     return tx.Exec("UPDATE session_leases SET holder = 'elsewhere/1/x' WHERE session_id = ?",
                                    {std::string_view(id)})
                         .status();
                   }).ok());
  };
  // In the middle of a turn: the model's answer is not appended.
  model_.Push(ScriptedModel::Hold(ScriptedModel::Text("too late")));
  std::string running = CreateSession();
  ASSERT_TRUE(Deliver(running, "first").ok());
  ASSERT_TRUE(model_.WaitForRequests(1));
  take_lease(running);
  ASSERT_TRUE(model_.Release());
  EXPECT_TRUE(manager_->WaitUntilNotLive(running, 10s));  // the clock stands: no renewal told it
  std::vector<Event> log = Log(running);
  EXPECT_EQ(Texts(log, et::kUserMessage), std::vector<std::string>{"first"});
  EXPECT_EQ(EventWaiter::Count(log, et::kAssistantMessage), 0u);
  EXPECT_EQ(EventWaiter::Count(log, et::kTurnEnd), 0u);

  // Idle: a message delivered to it is accepted into the inbox for the new
  // holder, and no turn starts here.
  std::string idle = CreateSession();
  take_lease(idle);
  auto d = Deliver(idle, "for the new holder");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_TRUE(manager_->WaitUntilNotLive(idle, 10s));
  EXPECT_EQ(EventWaiter::Count(Log(idle), et::kUserMessage), 0u);
  EXPECT_EQ(PendingRows(), 2);  // this one, and the cut turn's, which the new holder consumes
}

// The fence's other half: a host taking over an expired lease while the
// holder is frozen in the middle of an append waits for that append, then
// reads the log with it (it must not start from the log without it and
// write after it).
TEST_P(AgentTest, TakingALeaseOverWaitsForTheHoldersOpenAppend) {
  std::string id = CreateSession();  // live here: this host holds the lease
  std::vector<store::Migration> migrations = session::SessionStore::Migrations();
  for (auto& m : AgentManager::Migrations()) migrations.push_back(m);
  auto other_db = store::Database::Open(backend_.Factory(), migrations);
  ASSERT_TRUE(other_db.ok()) << other_db.status().ToString();

  std::promise<void> fenced, thaw;
  std::shared_future<void> thawed = thaw.get_future().share();
  std::promise<Result<std::vector<Event>>> appended;
  sessions_->AppendWithAsync(
      id, {{std::string(et::kUserMessage), Json{{"text", "written while frozen"}}}}, nullptr,
      [&](Result<std::vector<Event>> r) { appended.set_value(std::move(r)); },
      [&, holder = manager_->holder()](store::Tx& tx) {
        Status st = agent_store::CheckLease(tx, id, holder);
        fenced.set_value();
        thawed.wait();  // frozen here, the transaction open
        return st;
      });
  fenced.get_future().wait();

  // The other host, once the lease expired.
  const int64_t later = ToUnixMillis(clock_.Now()) + 60'000;
  auto taken = std::async(std::launch::async, [&]() -> Result<std::pair<bool, int64_t>> {
    std::pair<bool, int64_t> out{false, 0};
    DSH_RETURN_IF_ERROR((*other_db)->WriteSync([&](store::Tx& tx) -> Status {
      DSH_ASSIGN_OR_RETURN(out.first, agent_store::AcquireLease(tx, id, "elsewhere/1/x", later, later + 15'000));
      return Status::Ok();
    }));
    // Then, as a resume does, the log.
    DSH_RETURN_IF_ERROR((*other_db)->ReadSync([&](store::Tx& tx) -> Status {
      return tx.Query("SELECT last_seq FROM sessions WHERE id = ?", {std::string_view(id)}, [&](const store::Row& row) {
        out.second = row.Int(0);
        return Status::Ok();
      });
    }));
    return out;
  });
  EXPECT_EQ(taken.wait_for(500ms), std::future_status::timeout) << "the lease was taken during the append";
  thaw.set_value();
  auto stored = appended.get_future().get();
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  auto r = taken.get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->first);
  EXPECT_EQ(r->second, stored->back().seq) << "the new holder read the log without the append";
  (*other_db)->Close();
}

// Hosts that each have their own database handle, as on separate machines,
// and sweep their inboxes only hourly: what reaches them in time comes by
// notice (PostgreSQL's LISTEN/NOTIFY; SQLite has none).
class AgentNoticeTest : public AgentTest {
 protected:
  void SetUp() override {
    sweep_interval_ = 1h;
    Open();
  }
};

TEST_P(AgentNoticeTest, AMessageAnotherHostAcceptedReachesTheOwnerWithoutWaitingForASweep) {
  std::string id = CreateSession();  // live on the first host
  std::vector<store::Migration> migrations = session::SessionStore::Migrations();
  for (auto& m : AgentManager::Migrations()) migrations.push_back(m);
  auto other_db = store::Database::Open(backend_.Factory(), migrations);
  ASSERT_TRUE(other_db.ok()) << other_db.status().ToString();
  session::SessionStore other_sessions(**other_db, clock_, nullptr);
  auto other = MakeManager(**other_db, other_sessions);
  other->Start();
  ASSERT_TRUE(Deliver(*other, id, "via the other host").ok());
  auto log = waiter_.WaitForTurnEnds(id, 1);
  EXPECT_EQ(Texts(log, et::kAssistantMessage), std::vector<std::string>{"echo: via the other host"});
  EXPECT_FALSE(other->LiveStatus(id).has_value());
  other->Stop();
  (*other_db)->Close();
}

INSTANTIATE_TEST_SUITE_P(Postgres, AgentNoticeTest, ::testing::Values(std::string("postgres")),
                         store::testing::BackendTestName);

// The same semantics through the real openai adapter against the scripted
// Chat Completions server.
class OpenAiAgentTest : public AgentTest {
 protected:
  void SetUp() override {
    OpenAiOptions o;
    o.base_url = chat_.base_url();
    o.idle_timeout = 1500ms;  // above SlowToolCall's pause
    o.max_retries = 1;
    o.backoff_initial = 10ms;
    o.backoff_max = 20ms;
    adapter_ = MakeOpenAiModel(o);
    openai_router_ = std::make_unique<testing::SingleModelRouter>(*adapter_);
    router_ptr_ = openai_router_.get();
    ASSERT_TRUE(tools_.Register(std::make_unique<EchoTool>(), "test").ok());
    Open();
  }
  void TearDown() override {
    Close();
    adapter_->Shutdown();
  }

  // A tool-call reply whose stream ends only after `delay`: the turn is
  // running meanwhile.
  static testing::ScriptedResponse SlowToolCall(std::chrono::milliseconds delay = 700ms) {
    auto r = testing::ToolCallReply({{"call_1", "echo_args", R"({"text":"pong"})"}});
    r.chunks.back().delay = delay;
    return r;
  }
  static std::vector<std::string> RequestUserTexts(const testing::RecordedRequest& r) {
    std::vector<std::string> out;
    for (const auto& m : r.json["messages"]) {
      if (m["role"] == "user") out.push_back(m["content"]);
    }
    return out;
  }

  testing::FakeChatServer chat_;
  std::unique_ptr<ModelAdapter> adapter_;
  std::unique_ptr<testing::SingleModelRouter> openai_router_;
};

INSTANTIATE_TEST_SUITE_P(Backends, OpenAiAgentTest, store::testing::BackendNames(), store::testing::BackendTestName);

TEST_P(OpenAiAgentTest, TheAnswerIsPublishedInPiecesAsItIsGenerated) {
  std::string id = CreateSession();
  std::mutex mu;
  std::string text;
  std::set<int64_t> after;
  auto sub = hub_.Subscribe(
      id, [](const std::string&, const std::vector<Event>&) {},
      [&](const std::string&, const session::EventHub::Delta& d) {
        std::lock_guard lock(mu);
        if (d.kind == "text") text += d.text;
        after.insert(d.after_seq);
      });
  chat_.Enqueue(testing::TextReply("a streamed answer"));
  ASSERT_TRUE(Deliver(id, "stream it").ok());
  auto log = waiter_.WaitForTurnEnds(id, 1);
  std::lock_guard lock(mu);
  EXPECT_EQ(text, "a streamed answer");
  ASSERT_EQ(after.size(), 1u);
  int64_t last_user = 0;
  for (const auto& e : log) {
    if (e.type == et::kUserMessage || e.type == "title/fallback") last_user = std::max(last_user, e.seq);
  }
  EXPECT_EQ(*after.begin(), last_user) << "the seq the model call began after";
}

TEST_P(OpenAiAgentTest, AToolCallRunsAndItsResultReachesTheNextRequest) {
  chat_.Enqueue(testing::ToolCallReply({{"call_1", "echo_args", R"({"text":"pong"})"}}));
  chat_.Enqueue(testing::TextReply("done"));
  std::string id = CreateSession();
  ASSERT_TRUE(Deliver(id, "use the tool").ok());
  auto log = waiter_.WaitForTurnEnds(id, 1);
  EXPECT_EQ(log.back().data["status"], "completed");
  auto requests = chat_.requests();
  ASSERT_EQ(requests.size(), 2u);
  Json messages = requests[1].json["messages"];
  ASSERT_GE(messages.size(), 3u);
  Json call = messages[messages.size() - 2];
  EXPECT_EQ(call["role"], "assistant");
  EXPECT_EQ(call["tool_calls"][0]["id"], "call_1");
  EXPECT_EQ(call["tool_calls"][0]["function"]["name"], "echo_args");
  Json result = messages.back();
  EXPECT_EQ(result["role"], "tool");
  EXPECT_EQ(result["tool_call_id"], "call_1");
  EXPECT_EQ(ParseJson(result["content"].get<std::string>()).value(), (Json{{"said", "pong"}}));
  EXPECT_EQ(requests[0].json["tools"][0]["function"]["name"], "echo_args");
  EXPECT_EQ(Texts(log, et::kAssistantMessage), std::vector<std::string>{"done"});
}

TEST_P(OpenAiAgentTest, SteerLandsAtTheStepBoundaryOfARunningTurn) {
  chat_.Enqueue(SlowToolCall());
  chat_.Enqueue(testing::TextReply("final"));
  std::string id = CreateSession();
  ASSERT_TRUE(Deliver(id, "first").ok());
  ASSERT_TRUE(chat_.WaitForRequests(1, 10s));
  ASSERT_TRUE(Deliver(id, "steer me", DeliveryMode::kSteer).ok());
  auto log = waiter_.WaitForTurnEnds(id, 1);
  auto requests = chat_.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(RequestUserTexts(requests[1]), (std::vector<std::string>{"first", "steer me"}));
  EXPECT_EQ(requests[1].json["messages"].back()["role"], "user");  // after the tool result
  EXPECT_EQ(EventWaiter::Count(log, event_types::kTurnStart), 1u);
}

TEST_P(OpenAiAgentTest, FollowupWaitsForTheEndOfTheTurn) {
  chat_.Enqueue(SlowToolCall());
  chat_.Enqueue(testing::TextReply("first done"));
  chat_.Enqueue(testing::TextReply("second done"));
  std::string id = CreateSession();
  ASSERT_TRUE(Deliver(id, "first").ok());
  ASSERT_TRUE(chat_.WaitForRequests(1, 10s));
  ASSERT_TRUE(Deliver(id, "later", DeliveryMode::kFollowup).ok());
  auto log = waiter_.WaitForTurnEnds(id, 2);
  auto requests = chat_.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(RequestUserTexts(requests[1]), std::vector<std::string>{"first"});
  EXPECT_EQ(RequestUserTexts(requests[2]), (std::vector<std::string>{"first", "later"}));
  EXPECT_EQ(Texts(log, et::kAssistantMessage), (std::vector<std::string>{"first done", "second done"}));
}

TEST_P(OpenAiAgentTest, SteerAndFollowupBothWakeAnIdleAgent) {
  chat_.Enqueue(testing::TextReply("one"));
  chat_.Enqueue(testing::TextReply("two"));
  std::string id = CreateSession();
  ASSERT_TRUE(Deliver(id, "a", DeliveryMode::kSteer).ok());
  waiter_.WaitForTurnEnds(id, 1);
  ASSERT_TRUE(Deliver(id, "b", DeliveryMode::kFollowup).ok());
  auto log = waiter_.WaitForTurnEnds(id, 2);
  EXPECT_EQ(Texts(log, et::kAssistantMessage), (std::vector<std::string>{"one", "two"}));
}

TEST_P(OpenAiAgentTest, ADuplicateKeyDeliversOnce) {
  std::string id = CreateSession();
  auto a = Deliver(id, "once", DeliveryMode::kSteer, "key-1");
  auto b = Deliver(id, "once", DeliveryMode::kSteer, "key-1");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->message_id, b->message_id);
  ASSERT_TRUE(Deliver(id, "next", DeliveryMode::kFollowup).ok());
  auto log = waiter_.WaitForTurnEnds(id, 2);
  EXPECT_EQ(Texts(log, et::kUserMessage), (std::vector<std::string>{"once", "next"}));
  EXPECT_EQ(chat_.requests().size(), 2u);
}

TEST_P(OpenAiAgentTest, AServerErrorAndATimeoutEndTheTurnAndTheNextMessageWorks) {
  chat_.Enqueue(testing::Error(500, "boom"));
  chat_.Enqueue(testing::Error(500, "boom"));  // the one retry
  chat_.Enqueue(testing::Hang());
  chat_.Enqueue(testing::TextReply("fine"));
  std::string id = CreateSession();
  ASSERT_TRUE(Deliver(id, "one").ok());
  auto log = waiter_.WaitForTurnEnds(id, 1);
  EXPECT_EQ(log.back().data["error"]["code"], "model_error");
  ASSERT_TRUE(Deliver(id, "two").ok());
  log = waiter_.WaitForTurnEnds(id, 2);
  EXPECT_EQ(log.back().data["error"]["code"], "model_timeout");
  ASSERT_TRUE(Deliver(id, "three").ok());
  log = waiter_.WaitForTurnEnds(id, 3);
  EXPECT_EQ(log.back().data["status"], "completed");
  EXPECT_EQ(Texts(log, et::kAssistantMessage), std::vector<std::string>{"fine"});
  EXPECT_EQ(PendingRows(), 0);
}


// ---- the activity list: the outcome of the turn a delivery started --------

class ActivityTest : public AgentTest {
 protected:
  Result<Delivered> DeliverFromElsewhere(AgentManager& m, const std::string& id, const std::string& text,
                                         std::optional<std::string> key = std::nullopt) {
    Delivery d{id, text, DeliveryMode::kSteer, true, std::move(key), Json{{"origin", "session_send"}}};
    d.activity = activity::Source{"agent_message", std::nullopt, std::nullopt, std::nullopt};
    std::promise<Result<Delivered>> p;
    m.Deliver(std::move(d), [&](Result<Delivered> r) { p.set_value(std::move(r)); });
    return p.get_future().get();
  }
  std::vector<activity::Item> Items() {
    auto page = db_->ReadValue<activity::Page>(
        [](store::Tx& tx) { return activity::List(tx, activity::Filter::kAll, 100, std::nullopt); });
    EXPECT_TRUE(page.ok()) << page.status().ToString();
    return page.ok() ? page->items : std::vector<activity::Item>{};
  }
  static int64_t SeqOf(const std::vector<Event>& log, const std::string& message_id) {
    for (const auto& e : log) {
      if (e.type == et::kUserMessage && e.data.value("message_id", "") == message_id) return e.seq;
    }
    return -1;
  }
};
INSTANTIATE_TEST_SUITE_P(Backends, ActivityTest, store::testing::BackendNames(), store::testing::BackendTestName);

TEST_P(ActivityTest, ACompletedTurnRecordsItsSeqSummaryTokensAndTimes) {
  ModelResponse answer;
  answer.text = "\n  Disk usage is fine: 42% on /.\nDetails follow.";
  answer.finish_reason = "stop";
  answer.input_tokens = 120;
  answer.output_tokens = 9;
  model_.Push(ScriptedModel::Reply{answer});
  std::string id = CreateSession();
  auto d = DeliverFromElsewhere(*manager_, id, "check the disks");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  auto log = waiter_.WaitForTurnEnds(id, 1);
  // turn/end carries the provider's usage.
  EXPECT_EQ(log.back().data["usage"], (Json{{"input_tokens", 120}, {"output_tokens", 9}}));
  auto items = Items();
  ASSERT_EQ(items.size(), 1u);
  const auto& item = items[0];
  EXPECT_EQ(item.kind, "agent_message");
  EXPECT_EQ(item.outcome.status, "completed");
  EXPECT_EQ(item.outcome.session_id, std::optional<std::string>(id));
  EXPECT_EQ(item.outcome.seq, std::optional<int64_t>(SeqOf(log, d->message_id)));
  EXPECT_EQ(item.summary, std::optional<std::string>("Disk usage is fine: 42% on /."));
  EXPECT_EQ(item.outcome.input_tokens, std::optional<int64_t>(120));
  EXPECT_EQ(item.outcome.output_tokens, std::optional<int64_t>(9));
  ASSERT_TRUE(item.outcome.started_at && item.outcome.ended_at);
  EXPECT_LE(*item.outcome.started_at, *item.outcome.ended_at);
  EXPECT_FALSE(item.read);
}

TEST_P(ActivityTest, AFailedTurnRecordsItsErrorAndAPersonsMessageIsNoActivity) {
  model_.Push(ScriptedModel::Error("model_unavailable", "connection refused by 127.0.0.1:9"));
  std::string id = CreateSession();
  ASSERT_TRUE(DeliverFromElsewhere(*manager_, id, "report").ok());
  waiter_.WaitForTurnEnds(id, 1);
  ASSERT_TRUE(Deliver(id, "the person writes").ok());  // no activity source
  waiter_.WaitForTurnEnds(id, 2);
  auto items = Items();
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].outcome.status, "error");
  EXPECT_EQ(items[0].outcome.error_code, std::optional<std::string>("model_unavailable"));
  EXPECT_EQ(items[0].summary, std::optional<std::string>("connection refused by 127.0.0.1:9"));
  auto failed = db_->ReadValue<activity::Page>(
      [](store::Tx& tx) { return activity::List(tx, activity::Filter::kFailed, 10, std::nullopt); });
  ASSERT_TRUE(failed.ok());
  EXPECT_EQ(failed->items.size(), 1u);
}

TEST_P(ActivityTest, AStoppedTurnIsCancelled) {
  model_.Push(ScriptedModel::Hold(ScriptedModel::Text("never shown")));
  std::string id = CreateSession();
  ASSERT_TRUE(DeliverFromElsewhere(*manager_, id, "slow").ok());
  ASSERT_TRUE(model_.WaitForRequests(1));
  auto items = Items();
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].outcome.status, "running");
  manager_->Cancel(id);
  waiter_.WaitForTurnEnds(id, 1);
  items = Items();
  EXPECT_EQ(items[0].outcome.status, "cancelled");
  EXPECT_EQ(items[0].outcome.error_code, std::optional<std::string>("cancelled"));
}

TEST_P(ActivityTest, TheOutcomeOfAColdTargetIsLearntWhenItsTurnEndsAfterAHostRestart) {
  std::string id = CreateSession();
  manager_->EvictIdleForTesting();
  ASSERT_TRUE(manager_->WaitUntilNotLive(id, 10s));
  // Delivered to the cold session; the host stops in the middle of its turn.
  model_.Push(ScriptedModel::Hold(ScriptedModel::Text("lost with the host")));
  auto d = DeliverFromElsewhere(*manager_, id, "while you were away");
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE(model_.WaitForRequests(1));
  EXPECT_EQ(Items().at(0).outcome.status, "running");
  manager_->Stop();
  EXPECT_EQ(Items().at(0).outcome.status, "running");
  // Another host picks the session up and finishes the turn.
  second_ = MakeManager();
  second_->Start();
  auto log = waiter_.WaitForTurnEnds(id, 1);
  auto items = Items();
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].outcome.status, "completed");
  EXPECT_EQ(items[0].outcome.seq, std::optional<int64_t>(SeqOf(log, d->message_id)));
  EXPECT_EQ(items[0].summary, std::optional<std::string>("echo: while you were away"));
}

TEST_P(ActivityTest, ADuplicateKeyRecordsOneItemAndUnreadCountsFollowMarking) {
  std::string a = CreateSession();
  std::string b = CreateSession();
  ASSERT_TRUE(DeliverFromElsewhere(*manager_, a, "one", "k1").ok());
  ASSERT_TRUE(DeliverFromElsewhere(*manager_, a, "one again", "k1").ok());
  ASSERT_TRUE(DeliverFromElsewhere(*manager_, b, "two").ok());
  waiter_.WaitForTurnEnds(a, 1);
  waiter_.WaitForTurnEnds(b, 1);
  auto unread = db_->ReadValue<activity::Unread>([](store::Tx& tx) { return activity::CountUnread(tx); });
  ASSERT_TRUE(unread.ok());
  EXPECT_EQ(unread->total, 2);
  EXPECT_EQ(unread->sessions, (std::map<std::string, int64_t>{{a, 1}, {b, 1}}));
  auto marked = db_->WriteValue<int64_t>([&](store::Tx& tx) { return activity::MarkSessionRead(tx, a); });
  ASSERT_TRUE(marked.ok());
  EXPECT_EQ(*marked, 1);
  unread = db_->ReadValue<activity::Unread>([](store::Tx& tx) { return activity::CountUnread(tx); });
  EXPECT_EQ(unread->sessions, (std::map<std::string, int64_t>{{b, 1}}));
  auto page = db_->ReadValue<activity::Page>(
      [](store::Tx& tx) { return activity::List(tx, activity::Filter::kUnread, 10, std::nullopt); });
  ASSERT_EQ(page->items.size(), 1u);
  EXPECT_EQ(page->items[0].outcome.session_id, std::optional<std::string>(b));
}


// Approvals (docs/TOOLS.md): a tool the preset asks about waits for a person.
class ApprovalTest : public AgentTest {
 protected:
  void SetUp() override {
    auto tool = std::make_unique<EchoTool>();
    echo_ = tool.get();
    ASSERT_TRUE(tools_.Register(std::move(tool), "test").ok());
    AgentTest::SetUp();
  }
  // A session of `preset` whose model calls echo_args once per turn and
  // then answers "done"; waits for the approval request of `call_id`.
  std::string StartAsking(const std::string& call_id, const std::string& preset = "asker") {
    model_.Push(ScriptedModel::ToolCalls({{call_id, "echo_args", R"({"text":"rm -rf build"})"}}));
    model_.Push(ScriptedModel::Text("done"));
    std::string id = CreateSession(*manager_, preset);
    EXPECT_TRUE(Deliver(id, "clean up").ok());
    if (preset == "asker") WaitForRequest(id, call_id);
    return id;
  }
  void WaitForRequest(const std::string& id, const std::string& call_id) {
    waiter_.WaitFor(id, [&](const std::vector<Event>& log) {
      return std::any_of(log.begin(), log.end(), [&](const Event& e) {
        return e.type == event_types::kApprovalRequested && e.data.value("call_id", "") == call_id;
      });
    });
  }
  Status Answer(const std::string& id, const std::string& call_id, const std::string& decision) {
    std::promise<Status> p;
    manager_->AnswerApproval(id, call_id, decision, [&](Status st) { p.set_value(st); });
    return p.get_future().get();
  }
  static const Event* Find(const std::vector<Event>& log, std::string_view type) {
    for (const auto& e : log) {
      if (e.type == type) return &e;
    }
    return nullptr;
  }
  EchoTool* echo_ = nullptr;
};

INSTANTIATE_TEST_SUITE_P(Backends, ApprovalTest, store::testing::BackendNames(), store::testing::BackendTestName);

TEST_P(ApprovalTest, ACallThePresetAsksAboutWaitsAndRunsOnceAllowed) {
  std::string id = StartAsking("c1");
  // Nothing ran while it waits; a second model call was not made.
  EXPECT_TRUE(echo_->calls().empty());
  EXPECT_EQ(model_.requests().size(), 1u);
  auto waiting = Log(id);
  const Event* request = Find(waiting, event_types::kApprovalRequested);
  ASSERT_NE(request, nullptr);
  EXPECT_EQ(request->data["name"], "echo_args");
  EXPECT_EQ(request->data["timeout_seconds"], 900);
  EXPECT_NE(request->data.value("summary", "").find("rm -rf build"), std::string::npos);

  ASSERT_TRUE(Answer(id, "c1", "allow_once").ok());
  auto log = waiter_.WaitForTurnEnds(id, 1);
  EXPECT_EQ(echo_->calls().size(), 1u);
  const Event* decision = Find(log, event_types::kApproval);
  ASSERT_NE(decision, nullptr);
  EXPECT_EQ(decision->data["decision"], "allow_once");
  EXPECT_EQ(decision->data["by"], "person");
  EXPECT_EQ(Texts(log, et::kAssistantMessage).back(), "done");
  // A second answer finds nothing waiting.
  EXPECT_EQ(Answer(id, "c1", "deny").code(), codes::kConflict);
}

TEST_P(ApprovalTest, ADeniedCallDoesNotRunAndTheModelLearnsWhy) {
  std::string id = StartAsking("c1");
  EXPECT_EQ(Answer(id, "c1", "maybe").code(), codes::kInvalidArguments);
  EXPECT_EQ(Answer(id, "other", "deny").code(), codes::kConflict);
  ASSERT_TRUE(Answer(id, "c1", "deny").ok());
  auto log = waiter_.WaitForTurnEnds(id, 1);
  EXPECT_TRUE(echo_->calls().empty());
  const Event* result = Find(log, et::kToolResult);
  ASSERT_NE(result, nullptr);
  EXPECT_EQ(result->data["error"]["code"], "tool_denied");
  ASSERT_EQ(model_.requests().size(), 2u);
  EXPECT_NE(model_.requests()[1].messages.back().text.find("tool_denied"), std::string::npos);
}

TEST_P(ApprovalTest, AllowForTheSessionIsAGrantThatOutlivesTheHost) {
  std::string id = StartAsking("c1");
  ASSERT_TRUE(Answer(id, "c1", "allow_session").ok());
  waiter_.WaitForTurnEnds(id, 1);
  // The next turn's call runs without asking.
  model_.Push(ScriptedModel::ToolCalls({{"c2", "echo_args", R"({"text":"again"})"}}));
  model_.Push(ScriptedModel::Text("done again"));
  ASSERT_TRUE(Deliver(id, "once more").ok());
  waiter_.WaitForTurnEnds(id, 2);
  EXPECT_EQ(echo_->calls().size(), 2u);
  // So does one after a restart: the grant is in the log.
  manager_->Stop();
  manager_ = MakeManager();
  manager_->Start();
  model_.Push(ScriptedModel::ToolCalls({{"c3", "echo_args", R"({"text":"after restart"})"}}));
  model_.Push(ScriptedModel::Text("done after restart"));
  ASSERT_TRUE(Deliver(id, "and again").ok());
  auto log = waiter_.WaitForTurnEnds(id, 3);
  EXPECT_EQ(echo_->calls().size(), 3u);
  EXPECT_EQ(EventWaiter::Count(log, event_types::kApprovalRequested), 1u);
}

TEST_P(ApprovalTest, NoAnswerWithinTheTimeoutIsAnsweredApprovalTimeout) {
  approval_timeout_ = 200ms;
  manager_->Stop();
  manager_ = MakeManager();
  manager_->Start();
  std::string id = StartAsking("c1");
  auto log = waiter_.WaitForTurnEnds(id, 1);
  EXPECT_TRUE(echo_->calls().empty());
  const Event* decision = Find(log, event_types::kApproval);
  ASSERT_NE(decision, nullptr);
  EXPECT_EQ(decision->data["decision"], "timeout");
  EXPECT_EQ(decision->data["by"], "timeout");
  EXPECT_EQ(Find(log, et::kToolResult)->data["error"]["code"], "approval_timeout");
  EXPECT_EQ(Answer(id, "c1", "allow_once").code(), codes::kConflict);
}

TEST_P(ApprovalTest, APresetThatDeniesATookRefusesWithoutAsking) {
  std::string id = StartAsking("c1", "denier");
  auto log = waiter_.WaitForTurnEnds(id, 1);
  EXPECT_TRUE(echo_->calls().empty());
  EXPECT_EQ(Find(log, event_types::kApprovalRequested), nullptr);
  EXPECT_EQ(Find(log, et::kToolResult)->data["error"]["code"], "tool_denied");
}

TEST_P(ApprovalTest, StoppingTheTurnEndsTheWait) {
  std::string id = StartAsking("c1");
  manager_->Cancel(id);
  auto log = waiter_.WaitForTurnEnds(id, 1);
  EXPECT_TRUE(echo_->calls().empty());
  EXPECT_EQ(Find(log, et::kToolResult)->data["error"]["code"], "cancelled");
  EXPECT_EQ(Answer(id, "c1", "allow_once").code(), codes::kConflict);
}

TEST_P(ApprovalTest, AHostStoppedWhileACallWaitsAnswersItInterruptedOnResume) {
  std::string id = StartAsking("c1");
  manager_->Stop();
  EXPECT_TRUE(echo_->calls().empty());
  manager_ = MakeManager();
  manager_->Start();  // the sweep resumes the session for its pending message
  auto log = waiter_.WaitForTurnEnds(id, 1);
  EXPECT_TRUE(echo_->calls().empty());
  EXPECT_EQ(Find(log, et::kToolResult)->data["error"]["code"], "interrupted");
}
}  // namespace
}  // namespace dsh::agent
