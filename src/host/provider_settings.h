#pragma once

#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/model.h"
#include "base/status.h"
#include "host/model_routes.h"

namespace dsh::host {

// The model providers a person saves from the Settings page (docs/CONFIG.md,
// "Providers saved from the browser"), kept in the profile beside dsh.yml:
//   providers.yml   the saved providers and default route, in dsh.yml's own
//                   syntax but only the keys `providers` and `model`. A file
//                   of its own so that saving never rewrites the person's
//                   dsh.yml (its comments and layout stay theirs).
//   provider-keys   their API keys, JSON {"NAME": "KEY"}, mode 0600. Never
//                   in the database, a response or a log line.
// Both are written atomically (temp file, fsync, rename), the keys first: a
// key without its provider is ignored, so a crash between the two writes
// leaves a consistent profile. Read once, by Load, when the host starts.
//
// A change is checked (ModelRoutes::CheckSaved), written, then applied to
// the routes, so new sessions use it at once; a change that fails a check
// or a write changes nothing.
//
// Thread-safe: changes are serialised by `mu_`, which also guards the saved
// state; provider tests run one at a time on the object's own thread (they
// wait on the network), never on the caller's.
class ProviderSettings {
 public:
  // Contacts a provider for Test (agent::ProbeOpenAiProvider by default;
  // tests inject fakes). Blocking; runs on the settings' own thread.
  using Probe = std::function<Result<std::vector<std::string>>(
      const agent::OpenAiOptions& options, const std::string& chat_model, const agent::CancelToken* cancel)>;

  static constexpr const char* kProvidersFile = "providers.yml";
  static constexpr const char* kKeysFile = "provider-keys";

  // Reads the two files of `home` (each may be missing). Errors:
  // `invalid_config` naming the file and what is wrong (a key other than
  // `providers` and `model`, a provider that is not of type openai, the
  // schema of dsh.yml's keys, keys that are not a JSON object of strings);
  // `io_error` when a file exists but cannot be read.
  static Result<SavedProviders> Load(const std::filesystem::path& home);

  // `routes` must already hold `saved` (ModelRoutes::Build was given it) and
  // outlive this object. A null `probe` means the real one.
  ProviderSettings(std::filesystem::path home, SavedProviders saved, ModelRoutes& routes, Probe probe = nullptr);
  ~ProviderSettings();  // Stop()
  ProviderSettings(const ProviderSettings&) = delete;
  ProviderSettings& operator=(const ProviderSettings&) = delete;

  // A provider as PUT gives it. `api_key`: nullopt keeps the saved key (if
  // any), an empty optional inside forgets it, a value replaces it.
  struct ProviderChange {
    std::string base_url;
    std::optional<std::optional<std::string>> api_key;
    std::vector<Config::ProviderModel> models;  // empty = any model name
  };
  // Saves provider `name` (adds it, or replaces a built-in, declared or saved
  // one of that name). Errors: `invalid_arguments` for the echo provider;
  // `conflict` when the default route in effect or the saved one would no
  // longer resolve (say, its model is no longer listed); `io_error` when a
  // file cannot be written. Nothing changes on an error.
  Status PutProvider(const std::string& name, ProviderChange change);
  // Forgets saved provider `name` and its key; a built-in or declared
  // provider of that name is then in effect again. Errors: `not_found` (no
  // such provider), `conflict` (not a saved one: edit dsh.yml; or a default
  // route names it), `io_error`.
  Status DeleteProvider(const std::string& name);
  // Saves the profile's default route (DSH_MODEL still wins when set).
  // Errors: ModelRoutes::Validate's (`unknown_provider`, `unknown_model`, a
  // reasoning effort is refused as `invalid_reasoning_effort`), `io_error`.
  Status SetDefaultRoute(const session::ModelRoute& route);

  // Contacts provider `name` (its base URL and the key in effect) and calls
  // `done` once, on the settings' thread (or on the caller's at once when
  // the provider is unknown, needs nothing or the settings are stopped):
  // the model ids it lists, or its error. Errors: `not_found`, the probe's
  // (`model_error` with the provider's message, `model_unavailable`, ...),
  // `model_unavailable` when it needs a key and has none, `unavailable`
  // when too many tests wait, `shutting_down` after Stop.
  void Test(const std::string& name, std::function<void(Result<std::vector<std::string>>)> done);

  // Cancels the test in progress, answers waiting ones with
  // `shutting_down` and joins the thread. Idempotent; never call it from
  // a `done` callback.
  void Stop();

 private:
  struct Job {
    agent::OpenAiOptions options;
    std::string chat_model;
    std::function<void(Result<std::vector<std::string>>)> done;
  };

  // Checks `next`, writes both files, applies it to the routes and keeps it.
  Status CommitLocked(SavedProviders next);
  void RunTests();  // the test thread

  const std::filesystem::path home_;
  ModelRoutes& routes_;
  const Probe probe_;

  std::mutex mu_;
  SavedProviders saved_;  // GUARDED_BY(mu_)

  std::mutex jobs_mu_;
  std::condition_variable jobs_cv_;
  std::deque<Job> jobs_;                              // GUARDED_BY(jobs_mu_)
  bool stopping_ = false;                             // GUARDED_BY(jobs_mu_)
  const std::shared_ptr<agent::CancelToken> cancel_;  // cancelled by Stop
  std::thread thread_;
};

// The most tests that may wait for the test thread.
inline constexpr size_t kMaxWaitingProviderTests = 8;

}  // namespace dsh::host
