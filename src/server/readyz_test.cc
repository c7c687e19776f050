// GET /readyz over a real Host (SQLite profile in a temp dir): ready when
// the store answers and the schema is current, 503 with reasons otherwise.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include <future>
#include <thread>

#include "base/testing/temp_dir.h"
#include "host/host.h"
#include "server/api.h"
#include "server/http_client.h"
#include "server/http_server.h"

namespace dsh::server {
namespace {

using namespace std::chrono_literals;

class ReadyzTest : public ::testing::Test {
 protected:
  void SetUp() override {
    host::HostOptions options;
    options.home = dir_.File("home");
    options.env = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
    auto host = host::Host::Open(options);
    ASSERT_TRUE(host.ok()) << host.status().ToString();
    host_ = std::move(host).value();
    ASSERT_TRUE(host_->Start(1).ok());
    Api::Options api_options{"secret", "9.9.9"};
    api_options.ready_timeout = 300ms;
    api_ = std::make_unique<Api>(api_options, Api::Services{.tools = host_->tools(), .host = host_.get()});
    server_ = std::make_unique<HttpServer>(ioc_, HttpServer::Options{}, [this](HttpRequest req, Respond r) {
      api_->Handle(std::move(req), std::move(r));
    });
    auto port = server_->Listen();
    ASSERT_TRUE(port.ok()) << port.status().ToString();
    base_ = "http://127.0.0.1:" + std::to_string(*port);
    thread_ = std::thread([this] { ioc_.run(); });
  }
  void TearDown() override {
    if (server_) server_->Stop();
    if (thread_.joinable()) thread_.join();
    if (host_) host_->Close();
  }

  HttpClientResponse Request(const std::string& method = "GET") {
    auto r = HttpRequestSync(method, base_ + "/readyz", "", {}, 10s);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : HttpClientResponse{};
  }
  // The codes of a 503's reasons.
  static std::vector<std::string> ReasonCodes(const HttpClientResponse& r) {
    std::vector<std::string> out;
    Json j = Json::parse(r.body, nullptr, false);
    if (!j.is_object() || j.value("status", "") != "not_ready" || !j.contains("reasons")) return out;
    for (const Json& reason : j["reasons"]) out.push_back(reason.value("code", ""));
    return out;
  }
  Status SetSchemaVersion(const std::string& module, int64_t version) {
    return host_->database().WriteSync([&](store::Tx& tx) {
      return tx
          .Exec("UPDATE dsh_schema SET version = ? WHERE module = ?", {version, std::string_view(module)})
          .status();
    });
  }

  testing::TempDir dir_;
  std::unique_ptr<host::Host> host_;
  boost::asio::io_context ioc_;
  std::unique_ptr<Api> api_;
  std::unique_ptr<HttpServer> server_;
  std::string base_;
  std::thread thread_;
};

TEST_F(ReadyzTest, ReadyOnAHealthyHostWithoutAToken) {
  HttpClientResponse r = Request();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(Json::parse(r.body), (Json{{"status", "ready"}}));
  HttpClientResponse head = Request("HEAD");
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(Request("POST").status, 405);
}

TEST_F(ReadyzTest, NotReadyOnceTheStoreIsClosed) {
  host_->database().Close();
  HttpClientResponse r = Request();
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(ReasonCodes(r), std::vector<std::string>{"shutting_down"}) << r.body;
  // /healthz does not touch the store.
  auto health = HttpRequestSync("GET", base_ + "/healthz", "", {});
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(health->status, 200);
}

TEST_F(ReadyzTest, NotReadyWhenTheStoreDoesNotAnswerInTime) {
  // Hold both reader threads (DatabaseOptions::readers) until the end.
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::vector<std::future<Status>> held;
  std::promise<void> taken[2];
  std::future<void> took[2] = {taken[0].get_future(), taken[1].get_future()};
  for (int i = 0; i < 2; ++i) {
    held.push_back(std::async(std::launch::async, [&, i] {
      return host_->database().ReadSync([&, i](store::Tx&) {
        taken[i].set_value();
        released.wait();
        return Status::Ok();
      });
    }));
  }
  for (auto& t : took) t.wait();
  auto started = std::chrono::steady_clock::now();
  HttpClientResponse r = Request();
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(ReasonCodes(r), std::vector<std::string>{"unavailable"}) << r.body;
  EXPECT_NE(r.body.find("did not answer"), std::string::npos) << r.body;
  release.set_value();
  for (auto& f : held) EXPECT_TRUE(f.get().ok());
  EXPECT_EQ(Request().status, 200);  // the late answer of the held check changed nothing
}

TEST_F(ReadyzTest, NotReadyWhileTheSchemaIsNotThisBinarysVersion) {
  ASSERT_TRUE(SetSchemaVersion("host", 0).ok());
  HttpClientResponse older = Request();
  EXPECT_EQ(older.status, 503);
  EXPECT_EQ(ReasonCodes(older), std::vector<std::string>{"migration_pending"}) << older.body;

  ASSERT_TRUE(SetSchemaVersion("host", 99).ok());
  HttpClientResponse newer = Request();
  EXPECT_EQ(newer.status, 503);
  EXPECT_EQ(ReasonCodes(newer), std::vector<std::string>{"schema_too_new"}) << newer.body;
  EXPECT_NE(newer.body.find("upgrade dsh"), std::string::npos) << newer.body;
}

// GET /metrics over the same real Host (docs/API.md): the token, HEAD, and
// an answer even when the store's gauges cannot be read.
using MetricsRouteTest = ReadyzTest;

TEST_F(MetricsRouteTest, NeedsTheTokenAndStillAnswersWhenTheStoreIsClosed) {
  auto get = [&](const std::string& method, const std::string& path, bool token) {
    std::vector<std::pair<std::string, std::string>> headers;
    if (token) headers.emplace_back("Authorization", "Bearer secret");
    auto r = HttpRequestSync(method, base_ + path, "", headers, 10s);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : HttpClientResponse{};
  };
  EXPECT_EQ(get("GET", "/metrics", false).status, 401);
  HttpClientResponse ok = get("GET", "/metrics", true);
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.headers["content-type"], "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(ok.body.find("# TYPE dsh_store_commits_total counter\n"), std::string::npos) << ok.body;
  EXPECT_NE(ok.body.find("\ndsh_metrics_refresh_failures_total 0\n"), std::string::npos) << ok.body;
  HttpClientResponse head = get("HEAD", "/metrics", true);
  EXPECT_EQ(head.status, 200);
  EXPECT_TRUE(head.body.empty());
  HttpClientResponse query = get("GET", "/metrics?x=1", true);
  EXPECT_EQ(query.status, 400);
  EXPECT_NE(query.body.find("unknown query parameter `x` (expected none)"), std::string::npos) << query.body;
  EXPECT_EQ(get("DELETE", "/metrics", true).status, 405);

  host_->database().Close();
  HttpClientResponse closed = get("GET", "/metrics", true);
  EXPECT_EQ(closed.status, 200);
  EXPECT_NE(closed.body.find("\ndsh_metrics_refresh_failures_total 1\n"), std::string::npos) << closed.body;
  EXPECT_NE(closed.body.find("\ndsh_inbox_pending_messages 0\n"), std::string::npos) << "kept its last value";
}

}  // namespace
}  // namespace dsh::server
