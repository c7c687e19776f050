#include "plugins/webhooks/webhook_endpoints.h"

#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <utility>

#include "host/profile.h"
#include "plugins/webhooks/webhook_format.h"

namespace dsh::webhooks {

namespace fs = std::filesystem;

namespace {

constexpr const char* kSavedFile = "webhooks.yml";
constexpr const char* kSecretsFile = "webhook-secrets";

Status Bad(const fs::path& path, const std::string& what) {
  return Status(codes::kInvalidConfig, path.string() + ": " + what);
}

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// A `standard` endpoint's secret must decode (SecretKey); others take any.
Status CheckSecret(const host::Config::Webhook& w, const std::string& what) {
  if (w.format != "standard") return Status::Ok();
  if (w.secret.empty()) {
    return Status(codes::kInvalidArguments, "`" + what + "` is a `standard` endpoint without a secret");
  }
  if (auto key = SecretKey(w.secret); !key.ok()) {
    return Status(codes::kInvalidArguments, "`" + what + ".secret`: " + key.status().message());
  }
  return Status::Ok();
}

std::string SavedYaml(const std::vector<Endpoint>& saved) {
  YAML::Emitter out;
  out << YAML::Comment("Saved by dsh from the Settings page (docs/NOTIFICATIONS.md). Secrets are in webhook-secrets.");
  out << YAML::BeginMap << YAML::Key << "webhooks" << YAML::Value << YAML::BeginSeq;
  for (const auto& e : saved) {
    out << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value << e.spec.name;
    out << YAML::Key << "url" << YAML::Value << e.spec.url;
    out << YAML::Key << "format" << YAML::Value << e.spec.format;
    out << YAML::Key << "events" << YAML::Value << YAML::Flow << e.spec.events;
    if (e.spec.allow_private) out << YAML::Key << "allow_private" << YAML::Value << true;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace

Result<std::vector<Endpoint>> DeclaredEndpoints(const host::Config& config) {
  std::vector<Endpoint> out;
  for (const auto& w : config.notifications.webhooks) {
    Endpoint e{w, false};
    std::string what = "notifications.webhooks." + w.name;
    if (!w.secret_file.empty()) {
      struct stat st {};
      if (::stat(w.secret_file.c_str(), &st) != 0) {
        return Status(codes::kInvalidConfig, "`" + what + ".secret_file`: cannot read " + w.secret_file);
      }
      if ((st.st_mode & 077) != 0) {
        return Status(codes::kInvalidConfig, "`" + what + ".secret_file`: " + w.secret_file +
                                                 " must not be readable by others (chmod 600 it)");
      }
      DSH_ASSIGN_OR_RETURN(auto text, host::ReadFileIfPresent(w.secret_file));
      if (!text || Trimmed(*text).empty()) {
        return Status(codes::kInvalidConfig, "`" + what + ".secret_file`: " + w.secret_file + " is empty");
      }
      e.spec.secret = Trimmed(*text);
    }
    if (Status st = CheckSecret(e.spec, what); !st.ok()) return Status(codes::kInvalidConfig, st.message());
    out.push_back(std::move(e));
  }
  return out;
}

Result<std::vector<Endpoint>> LoadSaved(const fs::path& home) {
  std::vector<Endpoint> out;
  const fs::path path = home / kSavedFile;
  DSH_ASSIGN_OR_RETURN(auto text, host::ReadFileIfPresent(path));
  if (!text) return out;
  YAML::Node root;
  try {
    root = YAML::Load(*text);
  } catch (const YAML::Exception& e) {
    return Bad(path, std::string("not YAML: ") + e.what());
  }
  if (!root || root.IsNull()) return out;
  Json secrets = Json::object();
  DSH_ASSIGN_OR_RETURN(auto secrets_text, host::ReadFileIfPresent(home / kSecretsFile));
  if (secrets_text) {
    auto parsed = ParseJson(*secrets_text);
    if (!parsed.ok() || !parsed->is_object()) return Bad(home / kSecretsFile, "must be a JSON object of names to secrets");
    secrets = std::move(*parsed);
  }
  try {
    if (!root.IsMap() || !root["webhooks"] || !root["webhooks"].IsSequence()) {
      return Bad(path, "must be a mapping with the list `webhooks`");
    }
    for (const auto& n : root["webhooks"]) {
      Endpoint e;
      e.saved = true;
      e.spec.name = n["name"] ? n["name"].as<std::string>() : "";
      e.spec.url = n["url"] ? n["url"].as<std::string>() : "";
      e.spec.format = n["format"] ? n["format"].as<std::string>() : "standard";
      if (n["events"]) e.spec.events = n["events"].as<std::vector<std::string>>();
      if (n["allow_private"]) e.spec.allow_private = n["allow_private"].as<bool>();
      if (auto s = secrets.find(e.spec.name); s != secrets.end() && s->is_string()) e.spec.secret = s->get<std::string>();
      std::string what = "webhooks." + e.spec.name;
      if (Status st = host::CheckWebhook(e.spec, what); !st.ok()) return Bad(path, st.message());
      if (Status st = CheckSecret(e.spec, what); !st.ok()) return Bad(path, st.message());
      out.push_back(std::move(e));
    }
  } catch (const YAML::Exception& e) {
    return Bad(path, std::string("not the expected shape: ") + e.what());
  }
  return out;
}

Status StoreSaved(const fs::path& home, const std::vector<Endpoint>& saved) {
  Json secrets = Json::object();
  for (const auto& e : saved) {
    if (!e.spec.secret.empty()) secrets[e.spec.name] = e.spec.secret;
  }
  DSH_RETURN_IF_ERROR(host::WriteFileAtomically(home / kSecretsFile, secrets.dump(2) + "\n", 0600));
  return host::WriteFileAtomically(home / kSavedFile, SavedYaml(saved), 0644);
}

EndpointSet::EndpointSet(fs::path home, std::vector<Endpoint> declared, std::vector<Endpoint> saved,
                         agent::outbox::SubscriptionSource& subscriptions)
    : home_(std::move(home)), subscriptions_(subscriptions), declared_(std::move(declared)), saved_(std::move(saved)) {
  std::lock_guard lock(mu_);
  PublishLocked();
}

std::shared_ptr<const std::map<std::string, Endpoint>> EndpointSet::Get() const {
  std::lock_guard lock(mu_);
  return all_;
}

void EndpointSet::PublishLocked() {
  auto all = std::make_shared<std::map<std::string, Endpoint>>();
  auto subs = std::make_shared<agent::outbox::Subscriptions>();
  for (const auto* list : {&saved_, &declared_}) {  // declared ones win a name
    for (const auto& e : *list) {
      (*all)[e.spec.name] = e;
      subs->Add(e.spec.name, e.spec.events);
    }
  }
  all_ = std::move(all);
  subscriptions_.Set(subs->empty() ? nullptr : std::move(subs));
}

Status EndpointSet::Put(host::Config::Webhook spec, std::optional<std::optional<std::string>> secret) {
  std::lock_guard lock(mu_);
  auto declared = [&](const std::string& name) {
    return std::any_of(declared_.begin(), declared_.end(), [&](const Endpoint& e) { return e.spec.name == name; });
  };
  if (declared(spec.name)) {
    return Status(codes::kConflict, "the endpoint `" + spec.name + "` is declared in dsh.yml: change it there");
  }
  auto it = std::find_if(saved_.begin(), saved_.end(), [&](const Endpoint& e) { return e.spec.name == spec.name; });
  if (spec.url.empty()) {
    if (it == saved_.end()) return Status(codes::kInvalidArguments, "`url` is required");
    spec.url = it->spec.url;  // kept, as the secret is: no route shows it whole
  }
  if (!secret) {
    spec.secret = it != saved_.end() ? it->spec.secret : "";
  } else {
    spec.secret = secret->value_or("");
  }
  spec.secret_file.clear();
  std::string what = "endpoint " + spec.name;
  DSH_RETURN_IF_ERROR(host::CheckWebhook(spec, what));
  DSH_RETURN_IF_ERROR(CheckSecret(spec, what));
  std::vector<Endpoint> next = saved_;
  auto slot = std::find_if(next.begin(), next.end(), [&](const Endpoint& e) { return e.spec.name == spec.name; });
  if (slot != next.end()) {
    slot->spec = std::move(spec);
  } else {
    next.push_back(Endpoint{std::move(spec), true});
  }
  DSH_RETURN_IF_ERROR(StoreSaved(home_, next));
  saved_ = std::move(next);
  PublishLocked();
  return Status::Ok();
}

Status EndpointSet::Delete(const std::string& name) {
  std::lock_guard lock(mu_);
  if (std::any_of(declared_.begin(), declared_.end(), [&](const Endpoint& e) { return e.spec.name == name; })) {
    return Status(codes::kConflict, "the endpoint `" + name + "` is declared in dsh.yml: remove it there");
  }
  std::vector<Endpoint> next = saved_;
  auto it = std::find_if(next.begin(), next.end(), [&](const Endpoint& e) { return e.spec.name == name; });
  if (it == next.end()) return Status(codes::kNotFound, "no saved endpoint `" + name + "`");
  next.erase(it);
  DSH_RETURN_IF_ERROR(StoreSaved(home_, next));
  saved_ = std::move(next);
  PublishLocked();
  return Status::Ok();
}

std::string RedactedUrl(const std::string& url) {
  size_t scheme = url.find("://");
  if (scheme == std::string::npos) return url;
  size_t rest = url.find_first_of("/?#", scheme + 3);
  std::string authority = url.substr(scheme + 3, rest == std::string::npos ? std::string::npos : rest - scheme - 3);
  // user:password@host keeps only the host.
  if (size_t at = authority.rfind('@'); at != std::string::npos) authority = authority.substr(at + 1);
  std::string out = url.substr(0, scheme + 3) + authority;
  if (rest != std::string::npos && rest + 1 < url.size()) out += "/…";
  return out;
}

Json EndpointJson(const Endpoint& e) {
  return {{"name", e.spec.name},
          {"format", e.spec.format},
          {"url", RedactedUrl(e.spec.url)},
          {"events", e.spec.events},
          {"allow_private", e.spec.allow_private},
          {"has_secret", !e.spec.secret.empty()},
          {"source", e.saved ? "saved" : "config"}};
}

}  // namespace dsh::webhooks
