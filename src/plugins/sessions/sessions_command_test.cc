#include "plugins/sessions/sessions_command.h"

#include <gtest/gtest.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <future>
#include <mutex>
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

// Stands in for session_create and session_send, so these tests see exactly
// what the command passes (their behaviour has its own tests): records every
// call and answers with a canned result or error.
class FakeTool final : public agent::Tool {
 public:
  struct Call {
    agent::ToolContext ctx;
    Json args;
  };

  FakeTool(std::string name, Result<Json> answer) : name_(std::move(name)), answer_(std::move(answer)) {}

  const std::string& name() const override { return name_; }
  const std::string& description() const override { return name_; }
  const Json& parameters() const override { return parameters_; }
  void Invoke(const agent::ToolContext& ctx, const Json& args, Done done) override {
    {
      std::lock_guard lock(mu_);
      calls_.push_back({ctx, args});
    }
    done(answer_);
  }

  std::vector<Call> calls() const {
    std::lock_guard lock(mu_);
    return calls_;
  }

 private:
  std::string name_;
  Result<Json> answer_;
  Json parameters_ = Json::object();
  mutable std::mutex mu_;
  std::vector<Call> calls_;
};

// One of the real tools, registered in another registry too.
class ForwardTool final : public agent::Tool {
 public:
  explicit ForwardTool(agent::Tool& real) : real_(real) {}
  const std::string& name() const override { return real_.name(); }
  const std::string& description() const override { return real_.description(); }
  const Json& parameters() const override { return real_.parameters(); }
  void Invoke(const agent::ToolContext& ctx, const Json& args, Done done) override {
    real_.Invoke(ctx, args, std::move(done));
  }

 private:
  agent::Tool& real_;
};

// The real session_status and session_read over a real store and
// AgentManager (scripted model, fake clock), fake session_create and
// session_send, and /sessions over them, as the host wires them.
class SessionsCommandTest : public ::testing::Test {
 protected:
  static Json CreateAnswer() {
    return {{"session_id", "ses_new"}, {"accepted", true}, {"status", "queued"}, {"cwd", "/srv/app"}};
  }

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
    options.generate_titles = false;
    agent::AgentEnvironment env;
    env.preset = [](const std::optional<std::string>&) { return agent::PresetView{}; };
    manager_ =
        std::make_unique<agent::AgentManager>(ioc_, *db_, *store_, router_, tools_, clock_, env, options);
    manager_->Start();
    // The real read tools (from a registry of all six), the fakes for the rest.
    ASSERT_TRUE(RegisterSessionsTools(real_, *store_, *manager_, CreateEnvironment{}).ok());
    for (const char* name : {"session_status", "session_read"}) {
      ASSERT_TRUE(tools_.Register(std::make_unique<ForwardTool>(*real_.Find(name)), kToolGroup).ok());
    }
    auto create = std::make_unique<FakeTool>("session_create", CreateAnswer());
    create_ = create.get();
    ASSERT_TRUE(tools_.Register(std::move(create), kToolGroup).ok());
    auto send = std::make_unique<FakeTool>("session_send", Json{{"message_id", "msg_1"}});
    send_ = send.get();
    ASSERT_TRUE(tools_.Register(std::move(send), kToolGroup).ok());
    ASSERT_TRUE(RegisterSessionsCommand(commands_, tools_).ok());
  }

  void TearDown() override {
    manager_->Stop();
    db_->Close();
    work_.reset();
    for (auto& t : threads_) t.join();
    manager_.reset();
    store_.reset();
    db_.reset();
  }

  Result<host::CommandResult> Run(const std::string& text,
                                  std::optional<std::string> session_id = std::nullopt) {
    std::promise<Result<host::CommandResult>> p;
    commands_.Run(text, host::CommandCall{std::move(session_id)},
                  [&](Result<host::CommandResult> r) { p.set_value(std::move(r)); });
    return p.get_future().get();
  }
  host::CommandResult Ok(const std::string& text) {
    auto r = Run(text);
    EXPECT_TRUE(r.ok()) << text << ": " << r.status().ToString();
    return r.ok() ? *r : host::CommandResult{};
  }
  // Expects `invalid_arguments` whose message contains each of `parts`.
  void ExpectInvalid(const std::string& text, std::vector<std::string> parts) {
    auto r = Run(text);
    ASSERT_FALSE(r.ok()) << text << " was accepted";
    EXPECT_EQ(r.status().code(), codes::kInvalidArguments) << text;
    for (const auto& part : parts) {
      EXPECT_NE(r.status().message().find(part), std::string::npos)
          << text << ": `" << part << "` not in: " << r.status().message();
    }
  }

  Json Tool(const std::string& tool, const Json& args) {
    std::promise<Result<Json>> p;
    tools_.Invoke(tool, agent::ToolContext{}, args, [&](Result<Json> r) { p.set_value(std::move(r)); });
    auto r = p.get_future().get();
    EXPECT_TRUE(r.ok()) << tool << ": " << r.status().ToString();
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
  void Title(const std::string& id, const std::string& title) {
    Append(id, {{std::string(et::kTitleUser), {{"title", title}}}});
  }

  dsh::testing::TempDir dir_;
  FakeClock clock_;
  session::EventHub hub_;
  ScriptedModel model_;
  agent::testing::SingleModelRouter router_{model_};
  agent::ToolRegistry real_;
  agent::ToolRegistry tools_;
  host::CommandRegistry commands_;
  FakeTool* create_ = nullptr;
  FakeTool* send_ = nullptr;
  std::unique_ptr<store::Database> db_;
  std::unique_ptr<session::SessionStore> store_;
  boost::asio::io_context ioc_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
  std::unique_ptr<agent::AgentManager> manager_;
};

