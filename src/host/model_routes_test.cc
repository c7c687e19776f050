#include "host/model_routes.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <thread>

namespace dsh::host {
namespace {

// What the fake factories made, and what was done to it. Outlives the routes.
struct Recorder {
  std::mutex mu;
  int echo_made = 0;
  std::vector<agent::OpenAiOptions> openai_made;
  std::atomic<int> shutdowns{0};
};

class FakeAdapter : public agent::ModelAdapter {
 public:
  FakeAdapter(Recorder& rec, std::string kind) : rec_(rec), kind_(std::move(kind)) {}
  void Stream(agent::ModelRequest, std::shared_ptr<agent::CancelToken>, OnDelta, Done done) override {
    done(Status("model_error", "fake"));
  }
  std::string Describe(const std::string& model) const override { return model + " (fake " + kind_ + ")"; }
  void Shutdown() override { rec_.shutdowns++; }

 private:
  Recorder& rec_;
  std::string kind_;
};

ModelRoutes::Factories FakeFactories(Recorder& rec) {
  return ModelRoutes::Factories{
      .echo =
          [&rec] {
            std::lock_guard<std::mutex> lock(rec.mu);
            rec.echo_made++;
            return std::make_unique<FakeAdapter>(rec, "echo");
          },
      .openai =
          [&rec](agent::OpenAiOptions options) {
            std::lock_guard<std::mutex> lock(rec.mu);
            rec.openai_made.push_back(options);
            return std::make_unique<FakeAdapter>(rec, "openai");
          },
  };
}

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

Config Parse(const std::string& yaml) {
  auto c = ParseConfigText("x.yml", yaml);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : Config{};
}

std::unique_ptr<ModelRoutes> MustBuild(const Config& config, const EnvLookup& env, Recorder& rec) {
  auto r = ModelRoutes::Build(config, env, FakeFactories(rec));
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

session::ModelRoute Route(std::string provider, std::string model,
                          std::optional<std::string> effort = std::nullopt) {
  return session::ModelRoute{std::move(provider), std::move(model), std::move(effort)};
}

const char* kLocal = R"(
providers:
  local:
    base_url: http://127.0.0.1:8080/v1
    api_key_env: LOCAL_KEY
    models:
      qwen3: {reasoning_efforts: [low, medium, high]}
      llama: ~
)";

TEST(ModelRoutes, WithoutConfigTheBuiltInsExistAndTheDefaultIsEcho) {
  Recorder rec;
  auto routes = MustBuild(Config{}, Env({}), rec);
  ASSERT_TRUE(routes);
  EXPECT_EQ(routes->default_route(), Route("echo", "echo"));
  EXPECT_EQ(routes->ProviderNames(), (std::vector<std::string>{"deepseek", "echo", "openai"}));
  EXPECT_TRUE(routes->Validate(Route("echo", "anything")).ok());
  EXPECT_TRUE(routes->Validate(Route("openai", "gpt-4o")).ok());
  EXPECT_TRUE(routes->Validate(Route("deepseek", "deepseek-chat")).ok());
  EXPECT_TRUE(routes->Validate(Route("deepseek", "deepseek-reasoner")).ok());
  EXPECT_EQ(rec.echo_made + static_cast<int>(rec.openai_made.size()), 0);  // nothing made until used
}

TEST(ModelRoutes, EndpointsSayWhereEachProviderIsAndWhichVariableHoldsItsKey) {
  Recorder rec;
  auto routes = MustBuild(Parse(kLocal), Env({}), rec);
  ASSERT_TRUE(routes);
  auto local = routes->EndpointOf("local");
  ASSERT_TRUE(local);
  EXPECT_FALSE(local->echo);
  EXPECT_EQ(local->base_url, "http://127.0.0.1:8080/v1");
  EXPECT_EQ(local->api_key_env, "LOCAL_KEY");
  EXPECT_FALSE(local->key_optional);
  EXPECT_EQ(routes->EndpointOf("deepseek")->base_url, "https://api.deepseek.com/v1");
  EXPECT_EQ(routes->EndpointOf("deepseek")->api_key_env, "DEEPSEEK_API_KEY");
  EXPECT_EQ(routes->EndpointOf("openai")->base_url, "https://api.openai.com/v1");
  EXPECT_FALSE(routes->EndpointOf("openai")->key_optional);
  EXPECT_TRUE(routes->EndpointOf("echo")->echo);
  EXPECT_FALSE(routes->EndpointOf("nope"));
  // A local OpenAI-compatible server needs no key.
  auto with_base = MustBuild(Config{}, Env({{"OPENAI_BASE_URL", "http://127.0.0.1:11434/v1"}}), rec);
  ASSERT_TRUE(with_base);
  EXPECT_EQ(with_base->EndpointOf("openai")->base_url, "http://127.0.0.1:11434/v1");
  EXPECT_TRUE(with_base->EndpointOf("openai")->key_optional);
}

TEST(ModelRoutes, ValidateRejectsUnknownProvidersAndModels) {
  Recorder rec;
  auto routes = MustBuild(Parse(kLocal), Env({}), rec);
  ASSERT_TRUE(routes);
  Status s = routes->Validate(Route("anthropic", "claude"));
  EXPECT_EQ(s.code(), "unknown_provider");
  EXPECT_EQ(s.message(), "unknown provider `anthropic` (known: deepseek, echo, local, openai)");

  s = routes->Validate(Route("deepseek", "deepseek-coder"));
  EXPECT_EQ(s.code(), "unknown_model");
  EXPECT_EQ(
      s.message(),
      "provider `deepseek` has no model `deepseek-coder` (its models: deepseek-chat, deepseek-reasoner)");

  s = routes->Validate(Route("local", "mistral"));
  EXPECT_EQ(s.code(), "unknown_model");
  EXPECT_EQ(s.message(), "provider `local` has no model `mistral` (its models: llama, qwen3)");
  EXPECT_TRUE(routes->Validate(Route("local", "llama")).ok());

  EXPECT_EQ(routes->Validate(Route("openai", "")).code(), "unknown_model");
}

TEST(ModelRoutes, ValidateChecksTheReasoningEffortAgainstTheModel) {
  Recorder rec;
  auto routes = MustBuild(Parse(kLocal), Env({}), rec);
  ASSERT_TRUE(routes);
  EXPECT_EQ(routes->ReasoningEfforts("local", "qwen3"), (std::vector<std::string>{"low", "medium", "high"}));
  EXPECT_TRUE(routes->ReasoningEfforts("local", "llama").empty());
  EXPECT_TRUE(routes->ReasoningEfforts("deepseek", "deepseek-reasoner").empty());
  EXPECT_TRUE(routes->ReasoningEfforts("openai", "o3").empty());
  EXPECT_TRUE(routes->ReasoningEfforts("nope", "x").empty());

  EXPECT_TRUE(routes->Validate(Route("local", "qwen3", "medium")).ok());
  EXPECT_TRUE(routes->Validate(Route("local", "qwen3")).ok());  // no effort is always fine

  Status s = routes->Validate(Route("local", "qwen3", "max"));
  EXPECT_EQ(s.code(), "invalid_reasoning_effort");
  EXPECT_EQ(s.message(), "reasoning effort \"max\" is not one of low, medium, high for `local/qwen3`");

  s = routes->Validate(Route("local", "llama", "low"));
  EXPECT_EQ(s.code(), "invalid_reasoning_effort");
  EXPECT_EQ(s.message(), "`local/llama` takes no reasoning effort (got \"low\")");
  EXPECT_EQ(routes->Validate(Route("deepseek", "deepseek-reasoner", "high")).code(),
            "invalid_reasoning_effort");
  EXPECT_EQ(routes->Validate(Route("openai", "o3", "high")).code(), "invalid_reasoning_effort");
}

TEST(ModelRoutes, TheDefaultRouteComesFromDshModelThenTheConfigThenEcho) {
  Recorder rec;
  Config config = Parse(std::string(kLocal) + "model: local/llama\n");
  auto routes = MustBuild(config, Env({}), rec);
  ASSERT_TRUE(routes);
  EXPECT_EQ(routes->default_route(), Route("local", "llama"));

  routes = MustBuild(config, Env({{"DSH_MODEL", "deepseek/deepseek-chat"}}), rec);
  ASSERT_TRUE(routes);
  EXPECT_EQ(routes->default_route(), Route("deepseek", "deepseek-chat"));

  routes = MustBuild(config, Env({{"DSH_MODEL", ""}}), rec);  // empty = unset
  ASSERT_TRUE(routes);
  EXPECT_EQ(routes->default_route(), Route("local", "llama"));

  // The model part may itself hold slashes (Hugging Face names).
  routes = MustBuild(Config{}, Env({{"DSH_MODEL", "openai/meta-llama/Llama-3-8B"}}), rec);
  ASSERT_TRUE(routes);
  EXPECT_EQ(routes->default_route(), Route("openai", "meta-llama/Llama-3-8B"));
}

TEST(ModelRoutes, ABadDshModelFailsTheBuildNamingIt) {
  struct Case {
    const char* value;
    const char* expected;
  } cases[] = {
      {"deepseek", "DSH_MODEL must be provider/model, say deepseek/deepseek-chat (got \"deepseek\")"},
      {"/chat", "DSH_MODEL must be provider/model"},
      {"echo/", "DSH_MODEL must be provider/model"},
      {"anthropic/claude", "DSH_MODEL \"anthropic/claude\": unknown provider `anthropic`"},
      {"deepseek/gpt-4o", "DSH_MODEL \"deepseek/gpt-4o\": provider `deepseek` has no model `gpt-4o`"},
  };
  for (const auto& c : cases) {
    Recorder rec;
    auto r = ModelRoutes::Build(Config{}, Env({{"DSH_MODEL", c.value}}), FakeFactories(rec));
    ASSERT_FALSE(r.ok()) << c.value;
    EXPECT_EQ(r.status().code(), "invalid_config");
    EXPECT_EQ(r.status().message().rfind(c.expected, 0), 0u) << r.status().message();
  }
}

TEST(ModelRoutes, AConfiguredModelNamingAnUnknownProviderFailsTheBuild) {
  Recorder rec;
  auto r = ModelRoutes::Build(Parse("model: local/qwen3\n"), Env({}), FakeFactories(rec));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), "invalid_config");
  EXPECT_EQ(r.status().message().rfind("`model` \"local/qwen3\": unknown provider `local`", 0), 0u)
      << r.status().message();
  // DSH_MODEL wins, so a bad `model` is not even looked at then.
  EXPECT_TRUE(
      ModelRoutes::Build(Parse("model: local/qwen3\n"), Env({{"DSH_MODEL", "echo/echo"}}), FakeFactories(rec))
          .ok());
}

