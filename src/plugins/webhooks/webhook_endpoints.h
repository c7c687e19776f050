#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent/outbox.h"
#include "base/json.h"
#include "base/status.h"
#include "host/config.h"

namespace dsh::webhooks {

// One endpoint as the sender uses it: its configuration with the secret
// resolved (read from `secret_file`), and where it was declared.
struct Endpoint {
  host::Config::Webhook spec;  // spec.secret holds the secret in effect
  bool saved = false;    // from the Settings page (webhooks.yml), not dsh.yml
};

// The endpoints declared in dsh.yml, their `secret_file`s read: `invalid_config`
// naming the endpoint when a file is missing, unreadable, not mode 0600 (or
// stricter) or empty.
Result<std::vector<Endpoint>> DeclaredEndpoints(const host::Config& config);

// The endpoints saved from the Settings page (docs/NOTIFICATIONS.md), kept in
// the profile beside dsh.yml:
//   webhooks.yml      `webhooks:` a list in dsh.yml's syntax for
//                     `notifications.webhooks`, without secrets
//   webhook-secrets   their secrets, JSON {"NAME": "SECRET"}, mode 0600
// Both written atomically, the secrets first (a secret without its endpoint
// is ignored).
Result<std::vector<Endpoint>> LoadSaved(const std::filesystem::path& home);
Status StoreSaved(const std::filesystem::path& home, const std::vector<Endpoint>& saved);

// The endpoints in effect: declared ones, then saved ones (a saved endpoint
// may not take a declared one's name). Publishes each change as the
// agents' subscriptions (outbox::SubscriptionSource). Thread-safe.
class EndpointSet {
 public:
  EndpointSet(std::filesystem::path home, std::vector<Endpoint> declared, std::vector<Endpoint> saved,
              agent::outbox::SubscriptionSource& subscriptions);

  std::shared_ptr<const std::map<std::string, Endpoint>> Get() const;

  // Saves endpoint `spec.name` (adds or replaces a saved one). An empty
  // `spec.url` keeps the saved URL (`invalid_arguments` for a new one).
  // `secret`: nullopt keeps the saved secret, an empty optional inside
  // forgets it.
  // Errors: `invalid_arguments` (CheckWebhook, a bad `whsec_` secret),
  // `conflict` (declared in dsh.yml), `io_error`. Nothing changes on error.
  Status Put(host::Config::Webhook spec, std::optional<std::optional<std::string>> secret);
  // Errors: `not_found`, `conflict` (declared in dsh.yml), `io_error`.
  Status Delete(const std::string& name);

 private:
  // Publishes `all_` as subscriptions. Requires mu_.
  void PublishLocked();

  const std::filesystem::path home_;
  agent::outbox::SubscriptionSource& subscriptions_;
  mutable std::mutex mu_;
  std::vector<Endpoint> declared_;                           // GUARDED_BY(mu_)
  std::vector<Endpoint> saved_;                              // GUARDED_BY(mu_)
  std::shared_ptr<const std::map<std::string, Endpoint>> all_;  // GUARDED_BY(mu_)
};

// An endpoint as GET /api/notifications shows it (the secret never; the
// URL's path and query cut to "/…").
Json EndpointJson(const Endpoint& endpoint);
std::string RedactedUrl(const std::string& url);

}  // namespace dsh::webhooks
