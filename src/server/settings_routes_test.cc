// The Settings routes (docs/API.md, "Settings") over a real Host, Api and
// HttpServer, with a scripted OpenAI-compatible server (FakeChatServer) as
// the provider a person adds: what GET shows, that a change reaches new
// sessions without a restart, the 0600 key file, the environment's key
// winning, bad input changing nothing, and no key in any response.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <boost/asio/io_context.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "agent/testing/fake_chat_server.h"
#include "base/testing/temp_dir.h"
#include "host/host.h"
#include "server/api.h"
#include "server/http_client.h"
#include "server/http_server.h"

namespace dsh::server {
namespace {

namespace fs = std::filesystem;
using agent::testing::FakeChatServer;
using agent::testing::ScriptedResponse;
using namespace std::chrono_literals;

constexpr const char* kKey = "sk-saved-0123456789";
constexpr const char* kEnvKey = "sk-from-env-987654";

// A 2xx JSON answer (FakeChatServer's kError plays any status and body).
ScriptedResponse JsonReply(int status, const Json& body) {
  ScriptedResponse r;
  r.kind = ScriptedResponse::Kind::kError;
  r.status = status;
  r.body = body.dump();
  return r;
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class SettingsRoutesTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(); }
  void TearDown() override { Stop(); }

  void Start() {
    host::HostOptions options;
    options.home = home();
    options.env = [this](const std::string& name) -> std::optional<std::string> {
      auto it = env_.find(name);
      if (it == env_.end()) return std::nullopt;
      return it->second;
    };
    auto host = host::Host::Open(options);
    ASSERT_TRUE(host.ok()) << host.status().ToString();
    host_ = std::move(host).value();
    ASSERT_TRUE(host_->Start(2).ok());
    api_ = std::make_unique<Api>(Api::Options{"secret", "9.9.9"},
                                 Api::ServicesOf(*host_));
    ioc_ = std::make_unique<boost::asio::io_context>();
    server_ = std::make_unique<HttpServer>(*ioc_, HttpServer::Options{}, [this](HttpRequest req, Respond r) {
      api_->Handle(std::move(req), std::move(r));
    });
    auto port = server_->Listen();
    ASSERT_TRUE(port.ok()) << port.status().ToString();
    base_ = "http://127.0.0.1:" + std::to_string(*port);
    for (int i = 0; i < 2; ++i) threads_.emplace_back([this] { ioc_->run(); });
  }
  void Stop() {
    if (server_) server_->Stop();
    for (auto& t : threads_) t.join();
    threads_.clear();
    server_.reset();
    api_.reset();
    if (host_) host_->Close();
    host_.reset();
  }

  std::string home() const { return dir_.File("home"); }

  using Headers = std::vector<std::pair<std::string, std::string>>;
  HttpClientResponse Send(const std::string& method, const std::string& target, const std::string& body = "",
                          Headers headers = {{"Authorization", "Bearer secret"}}) {
    auto r = HttpRequestSync(method, base_ + target, body, headers);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    HttpClientResponse out = r.ok() ? *r : HttpClientResponse{};
    responses_.push_back(out.body);
    return out;
  }
  static Json Body(const HttpClientResponse& r) { return Json::parse(r.body, nullptr, false); }
  static std::string Code(const HttpClientResponse& r) {
    Json j = Body(r);
    return j.is_object() && j.contains("error") ? j["error"].value("code", "") : "";
  }
  Json Settings() {
    auto r = Send("GET", "/api/settings");
    EXPECT_EQ(r.status, 200) << r.body;
    return Body(r);
  }
  static const Json* Provider(const Json& settings, const std::string& name) {
    for (const auto& p : settings["providers"]) {
      if (p["name"] == name) return &p;
    }
    return nullptr;
  }
  HttpClientResponse PutProvider(const std::string& name, const Json& body) {
    return Send("PUT", "/api/settings/providers/" + name, body.dump());
  }
  Json LocalProvider(const std::string& base_url, bool with_key = true) {
    Json body = {{"kind", "openai"}, {"base_url", base_url}, {"models", {"m1", "m2"}}, {"efforts", {"low", "high"}}};
    if (with_key) body["api_key"] = kKey;
    return body;
  }
  // Every byte the profile directory holds, but the key file.
  std::string ProfileBytesButKeys() {
    std::string all;
    for (const auto& entry : fs::recursive_directory_iterator(home())) {
      if (entry.is_regular_file() && entry.path().filename() != "provider-keys") all += ReadFile(entry.path());
    }
    return all;
  }
  void ExpectNoKeyInAnyResponse() {
    for (const auto& body : responses_) {
      EXPECT_EQ(body.find(kKey), std::string::npos) << body;
      EXPECT_EQ(body.find(kEnvKey), std::string::npos) << body;
    }
  }

