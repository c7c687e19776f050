#include "host/provider_settings.h"

#include <yaml-cpp/yaml.h>

#include <utility>

#include "base/json.h"
#include "host/profile.h"

namespace dsh::host {
namespace fs = std::filesystem;
namespace {

constexpr std::chrono::milliseconds kProbeTimeout{10'000};

Status Bad(const fs::path& path, const std::string& what) {
  return Status(codes::kInvalidConfig, path.string() + ": " + what);
}

std::string ProvidersYaml(const SavedProviders& saved) {
  YAML::Emitter out;
  out << YAML::Comment("Saved by dsh from the Settings page (docs/CONFIG.md). The API keys are in provider-keys.");
  out << YAML::BeginMap;
  if (!saved.providers.empty()) {
    out << YAML::Key << "providers" << YAML::Value << YAML::BeginMap;
    for (const auto& p : saved.providers) {
      out << YAML::Key << p.name << YAML::Value << YAML::BeginMap;
      out << YAML::Key << "base_url" << YAML::Value << p.base_url;
      if (!p.models.empty()) {
        out << YAML::Key << "models" << YAML::Value << YAML::BeginMap;
        for (const auto& m : p.models) {
          out << YAML::Key << m.name << YAML::Value;
          if (m.reasoning_efforts.empty()) {
            out << YAML::Null;
          } else {
            out << YAML::Flow << YAML::BeginMap << YAML::Key << "reasoning_efforts" << YAML::Value << YAML::Flow
                << m.reasoning_efforts << YAML::EndMap;
          }
        }
        out << YAML::EndMap;
      }
      out << YAML::EndMap;
    }
    out << YAML::EndMap;
  }
  if (!saved.model.empty()) out << YAML::Key << "model" << YAML::Value << saved.model;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

std::string KeysJson(const SavedProviders& saved) {
  Json keys = Json::object();
  for (const auto& [name, key] : saved.keys) keys[name] = key;
  return keys.dump(2) + "\n";
}

}  // namespace

Result<SavedProviders> ProviderSettings::Load(const fs::path& home) {
  SavedProviders saved;
  const fs::path providers_path = home / kProvidersFile;
  DSH_ASSIGN_OR_RETURN(std::optional<std::string> text, ReadFileIfPresent(providers_path));
  if (text) {
    YAML::Node root;
    try {
      root = YAML::Load(*text);
    } catch (const YAML::Exception& e) {
      return Bad(providers_path, std::string("not YAML: ") + e.what());
    }
    if (root && !root.IsNull()) {
      if (!root.IsMap()) return Bad(providers_path, "must be a mapping with `providers` and `model`");
      for (const auto& kv : root) {
        const std::string key = kv.first.Scalar();
        if (key != "providers" && key != "model") {
          return Bad(providers_path, "unknown key `" + key + "` (known here: model, providers)");
        }
      }
      DSH_ASSIGN_OR_RETURN(Config config, ParseConfigText(providers_path.string(), *text));
      for (const auto& p : config.providers) {
        if (p.type != "openai") return Bad(providers_path, "`providers." + p.name + ".type` must be openai");
        if (!p.api_key_env.empty()) {
          return Bad(providers_path, "`providers." + p.name + ".api_key_env` is for dsh.yml; saved keys are in " +
                                         std::string(kKeysFile));
        }
      }
      saved.providers = std::move(config.providers);
      saved.model = std::move(config.model);
    }
  }
  const fs::path keys_path = home / kKeysFile;
  DSH_ASSIGN_OR_RETURN(std::optional<std::string> keys_text, ReadFileIfPresent(keys_path));
  if (keys_text) {
    auto keys = ParseJson(*keys_text);
    if (!keys.ok() || !keys->is_object()) return Bad(keys_path, "must be a JSON object of provider names to keys");
    for (const auto& [name, key] : keys->items()) {
      if (!key.is_string()) return Bad(keys_path, "the key of `" + name + "` must be a string");
      bool known = false;
      for (const auto& p : saved.providers) known = known || p.name == name;
      if (known && !key.get_ref<const std::string&>().empty()) saved.keys[name] = key.get<std::string>();
    }
  }
  return saved;
}

ProviderSettings::ProviderSettings(fs::path home, SavedProviders saved, ModelRoutes& routes, Probe probe)
    : home_(std::move(home)),
      routes_(routes),
      probe_(probe ? std::move(probe)
                   : Probe([](const agent::OpenAiOptions& options, const std::string& chat_model,
                              const agent::CancelToken* cancel) {
                       return agent::ProbeOpenAiProvider(options, chat_model, kProbeTimeout, cancel);
                     })),
      saved_(std::move(saved)),
      cancel_(std::make_shared<agent::CancelToken>()),
      thread_([this] { RunTests(); }) {}

ProviderSettings::~ProviderSettings() { Stop(); }

Status ProviderSettings::CommitLocked(SavedProviders next) {
  DSH_RETURN_IF_ERROR(routes_.CheckSaved(next));
  // The keys first: a key whose provider is not saved is ignored on load.
  DSH_RETURN_IF_ERROR(WriteFileAtomically(home_ / kKeysFile, KeysJson(next), 0600));
  DSH_RETURN_IF_ERROR(WriteFileAtomically(home_ / kProvidersFile, ProvidersYaml(next), 0644));
  DSH_RETURN_IF_ERROR(routes_.ApplySaved(next));
  saved_ = std::move(next);
  return Status::Ok();
}

Status ProviderSettings::PutProvider(const std::string& name, ProviderChange change) {
  if (auto endpoint = routes_.EndpointOf(name); endpoint && endpoint->echo) {
    return InvalidArguments("provider `" + name + "` is the offline echo model; it has no settings to change");
  }
  std::lock_guard<std::mutex> lock(mu_);
  SavedProviders next = saved_;
  Config::Provider provider{.name = name, .type = "openai", .base_url = std::move(change.base_url),
                            .models = std::move(change.models)};
  auto it = std::find_if(next.providers.begin(), next.providers.end(),
                         [&](const Config::Provider& p) { return p.name == name; });
  if (it != next.providers.end()) {
    *it = std::move(provider);
  } else {
    next.providers.push_back(std::move(provider));
    std::sort(next.providers.begin(), next.providers.end(),
              [](const Config::Provider& a, const Config::Provider& b) { return a.name < b.name; });
  }
  if (change.api_key) {
    if (*change.api_key) {
      next.keys[name] = **change.api_key;
    } else {
      next.keys.erase(name);
    }
  }
  return CommitLocked(std::move(next));
}

Status ProviderSettings::DeleteProvider(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  SavedProviders next = saved_;
  auto it = std::find_if(next.providers.begin(), next.providers.end(),
                         [&](const Config::Provider& p) { return p.name == name; });
  if (it == next.providers.end()) {
    auto endpoint = routes_.EndpointOf(name);
    if (!endpoint) return NotFound("no provider `" + name + "`");
    return Status(codes::kConflict, "provider `" + name +
                                        "` is built in or declared in dsh.yml, not saved from Settings; change "
                                        "dsh.yml to remove it");
  }
  next.providers.erase(it);
  next.keys.erase(name);
  return CommitLocked(std::move(next));
}

Status ProviderSettings::SetDefaultRoute(const session::ModelRoute& route) {
  DSH_RETURN_IF_ERROR(routes_.Validate(route));
  std::lock_guard<std::mutex> lock(mu_);
  SavedProviders next = saved_;
  next.model = route.provider + "/" + route.model;
  return CommitLocked(std::move(next));
}

void ProviderSettings::Test(const std::string& name, std::function<void(Result<std::vector<std::string>>)> done) {
  std::optional<ModelRoutes::Endpoint> endpoint = routes_.EndpointOf(name);
  if (!endpoint) return done(NotFound("no provider `" + name + "`"));
  if (endpoint->echo) return done(std::vector<std::string>{});  // offline: nothing to reach
  if (!endpoint->api_key && !endpoint->api_key_env.empty() && !endpoint->key_optional) {
    return done(Status(codes::kModelUnavailable,
                       "no API key: set " + endpoint->api_key_env + " or save a key for `" + name + "` in Settings"));
  }
  Job job;
  job.options.base_url = endpoint->base_url;
  job.options.api_key = endpoint->api_key.value_or("");
  for (const auto& choice : routes_.Choices()) {
    if (choice.name == name && !choice.models.empty()) job.chat_model = choice.models.front().name;
  }
  job.done = std::move(done);
  {
    std::lock_guard<std::mutex> lock(jobs_mu_);
    if (!stopping_ && jobs_.size() < kMaxWaitingProviderTests) {
      jobs_.push_back(std::move(job));
      jobs_cv_.notify_one();
      return;
    }
  }
  bool stopping;
  {
    std::lock_guard<std::mutex> lock(jobs_mu_);
    stopping = stopping_;
  }
  job.done(stopping ? Status(codes::kShuttingDown, "the host is shutting down")
                    : Status(codes::kUnavailable, "too many provider tests are waiting; try again shortly"));
}

void ProviderSettings::RunTests() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(jobs_mu_);
      jobs_cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job.done(probe_(job.options, job.chat_model, cancel_.get()));
  }
}

void ProviderSettings::Stop() {
  std::deque<Job> waiting;
  {
    std::lock_guard<std::mutex> lock(jobs_mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
    waiting.swap(jobs_);
    jobs_cv_.notify_all();
  }
  cancel_->Cancel();
  if (thread_.joinable()) thread_.join();
  for (auto& job : waiting) job.done(Status(codes::kShuttingDown, "the host is shutting down"));
}

}  // namespace dsh::host
