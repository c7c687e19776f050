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

// What the Settings page saved in the profile (ProviderSettings reads and
// writes it): providers that add to or replace the others by name, their
// API keys, and the default route.
struct SavedProviders {
  std::vector<Config::Provider> providers;  // type openai, in name order
  std::map<std::string, std::string> keys;  // provider name -> API key (saved providers only)
  std::string model;                        // "provider/model"; "" = none saved
};

// The model providers of a host: the built-ins, those declared in dsh.yml
// (and patches), and those saved from the Settings page; the default route;
// one adapter per provider.
//
// Built-in providers (a declared provider of the same name replaces one):
//   echo      type echo, any model name.
//   openai    base_url $OPENAI_BASE_URL or https://api.openai.com/v1, key
//             $OPENAI_API_KEY (optional when OPENAI_BASE_URL is set: local
//             servers need none), any model name.
//   deepseek  https://api.deepseek.com/v1, key $DEEPSEEK_API_KEY, models
//             deepseek-chat and deepseek-reasoner (no reasoning efforts).
// A saved provider replaces a built-in or declared one of its name (never
// an echo one) but keeps its key variable: a key from the environment wins
// over the saved key. A saved provider needs no key.
// The environment is read once, by Build.
//
// Thread-safe: every member function may be called from any thread. One
// mutex `mu_` guards the provider set, the default route and the adapters;
// ApplySaved replaces the first two at once, so a reader sees the set before
// or after a change, never a mix.
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
  // ("provider/model", empty = unset), else the saved default, else the
  // config's `model`, else echo/echo. Errors: `invalid_config` when the
  // route in effect is malformed or names an unknown provider or model (the
  // message names where it came from), or when OPENAI_BASE_URL is not an
  // http(s) URL.
  static Result<std::unique_ptr<ModelRoutes>> Build(const Config& config, const EnvLookup& env,
                                                    Factories factories, const SavedProviders& saved = {});

  // Shuts the created adapters down.
  ~ModelRoutes() override;
  ModelRoutes(const ModelRoutes&) = delete;
  ModelRoutes& operator=(const ModelRoutes&) = delete;

  // Whether `saved` could replace the saved layer: the route in effect and
  // the saved default (when set) must resolve. Errors: `conflict` naming
  // which route and why. Changes nothing.
  Status CheckSaved(const SavedProviders& saved) const;
  // Replaces the saved layer (after CheckSaved's checks; the same errors,
  // and then nothing changes). New sessions see the result at once. The
  // adapter of a provider whose URL or key changed, or that is gone, is
  // retired: calls in flight on it finish, the next call gets a new one.
  Status ApplySaved(const SavedProviders& saved);

  // The route of a session created without one (no reasoning effort).
  session::ModelRoute default_route() const;
  // Where the default route comes from: "environment" (DSH_MODEL),
  // "profile" (saved from the Settings page), "config" (`model`) or
  // "built-in" (echo/echo).
  std::string default_route_source() const;

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

  // Where a provider is and which key it uses, for checks that contact it
  // (`dsh doctor`, the Settings page's Test); nullopt for an unknown provider.
  struct Endpoint {
    bool echo = false;         // the offline echo model: nothing to reach
    std::string base_url;      // OpenAI-compatible API
    std::string api_key_env;   // "" = no key variable
    bool key_optional = false;  // built-in openai with OPENAI_BASE_URL, or a saved provider
    std::optional<std::string> api_key;  // the key in effect: the variable's value, else the saved key
    std::string key_source;              // "environment", "profile" or "" (no key)
  };
  std::optional<Endpoint> EndpointOf(const std::string& provider) const;

  // What a person may choose from (GET /api/host): each provider, sorted by
  // name, with its declared models (empty = any model name), whether it
  // can be used now (it has a key, or needs none) and its key variable.
  struct ProviderChoice {
    std::string name;
    std::vector<Config::ProviderModel> models;
    bool available = true;
    std::string api_key_env;  // "" = none
  };
  std::vector<ProviderChoice> Choices() const;

  // Every provider for the Settings page (GET /api/settings), sorted by
  // name. Never the key itself.
  struct ProviderInfo {
    std::string name;
    std::string kind;      // "openai" or "echo"
    std::string base_url;  // "" for echo
    std::vector<Config::ProviderModel> models;  // empty = any model name
    std::string api_key_env;                    // "" = none
    std::string key_source;                     // "environment", "profile" or "" (no key)
    std::string source;                         // "built-in", "config" or "profile"
    bool available = true;
  };
  std::vector<ProviderInfo> Providers() const;

  // The provider's adapter, created on first use and owned by this object
  // (valid until it is destroyed, even once retired). Errors:
  // `unknown_provider`; `model_unavailable` when the provider's API key
  // variable is unset or empty (nothing is created then, so a later call
  // tries again); `shutting_down` after Shutdown.
  Result<agent::ModelAdapter*> AdapterFor(const std::string& provider) override;

  // "provider/model"; for an echo provider followed by the adapter's own
  // description, so people see it is the offline echo model.
  std::string Describe(const session::ModelRoute& route);

  // Shuts down every created adapter, retired ones too (calls in flight
  // complete with `cancelled`); later AdapterFor calls fail with
  // `shutting_down`. Idempotent. Must not be called from an adapter's
  // worker thread.
  void Shutdown();

 private:
  struct Provider {
    std::string name;
    bool echo = false;  // else an OpenAI-compatible API
    std::string base_url;
    std::string api_key_env;                    // "" = no key
    std::optional<std::string> env_key;         // the variable's value, when set and not empty
    std::optional<std::string> saved_key;       // saved providers: the key saved in the profile
    bool key_optional = false;                  // built-in openai with OPENAI_BASE_URL, or saved
    std::vector<Config::ProviderModel> models;  // empty = any model name
    std::string source;                         // "built-in", "config" or "profile"

    const std::optional<std::string>& key() const { return env_key ? env_key : saved_key; }
    bool usable() const { return echo || api_key_env.empty() || key_optional || key().has_value(); }
  };
  using ProviderMap = std::map<std::string, Provider>;
  struct Resolved {
    ProviderMap providers;
    session::ModelRoute default_route;
    std::string default_source;
  };

  explicit ModelRoutes(Factories factories) : factories_(std::move(factories)) {}
  // The providers and default route with `saved` over the fixed layers.
  // `error_code`: the code of a route that does not resolve.
  Result<Resolved> Resolve(const SavedProviders& saved, const char* error_code) const;
  static const Provider* Find(const ProviderMap& providers, const std::string& name);
  static Status ValidateIn(const ProviderMap& providers, const session::ModelRoute& route);
  // `what` names the source of the route in messages ("DSH_MODEL", "`model`").
  static Result<session::ModelRoute> ParseRoute(const ProviderMap& providers, const char* error_code,
                                                const std::string& what, const std::string& text);

  const Factories factories_;
  // Fixed by Build: the built-in and declared providers (keys from the
  // environment), DSH_MODEL and the config's `model`.
  ProviderMap base_;
  std::optional<std::string> dsh_model_;
  std::string config_model_;

  mutable std::mutex mu_;
  ProviderMap providers_;                                                 // GUARDED_BY(mu_)
  session::ModelRoute default_route_;                                     // GUARDED_BY(mu_)
  std::string default_source_;                                            // GUARDED_BY(mu_)
  std::map<std::string, std::unique_ptr<agent::ModelAdapter>> adapters_;  // GUARDED_BY(mu_)
  std::vector<std::unique_ptr<agent::ModelAdapter>> retired_;             // GUARDED_BY(mu_)
  bool shut_down_ = false;                                                // GUARDED_BY(mu_)
};

}  // namespace dsh::host