  dsh::testing::TempDir dir_;
  std::map<std::string, std::string> env_;
  std::unique_ptr<host::Host> host_;
  std::unique_ptr<Api> api_;
  std::unique_ptr<boost::asio::io_context> ioc_;
  std::unique_ptr<HttpServer> server_;
  std::vector<std::thread> threads_;
  std::string base_;
  std::vector<std::string> responses_;
};

TEST_F(SettingsRoutesTest, ListsTheProvidersTheHostKnowsAndTheDefaultRoute) {
  Json s = Settings();
  std::vector<std::string> names;
  for (const auto& p : s["providers"]) names.push_back(p["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"deepseek", "echo", "openai"}));
  const Json* deepseek = Provider(s, "deepseek");
  ASSERT_NE(deepseek, nullptr);
  EXPECT_EQ((*deepseek)["kind"], "openai");
  EXPECT_EQ((*deepseek)["base_url"], "https://api.deepseek.com/v1");
  EXPECT_EQ((*deepseek)["models"], Json({"deepseek-chat", "deepseek-reasoner"}));
  EXPECT_EQ((*deepseek)["key_set"], false);
  EXPECT_TRUE((*deepseek)["key_source"].is_null());
  EXPECT_EQ((*deepseek)["key_env"], "DEEPSEEK_API_KEY");
  EXPECT_EQ((*deepseek)["source"], "built-in");
  EXPECT_EQ((*Provider(s, "echo"))["kind"], "echo");
  EXPECT_EQ(s["default_route"], Json({{"provider", "echo"}, {"model", "echo"}, {"source", "built-in"}}));
}

TEST_F(SettingsRoutesTest, AProviderAddedIsUsedByNewSessionsAtOnceAndOldSessionsKeepTheirRoute) {
  FakeChatServer model;
  model.SetDefault(agent::testing::TextReply("hello from local"));
  auto before = Send("POST", "/api/sessions", "{}");
  ASSERT_EQ(before.status, 201) << before.body;

  auto put = PutProvider("local", LocalProvider(model.base_url()));
  ASSERT_EQ(put.status, 200) << put.body;
  const Json put_body = Body(put);
  const Json* local = Provider(put_body, "local");
  ASSERT_NE(local, nullptr) << put.body;
  EXPECT_EQ((*local)["base_url"], model.base_url());
  EXPECT_EQ((*local)["models"], Json({"m1", "m2"}));
  EXPECT_EQ((*local)["efforts"], Json({{"m1", {"low", "high"}}, {"m2", {"low", "high"}}}));
  EXPECT_EQ((*local)["key_set"], true);
  EXPECT_EQ((*local)["key_source"], "profile");
  EXPECT_EQ((*local)["source"], "profile");

  auto route = Send("PUT", "/api/settings/default_route", Json{{"provider", "local"}, {"model", "m2"}}.dump());
  ASSERT_EQ(route.status, 200) << route.body;
  EXPECT_EQ(Body(route)["default_route"], Json({{"provider", "local"}, {"model", "m2"}, {"source", "profile"}}));

  // The host's own view for the browser follows too.
  Json info = Body(Send("GET", "/api/host"));
  EXPECT_EQ(info["default_model"]["provider"], "local");

  auto created = Send("POST", "/api/sessions", "{}");
  ASSERT_EQ(created.status, 201) << created.body;
  Json header = Body(created)["session"];
  EXPECT_EQ(header["route"]["provider"], "local");
  EXPECT_EQ(header["route"]["model"], "m2");
  const std::string id = header["id"];
  auto sent = Send("POST", "/api/sessions/" + id + "/messages", Json{{"message", "hi"}}.dump());
  ASSERT_EQ(sent.status, 200) << sent.body;
  ASSERT_TRUE(model.WaitForRequests(1, 10s));
  auto request = model.requests().front();
  EXPECT_EQ(request.target, "/v1/chat/completions");
  EXPECT_EQ(request.headers["authorization"], std::string("Bearer ") + kKey);
  EXPECT_EQ(request.json["model"], "m2");

  // The session made before the change keeps the route it was made with.
  auto old = Send("GET", "/api/sessions/" + Body(before)["session"]["id"].get<std::string>());
  EXPECT_EQ(Body(old)["session"]["route"]["provider"], "echo") << old.body;
  ExpectNoKeyInAnyResponse();
}

TEST_F(SettingsRoutesTest, KeysAreKeptInA0600FileBesideDshYmlAndNeverInAResponseOrTheDatabase) {
  FakeChatServer model;
  ASSERT_EQ(PutProvider("local", LocalProvider(model.base_url())).status, 200);
  const fs::path keys = fs::path(home()) / "provider-keys";
  struct stat st {};
  ASSERT_EQ(::stat(keys.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_NE(ReadFile(keys).find(kKey), std::string::npos);
  const std::string providers = ReadFile(fs::path(home()) / "providers.yml");
  EXPECT_NE(providers.find(model.base_url()), std::string::npos) << providers;

  model.Enqueue(JsonReply(200, {{"data", {{{"id", "m1"}}}}}));
  Send("POST", "/api/settings/providers/local/test", "{}");
  Send("GET", "/api/settings");
  Send("GET", "/api/host");
  Send("PUT", "/api/settings/providers/local", Json{{"kind", "openai"}, {"base_url", "ftp://x"}, {"models", Json::array()}}.dump());
  host_->Close();  // everything committed, the WAL checkpointed
  EXPECT_EQ(ProfileBytesButKeys().find(kKey), std::string::npos) << "a key outside provider-keys";
  ExpectNoKeyInAnyResponse();
}

TEST_F(SettingsRoutesTest, SavedProvidersAndTheDefaultRouteSurviveARestart) {
  FakeChatServer model;
  ASSERT_EQ(PutProvider("local", LocalProvider(model.base_url())).status, 200);
  ASSERT_EQ(Send("PUT", "/api/settings/default_route", Json{{"provider", "local"}, {"model", "m1"}}.dump()).status, 200);
  Stop();
  Start();
  Json s = Settings();
  const Json* local = Provider(s, "local");
  ASSERT_NE(local, nullptr) << s;
  EXPECT_EQ((*local)["key_source"], "profile");
  EXPECT_EQ((*local)["models"], Json({"m1", "m2"}));
  EXPECT_EQ(s["default_route"]["provider"], "local");
  EXPECT_EQ(s["default_route"]["model"], "m1");
}

TEST_F(SettingsRoutesTest, AKeyFromTheEnvironmentWinsOverTheSavedOne) {
  Stop();
  env_["OPENAI_API_KEY"] = kEnvKey;
  Start();
  FakeChatServer model;
  model.Enqueue(JsonReply(200, {{"data", {{{"id", "gpt-x"}}}}}));
  auto put = PutProvider("openai", Json{{"kind", "openai"}, {"base_url", model.base_url()}, {"api_key", kKey},
                                        {"models", Json::array()}});
  ASSERT_EQ(put.status, 200) << put.body;
  const Json put_body = Body(put);
  const Json* openai = Provider(put_body, "openai");
  ASSERT_NE(openai, nullptr);
  EXPECT_EQ((*openai)["key_source"], "environment");
  EXPECT_EQ((*openai)["key_env"], "OPENAI_API_KEY");
  EXPECT_EQ((*openai)["source"], "profile");
  auto test = Send("POST", "/api/settings/providers/openai/test");
  EXPECT_EQ(Body(test), Json({{"ok", true}, {"models", {"gpt-x"}}})) << test.body;
  ASSERT_TRUE(model.WaitForRequests(1, 5s));
  EXPECT_EQ(model.requests().front().headers["authorization"], std::string("Bearer ") + kEnvKey);
  ExpectNoKeyInAnyResponse();
}

TEST_F(SettingsRoutesTest, TestReportsTheModelsOrTheProvidersErrorInWords) {
  FakeChatServer model;
  ASSERT_EQ(PutProvider("local", LocalProvider(model.base_url())).status, 200);
  const std::string test = "/api/settings/providers/local/test";

  model.Enqueue(JsonReply(200, {{"object", "list"}, {"data", {{{"id", "m2"}}, {{"id", "m1"}}}}}));
  EXPECT_EQ(Body(Send("POST", test)), Json({{"ok", true}, {"models", {"m1", "m2"}}}));
  EXPECT_EQ(model.requests().back().target, "/v1/models");
  EXPECT_EQ(model.requests().back().method, "GET");

  model.Enqueue(agent::testing::Error(401, "Incorrect API key provided"));
  Json refused = Body(Send("POST", test));
  EXPECT_EQ(refused["ok"], false);
  EXPECT_EQ(refused["error"]["code"], "model_error");
  EXPECT_EQ(refused["error"]["message"], "HTTP 401 from " + model.base_url() + "/models: Incorrect API key provided");

  // No /models: one token of a chat answer to the first listed model.
  model.Enqueue(agent::testing::Error(404, "no such route"));
  model.Enqueue(JsonReply(200, {{"choices", {{{"index", 0}, {"message", {{"role", "assistant"}, {"content", "OK"}}}}}}}));
  EXPECT_EQ(Body(Send("POST", test)), Json({{"ok", true}, {"models", {"m1"}}}));
  auto chat = model.requests().back();
  EXPECT_EQ(chat.target, "/v1/chat/completions");
  EXPECT_EQ(chat.json["model"], "m1");
  EXPECT_EQ(chat.json["max_tokens"], 1);

  model.Stop();
  Json down = Body(Send("POST", test));
  EXPECT_EQ(down["ok"], false);
  EXPECT_EQ(down["error"]["code"], "model_unavailable");
  EXPECT_EQ(down["error"]["message"].get<std::string>().rfind("cannot reach " + model.base_url() + "/models: ", 0), 0u)
      << down;

  EXPECT_EQ(Body(Send("POST", "/api/settings/providers/echo/test")), Json({{"ok", true}, {"models", Json::array()}}));
  Json keyless = Body(Send("POST", "/api/settings/providers/deepseek/test"));
  EXPECT_EQ(keyless["error"]["message"], "no API key: set DEEPSEEK_API_KEY or save a key for `deepseek` in Settings");
  EXPECT_EQ(Send("POST", "/api/settings/providers/nope/test").status, 404);
  EXPECT_EQ(Send("POST", test, R"({"x":1})").status, 400);
  ExpectNoKeyInAnyResponse();
}

TEST_F(SettingsRoutesTest, BadInputIsAClear4xxThatChangesNothing) {
  FakeChatServer model;
  ASSERT_EQ(PutProvider("local", LocalProvider(model.base_url())).status, 200);
  const Json settings = Settings();
  const std::string keys = ReadFile(fs::path(home()) / "provider-keys");
  const std::string providers = ReadFile(fs::path(home()) / "providers.yml");
  const Json good = LocalProvider("http://127.0.0.1:1/v1");
  auto with = [&](const char* key, Json value) {
    Json b = good;
    b[key] = std::move(value);
    return b.dump();
  };
  auto without = [&](const char* key) {
    Json b = good;
    b.erase(key);
    return b.dump();
  };
  struct Case {
    std::string method, target, body;
    int status;
    std::string code, message_start;
  } cases[] = {
      {"PUT", "/api/settings/providers/local", with("extra", 1), 400, "invalid_arguments", "unknown property `extra`"},
      {"PUT", "/api/settings/providers/local", with("base_url", "ftp://host/v1"), 400, "invalid_arguments",
       "`base_url` must be a URL starting with http:// or https://"},
      {"PUT", "/api/settings/providers/local", with("base_url", "http://"), 400, "invalid_arguments", "`base_url`"},
      {"PUT", "/api/settings/providers/local", with("kind", "anthropic"), 400, "invalid_arguments", "`kind` must be"},
      {"PUT", "/api/settings/providers/local", with("models", "m1"), 400, "invalid_arguments", "`models` must be"},
      {"PUT", "/api/settings/providers/local", with("models", {"m1", "m1"}), 400, "invalid_arguments", "`models` names"},
      {"PUT", "/api/settings/providers/local", with("api_key", ""), 400, "invalid_arguments", "`api_key` must be"},
      {"PUT", "/api/settings/providers/local", with("api_key", "a\nb"), 400, "invalid_arguments", "`api_key` must not"},
      {"PUT", "/api/settings/providers/local", without("base_url"), 400, "invalid_arguments", "`base_url` is required"},
      {"PUT", "/api/settings/providers/local", without("kind"), 400, "invalid_arguments", "`kind` is required"},
      {"PUT", "/api/settings/providers/local", "[]", 400, "invalid_arguments", "the body must be a JSON object"},
      {"PUT", "/api/settings/providers/local", "{", 400, "invalid_arguments", "the body must be a JSON object"},
      {"PUT", "/api/settings/providers/", good.dump(), 400, "invalid_arguments", "the provider's name is empty"},
      {"PUT", "/api/settings/providers", good.dump(), 400, "invalid_arguments", "the provider's name is empty"},
      {"PUT", "/api/settings/providers/Local", good.dump(), 400, "invalid_arguments", "the provider's name \"Local\""},
      {"PUT", "/api/settings/providers/a%20b", good.dump(), 400, "invalid_arguments", "the provider's name"},
      {"PUT", "/api/settings/providers/echo", good.dump(), 400, "invalid_arguments", "provider `echo` is the offline"},
      {"DELETE", "/api/settings/providers/openai", "", 409, "conflict", "provider `openai` is built in"},
      {"DELETE", "/api/settings/providers/nope", "", 404, "not_found", "no provider `nope`"},
      {"DELETE", "/api/settings/providers/", "", 400, "invalid_arguments", "the provider's name is empty"},
      {"PUT", "/api/settings/default_route", R"({"provider":"nope","model":"x"})", 404, "unknown_provider", ""},
      {"PUT", "/api/settings/default_route", R"({"provider":"local","model":"m9"})", 404, "unknown_model",
       "provider `local` has no model `m9`"},
      {"PUT", "/api/settings/default_route", R"({"provider":"local","model":"m1","effort":"low"})", 400,
       "invalid_arguments", "unknown property `effort`"},
      {"PUT", "/api/settings/default_route", R"({"provider":"local"})", 400, "invalid_arguments", "give both"},
      {"PUT", "/api/settings/default_route", R"({"provider":"","model":"m1"})", 400, "invalid_arguments", "`provider`"},
  };
  for (const auto& c : cases) {
    auto r = Send(c.method, c.target, c.body);
    EXPECT_EQ(r.status, c.status) << c.method << " " << c.target << " " << c.body << " -> " << r.body;
    EXPECT_EQ(Code(r), c.code) << c.target << " " << c.body;
    std::string message = Body(r).is_object() ? Body(r)["error"].value("message", "") : "";
    EXPECT_EQ(message.rfind(c.message_start, 0), 0u) << message;
  }
  // A provider the default route needs cannot go, nor lose that model.
  ASSERT_EQ(Send("PUT", "/api/settings/default_route", Json{{"provider", "local"}, {"model", "m1"}}.dump()).status, 200);
  const Json routed = Settings();
  const std::string routed_providers = ReadFile(fs::path(home()) / "providers.yml");
  auto del = Send("DELETE", "/api/settings/providers/local");
  EXPECT_EQ(del.status, 409) << del.body;
  EXPECT_EQ(Code(del), "conflict");
  Json fewer = good;
  fewer["models"] = {"m2"};
  auto narrowed = PutProvider("local", fewer);
  EXPECT_EQ(narrowed.status, 409) << narrowed.body;
  EXPECT_NE(Body(narrowed)["error"]["message"].get<std::string>().find("the saved default route \"local/m1\""),
            std::string::npos) << narrowed.body;
  EXPECT_EQ(Settings(), routed);
  EXPECT_EQ(ReadFile(fs::path(home()) / "providers.yml"), routed_providers);
  EXPECT_EQ(ReadFile(fs::path(home()) / "provider-keys"), keys);
  // Before the default route changed, nothing else had either.
  Json unrouted = routed;
  unrouted["default_route"] = settings["default_route"];
  EXPECT_EQ(unrouted, settings);
  EXPECT_NE(providers, routed_providers);
  ExpectNoKeyInAnyResponse();
}

TEST_F(SettingsRoutesTest, DeleteForgetsTheProviderAndItsKeyAndEditKeepsTheKeyUnlessTold) {
  FakeChatServer model;
  ASSERT_EQ(PutProvider("local", LocalProvider(model.base_url())).status, 200);
  // An edit without `api_key` keeps the saved key; null forgets it.
  auto kept = PutProvider("local", LocalProvider(model.base_url(), /*with_key=*/false));
  EXPECT_EQ((*Provider(Body(kept), "local"))["key_source"], "profile");
  Json forget = LocalProvider(model.base_url(), false);
  forget["api_key"] = nullptr;
  auto forgotten = PutProvider("local", forget);
  EXPECT_EQ((*Provider(Body(forgotten), "local"))["key_set"], false);
  EXPECT_EQ(ReadFile(fs::path(home()) / "provider-keys").find(kKey), std::string::npos);

  ASSERT_EQ(PutProvider("local", LocalProvider(model.base_url())).status, 200);
  auto del = Send("DELETE", "/api/settings/providers/local");
  ASSERT_EQ(del.status, 200) << del.body;
  EXPECT_EQ(Provider(Body(del), "local"), nullptr);
  EXPECT_EQ(ReadFile(fs::path(home()) / "provider-keys").find(kKey), std::string::npos);
  EXPECT_EQ(ReadFile(fs::path(home()) / "providers.yml").find("local"), std::string::npos);
}

TEST_F(SettingsRoutesTest, OnlyARequestWithTheHostsTokenReadsOrChangesSettings) {
  for (const auto& [method, target] : std::vector<std::pair<std::string, std::string>>{
           {"GET", "/api/settings"},
           {"PUT", "/api/settings/providers/local"},
           {"DELETE", "/api/settings/providers/local"},
           {"POST", "/api/settings/providers/openai/test"},
           {"PUT", "/api/settings/default_route"}}) {
    for (const Headers& headers : {Headers{}, Headers{{"Authorization", "Bearer wrong"}}}) {
      auto r = Send(method, target, LocalProvider("http://127.0.0.1:1/v1").dump(), headers);
      EXPECT_EQ(r.status, 401) << method << " " << target;
    }
  }
  EXPECT_EQ(Provider(Settings(), "local"), nullptr);
  EXPECT_FALSE(fs::exists(fs::path(home()) / "providers.yml"));
  EXPECT_FALSE(fs::exists(fs::path(home()) / "provider-keys"));
}

TEST(ProviderSettingsLoad, AFileWithAnUnknownKeyOrABadProviderStopsTheHostNamingIt) {
  dsh::testing::TempDir dir;
  const fs::path home = dir.File("p");
  fs::create_directories(home);
  std::ofstream(home / "providers.yml") << "server: {port: 1}\n";
  auto bad = host::ProviderSettings::Load(home);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), "invalid_config");
  EXPECT_NE(bad.status().message().find("unknown key `server`"), std::string::npos) << bad.status().message();
  std::ofstream(home / "providers.yml") << "providers: {x: {type: echo}}\n";
  EXPECT_EQ(host::ProviderSettings::Load(home).status().code(), "invalid_config");
  std::ofstream(home / "providers.yml") << "providers: {x: {base_url: 'http://h/v1'}}\n";
  std::ofstream(home / "provider-keys") << R"({"x": "k", "gone": "k2"})";
  auto ok = host::ProviderSettings::Load(home);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->keys, (std::map<std::string, std::string>{{"x", "k"}}));  // a key without its provider is ignored
}

}  // namespace
}  // namespace dsh::server