TEST(ModelRoutes, EchoAdapterIsMadeOnceAndOwned) {
  Recorder rec;
  auto routes = MustBuild(Config{}, Env({}), rec);
  ASSERT_TRUE(routes);
  auto a = routes->AdapterFor("echo");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto b = routes->AdapterFor("echo");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(rec.echo_made, 1);
  EXPECT_TRUE(rec.openai_made.empty());
}

TEST(ModelRoutes, BuiltInOpenAiNeedsItsKeyUnlessABaseUrlIsSet) {
  Recorder rec;
  auto routes = MustBuild(Config{}, Env({}), rec);
  ASSERT_TRUE(routes);
  auto a = routes->AdapterFor("openai");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), "model_unavailable");
  EXPECT_EQ(a.status().message(), "provider `openai` needs the environment variable OPENAI_API_KEY");
  EXPECT_TRUE(rec.openai_made.empty());

  routes = MustBuild(Config{}, Env({{"OPENAI_API_KEY", ""}}), rec);  // empty = missing
  ASSERT_TRUE(routes);
  EXPECT_EQ(routes->AdapterFor("openai").status().code(), "model_unavailable");

  routes = MustBuild(Config{}, Env({{"OPENAI_API_KEY", "sk-1"}}), rec);
  ASSERT_TRUE(routes);
  ASSERT_TRUE(routes->AdapterFor("openai").ok());
  ASSERT_EQ(rec.openai_made.size(), 1u);
  EXPECT_EQ(rec.openai_made[0].base_url, "https://api.openai.com/v1");
  EXPECT_EQ(rec.openai_made[0].api_key, "sk-1");

  // A local server: no key needed, but one is sent when given.
  routes = MustBuild(Config{}, Env({{"OPENAI_BASE_URL", "http://127.0.0.1:11434/v1"}}), rec);
  ASSERT_TRUE(routes);
  ASSERT_TRUE(routes->AdapterFor("openai").ok());
  ASSERT_EQ(rec.openai_made.size(), 2u);
  EXPECT_EQ(rec.openai_made[1].base_url, "http://127.0.0.1:11434/v1");
  EXPECT_EQ(rec.openai_made[1].api_key, "");

  routes = MustBuild(Config{}, Env({{"OPENAI_BASE_URL", "http://h/v1"}, {"OPENAI_API_KEY", "k"}}), rec);
  ASSERT_TRUE(routes);
  ASSERT_TRUE(routes->AdapterFor("openai").ok());
  ASSERT_EQ(rec.openai_made.size(), 3u);
  EXPECT_EQ(rec.openai_made[2].api_key, "k");
}

