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
                                                        Factories factories) {
  auto get = [&](const std::string& name) -> std::optional<std::string> {
    std::optional<std::string> v = env(name);
    if (v && v->empty()) return std::nullopt;  // set but empty counts as unset
    return v;
  };
  std::unique_ptr<ModelRoutes> routes(new ModelRoutes(std::move(factories)));
  auto& providers = routes->providers_;

  providers["echo"] = Provider{.name = "echo", .echo = true};
  Provider openai{.name = "openai", .base_url = "https://api.openai.com/v1", .api_key_env = "OPENAI_API_KEY"};
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
                                   .models = {{"deepseek-chat", {}}, {"deepseek-reasoner", {}}}};
  for (const auto& p : config.providers) {
    providers[p.name] = Provider{.name = p.name,
                                 .echo = p.type == "echo",
                                 .base_url = p.base_url,
                                 .api_key_env = p.api_key_env,
                                 .models = p.models};
  }
  for (auto& [_, p] : providers) {
    if (!p.api_key_env.empty()) p.api_key = get(p.api_key_env);
  }

  session::ModelRoute route{"echo", "echo", std::nullopt};
  if (auto from_env = get("DSH_MODEL")) {
    DSH_ASSIGN_OR_RETURN(route, routes->ParseDefaultRoute("DSH_MODEL", *from_env));
  } else if (!config.model.empty()) {
    DSH_ASSIGN_OR_RETURN(route, routes->ParseDefaultRoute("`model`", config.model));
  }
  routes->default_route_ = std::move(route);
  return routes;
}

Result<session::ModelRoute> ModelRoutes::ParseDefaultRoute(const std::string& what,
                                                           const std::string& text) const {
  size_t slash = text.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == text.size()) {
    return Status(codes::kInvalidConfig,
                  what + " must be provider/model, say deepseek/deepseek-chat (got \"" + text + "\")");
  }
  session::ModelRoute route{text.substr(0, slash), text.substr(slash + 1), std::nullopt};
  if (Status s = Validate(route); !s.ok()) {
    return Status(codes::kInvalidConfig, what + " \"" + text + "\": " + s.message());
  }
  return route;
}

ModelRoutes::~ModelRoutes() { Shutdown(); }

const ModelRoutes::Provider* ModelRoutes::Find(const std::string& name) const {
  auto it = providers_.find(name);
  return it == providers_.end() ? nullptr : &it->second;
}

std::optional<ModelRoutes::Endpoint> ModelRoutes::EndpointOf(const std::string& provider) const {
  const Provider* p = Find(provider);
  if (p == nullptr) return std::nullopt;
  return Endpoint{p->echo, p->base_url, p->api_key_env, p->key_optional};
}

std::vector<std::string> ModelRoutes::ProviderNames() const {
  std::vector<std::string> names;
  for (const auto& [name, _] : providers_) names.push_back(name);
  return names;
}

std::vector<ModelRoutes::ProviderChoice> ModelRoutes::Choices() const {
  std::vector<ProviderChoice> out;
  for (const auto& [name, p] : providers_) {
    out.push_back({name, p.models, p.echo || p.api_key_env.empty() || p.api_key.has_value() || p.key_optional});
  }
  return out;
}

Status ModelRoutes::Validate(const session::ModelRoute& route) const {
  const Provider* p = Find(route.provider);
  if (!p) {
    return Status(codes::kUnknownProvider,
                  "unknown provider `" + route.provider + "` (known: " + JoinNames(ProviderNames()) + ")");
  }
  if (route.model.empty())
    return Status(codes::kUnknownModel, "no model given for provider `" + route.provider + "`");
  if (!p->models.empty()) {
    auto it = std::find_if(p->models.begin(), p->models.end(),
                           [&](const Config::ProviderModel& m) { return m.name == route.model; });
    if (it == p->models.end()) {
      std::vector<std::string> names;
      for (const auto& m : p->models) names.push_back(m.name);
      return Status(codes::kUnknownModel, "provider `" + route.provider + "` has no model `" + route.model +
                                       "` (its models: " + JoinNames(names) + ")");
    }
  }
  if (route.reasoning_effort) {
    std::vector<std::string> allowed = ReasoningEfforts(route.provider, route.model);
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
  const Provider* p = Find(provider);
  if (!p) return {};
  for (const auto& m : p->models) {
    if (m.name == model) return m.reasoning_efforts;
  }
  return {};
}

Result<agent::ModelAdapter*> ModelRoutes::AdapterFor(const std::string& provider) {
  const Provider* p = Find(provider);
  if (!p) {
    return Status(codes::kUnknownProvider,
                  "unknown provider `" + provider + "` (known: " + JoinNames(ProviderNames()) + ")");
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (shut_down_) return Status(codes::kShuttingDown, "the host is shutting down");
  if (auto it = adapters_.find(provider); it != adapters_.end()) return it->second.get();

  std::unique_ptr<agent::ModelAdapter> adapter;
  if (p->echo) {
    adapter = factories_.echo();
  } else {
    if (!p->api_key_env.empty() && !p->api_key && !p->key_optional) {
      return Status(codes::kModelUnavailable,
                    "provider `" + provider + "` needs the environment variable " + p->api_key_env);
    }
    agent::OpenAiOptions options;
    options.base_url = p->base_url;
    options.api_key = p->api_key.value_or("");
    adapter = factories_.openai(std::move(options));
  }
  if (!adapter) return Internal("the model factory made no adapter for provider `" + provider + "`");
  agent::ModelAdapter* raw = adapter.get();
  adapters_.emplace(provider, std::move(adapter));
  return raw;
}

std::string ModelRoutes::Describe(const session::ModelRoute& route) {
  std::string text = route.provider + "/" + route.model;
  const Provider* p = Find(route.provider);
  if (!p || !p->echo) return text;
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
  }
  // Outside the lock: an adapter's Shutdown joins threads whose callbacks may
  // call AdapterFor. The adapters stay owned here, so the pointers stay valid.
  for (auto* a : created) a->Shutdown();
}

}  // namespace dsh::host
