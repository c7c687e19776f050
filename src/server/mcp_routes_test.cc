// POST /mcp (docs/MCP.md) over a real HttpServer and a real Host (echo
// model, fake clock) with the sessions and loop plugins: what an MCP client
// sees, and that tool calls behave exactly as POST /api/tools/{name}.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include <thread>

#include "base/testing/temp_dir.h"
#include "host/host.h"
#include "plugins/loop/loop_plugin.h"
#include "plugins/sessions/sessions_tools.h"
#include "server/api.h"
#include "server/http_client.h"
#include "server/http_server.h"
#include "server/mcp_endpoint.h"

namespace dsh::server {
namespace {

const std::vector<std::string> kExposed = {"loop_create",    "loop_list",     "loop_delete",
                                           "session_status", "session_read",  "session_send",
                                           "session_create", "list_sessions", "check_session_status"};

// A registered tool that MCP does not offer.
class EchoTool final : public agent::Tool {
 public:
  const std::string& name() const override { return name_; }
  const std::string& description() const override { return name_; }
  const Json& parameters() const override { return params_; }
  void Invoke(const agent::ToolContext&, const Json& args, Done done) override { done(args); }

 private:
  std::string name_ = "echo";
  Json params_ = Json{{"type", "object"}};
};

class McpRoutesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    host::HostOptions options;
    options.home = dir_.File("home");
    options.clock = &clock_;
    options.env = [](const std::string&) { return std::optional<std::string>(); };  // echo/echo
    options.plugin_migrations = plugins::loop::PluginMigrations();
    auto host = host::Host::Open(options);
    ASSERT_TRUE(host.ok()) << host.status().ToString();
    host_ = std::move(host).value();
    ASSERT_TRUE(plugins::sessions::RegisterSessionsPlugin(*host_).ok());
    ASSERT_TRUE(plugins::loop::RegisterLoopPlugin(*host_).ok());
    ASSERT_TRUE(host_->tools().Register(std::make_shared<EchoTool>()).ok());
    ASSERT_TRUE(host_->Start(2).ok());
    api_ = std::make_unique<Api>(Api::Options{"secret", "9.9.9"},
                                 Api::ServicesOf(*host_));
    server_ = std::make_unique<HttpServer>(ioc_, HttpServer::Options{}, [this](HttpRequest req, Respond r) {
      api_->Handle(std::move(req), std::move(r));
    });
    auto port = server_->Listen();
    ASSERT_TRUE(port.ok()) << port.status().ToString();
    authority_ = "127.0.0.1:" + std::to_string(*port);
    base_ = "http://" + authority_;
    for (int i = 0; i < 2; ++i) threads_.emplace_back([this] { ioc_.run(); });
  }
  void TearDown() override {
    if (server_) server_->Stop();
    for (auto& t : threads_) t.join();
    if (host_) host_->Close();
  }

  using Headers = std::vector<std::pair<std::string, std::string>>;
  HttpClientResponse Send(const std::string& method, const std::string& target, const std::string& body,
                          Headers headers = {{"Authorization", "Bearer secret"}}) {
    auto r = HttpRequestSync(method, base_ + target, body, headers);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : HttpClientResponse{};
  }
  // POST /mcp with one message; the HTTP response.
  HttpClientResponse PostMcp(const Json& message, const std::string& query = "",
                             Headers headers = {{"Authorization", "Bearer secret"}}) {
    return Send("POST", "/mcp" + query, message.dump(), std::move(headers));
  }
  static Json Body(const HttpClientResponse& r) { return Json::parse(r.body, nullptr, false); }
  static Json Request(const std::string& method, Json params = Json::object(), Json id = 1) {
    return Json{{"jsonrpc", "2.0"}, {"id", std::move(id)}, {"method", method}, {"params", std::move(params)}};
  }
  // A request answered 200; its JSON-RPC response.
  Json Rpc(const std::string& method, Json params = Json::object(), const std::string& query = "") {
    auto r = PostMcp(Request(method, std::move(params)), query);
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.headers["content-type"], "application/json");
    EXPECT_EQ(r.headers.count("mcp-session-id"), 0u);  // stateless
    Json body = Body(r);
    EXPECT_EQ(body["jsonrpc"], "2.0") << body;
    EXPECT_EQ(body["id"], 1) << body;
    return body;
  }
  // tools/call's result (a CallToolResult).
  Json CallTool(const std::string& name, const Json& args, const std::string& query = "") {
    Json response = Rpc("tools/call", {{"name", name}, {"arguments", args}}, query);
    EXPECT_TRUE(response.contains("result")) << response;
    return response["result"];
  }
  // POST /api/tools/{name} for comparison: {status, body}.
  HttpClientResponse CallHttpTool(const std::string& name, const Json& args) {
    return Send("POST", "/api/tools/" + name, Json{{"args", args}}.dump());
  }
  std::string NewSession() {
    auto r = Send("POST", "/api/sessions", "{}");
    EXPECT_EQ(r.status, 201) << r.body;
    return Body(r)["session"]["id"].get<std::string>();
  }

  dsh::testing::TempDir dir_;
  FakeClock clock_;
  std::unique_ptr<host::Host> host_;
  boost::asio::io_context ioc_;
  std::unique_ptr<Api> api_;
  std::unique_ptr<HttpServer> server_;
  std::string authority_;
  std::string base_;
  std::vector<std::thread> threads_;
};