TEST(ModelRoutes, ABadOpenAiBaseUrlFailsTheBuild) {
  Recorder rec;
  auto r = ModelRoutes::Build(Config{}, Env({{"OPENAI_BASE_URL", "localhost:8080"}}), FakeFactories(rec));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), "invalid_config");
  EXPECT_NE(r.status().message().find("OPENAI_BASE_URL"), std::string::npos);
}

TEST(ModelRoutes, DeepSeekUsesItsOwnUrlAndKey) {
  Recorder rec;
  auto routes = MustBuild(Config{}, Env({{"OPENAI_API_KEY", "wrong"}}), rec);
  ASSERT_TRUE(routes);
  auto a = routes->AdapterFor("deepseek");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), "model_unavailable");
  EXPECT_EQ(a.status().message(), "provider `deepseek` needs the environment variable DEEPSEEK_API_KEY");

  routes = MustBuild(Config{}, Env({{"DEEPSEEK_API_KEY", "ds-1"}, {"OPENAI_BASE_URL", "http://h/v1"}}), rec);
  ASSERT_TRUE(routes);
  ASSERT_TRUE(routes->AdapterFor("deepseek").ok());
  ASSERT_EQ(rec.openai_made.size(), 1u);
  EXPECT_EQ(rec.openai_made[0].base_url, "https://api.deepseek.com/v1");
  EXPECT_EQ(rec.openai_made[0].api_key, "ds-1");
}

