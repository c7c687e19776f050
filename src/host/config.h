#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "mcp/transport.h"

namespace dsh::store {
struct DatabaseOptions;
struct SqliteOptions;
}  // namespace dsh::store

namespace dsh::host {

// The profile configuration: `<home>/dsh.yml` (optional) with `--patch FILE`
// overlays applied in order (maps merge key by key, everything else is
// replaced; later files win). Every file is checked on its own first, so an
// error names the file and the key. See docs/CONFIG.md for the keys.
struct Config {
  struct Server {
    std::string host = "127.0.0.1";
    int port = 7433;
    // `server.metrics_listen`: "HOST:PORT" ("[::1]:9464" for IPv6) of a
    // second listener serving only GET /metrics, without a token; "" (the
    // default) for none. `dsh web --metrics-listen` wins over it.
    std::string metrics_listen;
    // `server.public_url`: the address people open dsh at (no trailing
    // slash), for links in notifications; "" for none.
    std::string public_url;
  } server;
  struct Storage {
    bool synchronous_full = true;  // storage.synchronous: full | normal (SQLite)
    bool postgres = false;         // storage.backend: sqlite | postgres
    std::string url;               // storage.url: PostgreSQL's; DSH_DATABASE_URL wins over it
    // storage.max_gather_us (0..100000): how long after a write transaction
    // began it may wait for the rest of a burst of writes
    // (store::DatabaseOptions::max_gather); both backends.
    int64_t max_gather_us = 300;
    // storage.checkpoint.*: the SQLite writer's WAL checkpoints
    // (store::SqliteOptions::Checkpoints, same defaults); finish_frames <
    // start_frames <= max_frames. Ignored with postgres.
    struct Checkpoint {
      bool background = true;
      int start_frames = 1000;
      int finish_frames = 64;
      int max_frames = 10000;
    } checkpoint;
  } storage;
  struct Log {
    std::string level = "info";
  } log;
  // `retention.*` (docs/CONFIG.md, "Retention"): how long the host keeps
  // consumed inbox rows and loop run history; 0 keeps forever. Pruned in
  // small slices by the host's store::Pruner, never inside a delivery's
  // transaction.
  struct Retention {
    int64_t inbox_days = 30;      // consumed inbox rows (and their idempotency keys), 0..36500
    int64_t loop_runs = 1000;     // finished runs kept per loop, 0..1000000
    int64_t loop_run_days = 90;   // finished runs older than this go, 0..36500
  } retention;

  // `model`: the default route "provider/model" (DSH_MODEL wins over it);
  // only its form is checked here, ModelRoutes checks that it exists.
  // Empty = not configured.
  std::string model;

  // `providers.NAME`: model providers beyond the built-in `echo`, `openai`
  // and `deepseek` (a declared name replaces a built-in one).
  struct ProviderModel {
    std::string name;
    // Reasoning efforts the model accepts ("low", "medium", "high", ...);
    // empty = the model takes no reasoning_effort.
    std::vector<std::string> reasoning_efforts;
  };
  struct Provider {
    std::string name;
    std::string type = "openai";  // "openai" (Chat Completions) or "echo"
    std::string base_url;         // required for type openai
    std::string api_key_env;      // environment variable holding the key; "" = no key
    // The models it serves; empty = any model name, with no reasoning efforts.
    std::vector<ProviderModel> models;
  };
  std::vector<Provider> providers;  // in name order

  // `presets.ID`: system prompt and tool groups of an agent kind.
  struct Preset {
    std::string id;
    std::string system_prompt;
    // Tool groups the preset may use ("sessions", "loop", ...); empty = all.
    std::vector<std::string> tool_groups;
    bool all_tools = true;  // true when `tools` was not given
    // `permissions.TOOL`: "allow", "ask" or "deny" (docs/TOOLS.md); a tool
    // not named keeps its default.
    std::map<std::string, std::string> permissions;
    bool network = false;        // `network`: bash may reach the network
    bool fetch_private = false;  // `fetch_private`: fetch may reach loopback and private addresses
    std::vector<std::string> roots;  // `roots`: absolute directories besides the session's cwd
  };
  // In id order. Always holds a "default": the built-in one (empty prompt,
  // all tools) unless a declared preset of that id replaces it.
  std::vector<Preset> presets;
  std::string default_preset = "default";  // `default_preset`; must name a preset