// --- status -----------------------------------------------------------------

TEST_F(SessionsCommandTest, SessionsStatusListsTheSameDataAsSessionStatusWithNoArguments) {
  std::string cold = Cold();
  Title(cold, "Fix the parser");  // updated at :01 with the title
  std::string live = Live();      // :02, no title
  host::CommandResult r = Ok("/sessions status");
  EXPECT_EQ(r.data, Tool("session_status", Json::object()));
  ASSERT_EQ(r.data["sessions"].size(), 2u);
  // One aligned line per session, newest first: the title (else the id),
  // status, updated_at, and the id after a title.
  std::string pad(live.size() > 14 ? live.size() - 14 : 0, ' ');
  EXPECT_EQ(r.text, live + "  idle  2026-01-01T00:00:02.000Z\n" +  //
                        "Fix the parser" + pad + "  cold  2026-01-01T00:00:01.000Z  " + cold)
      << r.text;
  EXPECT_FALSE(manager_->LiveStatus(cold).has_value()) << "listing must not resume a cold session";
  EXPECT_TRUE(model_.requests().empty());
}

TEST_F(SessionsCommandTest, SessionsStatusRecentNPassesRecentN) {
  Cold();
  std::string b = Cold();
  std::string c = Live();
  host::CommandResult r = Ok("/sessions status --recent 2");
  EXPECT_EQ(r.data, Tool("session_status", {{"recent_n", 2}}));
  ASSERT_EQ(r.data["sessions"].size(), 2u);
  EXPECT_EQ(r.data["sessions"][0]["session_id"], c);
  EXPECT_EQ(r.data["sessions"][1]["session_id"], b);
  EXPECT_EQ(std::count(r.text.begin(), r.text.end(), '\n'), 1) << r.text;
  EXPECT_EQ(Ok("/sessions status --recent=1").data, Tool("session_status", {{"recent_n", 1}}));
}

TEST_F(SessionsCommandTest, SessionsStatusSessionIdPassesSessionIdAndRendersItsExactRow) {
  std::string a = Cold();
  Title(a, "Plan the release");
  Cold();
  host::CommandResult r = Ok("/sessions status " + a);
  EXPECT_EQ(r.data, Tool("session_status", {{"session_id", a}}));
  EXPECT_EQ(r.text, "Plan the release  cold  2026-01-01T00:00:01.000Z  " + a);
  host::CommandResult missing = Ok("/sessions status ses_nope");
  EXPECT_EQ(missing.data,
            (Json{{"sessions", Json::array({Json{{"session_id", "ses_nope"}, {"status", "missing"}}})}}));
  EXPECT_EQ(missing.text, "ses_nope  missing");
}

