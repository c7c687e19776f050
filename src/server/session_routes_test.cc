// The session routes of the API over a real HttpServer and SQLite store:
// GET /api/sessions/{id}/events, the WebSocket event stream and
// POST /api/sessions/{id}/fork; then, over a real Host, POST /api/sessions
// and POST /api/sessions/{id}/messages.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <thread>

#include "agent/testing/event_waiter.h"
#include "base/testing/temp_dir.h"
#include "host/host.h"
#include "server/api.h"
#include "server/change_feed.h"
#include "server/http_client.h"
#include "server/http_server.h"
#include "server/testing/ws_client.h"
#include "store/sqlite_connection.h"
#include "time/rfc3339.h"
#include "time/time_zone.h"

namespace dsh::server {
namespace {

using dsh::testing::WsClient;
using namespace std::chrono_literals;

class SessionRoutesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = store::Database::Open(
        std::make_unique<store::SqliteConnectionFactory>(store::SqliteOptions{.path = dir_.File("dsh.db")}),
        session::SessionStore::Migrations());
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(db).value();
    store_ = std::make_unique<session::SessionStore>(*db_, clock_, &hub_);
  }
  void TearDown() override {
    StopServer();
    store_.reset();
    db_.reset();
  }

  // Starts the server; tests that change limits call it themselves first.
  void StartServer(WebSocketLimits limits = {}, EventStream::Options stream = {}) {
    api_ = std::make_unique<Api>(Api::Options{"secret", "9.9.9", stream},
                                 Api::Services{.tools = tools_, .sessions = store_.get(), .events = &hub_});
    HttpServer::Options options;
    options.websocket = [this](HttpRequest req, UpgradeRespond r) {
      api_->HandleUpgrade(std::move(req), std::move(r));
    };
    options.websocket_limits = limits;
    server_ = std::make_unique<HttpServer>(
        ioc_, options, [this](HttpRequest req, Respond r) { api_->Handle(std::move(req), std::move(r)); });
    auto port = server_->Listen();
    ASSERT_TRUE(port.ok()) << port.status().ToString();
    port_ = *port;
    for (int i = 0; i < 2; ++i) threads_.emplace_back([this] { ioc_.run(); });
  }
  // Stops the server and waits (bounded) for the io_context to run out of
  // work; false if it did not.
  bool StopServer() {
    if (!server_) return true;
    server_->Stop();
    auto joined = std::async(std::launch::async, [this] {
      for (auto& t : threads_) t.join();
    });
    bool ok = joined.wait_for(30s) == std::future_status::ready;
    if (ok) threads_.clear();
    server_.reset();
    return ok;
  }

  std::string NewSession(const std::string& id = "s1") {
    auto h = store_->Create(session::NewSession{.id = id, .route = {"echo", "echo", std::nullopt}});
    EXPECT_TRUE(h.ok()) << h.status().ToString();
    return id;
  }
  void Append(const std::string& id, int n, const std::string& type = "message/user") {
    std::vector<session::EventDraft> drafts;
    for (int i = 0; i < n; ++i) drafts.push_back({type, Json{{"text", "m" + std::to_string(i)}}});
    auto r = store_->Append(id, std::move(drafts));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }

  HttpClientResponse Get(const std::string& target, const std::string& token = "secret") {
    std::vector<std::pair<std::string, std::string>> headers;
    if (!token.empty()) headers.emplace_back("Authorization", "Bearer " + token);
    auto r = HttpRequestSync("GET", "http://127.0.0.1:" + std::to_string(port_) + target, "", headers);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : HttpClientResponse{};
  }
  HttpClientResponse Post(const std::string& target, const std::string& body) {
    auto r = HttpRequestSync("POST", "http://127.0.0.1:" + std::to_string(port_) + target, body,
                             {{"Authorization", "Bearer secret"}});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : HttpClientResponse{};
  }
  static std::string Code(const HttpClientResponse& r) {
    auto j = Json::parse(r.body, nullptr, false);
    return j.is_object() && j.contains("error") ? j["error"]["code"].get<std::string>() : "";
  }
  size_t SessionCount() {
    auto all = store_->ListRecent(1000);
    EXPECT_TRUE(all.ok()) << all.status().ToString();
    return all.ok() ? all->size() : 0;
  }
  static std::vector<int64_t> Seqs(const Json& body) {
    std::vector<int64_t> out;
    for (const auto& e : body["events"]) out.push_back(e["seq"].get<int64_t>());
    return out;
  }

  std::unique_ptr<WsClient> Stream(const std::string& query,
                                   WsClient::Headers headers = {{"Authorization", "Bearer secret"}}) {
    auto c = WsClient::Connect(port_, "/api/sessions/s1/stream" + query, headers);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(c).value() : nullptr;
  }
  // Reads messages until `ready`; returns the seqs of the events before it.
  static std::vector<int64_t> ReadUntilReady(WsClient& c, int64_t* ready_last_seq = nullptr) {
    std::vector<int64_t> seqs;
    while (true) {
      auto m = c.ReadJson();
      EXPECT_TRUE(m.ok()) << m.status().ToString();
      if (!m.ok()) return seqs;
      if ((*m)["type"] == "ready") {
        if (ready_last_seq) *ready_last_seq = (*m)["last_seq"].get<int64_t>();
        return seqs;
      }
      EXPECT_EQ((*m)["type"], "event") << *m;
      seqs.push_back((*m)["event"]["seq"].get<int64_t>());
    }
  }
  // Reads `n` event messages; a non-event message or an error fails the test.
  static std::vector<int64_t> ReadEvents(WsClient& c, size_t n) {
    std::vector<int64_t> seqs;
    while (seqs.size() < n) {
      auto m = c.ReadJson();
      EXPECT_TRUE(m.ok()) << m.status().ToString() << " after " << seqs.size() << " events";
      if (!m.ok()) return seqs;
      EXPECT_EQ((*m)["type"], "event") << *m;
      seqs.push_back((*m)["event"]["seq"].get<int64_t>());
    }
    return seqs;
  }
  static std::vector<int64_t> Range(int64_t from, int64_t to) {
    std::vector<int64_t> out;
    for (int64_t s = from; s <= to; ++s) out.push_back(s);
    return out;
  }

  dsh::testing::TempDir dir_;
  FakeClock clock_;
  session::EventHub hub_;
  std::unique_ptr<store::Database> db_;
  std::unique_ptr<session::SessionStore> store_;
  agent::ToolRegistry tools_;
  boost::asio::io_context ioc_;
  std::unique_ptr<Api> api_;
  std::unique_ptr<HttpServer> server_;
  uint16_t port_ = 0;
  std::vector<std::thread> threads_;
};

// --- GET /api/sessions/{id}/events ---

TEST_F(SessionRoutesTest, TheHeaderOfASessionIsReadFromTheStore) {
  StartServer();
  NewSession();
  Append("s1", 2);
  auto r = Get("/api/sessions/s1");
  ASSERT_EQ(r.status, 200) << r.body;
  Json session = Json::parse(r.body)["session"];
  EXPECT_EQ(session["id"], "s1");
  EXPECT_EQ(session["last_seq"], 2);
  EXPECT_TRUE(session.contains("time_zone")) << session;
  EXPECT_EQ(Get("/api/sessions/nope").status, 404);
  EXPECT_EQ(Code(Get("/api/sessions/s1?x=1")), "invalid_arguments");
  EXPECT_EQ(Get("/api/sessions/s1", "").status, 401);
}

