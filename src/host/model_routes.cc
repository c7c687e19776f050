#include "host/model_routes.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <utility>

namespace dsh::host {
namespace {

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

bool IsHttpUrl(const std::string& s) {
  for (const char* scheme : {"http://", "https://"}) {
    std::string_view sv(scheme);
    if (s.size() > sv.size() && s.compare(0, sv.size(), sv) == 0) return true;
  }
  return false;
}

}  // namespace

EnvLookup ProcessEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    if (const char* v = std::getenv(name.c_str())) return std::string(v);
    return std::nullopt;
  };
}

Result<std::unique_ptr<ModelRoutes>> ModelRoutes::Build(const Config& config, const EnvLookup& env,
                                                        Factories factories, const SavedProviders& saved) {
  auto get = [&](const std::string& name) -> std::optional<std::string> {
    std::optional<std::string> v = env(name);
    if (v && v->empty()) return std::nullopt;  // set but empty counts as unset
    return v;
  };
  std::unique_ptr<ModelRoutes> routes(new ModelRoutes(std::move(factories)));
  auto& providers = routes->base_;

  providers["echo"] = Provider{.name = "echo", .echo = true, .source = "built-in"};
  Provider openai{.name = "openai", .base_url = "https://api.openai.com/v1", .api_key_env = "OPENAI_API_KEY",
                  .source = "built-in"};
  if (auto base = get("OPENAI_BASE_URL")) {
    if (!IsHttpUrl(*base)) {
      return Status(
          codes::kInvalidConfig,
          "OPENAI_BASE_URL must be a URL starting with http:// or https:// (got \"" + *base + "\")");
    }
    openai.base_url = *base;
    openai.key_optional = true;
  }
  providers["openai"] = openai;
  providers["deepseek"] = Provider{.name = "deepseek",
                                   .base_url = "https://api.deepseek.com/v1",
                                   .api_key_env = "DEEPSEEK_API_KEY",
                                   .models = {{"deepseek-chat", {}}, {"deepseek-reasoner", {}}},
                                   .source = "built-in"};
  for (const auto& p : config.providers) {
    providers[p.name] = Provider{.name = p.name,
                                 .echo = p.type == "echo",
                                 .base_url = p.base_url,
                                 .api_key_env = p.api_key_env,
                                 .models = p.models,
                                 .source = "config"};
  }
  for (auto& [_, p] : providers) {
    if (!p.api_key_env.empty()) p.env_key = get(p.api_key_env);
  }
  routes->dsh_model_ = get("DSH_MODEL");
  routes->config_model_ = config.model;

  DSH_ASSIGN_OR_RETURN(Resolved resolved, routes->Resolve(saved, codes::kInvalidConfig));
  routes->providers_ = std::move(resolved.providers);
  routes->default_route_ = std::move(resolved.default_route);
  routes->default_source_ = std::move(resolved.default_source);
  return routes;
}

Result<ModelRoutes::Resolved> ModelRoutes::Resolve(const SavedProviders& saved, const char* error_code) const {
  Resolved out;
  out.providers = base_;
  for (const auto& p : saved.providers) {
    Provider n{.name = p.name, .base_url = p.base_url, .key_optional = true, .models = p.models, .source = "profile"};
    if (auto it = base_.find(p.name); it != base_.end()) {
      if (it->second.echo) {
        return Status(error_code, "provider `" + p.name + "` is the offline echo model; a saved provider cannot replace it");
      }
      n.api_key_env = it->second.api_key_env;
      n.env_key = it->second.env_key;
    }
    if (auto key = saved.keys.find(p.name); key != saved.keys.end() && !key->second.empty()) n.saved_key = key->second;
    out.providers[p.name] = std::move(n);
  }
  if (!saved.model.empty()) {
    DSH_ASSIGN_OR_RETURN(out.default_route, ParseRoute(out.providers, error_code, "the saved default route", saved.model));
    out.default_source = "profile";
  }
  if (dsh_model_) {
    DSH_ASSIGN_OR_RETURN(out.default_route, ParseRoute(out.providers, error_code, "DSH_MODEL", *dsh_model_));
    out.default_source = "environment";
  } else if (saved.model.empty() && !config_model_.empty()) {
    DSH_ASSIGN_OR_RETURN(out.default_route, ParseRoute(out.providers, error_code, "`model`", config_model_));
    out.default_source = "config";
  } else if (saved.model.empty()) {
    out.default_route = session::ModelRoute{"echo", "echo", std::nullopt};
    out.default_source = "built-in";
  }
  return out;
}