TEST_F(SessionsCommandTest, StatusWithNoSessionsSaysSo) {
  host::CommandResult r = Ok("/sessions status");
  EXPECT_EQ(r.data, (Json{{"sessions", Json::array()}}));
  EXPECT_EQ(r.text, "No sessions.");
}

TEST_F(SessionsCommandTest, StatusCutsALongTitleInTheTextOnly) {
  std::string id = Cold();
  std::string title = "A very long title that somebody typed when renaming the session by hand ✓";
  Title(id, title);
  host::CommandResult r = Ok("/sessions status");
  EXPECT_EQ(r.data["sessions"][0]["title"], title);
  EXPECT_EQ(r.text.rfind(title.substr(0, 59) + "…  cold", 0), 0u) << r.text;
}

TEST_F(SessionsCommandTest, WhitespaceAroundAndBetweenWordsIsEquivalent) {
  std::string a = Cold();
  host::CommandResult plain = Ok("/sessions status");
  EXPECT_EQ(Ok("  /sessions    status   ").text, plain.text);
  EXPECT_EQ(Ok("/sessions\tstatus\n").data, plain.data);
  EXPECT_EQ(Ok("/sessions  status   " + a + "  ").data, Tool("session_status", {{"session_id", a}}));
}

// --- read -------------------------------------------------------------------

// A conversation with a tool round trip and trace-only events between.
class SessionsReadCommandTest : public SessionsCommandTest {
 protected:
  std::string Conversation() {
    std::string id = Cold();
    Append(id, {{std::string(et::kUserMessage), {{"text", "what time is it?"}}},
                {"turn/start", Json::object()},
                {std::string(et::kToolCall),
                 {{"call_id", "c1"}, {"name", "clock"}, {"arguments", {{"zone", "UTC"}}}}},
                {std::string(et::kToolResult),
                 {{"call_id", "c1"}, {"name", "clock"}, {"result", {{"now", "noon"}}}}},
                {std::string(et::kAssistantMessage), {{"text", "It is noon."}}},
                {"turn/end", Json::object()}});
    return id;
  }
};

TEST_F(SessionsReadCommandTest, SessionsReadSessionIdReturnsTheSameBoundedMessageWindowAsSessionRead) {
  std::string id = Conversation();
  host::CommandResult all = Ok("/sessions read " + id);
  EXPECT_EQ(all.data, Tool("session_read", {{"session_id", id}}));
  EXPECT_EQ(all.text,
            "user: what time is it?\n\n"
            "assistant → tool clock({\"zone\":\"UTC\"})\n\n"
            "tool clock: {\"now\":\"noon\"}\n\n"
            "assistant: It is noon.\n\n"
            "(Showing messages 1-4 of 4)");
  host::CommandResult window = Ok("/sessions read " + id + " --offset 2 --limit 2");
  EXPECT_EQ(window.data, Tool("session_read", {{"session_id", id}, {"offset", 2}, {"limit", 2}}));
  EXPECT_EQ(window.text,
            "assistant → tool clock({\"zone\":\"UTC\"})\n\n"
            "tool clock: {\"now\":\"noon\"}\n\n"
            "(Showing messages 2-3 of 4)");
  EXPECT_FALSE(manager_->LiveStatus(id).has_value()) << "reading must not resume a cold session";
}

TEST_F(SessionsReadCommandTest, ReadCapsItsWindowLikeTheTool) {
  std::string id = Cold();
  std::vector<session::EventDraft> events;
  for (int i = 1; i <= 205; ++i)
    events.push_back({std::string(et::kUserMessage), {{"text", "m" + std::to_string(i)}}});
  Append(id, std::move(events));
  host::CommandResult r = Ok("/sessions read " + id);
  EXPECT_EQ(r.data["messages"].size(), 200u);
  EXPECT_EQ(r.text.substr(r.text.rfind('\n') + 1), "(Showing messages 1-200 of 205)");
  EXPECT_EQ(r.text.find("1 "), std::string::npos) << "no generated line numbers";
  // Over the cap is the tool's own error, passed through unchanged.
  auto over = Run("/sessions read " + id + " --limit 201");
  ASSERT_FALSE(over.ok());
  std::promise<Result<Json>> p;
  tools_.Invoke("session_read", {}, {{"session_id", id}, {"limit", 201}},
                [&](Result<Json> r) { p.set_value(r); });
  EXPECT_EQ(over.status(), p.get_future().get().status());
}