TEST_F(SessionRoutesTest, EventsPagesWithAfterAndLimit) {
  StartServer();
  NewSession();
  Append("s1", 5);

  auto all = Get("/api/sessions/s1/events");
  ASSERT_EQ(all.status, 200) << all.body;
  Json body = Json::parse(all.body);
  EXPECT_EQ(Seqs(body), Range(1, 5));
  EXPECT_EQ(body["last_seq"], 5);
  const Json& first = body["events"][0];
  EXPECT_EQ(first["type"], "message/user");
  EXPECT_EQ(first["data"], (Json{{"text", "m0"}}));
  EXPECT_EQ(first["at"], ToUnixMillis(clock_.Now()));
  EXPECT_EQ(first.size(), 4u) << first;

  auto page = Get("/api/sessions/s1/events?after=2&limit=2");
  ASSERT_EQ(page.status, 200);
  EXPECT_EQ(Seqs(Json::parse(page.body)), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(Json::parse(page.body)["last_seq"], 5);

  auto past_end = Get("/api/sessions/s1/events?after=5");
  ASSERT_EQ(past_end.status, 200);
  EXPECT_EQ(Json::parse(past_end.body), (Json{{"events", Json::array()}, {"last_seq", 5}}));
}

TEST_F(SessionRoutesTest, EventsLimitDefaultsTo200AndAllowsUpTo1000) {
  StartServer();
  NewSession();
  Append("s1", 1001);
  EXPECT_EQ(Json::parse(Get("/api/sessions/s1/events").body)["events"].size(), 200u);
  EXPECT_EQ(Json::parse(Get("/api/sessions/s1/events?limit=1000").body)["events"].size(), 1000u);
  EXPECT_EQ(Seqs(Json::parse(Get("/api/sessions/s1/events?after=1000&limit=1000").body)), Range(1001, 1001));
}

TEST_F(SessionRoutesTest, EventsRejectsBadParametersNamingThem) {
  StartServer();
  NewSession();
  struct Case {
    std::string query, named;
  };
  for (const Case& c : std::vector<Case>{{"after=-1", "`after`"},
                                         {"after=abc", "`after`"},
                                         {"after=1.5", "`after`"},
                                         {"after=", "`after`"},
                                         {"after=9007199254740992", "`after`"},
                                         {"limit=0", "`limit`"},
                                         {"limit=1001", "`limit`"},
                                         {"limit=ten", "`limit`"},
                                         {"afterr=1", "`afterr`"}}) {
    auto r = Get("/api/sessions/s1/events?" + c.query);
    EXPECT_EQ(r.status, 400) << c.query;
    EXPECT_EQ(Code(r), "invalid_arguments") << c.query;
    EXPECT_NE(r.body.find(c.named), std::string::npos) << c.query << ": " << r.body;
  }
}

TEST_F(SessionRoutesTest, EventsOfAnUnknownSessionAre404AndNeedTheToken) {
  StartServer();
  auto unknown = Get("/api/sessions/nope/events");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(Code(unknown), "not_found");
  NewSession();
  EXPECT_EQ(Get("/api/sessions/s1/events", "").status, 401);
  // ?token= is for the WebSocket route only.
  EXPECT_EQ(Get("/api/sessions/s1/events?token=secret", "").status, 401);
  auto post = HttpRequestSync("POST", "http://127.0.0.1:" + std::to_string(port_) + "/api/sessions/s1/events",
                              "", {{"Authorization", "Bearer secret"}});
  EXPECT_EQ(post->status, 405);
}

// --- POST /api/sessions/{id}/fork ---

TEST_F(SessionRoutesTest, ForkCopiesThePrefixAndInheritsTheParentsSettings) {
  StartServer();
  auto parent = store_->Create(session::NewSession{.id = "s1",
                                                   .cwd = "/srv/app",
                                                   .preset = "coder",
                                                   .route = {"echo", "echo", "high"},
                                                   .time_zone = "Asia/Calcutta"});
  ASSERT_TRUE(parent.ok()) << parent.status().ToString();
  Append("s1", 3);
  auto r = Post("/api/sessions/s1/fork", R"({"seed_length": 2})");
  ASSERT_EQ(r.status, 201) << r.body;
  Json child = Json::parse(r.body)["session"];
  EXPECT_EQ(child["parent_id"], "s1");
  EXPECT_EQ(child["seed_length"], 2);
  EXPECT_EQ(child["last_seq"], 2);
  EXPECT_EQ(child["origin"], "fork");
  EXPECT_EQ(child["time_zone"], "Asia/Kolkata");
  EXPECT_EQ(child["preset"], "coder");
  EXPECT_EQ(child["cwd"], "/srv/app");
  EXPECT_EQ(child["route"], (Json{{"provider", "echo"}, {"model", "echo"}, {"reasoning_effort", "high"}}));
  EXPECT_EQ(child["delegation_depth"], 0);
  const std::string id = child["id"];
  EXPECT_NE(id, "s1");
  // The child is a stored session like any other; its events 1..2 are the parent's.
  auto stored = store_->Get(id);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(session::HeaderToJson(*stored), child);
  Json copied = Json::parse(Get("/api/sessions/" + id + "/events").body);
  Json original = Json::parse(Get("/api/sessions/s1/events?limit=2").body);
  EXPECT_EQ(copied["events"], original["events"]);
  EXPECT_EQ(copied["last_seq"], 2);
  EXPECT_EQ(store_->Get("s1")->last_seq, 3);  // the parent is untouched
}

TEST_F(SessionRoutesTest, ForkWithoutASeedLengthCopiesTheWholeLog) {
  StartServer();
  NewSession();
  Append("s1", 4);
  for (const char* body : {"", "{}"}) {
    auto r = Post("/api/sessions/s1/fork", body);
    ASSERT_EQ(r.status, 201) << r.body;
    Json child = Json::parse(r.body)["session"];
    EXPECT_EQ(child["seed_length"], 4) << body;
    EXPECT_EQ(child["last_seq"], 4) << body;
    EXPECT_EQ(Seqs(Json::parse(Get("/api/sessions/" + child["id"].get<std::string>() + "/events").body)),
              Range(1, 4));
  }
  // Seed 0: an empty child that still records its parent.
  auto empty = Post("/api/sessions/s1/fork", R"({"seed_length": 0})");
  ASSERT_EQ(empty.status, 201) << empty.body;
  EXPECT_EQ(Json::parse(empty.body)["session"]["last_seq"], 0);
  EXPECT_EQ(Json::parse(empty.body)["session"]["parent_id"], "s1");
  // A fork of a fork.
  std::string child = Json::parse(empty.body)["session"]["id"];
  Append(child, 1);
  auto grandchild = Post("/api/sessions/" + child + "/fork", "");
  ASSERT_EQ(grandchild.status, 201) << grandchild.body;
  EXPECT_EQ(Json::parse(grandchild.body)["session"]["parent_id"], child);
  EXPECT_EQ(Json::parse(grandchild.body)["session"]["seed_length"], 1);
}

TEST_F(SessionRoutesTest, ForkErrorsNameTheProblemAndCreateNothing) {
  StartServer();
  NewSession();
  Append("s1", 2);
  const size_t before = SessionCount();

  auto unknown = Post("/api/sessions/nope/fork", "{}");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(Code(unknown), "not_found");

  struct Case {
    std::string body, named;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"seed_length": 3})", "`seed_length` (3) is beyond the last seq"},
           {R"({"seed_length": -1})", "`seed_length`"},
           {R"({"seed_length": 1.5})", "`seed_length`"},
           {R"({"seed_length": "1"})", "`seed_length`"},
           {R"({"seed_length": null})", "`seed_length`"},
           {R"({"seed_length": 9007199254740992})", "`seed_length`"},
           {R"({"seed": 1})", "unknown property `seed`"},
           {R"({"seed_length": 1, "client_time_zone": "UTC"})", "unknown property `client_time_zone`"}}) {
    auto r = Post("/api/sessions/s1/fork", c.body);
    EXPECT_EQ(r.status, 400) << c.body;
    EXPECT_EQ(Code(r), "invalid_arguments") << c.body << ": " << r.body;
    EXPECT_NE(r.body.find(c.named), std::string::npos) << c.body << ": " << r.body;
  }
  EXPECT_EQ(Code(Post("/api/sessions/s1/fork", "[1]")), "invalid_json");
  EXPECT_EQ(Code(Post("/api/sessions/s1/fork", "{")), "invalid_json");
  EXPECT_EQ(Code(Post("/api/sessions/s1/fork?seed_length=1", "")), "invalid_arguments");
  EXPECT_EQ(Get("/api/sessions/s1/fork").status, 405);
  EXPECT_EQ(SessionCount(), before);
}