Result<session::ModelRoute> ModelRoutes::ParseRoute(const ProviderMap& providers, const char* error_code,
                                                    const std::string& what, const std::string& text) {
  size_t slash = text.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == text.size()) {
    return Status(error_code,
                  what + " must be provider/model, say deepseek/deepseek-chat (got \"" + text + "\")");
  }
  session::ModelRoute route{text.substr(0, slash), text.substr(slash + 1), std::nullopt};
  if (Status s = ValidateIn(providers, route); !s.ok()) {
    return Status(error_code, what + " \"" + text + "\": " + s.message());
  }
  return route;
}

Status ModelRoutes::CheckSaved(const SavedProviders& saved) const { return Resolve(saved, codes::kConflict).status(); }

Status ModelRoutes::ApplySaved(const SavedProviders& saved) {
  DSH_ASSIGN_OR_RETURN(Resolved resolved, Resolve(saved, codes::kConflict));
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = adapters_.begin(); it != adapters_.end();) {
    const Provider* before = Find(providers_, it->first);
    const Provider* after = Find(resolved.providers, it->first);
    bool same = before != nullptr && after != nullptr && before->echo == after->echo &&
                before->base_url == after->base_url && before->key() == after->key();
    if (same) {
      ++it;
      continue;
    }
    retired_.push_back(std::move(it->second));
    it = adapters_.erase(it);
  }
  providers_ = std::move(resolved.providers);
  default_route_ = std::move(resolved.default_route);
  default_source_ = std::move(resolved.default_source);
  return Status::Ok();
}

ModelRoutes::~ModelRoutes() { Shutdown(); }

session::ModelRoute ModelRoutes::default_route() const {
  std::lock_guard<std::mutex> lock(mu_);
  return default_route_;
}

std::string ModelRoutes::default_route_source() const {
  std::lock_guard<std::mutex> lock(mu_);
  return default_source_;
}

const ModelRoutes::Provider* ModelRoutes::Find(const ProviderMap& providers, const std::string& name) {
  auto it = providers.find(name);
  return it == providers.end() ? nullptr : &it->second;
}

std::optional<ModelRoutes::Endpoint> ModelRoutes::EndpointOf(const std::string& provider) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Provider* p = Find(providers_, provider);
  if (p == nullptr) return std::nullopt;
  return Endpoint{p->echo, p->base_url, p->api_key_env, p->key_optional, p->key(),
                  p->env_key ? "environment" : p->saved_key ? "profile" : ""};
}

std::vector<std::string> ModelRoutes::ProviderNames() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> names;
  for (const auto& [name, _] : providers_) names.push_back(name);
  return names;
}

std::vector<ModelRoutes::ProviderChoice> ModelRoutes::Choices() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ProviderChoice> out;
  for (const auto& [name, p] : providers_) out.push_back({name, p.models, p.usable(), p.api_key_env});
  return out;
}

std::vector<ModelRoutes::ProviderInfo> ModelRoutes::Providers() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ProviderInfo> out;
  for (const auto& [name, p] : providers_) {
    out.push_back(ProviderInfo{.name = name,
                               .kind = p.echo ? "echo" : "openai",
                               .base_url = p.echo ? "" : p.base_url,
                               .models = p.models,
                               .api_key_env = p.api_key_env,
                               .key_source = p.env_key ? "environment" : p.saved_key ? "profile" : "",
                               .source = p.source,
                               .available = p.usable()});
  }
  return out;
}

Status ModelRoutes::Validate(const session::ModelRoute& route) const {
  std::lock_guard<std::mutex> lock(mu_);
  return ValidateIn(providers_, route);
}