TEST_F(SessionsReadCommandTest, FlagsMayComeBeforeOrAfterPositionals) {
  std::string id = Conversation();
  Json expected = Tool("session_read", {{"session_id", id}, {"offset", 3}, {"limit", 1}});
  EXPECT_EQ(Ok("/sessions read --limit 1 " + id + " --offset 3").data, expected);
  EXPECT_EQ(Ok("/sessions read --offset=3 --limit=1 " + id).data, expected);
}

TEST_F(SessionsReadCommandTest, ToolErrorsPassThroughUnchanged) {
  auto r = Run("/sessions read ses_missing");
  ASSERT_FALSE(r.ok());
  std::promise<Result<Json>> p;
  tools_.Invoke("session_read", {}, {{"session_id", "ses_missing"}}, [&](Result<Json> x) { p.set_value(x); });
  EXPECT_EQ(r.status(), p.get_future().get().status());
  EXPECT_EQ(r.status().code(), codes::kNotFound);
}

// --- validation ---------------------------------------------------------------

TEST_F(SessionsCommandTest, PositiveIntegerFlagsAreValidatedNamingTheFlag) {
  std::string id = Cold();
  ExpectInvalid("/sessions status --recent 0", {"`--recent` must be a positive integer (got \"0\")"});
  ExpectInvalid("/sessions status --recent -5", {"`--recent`", "\"-5\""});
  ExpectInvalid("/sessions status --recent 2.5", {"`--recent`"});
  ExpectInvalid("/sessions status --recent 9007199254740992", {"`--recent`"});
  ExpectInvalid("/sessions read " + id + " --limit abc",
                {"`--limit` must be a positive integer (got \"abc\")"});
  ExpectInvalid("/sessions read " + id + " --offset 0", {"`--offset`"});
  ExpectInvalid("/sessions read " + id + " --offset ''", {"`--offset`"});
  EXPECT_EQ(Ok("/sessions status --recent 9007199254740991").data["sessions"].size(), 1u);
}

TEST_F(SessionsCommandTest, ShapeMistakesAreInvalidArgumentsWithAUsageLine) {
  ExpectInvalid("/sessions",
                {"missing subcommand", "usage: /sessions status", "/sessions send SESSION_ID MESSAGE"});
  ExpectInvalid("/sessions   ", {"missing subcommand"});
  ExpectInvalid("/sessions list", {"unknown subcommand `list`", "usage:"});
  ExpectInvalid("/sessions status --all",
                {"unknown flag `--all`", "usage: /sessions status [SESSION_ID] [--recent N]"});
  ExpectInvalid("/sessions status a b", {"unexpected argument `b`", "usage: /sessions status"});
  ExpectInvalid("/sessions status a --recent 5", {"not both", "usage: /sessions status"});
  ExpectInvalid("/sessions status --recent", {"`--recent` needs a value"});
  ExpectInvalid("/sessions status --recent 1 --recent 2", {"more than once"});
  ExpectInvalid("/sessions read",
                {"missing SESSION_ID", "usage: /sessions read SESSION_ID [--offset N] [--limit N]"});
  ExpectInvalid("/sessions read a --recent 3", {"unknown flag `--recent`"});
  ExpectInvalid("/sessions create", {"missing PROMPT", "usage: /sessions create PROMPT"});
  ExpectInvalid("/sessions create fix the parser", {"unexpected argument `the`", "quote"});
  ExpectInvalid("/sessions create x --workspace w", {"unknown flag `--workspace`"});
  ExpectInvalid("/sessions send ses_1", {"missing MESSAGE", "usage: /sessions send"});
  ExpectInvalid("/sessions send", {"missing SESSION_ID and MESSAGE"});
  ExpectInvalid("/sessions send ses_1 hello there", {"unexpected argument `there`"});
  ExpectInvalid("/sessions send ses_1 'hello", {"unterminated single quote"});
  EXPECT_TRUE(create_->calls().empty());
  EXPECT_TRUE(send_->calls().empty());
}