TEST(ModelRoutes, DeclaredProvidersUseTheirUrlAndKeyAndReplaceBuiltIns) {
  Recorder rec;
  Config config = Parse(std::string(kLocal) +
                        "  deepseek:\n    type: echo\n"
                        "  openai:\n    base_url: https://proxy.example/v1\n");
  auto routes = MustBuild(config, Env({}), rec);
  ASSERT_TRUE(routes);

  auto a = routes->AdapterFor("local");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), "model_unavailable");
  EXPECT_EQ(a.status().message(), "provider `local` needs the environment variable LOCAL_KEY");

  // The declared deepseek is an echo provider of any model now.
  ASSERT_TRUE(routes->AdapterFor("deepseek").ok());
  EXPECT_EQ(rec.echo_made, 1);
  EXPECT_TRUE(routes->Validate(Route("deepseek", "whatever")).ok());

  // The declared openai has no api_key_env, so it needs no key.
  ASSERT_TRUE(routes->AdapterFor("openai").ok());
  ASSERT_EQ(rec.openai_made.size(), 1u);
  EXPECT_EQ(rec.openai_made[0].base_url, "https://proxy.example/v1");
  EXPECT_EQ(rec.openai_made[0].api_key, "");

  routes = MustBuild(config, Env({{"LOCAL_KEY", "lk"}}), rec);
  ASSERT_TRUE(routes);
  ASSERT_TRUE(routes->AdapterFor("local").ok());
  ASSERT_EQ(rec.openai_made.size(), 2u);
  EXPECT_EQ(rec.openai_made[1].base_url, "http://127.0.0.1:8080/v1");
  EXPECT_EQ(rec.openai_made[1].api_key, "lk");
}

