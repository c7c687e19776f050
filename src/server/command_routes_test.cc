// POST /api/commands over a real HttpServer, with a command registry whose
// commands echo what they were given, and the real /sessions command over a
// tool that records what it was given.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include <atomic>
#include <mutex>
#include <thread>

#include "plugins/sessions/sessions_command.h"
#include "server/api.h"
#include "server/http_client.h"
#include "server/http_server.h"

namespace dsh::server {
namespace {

// Stands in for session_send under /sessions send: records the context of
// each call.
class RecordingTool final : public agent::Tool {
 public:
  explicit RecordingTool(std::string name) : name_(std::move(name)) {}
  const std::string& name() const override { return name_; }
  const std::string& description() const override { return name_; }
  const Json& parameters() const override { return parameters_; }
  void Invoke(const agent::ToolContext& ctx, const Json&, Done done) override {
    {
      std::lock_guard lock(mu_);
      contexts_.push_back(ctx);
    }
    done(Json{{"message_id", "msg_1"}});
  }
  std::vector<agent::ToolContext> contexts() const {
    std::lock_guard lock(mu_);
    return contexts_;
  }

 private:
  std::string name_;
  Json parameters_ = Json::object();
  mutable std::mutex mu_;
  std::vector<agent::ToolContext> contexts_;
};

class CommandRoutesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(
        commands_
            .Register("echo", "Echoes its arguments.",
                      [this](const host::CommandInput& input, const host::CommandCall& call,
                             host::CommandRegistry::Done done) {
                        Json args = Json::array();
                        std::string text;
                        for (const auto& a : input.args) {
                          args.push_back(a.value);
                          text += (text.empty() ? "" : " ") + a.value;
                        }
                        ++echo_runs_;
                        done(host::CommandResult{
                            text, Json{{"args", args},
                                       {"session_id", call.session_id ? Json(*call.session_id) : Json()},
                                       {"client_time_zone",
                                        call.client_time_zone ? Json(*call.client_time_zone) : Json()}}});
                      })
            .ok());
    ASSERT_TRUE(commands_
                    .Register("fail", "Fails like a tool would.",
                              [](const host::CommandInput&, const host::CommandCall&,
                                 host::CommandRegistry::Done done) { done(NotFound("no session ses_x")); })
                    .ok());
    auto send = std::make_unique<RecordingTool>("session_send");
    send_ = send.get();
    ASSERT_TRUE(tools_.Register(std::move(send)).ok());
    ASSERT_TRUE(plugins::sessions::RegisterSessionsCommand(commands_, tools_).ok());
  }
  void TearDown() override {
    if (server_) server_->Stop();
    for (auto& t : threads_) t.join();
  }

  void Start(bool with_commands = true) {
    Api::Services services{.tools = tools_};
    if (with_commands) services.commands = &commands_;
    api_ = std::make_unique<Api>(Api::Options{"secret", "9.9.9"}, services);
    server_ = std::make_unique<HttpServer>(ioc_, HttpServer::Options{}, [this](HttpRequest req, Respond r) {
      api_->Handle(std::move(req), std::move(r));
    });
    auto port = server_->Listen();
    ASSERT_TRUE(port.ok()) << port.status().ToString();
    base_ = "http://127.0.0.1:" + std::to_string(*port);
    for (int i = 0; i < 2; ++i) threads_.emplace_back([this] { ioc_.run(); });
  }

  HttpClientResponse Post(const std::string& body, const std::string& path = "/api/commands") {
    auto r = HttpRequestSync("POST", base_ + path, body, {{"Authorization", "Bearer secret"}});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : HttpClientResponse{};
  }
  static Json Error(const HttpClientResponse& r) {
    auto j = Json::parse(r.body, nullptr, false);
    return j.is_object() && j.contains("error") ? j["error"] : Json();
  }

  boost::asio::io_context ioc_;
  std::atomic<int> echo_runs_{0};
  agent::ToolRegistry tools_;
  RecordingTool* send_ = nullptr;
  host::CommandRegistry commands_;
  std::unique_ptr<Api> api_;
  std::unique_ptr<HttpServer> server_;
  std::string base_;
  std::vector<std::thread> threads_;
};

TEST_F(CommandRoutesTest, RunsTheCommandAndAnswersItsTextAndData) {
  Start();
  auto r = Post(R"({"text": "/echo status --recent 5 'two words'", "session_id": "ses_caller"})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json::parse(r.body), (Json{{"result",
                                        {{"text", "status --recent 5 two words"},
                                         {"data",
                                          {{"args", Json::array({"status", "--recent", "5", "two words"})},
                                           {"session_id", "ses_caller"},
                                           {"client_time_zone", nullptr}}}}}}));
  auto root = Post(R"({"text": "/echo"})");
  EXPECT_EQ(root.status, 200);
  EXPECT_EQ(Json::parse(root.body)["result"]["data"]["session_id"], nullptr);
}

TEST_F(CommandRoutesTest, AnUnknownCommandIs404UnknownCommand) {
  Start();
  auto r = Post(R"({"text": "/nope status"})");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(Error(r)["code"], "unknown_command");
  EXPECT_EQ(Error(r)["message"], "no command /nope (commands: /echo, /fail, /help, /sessions)");
}

