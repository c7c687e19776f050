#include "server/api.h"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <future>
#include <thread>

#include "server/http_client.h"
#include "server/http_server.h"

namespace dsh::server {
namespace {

struct EchoArgs {
  std::string text;
};

// Echoes its argument, the calling session and the client's zone; counts
// its calls.
class EchoTool final : public agent::TypedTool<EchoArgs> {
 public:
  explicit EchoTool(std::atomic<int>& calls)
      : TypedTool("echo", ObjectSchema<EchoArgs>("Echo.").Field("text", &EchoArgs::text, "Text.")),
        calls_(calls) {}

 protected:
  void Run(const agent::ToolContext& ctx, EchoArgs args, Done done) override {
    ++calls_;
    done(Json{{"text", args.text},
              {"session_id", ctx.session_id ? Json(*ctx.session_id) : Json(nullptr)},
              {"client_time_zone", ctx.client_time_zone ? Json(*ctx.client_time_zone) : Json(nullptr)}});
  }

 private:
  std::atomic<int>& calls_;
};

// Completes only when the test says so, to hold a request in flight.
class SlowTool final : public agent::Tool {
 public:
  const std::string& name() const override { return name_; }
  const std::string& description() const override { return name_; }
  const Json& parameters() const override { return params_; }
  void Invoke(const agent::ToolContext&, const Json&, Done done) override {
    std::lock_guard lock(mu);
    pending = std::move(done);
    started.set_value();
  }
  std::mutex mu;
  Done pending;
  std::promise<void> started;

 private:
  std::string name_ = "slow";
  Json params_ = Json::object();
};

class ApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(tools_.Register(std::make_unique<EchoTool>(echo_calls_)).ok());
    auto slow = std::make_unique<SlowTool>();
    slow_ = slow.get();
    ASSERT_TRUE(tools_.Register(std::move(slow)).ok());
    // A plugin's route: echoes what it was given; `fail` makes it answer an error.
    host::HttpRoute plugin{
        .method = "GET",
        .pattern = "/api/plugin/{x}/things",
        .query_keys = {"n", "fail"},
        .handler =
            [](host::HttpRouteRequest req, host::HttpRouteDone done) {
              if (req.query.count("fail")) return done(Status("unknown_thing", "no thing " + req.path_params.at("x")));
              done(host::HttpRouteResponse{201, Json{{"x", req.path_params.at("x")}, {"query", req.query}}});
            },
    };
    api_ = std::make_unique<Api>(Api::Options{"secret", "9.9.9"},
                                 Api::Services{.tools = tools_, .extra_routes = {std::move(plugin)}});
    server_ = std::make_unique<HttpServer>(ioc_, HttpServer::Options{},
                                           [this](HttpRequest req, Respond r) { api_->Handle(std::move(req), std::move(r)); });
    auto port = server_->Listen();
    ASSERT_TRUE(port.ok()) << port.status().ToString();
    base_ = "http://127.0.0.1:" + std::to_string(*port);
    for (int i = 0; i < 2; ++i) threads_.emplace_back([this] { ioc_.run(); });
  }
  void TearDown() override {
    server_->Stop();
    for (auto& t : threads_) t.join();
  }

  HttpClientResponse Post(const std::string& path, const std::string& body, const std::string& token = "secret") {
    std::vector<std::pair<std::string, std::string>> headers;
    if (!token.empty()) headers.emplace_back("Authorization", "Bearer " + token);
    auto r = HttpRequestSync("POST", base_ + path, body, headers);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : HttpClientResponse{};
  }
  static std::string Code(const HttpClientResponse& r) {
    auto j = Json::parse(r.body, nullptr, false);
    return j.is_object() && j.contains("error") ? j["error"]["code"].get<std::string>() : "";
  }

  boost::asio::io_context ioc_;
  std::atomic<int> echo_calls_{0};
  agent::ToolRegistry tools_;
  SlowTool* slow_ = nullptr;
  std::unique_ptr<Api> api_;
  std::unique_ptr<HttpServer> server_;
  std::string base_;
  std::vector<std::thread> threads_;
};