TEST(ModelRoutes, AnUnknownProviderHasNoAdapter) {
  Recorder rec;
  auto routes = MustBuild(Config{}, Env({}), rec);
  ASSERT_TRUE(routes);
  auto a = routes->AdapterFor("nope");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), "unknown_provider");
}

TEST(ModelRoutes, DescribeSaysWhenItIsTheEchoModel) {
  Recorder rec;
  auto routes = MustBuild(Config{}, Env({}), rec);
  ASSERT_TRUE(routes);
  EXPECT_EQ(routes->Describe(Route("echo", "echo")), "echo/echo — echo (fake echo)");
  EXPECT_EQ(routes->Describe(Route("openai", "gpt-4o", "high")), "openai/gpt-4o");
  EXPECT_TRUE(rec.openai_made.empty());  // describing needs no adapter
}

TEST(ModelRoutes, ShutdownStopsTheCreatedAdaptersAndRefusesNewOnes) {
  Recorder rec;
  auto routes = MustBuild(Config{}, Env({{"OPENAI_API_KEY", "k"}}), rec);
  ASSERT_TRUE(routes);
  ASSERT_TRUE(routes->AdapterFor("echo").ok());
  ASSERT_TRUE(routes->AdapterFor("openai").ok());
  routes->Shutdown();
  EXPECT_EQ(rec.shutdowns.load(), 2);
  auto a = routes->AdapterFor("echo");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), "shutting_down");
}

TEST(ModelRoutes, DestroyingShutsTheAdaptersDown) {
  Recorder rec;
  {
    auto routes = MustBuild(Config{}, Env({}), rec);
    ASSERT_TRUE(routes);
    ASSERT_TRUE(routes->AdapterFor("echo").ok());
  }
  EXPECT_EQ(rec.shutdowns.load(), 1);
}

TEST(ModelRoutes, ConcurrentFirstUsesMakeOneAdapter) {
  Recorder rec;
  auto routes = MustBuild(Config{}, Env({{"OPENAI_API_KEY", "k"}}), rec);
  ASSERT_TRUE(routes);
  constexpr int kThreads = 8;
  std::vector<agent::ModelAdapter*> got(kThreads, nullptr);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      auto a = routes->AdapterFor("openai");
      if (a.ok()) got[i] = *a;
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_NE(got[0], nullptr);
  for (auto* a : got) EXPECT_EQ(a, got[0]);
  EXPECT_EQ(rec.openai_made.size(), 1u);
}

SavedProviders SavedLocal(std::string base_url, std::optional<std::string> key = std::nullopt,
                          std::string model = "") {
  SavedProviders saved;
  saved.providers.push_back(Config::Provider{.name = "mine", .base_url = std::move(base_url), .models = {{"m1", {}}}});
  if (key) saved.keys["mine"] = *key;
  saved.model = std::move(model);
  return saved;
}

TEST(ModelRoutes, ASavedProviderIsAddedAndASavedDefaultRouteWinsOverTheConfigButNotDshModel) {
  Recorder rec;
  Config config = Parse(std::string(kLocal) + "model: local/llama\n");
  auto routes = ModelRoutes::Build(config, Env({}), FakeFactories(rec), SavedLocal("http://h:1/v1", "k", "mine/m1"));
  ASSERT_TRUE(routes.ok()) << routes.status().ToString();
  EXPECT_EQ((*routes)->default_route(), Route("mine", "m1"));
  EXPECT_EQ((*routes)->default_route_source(), "profile");
  auto endpoint = (*routes)->EndpointOf("mine");
  ASSERT_TRUE(endpoint);
  EXPECT_EQ(endpoint->api_key, "k");
  EXPECT_EQ(endpoint->key_source, "profile");

  auto env_wins = ModelRoutes::Build(config, Env({{"DSH_MODEL", "local/qwen3"}}), FakeFactories(rec),
                                     SavedLocal("http://h:1/v1", "k", "mine/m1"));
  ASSERT_TRUE(env_wins.ok());
  EXPECT_EQ((*env_wins)->default_route(), Route("local", "qwen3"));
  EXPECT_EQ((*env_wins)->default_route_source(), "environment");
}