TEST_F(McpRoutesTest, InitializeAnswersTheClientsRevisionWhenSupportedElseTheNewest) {
  for (const std::string asked : {"2025-06-18", "2025-03-26", "2024-11-05", "2099-01-01"}) {
    Json response = Rpc("initialize", {{"protocolVersion", asked},
                                       {"capabilities", Json::object()},
                                       {"clientInfo", {{"name", "test"}, {"version", "1"}}}});
    const Json& result = response["result"];
    const std::string want = asked == "2025-03-26" ? "2025-03-26" : "2025-06-18";
    EXPECT_EQ(result["protocolVersion"], want) << "asked " << asked;
    EXPECT_EQ(result["capabilities"], (Json{{"tools", {{"listChanged", false}}}}));
    EXPECT_EQ(result["serverInfo"], (Json{{"name", "dsh"}, {"version", "9.9.9"}}));
    ASSERT_TRUE(result["instructions"].is_string());
    EXPECT_NE(result["instructions"].get<std::string>().find("catch-up"), std::string::npos);
  }
  // Without a protocolVersion at all: the newest.
  EXPECT_EQ(Rpc("initialize")["result"]["protocolVersion"], "2025-06-18");
}

TEST_F(McpRoutesTest, PingAnswersAnEmptyResultAndAnUnknownMethodIsMethodNotFound) {
  EXPECT_EQ(Rpc("ping")["result"], Json::object());
  Json unknown = Rpc("resources/list");
  EXPECT_EQ(unknown["error"]["code"], McpEndpoint::kMethodNotFound) << unknown;
  EXPECT_FALSE(unknown.contains("result"));
}

TEST_F(McpRoutesTest, ToolsListIsExactlyTheSessionAndLoopToolsWithTheRegistrysSchemas) {
  Json result = Rpc("tools/list", {{"cursor", "ignored"}})["result"];
  EXPECT_FALSE(result.contains("nextCursor"));
  std::vector<std::string> names;
  for (const Json& tool : result["tools"]) {
    const std::string name = tool["name"].get<std::string>();
    names.push_back(name);
    auto registered = host_->tools().Find(name);
    ASSERT_NE(registered, nullptr) << name;
    EXPECT_EQ(tool["inputSchema"], registered->parameters()) << name;
    EXPECT_EQ(tool["description"], registered->description()) << name;
    EXPECT_EQ(tool["inputSchema"]["type"], "object") << name;
  }
  EXPECT_EQ(names, kExposed);  // in this order; `echo` (registered) is not offered
}