// A fork inside a turn would make the child's agent continue that turn: a
// model call nobody asked for, and the old answer twice.
TEST_F(SessionRoutesTest, ForkRefusesASeedInsideATurnAndNamesTheBoundaries) {
  StartServer();
  NewSession();
  // 1 start, 2 user, 3 assistant, 4 end, 5 start, 6 user (running).
  Append("s1", 1, "turn/start");
  Append("s1", 1, "message/user");
  Append("s1", 1, "message/assistant");
  Append("s1", 1, "turn/end");
  Append("s1", 1, "turn/start");
  Append("s1", 1, "message/user");
  const size_t before = SessionCount();
  auto inside = Post("/api/sessions/s1/fork", R"({"seed_length": 5})");
  EXPECT_EQ(inside.status, 400);
  EXPECT_EQ(Code(inside), "invalid_arguments");
  EXPECT_NE(inside.body.find("`seed_length`"), std::string::npos) << inside.body;
  EXPECT_NE(inside.body.find("nearest turn boundaries are 4"), std::string::npos) << inside.body;
  auto first = Post("/api/sessions/s1/fork", R"({"seed_length": 2})");
  EXPECT_EQ(first.status, 400);
  EXPECT_NE(first.body.find("nearest turn boundaries are 0 and 4"), std::string::npos) << first.body;
  EXPECT_EQ(SessionCount(), before);
  // The boundary before the second message's turn, and the default: whole turns only.
  auto ok = Post("/api/sessions/s1/fork", R"({"seed_length": 4})");
  ASSERT_EQ(ok.status, 201) << ok.body;
  auto whole = Post("/api/sessions/s1/fork", "{}");
  ASSERT_EQ(whole.status, 201) << whole.body;
  EXPECT_EQ(Json::parse(whole.body)["session"]["seed_length"], 4);
}

// --- PATCH /api/sessions/{id} ---

TEST_F(SessionRoutesTest, PatchRenamesAndArchivesThroughTheLog) {
  StartServer();
  NewSession();
  ASSERT_TRUE(store_->Append("s1", {{"title/fallback", {{"title", "what I asked first"}}}}).ok());
  auto patch = [&](const std::string& body) {
    auto r = HttpRequestSync("PATCH", "http://127.0.0.1:" + std::to_string(port_) + "/api/sessions/s1", body,
                             {{"Authorization", "Bearer secret"}});
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : HttpClientResponse{};
  };
  auto renamed = patch(R"({"title": "  Weekly report \n"})");
  ASSERT_EQ(renamed.status, 200) << renamed.body;
  EXPECT_EQ(Json::parse(renamed.body)["title"], "Weekly report");
  EXPECT_EQ(Json::parse(renamed.body)["title_source"], "user");
  EXPECT_EQ(Json::parse(renamed.body)["session"]["archived"], false);
  EXPECT_EQ(store_->ReadTitles({"s1"})->at("s1").Effective(), "Weekly report");

  auto archived = patch(R"({"archived": true})");
  ASSERT_EQ(archived.status, 200) << archived.body;
  EXPECT_EQ(Json::parse(archived.body)["session"]["archived"], true);
  EXPECT_EQ(Json::parse(Get("/api/sessions/s1").body)["session"]["archived"], true);
  EXPECT_EQ(Json::parse(archived.body)["title"], "Weekly report");

  auto both = patch(R"({"title": null, "archived": false})");
  ASSERT_EQ(both.status, 200) << both.body;
  EXPECT_EQ(Json::parse(both.body)["title"], "what I asked first");
  EXPECT_EQ(Json::parse(both.body)["title_source"], "fallback") << "the rename is gone";
  EXPECT_EQ(Json::parse(both.body)["session"]["archived"], false);
  // Each change is an event of the session's log.
  std::vector<std::string> types;
  const Json log = Json::parse(Get("/api/sessions/s1/events").body);
  for (const auto& e : log["events"]) types.push_back(e["type"]);
  EXPECT_EQ(types, (std::vector<std::string>{"title/fallback", "title/user", "session/archived", "title/user",
                                             "session/archived"}));

  const int64_t last = store_->Get("s1")->last_seq;
  struct Case {
    std::string body, code, named;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"title": ""})", "invalid_arguments", "`title` must not be empty"},
           {R"({"title": "   "})", "invalid_arguments", "`title` must not be empty"},
           {R"({"title": 7})", "invalid_arguments", "`title` must be a string or null"},
           {"{\"title\": \"" + std::string(201, 'x') + "\"}", "invalid_arguments", "at most 200"},
           {R"({"archived": "yes"})", "invalid_arguments", "`archived` must be true or false"},
           {R"({"title": "ok", "pinned": true})", "invalid_arguments", "unknown property `pinned`"},
           {R"({})", "invalid_arguments", "nothing to change"},
           {R"([1])", "invalid_json", ""},
           {R"({)", "invalid_json", ""}}) {
    auto r = patch(c.body);
    EXPECT_EQ(r.status, 400) << c.body;
    EXPECT_EQ(Code(r), c.code) << c.body << ": " << r.body;
    EXPECT_NE(r.body.find(c.named), std::string::npos) << c.body << ": " << r.body;
  }
  // 200 characters (not bytes) is still a title.
  std::string long_title;
  for (int i = 0; i < 200; ++i) long_title += "\xC3\xA9";
  EXPECT_EQ(patch("{\"title\": \"" + long_title + "\"}").status, 200);
  EXPECT_EQ(store_->Get("s1")->last_seq, last + 1) << "nothing written by the refused bodies";
  auto missing = HttpRequestSync("PATCH", "http://127.0.0.1:" + std::to_string(port_) + "/api/sessions/nope",
                                 R"({"title": "x"})", {{"Authorization", "Bearer secret"}});
  EXPECT_EQ(missing->status, 404);
}

// --- GET /api/sessions/{id}/export ---

TEST_F(SessionRoutesTest, ExportDownloadsTheConversationAsMarkdownOrItsRawEvents) {
  StartServer();
  NewSession();
  Append("s1", 3);
  ASSERT_TRUE(store_->Append("s1", {{"title/user", {{"title", "Plans: Q3 / Q4?"}}}}).ok());
  auto md = Get("/api/sessions/s1/export?format=markdown");
  ASSERT_EQ(md.status, 200) << md.body;
  EXPECT_EQ(md.headers["content-type"], "text/markdown; charset=utf-8");
  EXPECT_EQ(md.headers["content-disposition"], "attachment; filename=\"Plans-Q3-Q4.md\"");
  EXPECT_EQ(md.body.rfind("# Plans: Q3 / Q4?\n", 0), 0u) << md.body;
  EXPECT_NE(md.body.find("m2"), std::string::npos) << md.body;
  EXPECT_EQ(Get("/api/sessions/s1/export").body, md.body) << "Markdown is the default";

  auto json = Get("/api/sessions/s1/export?format=json");
  ASSERT_EQ(json.status, 200) << json.body;
  EXPECT_EQ(json.headers["content-disposition"], "attachment; filename=\"Plans-Q3-Q4.json\"");
  Json body = Json::parse(json.body);
  EXPECT_EQ(body["session"]["id"], "s1");
  EXPECT_EQ(body["title"], "Plans: Q3 / Q4?");
  EXPECT_EQ(body["events"], Json::parse(Get("/api/sessions/s1/events").body)["events"]);

  EXPECT_EQ(Code(Get("/api/sessions/s1/export?format=pdf")), "invalid_arguments");
  EXPECT_EQ(Code(Get("/api/sessions/s1/export?limit=3")), "invalid_arguments");
  EXPECT_EQ(Get("/api/sessions/nope/export").status, 404);
}

TEST_F(SessionRoutesTest, ExportReadsEveryPageOfALongLog) {
  StartServer();
  NewSession();
  Append("s1", 2500);
  auto json = Get("/api/sessions/s1/export?format=json");
  ASSERT_EQ(json.status, 200);
  EXPECT_EQ(Seqs(Json::parse(json.body)), Range(1, 2500));
  EXPECT_EQ(json.headers["content-disposition"], "attachment; filename=\"s1.json\"") << "no title: the id";
}

// --- WebSocket /api/sessions/{id}/stream ---