TEST_F(CommandRoutesTest, CommandErrorsKeepTheirCode) {
  Start();
  auto r = Post(R"({"text": "/fail"})");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(Error(r), (Json{{"code", "not_found"}, {"message", "no session ses_x"}}));
  auto quote = Post(R"({"text": "/echo 'unterminated"})");
  EXPECT_EQ(quote.status, 400);
  EXPECT_EQ(Error(quote)["code"], "invalid_arguments");
}

TEST_F(CommandRoutesTest, RejectsABadBodyNamingTheProperty) {
  Start();
  auto unknown = Post(R"({"text": "/echo", "sesion_id": "typo"})");
  EXPECT_EQ(unknown.status, 400);
  EXPECT_EQ(Error(unknown)["code"], "invalid_arguments");
  EXPECT_NE(Error(unknown)["message"].get<std::string>().find("unknown property `sesion_id`"),
            std::string::npos);
  for (const char* body : {R"({})", R"({"text": ""})", R"({"text": 5})",
                           R"({"text": "/echo", "session_id": ""})", R"({"text": "echo"})"}) {
    auto r = Post(body);
    EXPECT_EQ(r.status, 400) << body;
    EXPECT_EQ(Error(r)["code"], "invalid_arguments") << body << ": " << r.body;
  }
  auto not_json = Post(R"({"text": )");
  EXPECT_EQ(Error(not_json)["code"], "invalid_json");
  auto array = Post(R"(["/echo"])");
  EXPECT_EQ(Error(array)["code"], "invalid_json");
  auto query = Post(R"({"text": "/echo"})", "/api/commands?x=1");
  EXPECT_EQ(Error(query)["code"], "invalid_arguments");
}

TEST_F(CommandRoutesTest, TheCommandGetsTheClientTimeZoneCanonicalized) {
  Start();
  auto zone_of = [&](const std::string& body) {
    auto r = Post(body);
    EXPECT_EQ(r.status, 200) << body << ": " << r.body;
    return Json::parse(r.body, nullptr, false)["result"]["data"]["client_time_zone"];
  };
  EXPECT_EQ(zone_of(R"({"text": "/echo", "client_time_zone": "America/New_York"})"), "America/New_York");
  EXPECT_EQ(zone_of(R"({"text": "/echo", "client_time_zone": "Asia/Calcutta"})"), "Asia/Kolkata");
  EXPECT_EQ(zone_of(R"({"text": "/echo"})"), nullptr);
}

TEST_F(CommandRoutesTest, ABadClientTimeZoneIsRefusedAndTheCommandNeverRuns) {
  Start();
  for (const char* zone : {R"("Mars/Olympus")", R"("PST")", R"("UTC+8")", R"("")"}) {
    auto r = Post(std::string(R"({"text": "/echo", "client_time_zone": )") + zone + "}");
    EXPECT_EQ(r.status, 400) << zone;
    EXPECT_EQ(Error(r)["code"], "invalid_time_zone") << zone << ": " << r.body;
    EXPECT_NE(r.body.find("`client_time_zone`"), std::string::npos) << r.body;
  }
  auto list = Post(R"({"text": "/echo", "client_time_zone": ["UTC"]})");
  EXPECT_EQ(Error(list)["code"], "invalid_arguments");
  auto send = Post(R"({"text": "/sessions send ses_x hi", "client_time_zone": "Nowhere/Special"})");
  EXPECT_EQ(Error(send)["code"], "invalid_time_zone");
  EXPECT_EQ(echo_runs_, 0);
  EXPECT_TRUE(send_->contexts().empty());
  auto unknown = Post(R"({"text": "/echo", "time_zone": "UTC"})");
  EXPECT_NE(
      Error(unknown)["message"].get<std::string>().find("(expected text, session_id, client_time_zone)"),
      std::string::npos)
      << unknown.body;
}

TEST_F(CommandRoutesTest, SessionsPassesTheClientTimeZoneToTheToolItCalls) {
  Start();
  auto r = Post(
      R"({"text": "/sessions send ses_x hi", "session_id": "ses_caller", "client_time_zone": "Asia/Calcutta"})");
  ASSERT_EQ(r.status, 200) << r.body;
  auto plain = Post(R"({"text": "/sessions send ses_x again"})");
  ASSERT_EQ(plain.status, 200) << plain.body;
  auto calls = send_->contexts();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].client_time_zone, "Asia/Kolkata");
  EXPECT_EQ(calls[0].session_id, "ses_caller");
  EXPECT_FALSE(calls[0].agent_call);
  EXPECT_EQ(calls[1].client_time_zone, std::nullopt);
}

TEST_F(CommandRoutesTest, WithoutACommandRegistryTheRouteIsUnavailable) {
  Start(/*with_commands=*/false);
  auto r = Post(R"({"text": "/echo"})");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(Error(r)["code"], "unavailable");
}

TEST_F(CommandRoutesTest, NeedsTheTokenAndPost) {
  Start();
  auto no_token = HttpRequestSync("POST", base_ + "/api/commands", R"({"text": "/echo"})", {});
  EXPECT_EQ(no_token->status, 401);
  auto get = HttpRequestSync("GET", base_ + "/api/commands", "", {{"Authorization", "Bearer secret"}});
  EXPECT_EQ(get->status, 405);
}

}  // namespace
}  // namespace dsh::server