TEST_F(McpRoutesTest, ToolsCallGivesTheResultAsTextAndStructuredContent) {
  std::string id = NewSession();
  Json result = CallTool("check_session_status", {{"session_id", id}});
  EXPECT_EQ(result["isError"], false) << result;
  auto http = CallHttpTool("check_session_status", {{"session_id", id}});
  ASSERT_EQ(http.status, 200) << http.body;
  const Json want = Body(http)["result"];
  EXPECT_EQ(result["structuredContent"], want);
  ASSERT_EQ(result["content"].size(), 1u) << result;
  EXPECT_EQ(result["content"][0]["type"], "text");
  EXPECT_EQ(Json::parse(result["content"][0]["text"].get<std::string>()), want);

  // A result that is not an object (loop_list's array) is text only.
  Json created = CallTool(
      "loop_create",
      {{"prompt", "check"}, {"schedule", {{"kind", "every"}, {"every_seconds", 3600}}}, {"session_id", id}});
  ASSERT_EQ(created["isError"], false) << created;
  Json list = CallTool("loop_list", {{"session_id", id}});
  EXPECT_EQ(list["isError"], false) << list;
  EXPECT_FALSE(list.contains("structuredContent")) << list;
  Json loops = Json::parse(list["content"][0]["text"].get<std::string>());
  ASSERT_EQ(loops.size(), 1u) << loops;
  EXPECT_EQ(loops[0]["loop_id"], created["structuredContent"]["loop_id"]);
  EXPECT_EQ(loops[0]["created_by_session_id"], "root");  // no session named: a root call
}

TEST_F(McpRoutesTest, ABadToolCallIsAToolErrorWithTheCodeAndMessageOfTheHttpApi) {
  std::string id = NewSession();
  const std::vector<Json> bad_calls = {
      Json{{"prompt", "check"}},  // no schedule
      Json{{"prompt", "check"}, {"schedule", {{"kind", "every"}, {"every_seconds", 0}}}, {"session_id", id}},
      Json{{"prompt", "check"}, {"schedule", {{"kind", "every"}, {"every_seconds", 60}}}},  // root: no target
      Json{{"prompt", "check"}, {"schedule", {{"kind", "every"}, {"every_seconds", 60}}}, {"bogus", 1}},
      Json{{"prompt", "check"}, {"schedule", {{"kind", "cron"}, {"expr", "0 0 30 2 *"}}}, {"session_id", id}},
      Json{{"prompt", "check"},
           {"schedule", {{"kind", "after"}, {"after_seconds", 5}}},
           {"session_id", "ses_no"}},
  };
  for (const Json& args : bad_calls) {
    auto http = CallHttpTool("loop_create", args);
    ASSERT_GE(http.status, 400) << args;
    const Json error = Body(http)["error"];
    Json result = CallTool("loop_create", args);
    EXPECT_EQ(result["isError"], true) << args;
    EXPECT_EQ(result["structuredContent"], (Json{{"error", error}})) << args;
    EXPECT_EQ(result["content"], Json::array({Json{{"type", "text"},
                                                   {"text", error["code"].get<std::string>() + ": " +
                                                                error["message"].get<std::string>()}}}))
        << args;
  }
  // Nothing was created.
  EXPECT_EQ(
      Json::parse(CallTool("loop_list", {{"session_id", "global"}})["content"][0]["text"].get<std::string>()),
      Json::array());
}

TEST_F(McpRoutesTest, AnUnknownOrUnofferedToolAndBadArgumentsAreInvalidParams) {
  for (const std::string name : {"nope", "echo"}) {
    Json response = Rpc("tools/call", {{"name", name}, {"arguments", Json::object()}});
    EXPECT_EQ(response["error"]["code"], McpEndpoint::kInvalidParams) << response;
    EXPECT_EQ(response["error"]["data"]["code"], "unknown_tool") << response;
    EXPECT_TRUE(response["error"]["data"]["message"].is_string()) << response;
  }
  Json not_object = Rpc("tools/call", {{"name", "list_sessions"}, {"arguments", "x"}});
  EXPECT_EQ(not_object["error"]["code"], McpEndpoint::kInvalidParams) << not_object;
  EXPECT_EQ(not_object["error"]["data"]["code"], "invalid_arguments") << not_object;
  Json no_name = Rpc("tools/call", {{"arguments", Json::object()}});
  EXPECT_EQ(no_name["error"]["code"], McpEndpoint::kInvalidParams) << no_name;
  // Missing arguments are {}.
  Json no_args = Rpc("tools/call", {{"name", "list_sessions"}});
  EXPECT_EQ(no_args["result"]["isError"], false) << no_args;
}