TEST_F(SessionRoutesTest, StreamSendsTheBacklogThenReadyThenLiveEventsInOrder) {
  StartServer();
  NewSession();
  Append("s1", 3);
  auto c = Stream("");
  ASSERT_TRUE(c);
  int64_t ready = -1;
  EXPECT_EQ(ReadUntilReady(*c, &ready), Range(1, 3));
  EXPECT_EQ(ready, 3);
  Append("s1", 2);
  Append("s1", 1, "message/assistant");
  auto m = c->ReadJson();
  ASSERT_TRUE(m.ok());
  EXPECT_EQ((*m)["type"], "event");
  EXPECT_EQ((*m)["event"]["seq"], 4);
  EXPECT_EQ((*m)["event"]["data"], (Json{{"text", "m0"}}));
  EXPECT_EQ((*m)["event"]["at"], ToUnixMillis(clock_.Now()));
  EXPECT_EQ(ReadEvents(*c, 1), (std::vector<int64_t>{5}));
  auto last = c->ReadJson();
  ASSERT_TRUE(last.ok());
  EXPECT_EQ((*last)["event"]["type"], "message/assistant");
  EXPECT_EQ((*last)["event"]["seq"], 6);
  EXPECT_TRUE(c->Close().ok());
}

TEST_F(SessionRoutesTest, StreamSendsModelDeltasOnlyOnTopOfWhatTheClientHas) {
  StartServer();
  NewSession();
  Append("s1", 3);
  auto c = Stream("");
  ASSERT_TRUE(c);
  ReadUntilReady(*c);
  hub_.PublishDelta("s1", {5, "text", "from the future"});  // after events the client lacks: dropped
  hub_.PublishDelta("s1", {3, "text", "ec"});
  hub_.PublishDelta("s1", {3, "reasoning", "hm"});
  hub_.PublishDelta("other", {3, "text", "another session's"});
  Append("s1", 1, "message/assistant");
  auto first = c->ReadJson();
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(*first, (Json{{"type", "delta"}, {"after_seq", 3}, {"kind", "text"}, {"offset", 0}, {"text", "ec"}}));
  auto second = c->ReadJson();
  ASSERT_TRUE(second.ok());
  EXPECT_EQ((*second)["kind"], "reasoning");
  EXPECT_EQ(ReadEvents(*c, 1), (std::vector<int64_t>{4})) << "then the committed event; nothing else";
  EXPECT_TRUE(c->Close().ok());
}

// A page opened (or reconnected) while the model is answering shows the
// answer from its first word: what was streamed so far comes first, then
// each later piece with its offset, so the client can drop what it holds.
TEST_F(SessionRoutesTest, AClientThatJoinsMidAnswerGetsWhatWasStreamedSoFarFirst) {
  StartServer();
  NewSession();
  Append("s1", 3);
  hub_.PublishDelta("s1", {3, "reasoning", "Let me "});
  hub_.PublishDelta("s1", {3, "text", "This is "});
  hub_.PublishDelta("s1", {3, "text", "a slow \xF0\x9F\x98\x80 "});  // an emoji: two UTF-16 units
  auto c = Stream("");
  ASSERT_TRUE(c);
  ReadUntilReady(*c);
  auto reasoning = c->ReadJson();
  ASSERT_TRUE(reasoning.ok());
  EXPECT_EQ(*reasoning, (Json{{"type", "delta"}, {"after_seq", 3}, {"kind", "reasoning"}, {"offset", 0},
                              {"text", "Let me "}}));
  auto text = c->ReadJson();
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, (Json{{"type", "delta"}, {"after_seq", 3}, {"kind", "text"}, {"offset", 0},
                         {"text", "This is a slow \xF0\x9F\x98\x80 "}}));
  hub_.PublishDelta("s1", {3, "text", "answer"});
  auto next = c->ReadJson();
  ASSERT_TRUE(next.ok());
  EXPECT_EQ((*next)["offset"], 18) << "8 + 10 UTF-16 units before it";
  EXPECT_EQ((*next)["text"], "answer");
  // The committed answer replaces what was streamed: a later client gets only the events.
  Append("s1", 1, "message/assistant");
  EXPECT_EQ(ReadEvents(*c, 1), (std::vector<int64_t>{4}));
  auto later = Stream("?after=3");
  ASSERT_TRUE(later);
  EXPECT_EQ(ReadUntilReady(*later), (std::vector<int64_t>{4}));
  hub_.PublishDelta("s1", {4, "text", "the next call"});
  auto fresh = later->ReadJson();
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(*fresh, (Json{{"type", "delta"}, {"after_seq", 4}, {"kind", "text"}, {"offset", 0},
                          {"text", "the next call"}}));
}

TEST_F(SessionRoutesTest, StreamOfAnEmptySessionIsReadyAtZero) {
  StartServer();
  NewSession();
  auto c = Stream("?after=0");
  ASSERT_TRUE(c);
  int64_t ready = -1;
  EXPECT_TRUE(ReadUntilReady(*c, &ready).empty());
  EXPECT_EQ(ready, 0);
  Append("s1", 1);
  EXPECT_EQ(ReadEvents(*c, 1), (std::vector<int64_t>{1}));
}

TEST_F(SessionRoutesTest, ReconnectingWithTheLastSeqGetsExactlyTheMissedEvents) {
  StartServer();
  NewSession();
  Append("s1", 2);
  auto c = Stream("");
  ASSERT_TRUE(c);
  EXPECT_EQ(ReadUntilReady(*c), Range(1, 2));
  Append("s1", 1);
  EXPECT_EQ(ReadEvents(*c, 1), (std::vector<int64_t>{3}));
  ASSERT_TRUE(c->Close().ok());
  c.reset();

  Append("s1", 4);  // while disconnected
  auto again = Stream("?after=3");
  ASSERT_TRUE(again);
  int64_t ready = -1;
  EXPECT_EQ(ReadUntilReady(*again, &ready), Range(4, 7));
  EXPECT_EQ(ready, 7);
  Append("s1", 1);
  EXPECT_EQ(ReadEvents(*again, 1), (std::vector<int64_t>{8}));
}

TEST_F(SessionRoutesTest, ConcurrentAppendsArriveExactlyOnceInOrder) {
  StartServer({}, EventStream::Options{.page = 7});  // small pages: many backlog reads race the appends
  NewSession();
  Append("s1", 20);
  auto c = Stream("?after=5");
  ASSERT_TRUE(c);
  constexpr int kThreads = 4, kAppends = 40;
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([this, t] {
      for (int i = 0; i < kAppends; ++i) Append("s1", 1 + (i + t) % 3);  // batches of 1..3 events
    });
  }
  int64_t total = 20;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kAppends; ++i) total += 1 + (i + t) % 3;
  }
  // The backlog ends at some seq between 20 and `total`; what follows it is
  // live. Together: 6..total, each once, in order.
  std::vector<int64_t> seqs = ReadUntilReady(*c);
  ASSERT_GE(seqs.size(), 15u);
  std::vector<int64_t> live = ReadEvents(*c, static_cast<size_t>(total - 5) - seqs.size());
  seqs.insert(seqs.end(), live.begin(), live.end());
  for (auto& w : writers) w.join();
  EXPECT_EQ(seqs, Range(6, total));
  // Nothing was sent twice: the next message is the next event.
  Append("s1", 1);
  EXPECT_EQ(ReadEvents(*c, 1), (std::vector<int64_t>{total + 1}));
}

TEST_F(SessionRoutesTest, EventsAppendedWithoutTheHubAreReadFromTheStore) {
  StartServer();
  NewSession();
  auto c = Stream("");
  ASSERT_TRUE(c);
  EXPECT_TRUE(ReadUntilReady(*c).empty());
  Append("s1", 1);
  EXPECT_EQ(ReadEvents(*c, 1), (std::vector<int64_t>{1}));
  // Another host on the same profile: its appends never reach our hub.
  session::SessionStore other_host(*db_, clock_);
  ASSERT_TRUE(other_host.Append("s1", {{"message/user", Json{{"text", "elsewhere"}}}}).ok());
  ASSERT_TRUE(other_host.Append("s1", {{"message/user", Json{{"text", "elsewhere"}}}}).ok());
  Append("s1", 1);  // seq 4 is published; 2 and 3 are read to fill the gap
  EXPECT_EQ(ReadEvents(*c, 3), Range(2, 4));
}

