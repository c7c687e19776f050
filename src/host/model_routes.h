#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/model.h"
#include "base/status.h"
#include "host/config.h"
#include "session/session_header.h"

namespace dsh::host {

// Reads one environment variable; nullopt when it is not set.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
// The process environment (getenv). Not safe against a concurrent setenv.
EnvLookup ProcessEnv();

// The model providers of a host: the built-ins plus those declared in
// dsh.yml, the default route, and one adapter per provider.
//
// Built-in providers (a declared provider of the same name replaces one):
//   echo      type echo, any model name.
//   openai    base_url $OPENAI_BASE_URL or https://api.openai.com/v1, key
//             $OPENAI_API_KEY (optional when OPENAI_BASE_URL is set: local
//             servers need none), any model name.
//   deepseek  https://api.deepseek.com/v1, key $DEEPSEEK_API_KEY, models
//             deepseek-chat and deepseek-reasoner (no reasoning efforts).
// The environment is read once, by Build.
//
// Thread-safe: everything but AdapterFor, Describe and Shutdown reads state
// fixed by Build; those three lock `mu_`.
class ModelRoutes final : public agent::ModelRouter {
 public:
  // How adapters are made; tests inject fakes.
  struct Factories {
    std::function<std::unique_ptr<agent::ModelAdapter>()> echo;
    std::function<std::unique_ptr<agent::ModelAdapter>(agent::OpenAiOptions)> openai;
  };
  // MakeEchoModel and MakeOpenAiModel (default_model_factories.cc, so a
  // binary that never calls this does not need the adapters linked in).
  static Factories DefaultFactories();

  // Resolves the providers and the default route: $DSH_MODEL
  // ("provider/model", empty = unset), else the config's `model`, else
  // echo/echo. Errors: `invalid_config` when DSH_MODEL or `model` is
  // malformed or names an unknown provider or model (the message names which),
  // or when OPENAI_BASE_URL is not an http(s) URL.
  static Result<std::unique_ptr<ModelRoutes>> Build(const Config& config, const EnvLookup& env,
                                                    Factories factories);

  // Shuts the created adapters down.
  ~ModelRoutes() override;
  ModelRoutes(const ModelRoutes&) = delete;
  ModelRoutes& operator=(const ModelRoutes&) = delete;

  // The route of a session created without one (no reasoning effort).
  const session::ModelRoute& default_route() const { return default_route_; }

  // Whether `route` can be used, without touching the network. Errors:
  // `unknown_provider`; `unknown_model` (empty, or the provider lists its
  // models and this is not one); `invalid_reasoning_effort` (an effort for a
  // model that takes none, or one not in its list; the message lists the
  // allowed ones).
  Status Validate(const session::ModelRoute& route) const;

  // The efforts `provider/model` accepts, in declared order; empty when it
  // takes none or is unknown.
  std::vector<std::string> ReasoningEfforts(const std::string& provider, const std::string& model) const;

  // The provider names, sorted.
  std::vector<std::string> ProviderNames() const;

  // Where a provider is and which variable holds its key, for checks that
  // contact it (`dsh doctor`); nullopt for an unknown provider.
  struct Endpoint {
    bool echo = false;         // the offline echo model: nothing to reach
    std::string base_url;      // OpenAI-compatible API
    std::string api_key_env;   // "" = no key
    bool key_optional = false;  // built-in openai with OPENAI_BASE_URL
  };
  std::optional<Endpoint> EndpointOf(const std::string& provider) const;

  // What a person may choose from (GET /api/host): each provider, sorted by
  // name, with its declared models (empty = any model name) and whether it
  // can be used now (its API key variable is set, or it needs none).
  struct ProviderChoice {
    std::string name;
    std::vector<Config::ProviderModel> models;
    bool available = true;
  };
  std::vector<ProviderChoice> Choices() const;

  // The provider's adapter, created on first use and owned by this object
  // (valid until it is destroyed). Errors: `unknown_provider`;
  // `model_unavailable` when the provider's API key variable is unset or
  // empty (nothing is created then, so a later call tries again);
  // `shutting_down` after Shutdown.
  Result<agent::ModelAdapter*> AdapterFor(const std::string& provider) override;

  // "provider/model"; for an echo provider followed by the adapter's own
  // description, so people see it is the offline echo model.
  std::string Describe(const session::ModelRoute& route);

  // Shuts down every created adapter (calls in flight complete with
  // `cancelled`); later AdapterFor calls fail with `shutting_down`.
  // Idempotent. Must not be called from an adapter's worker thread.
  void Shutdown();

 private:
  struct Provider {
    std::string name;
    bool echo = false;  // else an OpenAI-compatible API
    std::string base_url;
    std::string api_key_env;                    // "" = no key
    std::optional<std::string> api_key;         // the variable's value, when set and not empty
    bool key_optional = false;                  // built-in openai with OPENAI_BASE_URL
    std::vector<Config::ProviderModel> models;  // empty = any model name
  };

  explicit ModelRoutes(Factories factories) : factories_(std::move(factories)) {}
  const Provider* Find(const std::string& name) const;
  // `what` names the source of the route in messages ("DSH_MODEL", "`model`").
  Result<session::ModelRoute> ParseDefaultRoute(const std::string& what, const std::string& text) const;

  const Factories factories_;
  std::map<std::string, Provider> providers_;  // fixed by Build
  session::ModelRoute default_route_;          // fixed by Build

  std::mutex mu_;
  std::map<std::string, std::unique_ptr<agent::ModelAdapter>> adapters_;  // GUARDED_BY(mu_)
  bool shut_down_ = false;                                                // GUARDED_BY(mu_)
};

}  // namespace dsh::host