// --- create -------------------------------------------------------------------

TEST_F(SessionsCommandTest, CreatePassesAQuotedPromptAndEveryFlagToSessionCreate) {
  auto r = Run(R"(/sessions create "fix the  parser, it's broken" --preset coder --provider openai )"
               R"(--model gpt-5 --effort high --cwd '/srv/my app')",
               "ses_caller");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(create_->calls().size(), 1u);
  FakeTool::Call call = create_->calls()[0];
  EXPECT_EQ(call.args,
            (Json{{"prompt", "fix the  parser, it's broken"},
                  {"preset", "coder"},
                  {"model", {{"provider", "openai"}, {"model", "gpt-5"}, {"reasoningEffort", "high"}}},
                  {"cwd", "/srv/my app"}}));
  EXPECT_EQ(call.ctx.session_id, "ses_caller") << "the caller is the inheritance source";
  EXPECT_FALSE(call.ctx.agent_call);
  EXPECT_EQ(r->data, CreateAnswer());
  EXPECT_EQ(r->text, CreateAnswer().dump(2));
}

TEST_F(SessionsCommandTest, CreateWithOnlyAPromptPassesOnlyThePrompt) {
  Ok("/sessions create 'hello world'");
  Ok("/sessions create --provider echo 'hello' --model echo");
  ASSERT_EQ(create_->calls().size(), 2u);
  EXPECT_EQ(create_->calls()[0].args, (Json{{"prompt", "hello world"}}));
  EXPECT_FALSE(create_->calls()[0].ctx.session_id.has_value()) << "no calling session: a root create";
  EXPECT_EQ(create_->calls()[1].args,
            (Json{{"prompt", "hello"}, {"model", {{"provider", "echo"}, {"model", "echo"}}}}));
}

TEST_F(SessionsCommandTest, CreateRejectsMalformedModelArguments) {
  ExpectInvalid("/sessions create x --provider openai",
                {"malformed model arguments", "`--provider` and `--model`"});
  ExpectInvalid("/sessions create x --model gpt-5", {"malformed model arguments"});
  ExpectInvalid("/sessions create x --effort high", {"malformed model arguments", "`--effort` needs"});
  ExpectInvalid("/sessions create x --provider openai --effort high", {"malformed model arguments"});
  ExpectInvalid("/sessions create x --model gpt-5 --effort high", {"malformed model arguments"});
  EXPECT_TRUE(create_->calls().empty());
}