TEST_F(SessionRoutesTest, EventsAnotherHostAppendedArriveWhenItsNoticeComes) {
  StartServer();
  NewSession();
  auto c = Stream("");
  ASSERT_TRUE(c);
  EXPECT_TRUE(ReadUntilReady(*c).empty());
  auto feed = WsClient::Connect(port_, "/api/changes", {{"Cookie", "dsh_token=secret"}});
  ASSERT_TRUE(feed.ok()) << feed.status().ToString();
  ASSERT_TRUE((*feed)->ReadJson().ok());  // ready
  // Another host on the profile's database appends; its notice reaches this
  // host's store, which announces it on the hub (PostgreSQL: LISTEN).
  session::SessionStore other_host(*db_, clock_);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(other_host.Append("s1", {{"message/user", Json{{"text", "elsewhere"}}}}).ok());
  hub_.PublishRemote("s1");
  EXPECT_EQ(ReadEvents(*c, 3), Range(1, 3));
  auto changed = (*feed)->ReadJson();
  ASSERT_TRUE(changed.ok());
  EXPECT_EQ(*changed, (Json{{"type", "changed"}, {"sessions", {"s1"}}}));
  // A notice with nothing new is no error, and the stream goes on in order.
  hub_.PublishRemote("s1");
  Append("s1", 1);
  EXPECT_EQ(ReadEvents(*c, 1), (std::vector<int64_t>{4}));
}

TEST_F(SessionRoutesTest, StreamNeedsTheTokenAndAcceptsItInTheQuery) {
  StartServer();
  NewSession();
  auto none = WsClient::Connect(port_, "/api/sessions/s1/stream");
  EXPECT_EQ(none.status().code(), "unauthorized");
  EXPECT_EQ(none.status().message().rfind("HTTP 401", 0), 0u) << none.status().message();
  auto wrong = WsClient::Connect(port_, "/api/sessions/s1/stream?token=nope");
  EXPECT_EQ(wrong.status().code(), "unauthorized");
  auto wrong_header = WsClient::Connect(port_, "/api/sessions/s1/stream", {{"Authorization", "Bearer nope"}});
  EXPECT_EQ(wrong_header.status().code(), "unauthorized");

  auto query = WsClient::Connect(port_, "/api/sessions/s1/stream?token=secret");
  ASSERT_TRUE(query.ok()) << query.status().ToString();
  EXPECT_TRUE(ReadUntilReady(**query).empty());
  auto cookie = WsClient::Connect(port_, "/api/sessions/s1/stream", {{"Cookie", "dsh_token=secret"}});
  ASSERT_TRUE(cookie.ok()) << cookie.status().ToString();
  EXPECT_TRUE(ReadUntilReady(**cookie).empty());
}

TEST_F(SessionRoutesTest, StreamFromAnotherOriginIsForbiddenEvenWithTheCookie) {
  StartServer();
  NewSession();
  auto foreign = WsClient::Connect(port_, "/api/sessions/s1/stream",
                                   {{"Cookie", "dsh_token=secret"}, {"Origin", "http://evil.example"}});
  EXPECT_EQ(foreign.status().code(), "forbidden") << foreign.status().ToString();
  EXPECT_EQ(foreign.status().message().rfind("HTTP 403", 0), 0u) << foreign.status().message();
  std::string own = "http://127.0.0.1:" + std::to_string(port_);
  auto same = WsClient::Connect(port_, "/api/sessions/s1/stream", {{"Cookie", "dsh_token=secret"}, {"Origin", own}});
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_TRUE(ReadUntilReady(**same).empty());
}

TEST_F(SessionRoutesTest, StreamRefusesUnknownSessionsAndBadAfter) {
  StartServer();
  NewSession();
  Append("s1", 2);
  WsClient::Headers auth = {{"Authorization", "Bearer secret"}};
  auto unknown = WsClient::Connect(port_, "/api/sessions/nope/stream", auth);
  EXPECT_EQ(unknown.status().code(), "not_found");
  EXPECT_EQ(unknown.status().message().rfind("HTTP 404", 0), 0u) << unknown.status().message();
  auto negative = WsClient::Connect(port_, "/api/sessions/s1/stream?after=-1", auth);
  EXPECT_EQ(negative.status().code(), "invalid_arguments");
  EXPECT_NE(negative.status().message().find("`after`"), std::string::npos);
  auto beyond = WsClient::Connect(port_, "/api/sessions/s1/stream?after=3", auth);
  EXPECT_EQ(beyond.status().code(), "invalid_arguments");
  auto unknown_route = WsClient::Connect(port_, "/api/sessions/s1/other", auth);
  EXPECT_EQ(unknown_route.status().code(), "not_found");
  // A plain GET on the stream route asks for the upgrade.
  auto plain = Get("/api/sessions/s1/stream");
  EXPECT_EQ(plain.status, 426);
  EXPECT_EQ(Code(plain), "upgrade_required");
  // The server still serves HTTP after refusing upgrades.
  EXPECT_EQ(Get("/api/sessions/s1/events").status, 200);
}

TEST_F(SessionRoutesTest, ALongBacklogIsPacedButASlowLiveConsumerIsClosed) {
  StartServer(WebSocketLimits{.max_queued_messages = 4}, EventStream::Options{.page = 2});
  NewSession();
  Append("s1", 50);
  auto c = Stream("");
  ASSERT_TRUE(c);
  // The backlog is read a page at a time as the client takes it: all of it
  // arrives although it is far over the queue limit.
  int64_t ready = -1;
  EXPECT_EQ(ReadUntilReady(*c, &ready), Range(1, 50));
  EXPECT_EQ(ready, 50);
  // 50 live events in one commit reach the connection at once: over the
  // limit of 4 queued messages, so the server gives up on this client.
  Append("s1", 50);
  size_t received = 0;
  Result<std::string> m = c->Read();
  for (; m.ok(); m = c->Read()) ++received;
  EXPECT_EQ(m.status().code(), "closed") << m.status().ToString();
  EXPECT_EQ(c->close_code(), 1008);
  EXPECT_NE(c->close_reason().find("too far behind"), std::string::npos) << c->close_reason();
  EXPECT_LT(received, 50u);
  // Other clients are not affected.
  auto fresh = Stream("?after=100");
  ASSERT_TRUE(fresh);
  EXPECT_TRUE(ReadUntilReady(*fresh).empty());
}

TEST_F(SessionRoutesTest, StopClosesStreamsWithGoingAwayAndTheIoContextFinishes) {
  StartServer();
  NewSession();
  auto a = Stream("");
  auto b = Stream("");
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(ReadUntilReady(*a).empty());
  EXPECT_TRUE(ReadUntilReady(*b).empty());
  server_->Stop();
  for (WsClient* c : {a.get(), b.get()}) {
    auto m = c->Read();
    EXPECT_EQ(m.status().code(), "closed") << m.status().ToString();
    EXPECT_EQ(c->close_code(), 1001);
  }
  EXPECT_TRUE(StopServer());  // the io_context threads return
  // The stream's hub subscription is gone: appends after Stop go nowhere.
  Append("s1", 1);
}

// POST /api/sessions, POST /api/sessions/{id}/messages and the fork route
// over a real Host (echo model, fake clock) on a temporary profile.
// --- WebSocket /api/changes ---