TEST_F(ApiTest, HealthzNeedsNoToken) {
  auto r = HttpRequestSync("GET", base_ + "/healthz", "", {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(Json::parse(r->body), (Json{{"status", "ok"}, {"version", "9.9.9"}}));
}

TEST_F(ApiTest, ApiRequestsWithoutTheRightTokenAre401) {
  auto missing = Post("/api/tools/echo", R"({"args": {"text": "x"}})", "");
  EXPECT_EQ(missing.status, 401);
  EXPECT_EQ(Code(missing), "unauthorized");
  auto wrong = Post("/api/tools/echo", R"({"args": {"text": "x"}})", "nope");
  EXPECT_EQ(wrong.status, 401);
  auto cookie = HttpRequestSync("POST", base_ + "/api/tools/echo", R"({"args": {"text": "x"}})",
                                {{"Cookie", "a=b; dsh_token=secret"}});
  EXPECT_EQ(cookie->status, 200);
}

TEST_F(ApiTest, TheTokenUrlSetsAStrictHttpOnlyCookieAndRedirectsToTheAddressWithoutIt) {
  auto r = HttpRequestSync("GET", base_ + "/?token=secret", "", {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 303);
  EXPECT_EQ(r->headers["location"], "/");
  EXPECT_EQ(r->headers["set-cookie"], "dsh_token=secret; Path=/; HttpOnly; SameSite=Strict");
  auto app = HttpRequestSync("GET", base_ + "/", "", {{"Cookie", "dsh_token=secret"}});
  ASSERT_TRUE(app.ok());
  EXPECT_EQ(app->status, 200);
  EXPECT_EQ(app->headers["content-type"], "text/html; charset=utf-8");
  EXPECT_EQ(app->headers["cache-control"], "no-cache");
  EXPECT_NE(app->body.find("<div id=\"app\">"), std::string::npos) << app->body;
}

TEST_F(ApiTest, WithoutTheCookieTheAppIsASignInPageAndAWrongTokenIsRefused) {
  for (const char* path : {"/", "/?token=nope", "/?token="}) {
    auto r = HttpRequestSync("GET", base_ + path, "", {});
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 401) << path;
    EXPECT_EQ(r->headers.count("set-cookie"), 0u) << path;
    EXPECT_NE(r->body.find("Open the URL printed by <code>dsh web</code>"), std::string::npos) << r->body;
  }
  auto wrong_cookie = HttpRequestSync("GET", base_ + "/", "", {{"Cookie", "dsh_token=nope"}});
  EXPECT_EQ(wrong_cookie->status, 401);
}

TEST_F(ApiTest, HashedAssetsAreImmutableTypedAndGzippedWhenAccepted) {
  auto page = HttpRequestSync("GET", base_ + "/", "", {{"Cookie", "dsh_token=secret"}});
  ASSERT_TRUE(page.ok());
  auto at = page->body.find("/assets/");
  ASSERT_NE(at, std::string::npos) << "the page names its script";
  std::string path = page->body.substr(at, page->body.find('"', at) - at);
  auto plain = HttpRequestSync("GET", base_ + path, "", {});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->status, 200) << "assets need no token";
  EXPECT_EQ(plain->headers["cache-control"], "public, max-age=31536000, immutable");
  EXPECT_EQ(plain->headers.count("content-encoding"), 0u);
  EXPECT_NE(plain->headers["content-type"].find("javascript"), std::string::npos) << plain->headers["content-type"];
  auto zipped = HttpRequestSync("GET", base_ + path, "", {{"Accept-Encoding", "gzip, br"}});
  ASSERT_TRUE(zipped.ok());
  EXPECT_EQ(zipped->headers["content-encoding"], "gzip");
  EXPECT_EQ(zipped->headers["vary"], "Accept-Encoding");
  EXPECT_LT(zipped->body.size(), plain->body.size());
  EXPECT_EQ(HttpRequestSync("GET", base_ + "/assets/nope.js", "", {})->status, 404);
  EXPECT_EQ(HttpRequestSync("GET", base_ + "/elsewhere", "", {{"Cookie", "dsh_token=secret"}})->status, 404);
}

TEST_F(ApiTest, CallsAToolWithTheCallingSession) {
  auto r = Post("/api/tools/echo", R"({"args": {"text": "hi"}, "session_id": "ses_1"})");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(Json::parse(r.body),
            (Json{{"result", {{"text", "hi"}, {"session_id", "ses_1"}, {"client_time_zone", nullptr}}}}));
  auto root = Post("/api/tools/echo", R"({"args": {"text": "hi"}})");
  EXPECT_EQ(Json::parse(root.body)["result"]["session_id"], nullptr);
}

TEST_F(ApiTest, AToolCallCarriesTheClientTimeZoneCanonicalized) {
  auto zone_of = [&](const std::string& body) {
    auto r = Post("/api/tools/echo", body);
    EXPECT_EQ(r.status, 200) << body << ": " << r.body;
    return Json::parse(r.body, nullptr, false)["result"]["client_time_zone"];
  };
  EXPECT_EQ(zone_of(R"({"args": {"text": "hi"}, "client_time_zone": "Europe/Paris"})"), "Europe/Paris");
  EXPECT_EQ(zone_of(R"({"args": {"text": "hi"}, "client_time_zone": "Asia/Calcutta"})"), "Asia/Kolkata");
  EXPECT_EQ(zone_of(R"({"args": {"text": "hi"}, "client_time_zone": "US/Eastern"})"), "America/New_York");
  EXPECT_EQ(zone_of(R"({"args": {"text": "hi"}, "client_time_zone": "UTC"})"), "UTC");
  EXPECT_EQ(zone_of(R"({"args": {"text": "hi"}})"), nullptr);  // absent: unknown to the tool
}

TEST_F(ApiTest, ABadClientTimeZoneIsRefusedAndTheToolNeverRuns) {
  for (const char* zone :
       {R"("Mars/Olympus")", R"("CST")", R"("+08:00")", R"("Etc/GMT+8")", R"("")", R"("Japan")"}) {
    auto r =
        Post("/api/tools/echo", std::string(R"({"args": {"text": "hi"}, "client_time_zone": )") + zone + "}");
    EXPECT_EQ(r.status, 400) << zone;
    EXPECT_EQ(Code(r), "invalid_time_zone") << zone << ": " << r.body;
    EXPECT_NE(r.body.find("`client_time_zone`"), std::string::npos) << r.body;
  }
  auto number = Post("/api/tools/echo", R"({"args": {"text": "hi"}, "client_time_zone": 8})");
  EXPECT_EQ(number.status, 400);
  EXPECT_EQ(Code(number), "invalid_arguments");
  EXPECT_NE(number.body.find("`client_time_zone` must be a string"), std::string::npos) << number.body;
  EXPECT_EQ(echo_calls_, 0);
  // The list of known properties names it.
  auto extra = Post("/api/tools/echo", R"({"args": {"text": "x"}, "client_zone": "UTC"})");
  EXPECT_NE(extra.body.find("(expected args, session_id, client_time_zone)"), std::string::npos)
      << extra.body;
}

TEST_F(ApiTest, UnknownToolIs404) {
  auto r = Post("/api/tools/nope", "{}");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(Code(r), "unknown_tool");
}

TEST_F(ApiTest, MalformedJsonIs400) {
  auto r = Post("/api/tools/echo", "{\"args\": ");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(Code(r), "invalid_json");
}

TEST_F(ApiTest, InvalidArgumentsAre400WithTheFieldNamed) {
  auto r = Post("/api/tools/echo", R"({"args": {"text": ""}})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(Code(r), "invalid_arguments");
  EXPECT_NE(r.body.find("`text` must not be empty"), std::string::npos) << r.body;
  auto extra = Post("/api/tools/echo", R"({"args": {"text": "x"}, "sesion_id": "typo"})");
  EXPECT_EQ(extra.status, 400);
  EXPECT_NE(extra.body.find("unknown property `sesion_id`"), std::string::npos);
}

TEST_F(ApiTest, ABodyOverOneMebibyteIs413) {
  std::string big = R"({"args": {"text": ")" + std::string(1 << 20, 'x') + R"("}})";
  auto r = Post("/api/tools/echo", big);
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(Code(r), "payload_too_large");
}

TEST_F(ApiTest, WrongMethodAndUnknownPath) {
  auto get = HttpRequestSync("GET", base_ + "/api/tools/echo", "", {{"Authorization", "Bearer secret"}});
  EXPECT_EQ(get->status, 405);
  auto unknown = HttpRequestSync("GET", base_ + "/api/nothing", "", {{"Authorization", "Bearer secret"}});
  EXPECT_EQ(unknown->status, 404);
  EXPECT_EQ(Code(*unknown), "not_found");
}

TEST_F(ApiTest, CronPreviewWithoutAHostIs503) {
  auto r = HttpRequestSync("GET", base_ + "/api/cron/preview?expr=@daily", "",
                           {{"Authorization", "Bearer secret"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(Code(*r), "unavailable");
}

TEST_F(ApiTest, StopLetsAnInFlightRequestFinish) {
  auto response = std::async(std::launch::async, [&] { return Post("/api/tools/slow", "{}"); });
  slow_->started.get_future().wait();
  server_->Stop();
  {
    std::lock_guard lock(slow_->mu);
    slow_->pending(Json{{"done", true}});
  }
  auto r = response.get();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(Json::parse(r.body)["result"]["done"], true);
  // New connections are refused after Stop.
  for (auto& t : threads_) t.join();
  threads_.clear();
  EXPECT_FALSE(HttpRequestSync("GET", base_ + "/healthz", "", {}, std::chrono::seconds(2)).ok());
}


TEST_F(ApiTest, PluginRoutesGetTheSameAuthQueryChecksAndEnvelope) {
  std::vector<std::pair<std::string, std::string>> auth = {{"Authorization", "Bearer secret"}};
  auto ok = HttpRequestSync("GET", base_ + "/api/plugin/a1/things?n=3", "", auth);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->status, 201);
  EXPECT_EQ(Json::parse(ok->body), (Json{{"x", "a1"}, {"query", {{"n", "3"}}}}));

  auto no_token = HttpRequestSync("GET", base_ + "/api/plugin/a1/things", "", {});
  EXPECT_EQ(no_token->status, 401);

  auto unknown_key = HttpRequestSync("GET", base_ + "/api/plugin/a1/things?m=1", "", auth);
  EXPECT_EQ(unknown_key->status, 400);
  EXPECT_EQ(Code(*unknown_key), "invalid_arguments");
  EXPECT_NE(unknown_key->body.find("`m`"), std::string::npos) << unknown_key->body;

  auto failed = HttpRequestSync("GET", base_ + "/api/plugin/a1/things?fail=1", "", auth);
  EXPECT_EQ(failed->status, 404);
  EXPECT_EQ(Code(*failed), "unknown_thing");

  auto wrong_method = Post("/api/plugin/a1/things", "{}");
  EXPECT_EQ(wrong_method.status, 405);
  EXPECT_EQ(Code(wrong_method), "method_not_allowed");
}

}  // namespace
}  // namespace dsh::server