TEST_F(SessionsCommandTest, CreateJsonFormPassesTheObjectThroughAsTheArguments) {
  // Unknown fields such as workspace_id are the tool's to reject: the command
  // passes the object through untouched.
  Ok(R"(/sessions create {"prompt": "fix  it's  parser", "workspace_id": "ws_1", "model": {"provider": "p", "model": "m"}})");
  Ok(R"(/sessions create '{"prompt":"quoted","cwd":"/srv"}')");
  Ok(R"(/sessions create   {"prompt":"tight"}   )");
  ASSERT_EQ(create_->calls().size(), 3u);
  EXPECT_EQ(create_->calls()[0].args, (Json{{"prompt", "fix  it's  parser"},
                                            {"workspace_id", "ws_1"},
                                            {"model", {{"provider", "p"}, {"model", "m"}}}}));
  EXPECT_EQ(create_->calls()[1].args, (Json{{"prompt", "quoted"}, {"cwd", "/srv"}}));
  EXPECT_EQ(create_->calls()[2].args, (Json{{"prompt", "tight"}}));
}

TEST_F(SessionsCommandTest, CreateJsonFormRejectsANonObject) {
  ExpectInvalid("/sessions create [1, 2]", {"must be a JSON object"});
  ExpectInvalid("/sessions create '[\"prompt\"]'", {"must be a JSON object"});
  ExpectInvalid(R"(/sessions create {"prompt": "x")", {"must be one JSON object"});
  ExpectInvalid(R"(/sessions create {"prompt": "x"} --preset p)", {"must be one JSON object"});
  ExpectInvalid(R"(/sessions create '{"prompt": "x"}' extra)", {"exactly one JSON object"});
  EXPECT_TRUE(create_->calls().empty());
}

// --- send ---------------------------------------------------------------------

TEST_F(SessionsCommandTest, SendPassesSessionMessageAndModeToSessionSend) {
  auto r = Run(R"(/sessions send ses_target "please  check \"this\"" --mode followup)", "ses_caller");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  Ok("/sessions send --mode steer ses_target hi");
  Ok("/sessions send ses_target -- --not-a-flag");
  ASSERT_EQ(send_->calls().size(), 3u);
  EXPECT_EQ(
      send_->calls()[0].args,
      (Json{{"session_id", "ses_target"}, {"message", "please  check \"this\""}, {"mode", "followup"}}));
  EXPECT_EQ(send_->calls()[0].ctx.session_id, "ses_caller");
  EXPECT_FALSE(send_->calls()[0].ctx.agent_call);
  EXPECT_EQ(send_->calls()[1].args,
            (Json{{"session_id", "ses_target"}, {"message", "hi"}, {"mode", "steer"}}));
  EXPECT_EQ(send_->calls()[2].args, (Json{{"session_id", "ses_target"}, {"message", "--not-a-flag"}}));
  EXPECT_EQ(r->data, (Json{{"message_id", "msg_1"}}));
  EXPECT_EQ(r->text, Json({{"message_id", "msg_1"}}).dump(2));
}

TEST_F(SessionsCommandTest, TheToolsItCallsSeeTheCallersClientTimeZone) {
  for (const char* text : {"/sessions send ses_target hi", "/sessions create hello"}) {
    std::promise<Result<host::CommandResult>> p;
    commands_.Run(text, host::CommandCall{.session_id = "ses_caller", .client_time_zone = "Asia/Kolkata"},
                  [&](Result<host::CommandResult> r) { p.set_value(std::move(r)); });
    auto r = p.get_future().get();
    ASSERT_TRUE(r.ok()) << text << ": " << r.status().ToString();
  }
  ASSERT_EQ(send_->calls().size(), 1u);
  EXPECT_EQ(send_->calls()[0].ctx.client_time_zone, "Asia/Kolkata");
  EXPECT_EQ(send_->calls()[0].ctx.session_id, "ses_caller");
  ASSERT_EQ(create_->calls().size(), 1u);
  EXPECT_EQ(create_->calls()[0].ctx.client_time_zone, "Asia/Kolkata");
  // A call without one passes none.
  Ok("/sessions send ses_target again");
  ASSERT_EQ(send_->calls().size(), 2u);
  EXPECT_EQ(send_->calls()[1].ctx.client_time_zone, std::nullopt);
}

TEST_F(SessionsCommandTest, SessionToolErrorsPassThroughUnchanged) {
  agent::ToolRegistry tools;
  ASSERT_TRUE(
      tools.Register(std::make_unique<FakeTool>("session_send", Status("not_found", "no session ses_x")))
          .ok());
  host::CommandRegistry commands;
  ASSERT_TRUE(RegisterSessionsCommand(commands, tools).ok());
  std::promise<Result<host::CommandResult>> p;
  commands.Run("/sessions send ses_x hi", {},
               [&](Result<host::CommandResult> r) { p.set_value(std::move(r)); });
  EXPECT_EQ(p.get_future().get().status(), Status("not_found", "no session ses_x"));
  // A tool that is not registered is the registry's unknown_tool.
  std::promise<Result<host::CommandResult>> q;
  commands.Run("/sessions create x", {}, [&](Result<host::CommandResult> r) { q.set_value(std::move(r)); });
  EXPECT_EQ(q.get_future().get().status().code(), "unknown_tool");
  EXPECT_EQ(RegisterSessionsCommand(commands, tools).code(), codes::kAlreadyExists);
}

}  // namespace
}  // namespace dsh::plugins::sessions