TEST_F(SessionRoutesTest, TheChangeFeedNamesSessionsWhoseLogGrewAndSaysWhenLoopsOrMcpServersChanged) {
  StartServer();
  NewSession();
  auto c = WsClient::Connect(port_, "/api/changes", {{"Cookie", "dsh_token=secret"}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto ready = (*c)->ReadJson();
  ASSERT_TRUE(ready.ok());
  EXPECT_EQ(*ready, (Json{{"type", "ready"}}));
  Append("s1", 1);
  auto grew = (*c)->ReadJson();
  ASSERT_TRUE(grew.ok());
  EXPECT_EQ(*grew, (Json{{"type", "changed"}, {"sessions", {"s1"}}}));
  hub_.PublishChange({"session", "s2"});  // a live agent started or stopped
  auto live = (*c)->ReadJson();
  ASSERT_TRUE(live.ok());
  EXPECT_EQ(*live, (Json{{"type", "changed"}, {"sessions", {"s2"}}}));
  hub_.PublishChange({"loops", ""});
  auto loops = (*c)->ReadJson();
  ASSERT_TRUE(loops.ok());
  EXPECT_EQ(*loops, (Json{{"type", "changed"}, {"loops", true}}));
  hub_.PublishChange({"mcp", ""});  // an MCP server of the host changed
  auto mcp = (*c)->ReadJson();
  ASSERT_TRUE(mcp.ok());
  EXPECT_EQ(*mcp, (Json{{"type", "changed"}, {"mcp", true}}));
  EXPECT_TRUE((*c)->Close().ok());
}

TEST_F(SessionRoutesTest, TheChangeFeedLosesNoSessionInABurst) {
  StartServer();
  auto c = WsClient::Connect(port_, "/api/changes", {{"Authorization", "Bearer secret"}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE((*c)->ReadJson().ok());  // ready
  constexpr int kSessions = 250;
  for (int i = 0; i < kSessions; ++i) hub_.PublishChange({"session", "s" + std::to_string(i)});
  hub_.PublishChange({"loops", ""});
  // Coalesced into fewer messages, possibly "all_sessions": together they
  // name every session, and the last change (loops) comes last.
  std::set<std::string> named;
  bool all = false;
  int messages = 0;
  while (true) {
    auto m = (*c)->ReadJson();
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    ++messages;
    ASSERT_EQ((*m)["type"], "changed") << *m;
    if (m->contains("sessions")) {
      EXPECT_LE((*m)["sessions"].size(), ChangeFeed::kMaxListedSessions);
      for (const auto& id : (*m)["sessions"]) named.insert(id.get<std::string>());
    }
    all = all || m->value("all_sessions", false);
    if (m->value("loops", false)) break;
  }
  EXPECT_TRUE(all || named.size() == kSessions) << named.size() << " named in " << messages << " messages";
  EXPECT_LE(messages, kSessions + 1);
}

TEST_F(SessionRoutesTest, TheChangeFeedNeedsTheTokenAndTheSameOrigin) {
  StartServer();
  auto none = WsClient::Connect(port_, "/api/changes");
  EXPECT_EQ(none.status().code(), "unauthorized");
  auto foreign = WsClient::Connect(port_, "/api/changes", {{"Cookie", "dsh_token=secret"}, {"Origin", "http://evil.example"}});
  EXPECT_EQ(foreign.status().code(), "forbidden") << foreign.status().ToString();
  auto extra = WsClient::Connect(port_, "/api/changes?after=3", {{"Authorization", "Bearer secret"}});
  EXPECT_EQ(extra.status().code(), "invalid_arguments") << extra.status().ToString();
  EXPECT_EQ(Code(Get("/api/changes")), "upgrade_required");
}

class HostRoutesTest : public ::testing::Test {
 protected:
  // The profile's dsh.yml; none when empty.
  virtual std::string Config() const { return ""; }

  void SetUp() override {
    host::HostOptions options;
    options.home = dir_.File("home");
    if (std::string config = Config(); !config.empty()) {
      std::filesystem::create_directories(*options.home);
      std::ofstream(*options.home + "/dsh.yml") << config;
    }
    options.clock = &clock_;
    options.env = [](const std::string&) { return std::optional<std::string>(); };  // echo/echo
    auto host = host::Host::Open(options);
    ASSERT_TRUE(host.ok()) << host.status().ToString();
    host_ = std::move(host).value();
    waiter_ = std::make_unique<agent::testing::EventWaiter>(host_->events());
    ASSERT_TRUE(host_->Start(2).ok());
    api_ =
        std::make_unique<Api>(Api::Options{"secret", "9.9.9"}, Api::ServicesOf(*host_));
    HttpServer::Options server_options;
    server_options.websocket = [this](HttpRequest req, UpgradeRespond r) {
      api_->HandleUpgrade(std::move(req), std::move(r));
    };
    server_ = std::make_unique<HttpServer>(ioc_, server_options, [this](HttpRequest req, Respond r) {
      api_->Handle(std::move(req), std::move(r));
    });
    auto port = server_->Listen();
    ASSERT_TRUE(port.ok()) << port.status().ToString();
    port_ = *port;
    base_ = "http://127.0.0.1:" + std::to_string(*port);
    for (int i = 0; i < 2; ++i) threads_.emplace_back([this] { ioc_.run(); });
  }
  void TearDown() override {
    if (server_) server_->Stop();
    for (auto& t : threads_) t.join();
    if (host_) host_->Close();
    waiter_.reset();
  }

  HttpClientResponse Post(const std::string& target, const Json& body) {
    auto r = HttpRequestSync("POST", base_ + target, body.dump(), {{"Authorization", "Bearer secret"}});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : HttpClientResponse{};
  }
  // `target` with its query already percent-encoded.
  HttpClientResponse Get(const std::string& target) {
    auto r = HttpRequestSync("GET", base_ + target, "", {{"Authorization", "Bearer secret"}});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : HttpClientResponse{};
  }
  static Json Error(const HttpClientResponse& r) {
    auto j = Json::parse(r.body, nullptr, false);
    return j.is_object() && j.contains("error") ? j["error"] : Json();
  }
  // POST /api/sessions; the new session's header.
  Json Create(const Json& body = Json::object()) {
    auto r = Post("/api/sessions", body);
    EXPECT_EQ(r.status, 201) << r.body;
    return Json::parse(r.body, nullptr, false)["session"];
  }
  size_t SessionCount() {
    auto all = host_->sessions().ListRecent(1000);
    EXPECT_TRUE(all.ok()) << all.status().ToString();
    return all.ok() ? all->size() : 0;
  }
  agent::AgentStatus AgentStatusOf(const std::string& id) {
    std::promise<agent::AgentStatus> p;
    host_->agents().GetStatus(id, [&](agent::AgentStatus s) { p.set_value(s); });
    return p.get_future().get();
  }
  // The `message/user` events of a session's log once `n` turns ended.
  std::vector<session::Event> UserMessages(const std::string& id, size_t n) {
    std::vector<session::Event> out;
    for (auto& e : waiter_->WaitForTurnEnds(id, n)) {
      if (e.type == "message/user") out.push_back(e);
    }
    return out;
  }

  dsh::testing::TempDir dir_;
  FakeClock clock_;
  std::unique_ptr<host::Host> host_;
  std::unique_ptr<agent::testing::EventWaiter> waiter_;
  boost::asio::io_context ioc_;
  std::unique_ptr<Api> api_;
  std::unique_ptr<HttpServer> server_;
  uint16_t port_ = 0;
  std::string base_;
  std::vector<std::thread> threads_;
};

TEST_F(HostRoutesTest, ASessionCreatedWithAClientTimeZoneKeepsItAsItsZone) {
  Json paris = Create({{"client_time_zone", "Europe/Paris"}});
  EXPECT_EQ(paris["time_zone"], "Europe/Paris");
  Json alias = Create({{"client_time_zone", "Asia/Calcutta"}, {"preset", "default"}});
  EXPECT_EQ(alias["time_zone"], "Asia/Kolkata");  // canonical, as stored
  EXPECT_EQ(alias["preset"], "default");
  auto stored = host_->sessions().Get(alias["id"]);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(stored->time_zone, "Asia/Kolkata");
  EXPECT_EQ(stored->origin, "api");
  // Without one: the host's zone, as before.
  Json plain = Create();
  EXPECT_EQ(plain["time_zone"], HostTimeZone().name());
  EXPECT_EQ(plain["time_zone"], host_->DefaultNewSession().time_zone);
}

TEST_F(HostRoutesTest, ABadClientTimeZoneCreatesNoSession) {
  const size_t before = SessionCount();
  for (const Json& zone : {Json("Mars/Olympus"), Json("CST"), Json("+05:30"), Json("Etc/GMT-5"), Json("")}) {
    auto r = Post("/api/sessions", {{"client_time_zone", zone}});
    EXPECT_EQ(r.status, 400) << zone;
    EXPECT_EQ(Error(r)["code"], "invalid_time_zone") << zone << ": " << r.body;
    EXPECT_NE(r.body.find("`client_time_zone`"), std::string::npos) << r.body;
  }
  auto number = Post("/api/sessions", {{"client_time_zone", 530}});
  EXPECT_EQ(Error(number)["code"], "invalid_arguments");
  EXPECT_NE(number.body.find("`client_time_zone` must be a string"), std::string::npos) << number.body;
  EXPECT_EQ(SessionCount(), before);
}

TEST_F(HostRoutesTest, AMessageCarriesItsClientTimeZoneInItsMeta) {
  std::string id = Create()["id"];
  auto sent = Post("/api/sessions/" + id + "/messages",
                   {{"message", "first"}, {"client_time_zone", "Asia/Calcutta"}});
  ASSERT_EQ(sent.status, 200) << sent.body;
  auto messages = UserMessages(id, 1);
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0].data["text"], "first");
  EXPECT_EQ(messages[0].data["meta"], (Json{{"origin", "api"}, {"client_time_zone", "Asia/Kolkata"}}));

  // Without one the meta is as before.
  ASSERT_EQ(Post("/api/sessions/" + id + "/messages", {{"message", "second"}}).status, 200);
  messages = UserMessages(id, 2);
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_EQ(messages[1].data["meta"], (Json{{"origin", "api"}}));
}

TEST_F(HostRoutesTest, AMessageWithABadClientTimeZoneIsNotDelivered) {
  std::string id = Create()["id"];
  auto bad =
      Post("/api/sessions/" + id + "/messages", {{"message", "lost"}, {"client_time_zone", "Moon/Base"}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(Error(bad)["code"], "invalid_time_zone");
  EXPECT_NE(bad.body.find("`client_time_zone`"), std::string::npos) << bad.body;
  auto typed =
      Post("/api/sessions/" + id + "/messages", {{"message", "lost"}, {"client_time_zone", {"UTC"}}});
  EXPECT_EQ(Error(typed)["code"], "invalid_arguments");
  // Refused before anything was queued: the next message is the first one the
  // session ever gets.
  ASSERT_EQ(Post("/api/sessions/" + id + "/messages", {{"message", "kept"}}).status, 200);
  auto messages = UserMessages(id, 1);
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0].data["text"], "kept");
}

TEST_F(HostRoutesTest, AForkOfALiveSessionIsNotLive) {
  Json parent = Create({{"client_time_zone", "Australia/Lord_Howe"}});
  std::string id = parent["id"];
  ASSERT_EQ(Post("/api/sessions/" + id + "/messages", {{"message", "hello"}}).status, 200);
  auto log = waiter_->WaitForTurnEnds(id, 1);
  EXPECT_NE(AgentStatusOf(id), agent::AgentStatus::kCold);
  auto r = Post("/api/sessions/" + id + "/fork", Json::object());
  ASSERT_EQ(r.status, 201) << r.body;
  Json child = Json::parse(r.body)["session"];
  EXPECT_EQ(child["parent_id"], id);
  EXPECT_EQ(child["time_zone"], "Australia/Lord_Howe");
  EXPECT_EQ(child["preset"], parent["preset"]);
  EXPECT_EQ(child["route"], parent["route"]);
  EXPECT_GE(child["seed_length"].get<int64_t>(), log.back().seq);
  EXPECT_EQ(AgentStatusOf(child["id"]), agent::AgentStatus::kCold);
}

TEST_F(HostRoutesTest, ResumeMakesAColdSessionLiveAndIsIdempotent) {
  std::string id = Create()["id"];
  host_->agents().EvictIdleForTesting();
  ASSERT_TRUE(host_->agents().WaitUntilNotLive(id, std::chrono::seconds(10)));
  EXPECT_EQ(AgentStatusOf(id), agent::AgentStatus::kCold);
  auto r = Post("/api/sessions/" + id + "/resume", Json::object());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json::parse(r.body), (Json{{"status", "idle"}}));
  EXPECT_EQ(AgentStatusOf(id), agent::AgentStatus::kIdle);
  auto again = HttpRequestSync("POST", base_ + "/api/sessions/" + id + "/resume", "", {{"Authorization", "Bearer secret"}});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->status, 200) << again->body;
  auto missing = Post("/api/sessions/ses_nope/resume", Json::object());
  EXPECT_EQ(missing.status, 404) << missing.body;
  auto extra = Post("/api/sessions/" + id + "/resume", {{"preset", "x"}});
  EXPECT_EQ(extra.status, 400);
  EXPECT_NE(Error(extra)["message"].get<std::string>().find("preset"), std::string::npos) << extra.body;
}