TEST_F(McpRoutesTest, TheSessionIdQueryMakesTheCallFromThatSession) {
  std::string id = NewSession();
  const Json args = {{"prompt", "check"}, {"schedule", {{"kind", "every"}, {"every_seconds", 3600}}}};
  Json result = CallTool("loop_create", args, "?session_id=" + id);
  ASSERT_EQ(result["isError"], false) << result;
  EXPECT_EQ(result["structuredContent"]["created_by_session_id"], id);
  EXPECT_EQ(result["structuredContent"]["session_id"], id);  // omitted target = the calling session
  // The same call as a root call must name a target.
  Json root = CallTool("loop_create", args);
  EXPECT_EQ(root["isError"], true);
  EXPECT_EQ(root["structuredContent"]["error"]["code"], "invalid_arguments");

  auto empty = PostMcp(Request("ping"), "?session_id=");
  EXPECT_EQ(empty.status, 400) << empty.body;
  EXPECT_EQ(Body(empty)["error"]["code"], "invalid_arguments");
  auto unknown = PostMcp(Request("ping"), "?session=" + id);
  EXPECT_EQ(unknown.status, 400) << unknown.body;
  EXPECT_EQ(Body(unknown)["error"]["code"], "invalid_arguments");
  auto bad_zone = PostMcp(Request("ping"), "?client_time_zone=CST");
  EXPECT_EQ(bad_zone.status, 400) << bad_zone.body;
  EXPECT_EQ(Body(bad_zone)["error"]["code"], "invalid_time_zone");
  auto zone = PostMcp(Request("ping"), "?client_time_zone=Asia%2FCalcutta&session_id=" + id);
  EXPECT_EQ(zone.status, 200) << zone.body;
}

TEST_F(McpRoutesTest, WithoutTheRightTokenIs401WithABearerChallenge) {
  for (const Headers& headers : {Headers{}, Headers{{"Authorization", "Bearer wrong"}}}) {
    auto r = PostMcp(Request("initialize"), "", headers);
    EXPECT_EQ(r.status, 401) << r.body;
    EXPECT_EQ(r.headers["www-authenticate"], "Bearer");
    EXPECT_EQ(Body(r)["error"]["code"], "unauthorized");
  }
}

TEST_F(McpRoutesTest, NotificationsAndResponsesAre202WithNoBody) {
  for (const Json& message :
       {Json{{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}},
        Json{{"jsonrpc", "2.0"}, {"method", "notifications/cancelled"}, {"params", {{"requestId", 3}}}},
        Json{{"jsonrpc", "2.0"}, {"id", 7}, {"result", Json::object()}},
        Json{{"jsonrpc", "2.0"}, {"id", 8}, {"error", {{"code", -1}, {"message", "no"}}}}}) {
    auto r = PostMcp(message);
    EXPECT_EQ(r.status, 202) << message;
    EXPECT_EQ(r.body, "") << message;
  }
}

TEST_F(McpRoutesTest, GetAndDeleteAre405AllowingPost) {
  for (const std::string method : {"GET", "DELETE"}) {
    auto r = Send(method, "/mcp", "", {{"Authorization", "Bearer secret"}, {"Accept", "text/event-stream"}});
    EXPECT_EQ(r.status, 405) << method << " " << r.body;
    EXPECT_EQ(r.headers["allow"], "POST") << method;
  }
}

TEST_F(McpRoutesTest, AForeignOriginIs403AndTheHostsOwnIsAccepted) {
  auto foreign =
      PostMcp(Request("ping"), "", {{"Authorization", "Bearer secret"}, {"Origin", "http://evil.example"}});
  EXPECT_EQ(foreign.status, 403) << foreign.body;
  EXPECT_EQ(Body(foreign)["error"]["code"], "forbidden");
  // A page of this host itself (same scheme, name and port as the Host header).
  auto own =
      PostMcp(Request("ping"), "", {{"Authorization", "Bearer secret"}, {"Origin", "http://" + authority_}});
  EXPECT_EQ(own.status, 200) << own.body;
}