Status ModelRoutes::ValidateIn(const ProviderMap& providers, const session::ModelRoute& route) {
  const Provider* p = Find(providers, route.provider);
  if (!p) {
    std::vector<std::string> names;
    for (const auto& [name, _] : providers) names.push_back(name);
    return Status(codes::kUnknownProvider,
                  "unknown provider `" + route.provider + "` (known: " + JoinNames(names) + ")");
  }
  if (route.model.empty())
    return Status(codes::kUnknownModel, "no model given for provider `" + route.provider + "`");
  const Config::ProviderModel* model = nullptr;
  if (!p->models.empty()) {
    auto it = std::find_if(p->models.begin(), p->models.end(),
                           [&](const Config::ProviderModel& m) { return m.name == route.model; });
    if (it == p->models.end()) {
      std::vector<std::string> names;
      for (const auto& m : p->models) names.push_back(m.name);
      return Status(codes::kUnknownModel, "provider `" + route.provider + "` has no model `" + route.model +
                                       "` (its models: " + JoinNames(names) + ")");
    }
    model = &*it;
  }
  if (route.reasoning_effort) {
    std::vector<std::string> allowed = model ? model->reasoning_efforts : std::vector<std::string>{};
    const std::string name = route.provider + "/" + route.model;
    if (allowed.empty()) {
      return Status(codes::kInvalidReasoningEffort,
                    "`" + name + "` takes no reasoning effort (got \"" + *route.reasoning_effort + "\")");
    }
    if (std::find(allowed.begin(), allowed.end(), *route.reasoning_effort) == allowed.end()) {
      return Status(codes::kInvalidReasoningEffort, "reasoning effort \"" + *route.reasoning_effort +
                                                 "\" is not one of " + JoinNames(allowed) + " for `" + name +
                                                 "`");
    }
  }
  return Status::Ok();
}

std::vector<std::string> ModelRoutes::ReasoningEfforts(const std::string& provider,
                                                       const std::string& model) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Provider* p = Find(providers_, provider);
  if (!p) return {};
  for (const auto& m : p->models) {
    if (m.name == model) return m.reasoning_efforts;
  }
  return {};
}

Result<agent::ModelAdapter*> ModelRoutes::AdapterFor(const std::string& provider) {
  std::lock_guard<std::mutex> lock(mu_);
  const Provider* p = Find(providers_, provider);
  if (!p) {
    std::vector<std::string> names;
    for (const auto& [name, _] : providers_) names.push_back(name);
    return Status(codes::kUnknownProvider, "unknown provider `" + provider + "` (known: " + JoinNames(names) + ")");
  }
  if (shut_down_) return Status(codes::kShuttingDown, "the host is shutting down");
  if (auto it = adapters_.find(provider); it != adapters_.end()) return it->second.get();

  std::unique_ptr<agent::ModelAdapter> adapter;
  if (p->echo) {
    adapter = factories_.echo();
  } else {
    if (!p->usable()) {
      return Status(codes::kModelUnavailable,
                    "provider `" + provider + "` needs the environment variable " + p->api_key_env);
    }
    agent::OpenAiOptions options;
    options.base_url = p->base_url;
    options.api_key = p->key().value_or("");
    adapter = factories_.openai(std::move(options));
  }
  if (!adapter) return Internal("the model factory made no adapter for provider `" + provider + "`");
  agent::ModelAdapter* raw = adapter.get();
  adapters_.emplace(provider, std::move(adapter));
  return raw;
}

std::string ModelRoutes::Describe(const session::ModelRoute& route) {
  std::string text = route.provider + "/" + route.model;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const Provider* p = Find(providers_, route.provider);
    if (!p || !p->echo) return text;
  }
  auto adapter = AdapterFor(route.provider);
  if (!adapter.ok()) return text;
  return text + " — " + (*adapter)->Describe(route.model);
}

void ModelRoutes::Shutdown() {
  std::vector<agent::ModelAdapter*> created;
  {
    std::lock_guard<std::mutex> lock(mu_);
    shut_down_ = true;
    for (auto& [_, a] : adapters_) created.push_back(a.get());
    for (auto& a : retired_) created.push_back(a.get());
  }
  // Outside the lock: an adapter's Shutdown joins threads whose callbacks may
  // call AdapterFor. The adapters stay owned here, so the pointers stay valid.
  for (auto* a : created) a->Shutdown();
}

}  // namespace dsh::host