TEST_F(HostRoutesTest, HostInfoListsTheToolsARootCallMayUse) {
  auto r = Get("/api/host");
  ASSERT_EQ(r.status, 200) << r.body;
  Json tools = Json::parse(r.body)["tools"];
  ASSERT_TRUE(tools.is_array());
  std::vector<std::string> names;
  for (const auto& t : host_->tools().List()) names.push_back(t->name());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(tools, Json(names));
}

// --- GET /api/cron/preview ---

TEST_F(HostRoutesTest, CronPreviewGivesTheNextOccurrencesInTheZoneAndTheDescription) {
  // The fake clock is at 2026-01-01T00:00:00Z (08:00 in Shanghai).
  auto r = Get("/api/cron/preview?expr=0%209%20*%20*%20*&tz=Asia/Shanghai&count=3");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(
      Json::parse(r.body),
      (Json{{"description", "At 09:00"},
            {"tz", "Asia/Shanghai"},
            {"next",
             {"2026-01-01T09:00:00+08:00", "2026-01-02T09:00:00+08:00", "2026-01-03T09:00:00+08:00"}}}));
  // Strictly after now, a link answered by its canonical name, `+` as a space.
  clock_.SetWall(*ParseRfc3339("2026-03-08T06:30:00Z"));  // 01:30 EST, the night clocks spring forward
  auto dst = Get("/api/cron/preview?expr=30+1+*+*+*&tz=US/Eastern&count=2");
  ASSERT_EQ(dst.status, 200) << dst.body;
  Json body = Json::parse(dst.body);
  EXPECT_EQ(body["tz"], "America/New_York");
  EXPECT_EQ(body["next"], (Json{"2026-03-09T01:30:00-04:00", "2026-03-10T01:30:00-04:00"}));
}

TEST_F(HostRoutesTest, CronPreviewDefaultsToTheHostZoneAndFiveOccurrences) {
  auto r = Get("/api/cron/preview?expr=*/10%20*%20*%20*%20*");
  ASSERT_EQ(r.status, 200) << r.body;
  Json body = Json::parse(r.body);
  const TimeZone host_zone = HostTimeZone();
  EXPECT_EQ(body["tz"], host_zone.name());
  EXPECT_EQ(body["description"], "Every 10 minutes");
  Json want = Json::array();
  for (int i = 1; i <= 5; ++i) want.push_back(FormatRfc3339InZone(clock_.Now() + i * 10min, host_zone));
  EXPECT_EQ(body["next"], want);
  // count's bounds.
  EXPECT_EQ(Json::parse(Get("/api/cron/preview?expr=@hourly&tz=UTC&count=1").body)["next"],
            (Json{"2026-01-01T01:00:00+00:00"}));
  EXPECT_EQ(Json::parse(Get("/api/cron/preview?expr=@hourly&tz=UTC&count=20").body)["next"].size(), 20u);
}