TEST_F(McpRoutesTest, MalformedInputIs400WithAJsonRpcError) {
  auto batch = Send("POST", "/mcp", Json::array({Request("ping")}).dump());
  EXPECT_EQ(batch.status, 400);
  EXPECT_EQ(Body(batch)["error"]["code"], McpEndpoint::kInvalidRequest) << batch.body;
  EXPECT_NE(Body(batch)["error"]["message"].get<std::string>().find("batch"), std::string::npos);

  auto not_json = Send("POST", "/mcp", "{\"jsonrpc\": ");
  EXPECT_EQ(not_json.status, 400);
  EXPECT_EQ(Body(not_json)["error"]["code"], McpEndpoint::kParseError) << not_json.body;
  EXPECT_TRUE(Body(not_json)["id"].is_null());

  struct Case {
    Json message;
    Json id;  // of the error response
  };
  for (const Case& c : {Case{Json{{"id", 1}, {"method", "ping"}}, 1},  // no jsonrpc
                        Case{Json{{"jsonrpc", "1.0"}, {"id", "a"}, {"method", "ping"}}, "a"},
                        Case{Json{{"jsonrpc", "2.0"}, {"id", 1.5}, {"method", "ping"}}, nullptr},
                        Case{Json{{"jsonrpc", "2.0"}, {"id", nullptr}, {"method", "ping"}}, nullptr},
                        Case{Json{{"jsonrpc", "2.0"}, {"id", Json::object()}, {"method", "ping"}}, nullptr},
                        Case{Json{{"jsonrpc", "2.0"}, {"id", 2}, {"method", 5}}, 2},
                        Case{Json{{"jsonrpc", "2.0"}, {"id", 3}, {"method", "ping"}, {"params", "x"}}, 3},
                        Case{Json{{"jsonrpc", "2.0"}, {"id", 4}}, 4}, Case{Json("ping"), nullptr}}) {
    auto r = PostMcp(c.message);
    EXPECT_EQ(r.status, 400) << c.message;
    EXPECT_EQ(Body(r)["error"]["code"], McpEndpoint::kInvalidRequest) << c.message << " -> " << r.body;
    EXPECT_EQ(Body(r)["id"], c.id) << c.message;
  }
}

TEST_F(McpRoutesTest, AnUnsupportedProtocolVersionHeaderIs400AndASupportedOneIsServed) {
  auto old = PostMcp(Request("ping"), "",
                     {{"Authorization", "Bearer secret"}, {"MCP-Protocol-Version", "2024-11-05"}});
  EXPECT_EQ(old.status, 400) << old.body;
  EXPECT_EQ(Body(old)["error"]["code"], McpEndpoint::kInvalidRequest) << old.body;
  for (const std::string version : {"2025-06-18", "2025-03-26"}) {
    auto r =
        PostMcp(Request("ping"), "", {{"Authorization", "Bearer secret"}, {"MCP-Protocol-Version", version}});
    EXPECT_EQ(r.status, 200) << version << " " << r.body;
  }
  // `initialize` negotiates in its params, so a header sent with it (some
  // clients send their newest revision) does not refuse the connection.
  auto init = PostMcp(Request("initialize", {{"protocolVersion", "2025-11-25"}}), "",
                      {{"Authorization", "Bearer secret"}, {"MCP-Protocol-Version", "2025-11-25"}});
  EXPECT_EQ(init.status, 200) << init.body;
  EXPECT_EQ(Body(init)["result"]["protocolVersion"], "2025-06-18") << init.body;
}

TEST_F(McpRoutesTest, ANullParamsIsTakenAsNone) {
  auto notification = PostMcp(Json{{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}, {"params", nullptr}});
  EXPECT_EQ(notification.status, 202) << notification.body;
  auto ping = PostMcp(Json{{"jsonrpc", "2.0"}, {"id", 7}, {"method", "ping"}, {"params", nullptr}});
  EXPECT_EQ(ping.status, 200) << ping.body;
  EXPECT_EQ(Body(ping)["result"], Json::object()) << ping.body;
  auto list = PostMcp(Json{{"jsonrpc", "2.0"}, {"id", 8}, {"method", "tools/list"}, {"params", nullptr}});
  EXPECT_EQ(Body(list)["result"]["tools"].size(), 9u) << list.body;
}

}  // namespace
}  // namespace dsh::server