TEST(ModelRoutes, ASavedProviderReplacingABuiltInKeepsItsVariableWhichWinsOverTheSavedKey) {
  Recorder rec;
  SavedProviders saved;
  saved.providers.push_back(Config::Provider{.name = "deepseek", .base_url = "http://proxy:1/v1"});
  saved.keys["deepseek"] = "saved";
  auto routes = ModelRoutes::Build(Config{}, Env({{"DEEPSEEK_API_KEY", "env"}}), FakeFactories(rec), saved);
  ASSERT_TRUE(routes.ok());
  auto endpoint = (*routes)->EndpointOf("deepseek");
  EXPECT_EQ(endpoint->base_url, "http://proxy:1/v1");
  EXPECT_EQ(endpoint->api_key, "env");
  EXPECT_EQ(endpoint->key_source, "environment");
  ASSERT_TRUE((*routes)->AdapterFor("deepseek").ok());
  EXPECT_EQ(rec.openai_made.back().api_key, "env");
  // A saved provider cannot replace the offline echo model.
  saved.providers[0].name = "echo";
  EXPECT_EQ((*routes)->CheckSaved(saved).code(), "conflict");
}

TEST(ModelRoutes, ApplySavedRetiresTheAdapterOfAChangedProviderButKeepsItAlive) {
  Recorder rec;
  auto routes = ModelRoutes::Build(Config{}, Env({}), FakeFactories(rec), SavedLocal("http://a:1/v1", "k1"));
  ASSERT_TRUE(routes.ok());
  auto first = (*routes)->AdapterFor("mine");
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE((*routes)->AdapterFor("echo").ok());
  ASSERT_TRUE((*routes)->ApplySaved(SavedLocal("http://a:1/v1", "k2")).ok());
  auto second = (*routes)->AdapterFor("mine");
  ASSERT_TRUE(second.ok());
  EXPECT_NE(*first, *second);
  EXPECT_EQ(rec.openai_made.back().api_key, "k2");
  EXPECT_EQ(rec.echo_made, 1);  // unchanged providers keep theirs
  (*first)->Describe("m1");     // still alive
  EXPECT_EQ(rec.shutdowns.load(), 0);
  (*routes)->Shutdown();
  EXPECT_EQ(rec.shutdowns.load(), 3);  // the retired one too
}

TEST(ModelRoutes, ApplySavedRefusesAChangeThatBreaksTheDefaultRouteAndChangesNothing) {
  Recorder rec;
  auto routes = ModelRoutes::Build(Config{}, Env({}), FakeFactories(rec), SavedLocal("http://a:1/v1", {}, "mine/m1"));
  ASSERT_TRUE(routes.ok());
  SavedProviders gone;  // the provider goes, the saved default stays
  gone.model = "mine/m1";
  Status st = (*routes)->ApplySaved(gone);
  EXPECT_EQ(st.code(), "conflict");
  EXPECT_EQ(st.message(), "the saved default route \"mine/m1\": unknown provider `mine` (known: deepseek, echo, openai)");
  EXPECT_EQ((*routes)->ApplySaved(SavedLocal("http://b:1/v1", {}, "mine/m9")).code(), "conflict");
  EXPECT_EQ((*routes)->default_route(), Route("mine", "m1"));
  EXPECT_EQ((*routes)->EndpointOf("mine")->base_url, "http://a:1/v1");
  ASSERT_TRUE((*routes)->ApplySaved(SavedProviders{}).ok());  // nothing saved: echo/echo again
  EXPECT_EQ((*routes)->default_route(), Route("echo", "echo"));
  EXPECT_FALSE((*routes)->EndpointOf("mine"));
}

}  // namespace
}  // namespace dsh::host