TEST_F(HostRoutesTest, CronPreviewGivesTheTimeLayersErrors) {
  struct Case {
    std::string query;
    int status;
    const char* code;
    const char* mention;
  };
  for (const Case& c : {
           Case{"expr=61+*+*+*+*&tz=UTC", 400, "invalid_cron", "minute field"},
           Case{"expr=0+0+L+*+*", 400, "invalid_cron", "`expr`"},
           Case{"expr=0+0+30+2+*&tz=UTC", 400, "cron_never_fires", "`expr`"},
           Case{"expr=@daily&tz=CST", 400, "invalid_time_zone", "`tz`"},
           Case{"expr=@daily&tz=Mars/Olympus", 400, "invalid_time_zone", "Mars/Olympus"},
           Case{"expr=@daily&tz=", 400, "invalid_time_zone", "`tz`"},
           Case{"expr=@daily&count=0", 400, "invalid_arguments", "`count`"},
           Case{"expr=@daily&count=21", 400, "invalid_arguments", "`count`"},
           Case{"expr=@daily&count=abc", 400, "invalid_arguments", "`count`"},
           Case{"expr=@daily&count=", 400, "invalid_arguments", "`count`"},
           Case{"tz=UTC", 400, "invalid_arguments", "`expr`"},
           Case{"expr=", 400, "invalid_arguments", "`expr`"},
           Case{"expr=@daily&from=2026-01-01T00:00:00Z", 400, "invalid_arguments", "`from`"},
       }) {
    auto r = Get("/api/cron/preview?" + c.query);
    EXPECT_EQ(r.status, c.status) << c.query << ": " << r.body;
    EXPECT_EQ(Error(r)["code"], c.code) << c.query << ": " << r.body;
    EXPECT_NE(Error(r)["message"].get<std::string>().find(c.mention), std::string::npos)
        << c.query << ": " << r.body;
  }
  auto post = HttpRequestSync("POST", base_ + "/api/cron/preview?expr=@daily", "",
                              {{"Authorization", "Bearer secret"}});
  ASSERT_TRUE(post.ok());
  EXPECT_EQ(post->status, 405);
  auto anonymous = HttpRequestSync("GET", base_ + "/api/cron/preview?expr=@daily", "", {});
  ASSERT_TRUE(anonymous.ok());
  EXPECT_EQ(anonymous->status, 401);
}

TEST_F(HostRoutesTest, CronPreviewGivesWhatIsLeftBeforeTheYear10000AndAnErrorWhenNothingIs) {
  clock_.SetWall(*ParseRfc3339("9998-06-01T00:00:00Z"));
  auto few = Get("/api/cron/preview?expr=0+0+1+1+*&tz=UTC&count=3");
  ASSERT_EQ(few.status, 200) << few.body;
  EXPECT_EQ(Json::parse(few.body)["next"], (Json{"9999-01-01T00:00:00+00:00"}));
  clock_.SetWall(*ParseRfc3339("9999-06-01T00:00:00Z"));
  auto none = Get("/api/cron/preview?expr=0+0+1+1+*&tz=UTC");
  EXPECT_EQ(none.status, 400) << none.body;
  EXPECT_EQ(Error(none)["code"], "cron_never_fires") << none.body;
  EXPECT_NE(none.body.find("no occurrence after 9999-06-01T00:00:00+00:00"), std::string::npos) << none.body;
}

// A host whose MCP server cannot start: it is retried in the background.
class McpHostRoutesTest : public HostRoutesTest {
 protected:
  std::string Config() const override {
    return "mcp:\n  servers:\n    broken:\n      command: [" + dir_.File("no-such-mcp-server") + "]\n";
  }
};

TEST_F(McpHostRoutesTest, TheChangeFeedSaysWhenAnMcpServerChangesState) {
  auto feed = WsClient::Connect(port_, "/api/changes", {{"Authorization", "Bearer secret"}});
  ASSERT_TRUE(feed.ok()) << feed.status().ToString();
  auto ready = (*feed)->ReadJson();
  ASSERT_TRUE(ready.ok()) << ready.status().ToString();
  EXPECT_EQ((*ready)["type"], "ready");
  // Its next retry (0.5 s after the first attempt, then 1 s, 2 s...) goes
  // from down to starting and down again, on the server's client thread.
  for (;;) {
    auto m = (*feed)->ReadJson(30s);
    ASSERT_TRUE(m.ok()) << "no mcp change: " << m.status().ToString();
    if (m->value("mcp", false)) break;
  }
  auto host = Get("/api/host");
  ASSERT_EQ(host.status, 200) << host.body;
  Json server = Json::parse(host.body)["mcp_servers"][0];
  EXPECT_EQ(server["name"], "broken");
  EXPECT_NE(server["state"], "ready");
  EXPECT_NE(server["last_error"].get<std::string>().find("No such file or directory"), std::string::npos)
      << server;
  EXPECT_TRUE((*feed)->Close().ok());
}

TEST_F(HostRoutesTest, AnApprovalAnswerNeedsAWaitingCallAndAKnownDecision) {
  std::string id = Create()["id"];
  auto none = Post("/api/sessions/" + id + "/approvals/call_1", {{"decision", "allow_once"}});
  EXPECT_EQ(none.status, 409) << none.body;
  EXPECT_EQ(Error(none)["code"], "conflict");
  auto bad = Post("/api/sessions/" + id + "/approvals/call_1", {{"decision", "sure"}});
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(Error(bad)["message"].get<std::string>().find("decision"), std::string::npos) << bad.body;
  auto extra = Post("/api/sessions/" + id + "/approvals/call_1", {{"decision", "deny"}, {"why", "no"}});
  EXPECT_EQ(extra.status, 400) << extra.body;
  auto missing = Post("/api/sessions/ses_nope/approvals/call_1", {{"decision", "deny"}});
  EXPECT_EQ(missing.status, 404) << missing.body;
}

// GET /api/search over a real host: what a person said and what the model
// answered are found soon after, by word or prefix; a rename is found by
// its new title; bad queries are refused.
TEST_F(HostRoutesTest, SearchFindsMessagesAndTitlesSoonAfterTheyAreWritten) {
  std::string id = Create()["id"];
  auto sent = Post("/api/sessions/" + id + "/messages", {{"message", "where is the Kilimanjaro trailhead?"}});
  ASSERT_EQ(sent.status, 200) << sent.body;
  UserMessages(id, 1);
  // Waits for the host's index to hold every event of the session (the
  // only one with events), then searches once.
  auto search = [&](const std::string& q) {
    auto header = host_->sessions().Get(id);
    EXPECT_TRUE(header.ok()) << header.status().ToString();
    const int64_t last_seq = header.ok() ? header->last_seq : 0;
    EXPECT_TRUE(host_->search().WaitFor(
        [&](const session::SearchIndex::Stats& s) { return s.events_indexed >= last_seq; }, 20s))
        << "indexed " << host_->search().stats().events_indexed << " of " << last_seq;
    auto r = Get("/api/search?q=" + q);
    EXPECT_EQ(r.status, 200) << r.body;
    return Json::parse(r.body, nullptr, false);
  };
  Json found = search("kilim");
  ASSERT_EQ(found["results"].size(), 1u) << found.dump();
  EXPECT_EQ(found["results"][0]["session_id"], id);
  EXPECT_GT(found["results"][0]["seq"].get<int64_t>(), 0);
  EXPECT_NE(found["results"][0]["snippet"].get<std::string>().find("<mark>Kilimanjaro</mark>"), std::string::npos);
  EXPECT_EQ(found["results"][0]["archived"], false);
  EXPECT_FALSE(found.contains("next"));

  auto renamed = HttpRequestSync("PATCH", base_ + "/api/sessions/" + id, R"({"title": "Hiking plans"})",
                                 {{"Authorization", "Bearer secret"}});
  ASSERT_TRUE(renamed.ok());
  ASSERT_EQ(renamed->status, 200) << renamed->body;
  found = search("hiking%20plan");
  ASSERT_EQ(found["results"].size(), 1u) << found.dump();
  EXPECT_EQ(found["results"][0]["title"], "Hiking plans");
  EXPECT_EQ(found["results"][0]["seq"], 0);

  for (const std::string bad : {"/api/search", "/api/search?q=%21%21", "/api/search?q=x&limit=0",
                                "/api/search?q=x&limit=101", "/api/search?q=x&before=abc", "/api/search?q=x&sort=new"}) {
    auto r = Get(bad);
    EXPECT_EQ(r.status, 400) << bad << ": " << r.body;
    EXPECT_EQ(Error(r)["code"], "invalid_arguments") << bad;
  }
  auto anonymous = HttpRequestSync("GET", base_ + "/api/search?q=kilim", "", {});
  ASSERT_TRUE(anonymous.ok());
  EXPECT_EQ(anonymous->status, 401);
}

}  // namespace
}  // namespace dsh::server
