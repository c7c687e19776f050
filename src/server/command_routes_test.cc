// POST /api/commands over a real HttpServer, with a command registry whose
// commands echo what they were given.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include <thread>

#include "server/api.h"
#include "server/http_client.h"
#include "server/http_server.h"

namespace dsh::server {
namespace {

class CommandRoutesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(
        commands_
            .Register("echo", "Echoes its arguments.",
                      [](const host::CommandInput& input, const host::CommandCall& call,
                         host::CommandRegistry::Done done) {
                        Json args = Json::array();
                        std::string text;
                        for (const auto& a : input.args) {
                          args.push_back(a.value);
                          text += (text.empty() ? "" : " ") + a.value;
                        }
                        done(host::CommandResult{
                            text, Json{{"args", args},
                                       {"session_id", call.session_id ? Json(*call.session_id) : Json()}}});
                      })
            .ok());
    ASSERT_TRUE(commands_
                    .Register("fail", "Fails like a tool would.",
                              [](const host::CommandInput&, const host::CommandCall&,
                                 host::CommandRegistry::Done done) { done(NotFound("no session ses_x")); })
                    .ok());
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
  agent::ToolRegistry tools_;
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
                                           {"session_id", "ses_caller"}}}}}}));
  auto root = Post(R"({"text": "/echo"})");
  EXPECT_EQ(root.status, 200);
  EXPECT_EQ(Json::parse(root.body)["result"]["data"]["session_id"], nullptr);
}

TEST_F(CommandRoutesTest, AnUnknownCommandIs404UnknownCommand) {
  Start();
  auto r = Post(R"({"text": "/nope status"})");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(Error(r)["code"], "unknown_command");
  EXPECT_EQ(Error(r)["message"], "no command /nope (commands: /echo, /fail)");
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