  // `workspaces.ID: /absolute/path`.
  struct Workspace {
    std::string id;
    std::string path;  // absolute, lexically normalized
  };
  std::vector<Workspace> workspaces;  // in id order

  // `mcp.servers.NAME`: MCP servers whose tools the agents get, as the tool
  // group `mcp:NAME` (docs/MCP.md). In name order.
  std::vector<mcp::ServerSpec> mcp_servers;

  struct Interface {
    bool global_session = true;  // `interface.global_session`
  } interface;

  // `notifications`: outbound webhooks (docs/NOTIFICATIONS.md).
  struct Webhook {
    std::string name;
    std::string url;                  // http:// or https://
    std::string format = "standard";  // standard | slack | discord | ntfy
    std::vector<std::string> events;  // event names or "*"; at least one
    std::string secret;               // `secret`, inline
    std::string secret_file;          // `secret_file`: an absolute path, read when the host starts
    bool allow_private = false;       // loopback and private addresses allowed
  };
  struct Notifications {
    int64_t retry_for_seconds = 86'400;  // `notifications.retry_for`
    int64_t timeout_seconds = 10;        // `notifications.timeout`: one attempt (1..60)
    std::vector<Webhook> webhooks;       // `notifications.webhooks`, in the file's order
  } notifications;

  struct Tools {
    int64_t approval_timeout_seconds = 900;  // `tools.approval_timeout` (1..86400)
    bool sandbox = true;                     // `tools.sandbox`: false runs bash without bubblewrap
  } tools;

  struct Agents {
    int64_t idle_eviction_seconds = 600;  // `agents.idle_eviction` (seconds, >= 1)
    int64_t lease_seconds = 15;           // `agents.lease` (3..3600): a live session's lease on this host
    int64_t max_steps = 50;               // `agents.max_steps` (1..10000)
  } agents;

  // `plugins.NAME.enabled`: which plugins the host composes. The names are
  // fixed (the plugins compiled in); the default composition is loop,
  // sessions and workspace on, schedule and time_context off.
  struct Plugins {
    bool loop = true;           // `plugins.loop.enabled`: scheduled wake-ups (loop_* tools)
    bool sessions = true;       // `plugins.sessions.enabled`: session_* tools and /sessions
    bool schedule = false;      // `plugins.schedule.enabled`: session-local reminders (schedule_* tools)
    bool time_context = false;  // `plugins.time_context.enabled`: the current time in model requests
    bool workspace = true;      // `plugins.workspace.enabled`: read, write, edit, list, grep, bash, fetch
  } plugins;

  // nullptr when there is none. FindProvider sees declared providers only
  // (the built-ins live in ModelRoutes).
  const Preset* FindPreset(const std::string& id) const;
  const Provider* FindProvider(const std::string& name) const;
};

// The store's options as the `storage` keys set them; everything else keeps
// the store's defaults. Host::Open and DatabaseFactory build the database
// with these. `path`: the SQLite database file.
store::DatabaseOptions DatabaseOptionsOf(const Config& config);
store::SqliteOptions SqliteOptionsOf(const Config& config, std::string path);

// Loads and merges `files` (those that do not exist are skipped only when
// `optional`). Errors: `invalid_config` naming the file and the key path; a
// check of the merged result (default_preset names no preset, an openai
// provider without base_url) names the last file that set the key.
struct ConfigFile {
  std::string path;
  bool optional = false;
};
Result<Config> LoadConfig(const std::vector<ConfigFile>& files);

// The events a webhook may name (docs/NOTIFICATIONS.md, "Events"), without "*".
const std::vector<std::string>& WebhookEvents();
// Checks one endpoint as dsh.yml's rules and the Settings page's PUT both
// need: the name, the URL, the format, the events, that a `standard`
// endpoint has a secret and that `secret` and `secret_file` are not both
// given. `invalid_arguments` naming `what` (say "notifications.webhooks[0]").
Status CheckWebhook(const Config::Webhook& webhook, const std::string& what);

// Parses one YAML document given as text (for tests); `name` is used in messages.
Result<Config> ParseConfigText(const std::string& name, const std::string& text);

}  // namespace dsh::host
