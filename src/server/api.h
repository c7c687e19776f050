#pragma once

#include <chrono>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "agent/tool_registry.h"
#include "base/metrics.h"
#include "host/command_registry.h"
#include "host/host.h"
#include "host/http_route.h"
#include "server/event_stream.h"
#include "server/http_types.h"
#include "server/mcp_endpoint.h"
#include "session/event_hub.h"
#include "session/session_store.h"

namespace dsh::server {

// The JSON API of docs/API.md over the host's services: token auth for
// /api/*, /mcp and /metrics, /healthz, /readyz, the routes of kRoutes (api.cc), the event stream
// WebSocket and the MCP endpoint (docs/MCP.md). Thread-safe; Handle and HandleUpgrade may be called
// concurrently and respond once, possibly from another thread.
class Api {
 public:
  struct Options {
    std::string token;    // required for every /api/* request
    std::string version;  // reported by /healthz
    EventStream::Options stream;
    // How long GET /readyz waits for the store's answer before it says
    // `not_ready` (the read itself goes on, on a reader thread).
    std::chrono::milliseconds ready_timeout{2000};
  };

  // What the routes work on; borrowed, must outlive the Api and every
  // connection it accepted. A route whose service is null answers 503
  // `unavailable`.
  struct Services {
    const agent::ToolRegistry& tools;
    session::SessionStore* sessions = nullptr;
    session::EventHub* events = nullptr;
    host::Host* host = nullptr;  // agents, models, the global session
    const host::CommandRegistry* commands = nullptr;  // POST /api/commands
    // Plugins' routes (host::Host::http_routes()), matched after the
    // built-in ones with the same auth and envelope. A handler's success is
    // sent as its status and JSON body.
    std::vector<host::HttpRoute> extra_routes = {};
  };
  // Everything a started host serves: its tools, sessions, hub, commands and
  // plugin routes (what `dsh web` and the tests over a real host use).
  static Services ServicesOf(host::Host& host) {
    return {.tools = host.tools(),
            .sessions = &host.sessions(),
            .events = &host.events(),
            .host = &host,
            .commands = &host.commands(),
            .extra_routes = host.http_routes()};
  }

  Api(Options options, Services services)
      : options_(std::move(options)), services_(std::move(services)), mcp_(services_.tools, options_.version) {
    AddMetrics();
  }

  // An HTTP request (HttpServer's HttpHandler).
  void Handle(HttpRequest req, Respond respond) const;
  // A WebSocket upgrade request (HttpServer's WebSocketHandler): accepts
  // `GET /api/sessions/{id}/stream` with an EventStream and `GET
  // /api/changes` with a ChangeFeed, refuses anything else with an error
  // response; a request with an `Origin` other than this
  // host's is `403 forbidden`.
  void HandleUpgrade(HttpRequest req, UpgradeRespond respond) const;
  // The `--metrics-listen` listener's handler: `GET /metrics` without a
  // token (that address is the operator's choice, loopback by default);
  // anything else is 404.
  void HandleMetricsListener(HttpRequest req, Respond respond) const;

 private:
  // A matched route's `{name}` path segments.
  using PathParams = std::map<std::string, std::string, std::less<>>;
  using RouteFn = void (Api::*)(const PathParams&, HttpRequest, Respond) const;
  struct Route {
    std::string_view method;
    std::string_view pattern;  // "/api/sessions/{id}/events": `{x}` matches one non-empty segment
    RouteFn fn;
  };
  static const std::vector<Route>& Routes();

  // `allow_query_token`: also accept `?token=` (WebSocket upgrades, where
  // browsers cannot set headers).
  bool Authorized(const HttpRequest& req, bool allow_query_token) const;

  // `POST /mcp` (docs/MCP.md): one JSON-RPC message over MCP's Streamable
  // HTTP transport, answered as application/json (a request: 200 with its
  // response) or 202 with no body (a notification or response); GET and
  // DELETE are 405. Same token as /api/*; a foreign `Origin` is 403; an
  // unsupported `MCP-Protocol-Version` header, a body that is not one
  // well-formed message (not JSON, a batch) are 400 with a JSON-RPC error.
  // `?session_id=` names the calling session, `?client_time_zone=` the
  // person's zone, as the body of POST /api/tools/{name} does.
  void HandleMcp(HttpRequest req, Respond respond) const;

  // `GET /readyz` (docs/API.md): 200 when a trivial read of the store
  // answers within Options::ready_timeout and the host's schema modules are
  // at the versions this binary knows; else 503 with the reasons. Never
  // blocks the calling thread: the read runs on a database reader thread,
  // the timeout on the host's io_context; whichever ends first answers.
  void Readiness(const HttpRequest& req, Respond respond) const;

  // `GET /metrics` (docs/DEPLOY.md, "Metrics"): host::Host::ScrapeMetrics
  // as text/plain version 0.0.4; 503 `unavailable` without a host. The
  // caller checked the token (or needs none).
  void ServeMetrics(const HttpRequest& req, Respond respond) const;
  // Registers the server's own metrics (dsh_websocket_clients) with the host's registry.
  void AddMetrics();

  void CallTool(const PathParams& params, HttpRequest req, Respond respond) const;
  void RunCommand(const PathParams& params, HttpRequest req, Respond respond) const;
  void ReadHeader(const PathParams& params, HttpRequest req, Respond respond) const;
  void ReadEvents(const PathParams& params, HttpRequest req, Respond respond) const;
  void ExportSession(const PathParams& params, HttpRequest req, Respond respond) const;
  void UpdateSession(const PathParams& params, HttpRequest req, Respond respond) const;
  void PostMessage(const PathParams& params, HttpRequest req, Respond respond) const;
  void CreateSession(const PathParams& params, HttpRequest req, Respond respond) const;
  void CancelTurn(const PathParams& params, HttpRequest req, Respond respond) const;
  void AnswerApproval(const PathParams& params, HttpRequest req, Respond respond) const;
  void ForkSession(const PathParams& params, HttpRequest req, Respond respond) const;
  // POST /api/sessions/{id}/resume: makes a cold session live here (its
  // overdue reminders then fire); idempotent for a live one.
  void ResumeSession(const PathParams& params, HttpRequest req, Respond respond) const;
  void HostInfo(const PathParams& params, HttpRequest req, Respond respond) const;
  // GET /api/cron/preview: the next occurrences of a cron rule after the
  // host clock's now, as `dsh cron next` computes them, with its English
  // description. Reads no store; answers before it returns.
  void CronPreview(const PathParams& params, HttpRequest req, Respond respond) const;
  void StreamWithoutUpgrade(const PathParams& params, HttpRequest req, Respond respond) const;
  void CallExtraRoute(const host::HttpRoute& route, PathParams params, HttpRequest req, Respond respond) const;
  // The browser UI (docs/UI.md): `/?token=` sets the cookie and redirects;
  // `/` is the app for a signed-in browser, else a sign-in page (401);
  // `/assets/*` are the embedded files (public, immutable, gzip).
  void ServeWeb(const HttpRequest& req, Respond respond) const;

  Options options_;
  Services services_;
  McpEndpoint mcp_;  // over services_.tools: declared after it
  // Open WebSockets by feed; null without a host.
  metrics::Gauge* stream_clients_ = nullptr;
  metrics::Gauge* changes_clients_ = nullptr;
};

}  // namespace dsh::server
