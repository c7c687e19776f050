#include "app/web_command.h"

#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <future>
#include <ostream>
#include <thread>

#include "app/version.h"
#include "base/allocator.h"
#include "base/log.h"
#include "host/host.h"
#include "plugins/loop/loop_plugin.h"
#include "plugins/schedule/schedule_plugin.h"
#include "plugins/sessions/sessions_tools.h"
#include "plugins/time_context/time_context.h"
#include "plugins/webhooks/webhook_plugin.h"
#include "plugins/workspace/workspace_plugin.h"
#include "server/api.h"
#include "server/http_server.h"

namespace dsh::app {
namespace {

struct WebFlags {
  std::string home;
  std::string host;
  int port = -1;
  std::vector<std::string> patches;
  std::string token;
  std::string log_level;
  std::string metrics_listen;
};

struct ListenAddress {
  std::string host;
  uint16_t port = 0;
};

// "HOST:PORT", "[IPV6]:PORT" (`--metrics-listen`, `server.metrics_listen`).
Result<ListenAddress> ParseListenAddress(const std::string& text, std::string_view what) {
  auto bad = [&] {
    return Status(codes::kInvalidConfig, std::string(what) + " must be HOST:PORT, say 127.0.0.1:9464 (got \"" + text + "\")");
  };
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) return bad();
  std::string host = text.substr(0, colon);
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return bad();
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string::npos) {
    return bad();
  }
  std::string port = text.substr(colon + 1);
  if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) return bad();
  int n = std::stoi(port);
  if (n > 65535) return bad();
  return ListenAddress{host, static_cast<uint16_t>(n)};
}

std::string UrlHost(const std::string& host) { return host.find(':') != std::string::npos ? "[" + host + "]" : host; }

int Fail(CommandContext& ctx, const Status& st) {
  ctx.err << "error: " << st.code() << ": " << st.message() << "\n";
  return st.code() == codes::kInvalidConfig || st.code() == codes::kInvalidArguments ? kExitUsage : kExitFailure;
}

int RunWeb(const WebFlags& flags, CommandContext& ctx) {
  host::HostOptions options;
  if (!flags.home.empty()) options.home = flags.home;
  options.patches = flags.patches;
  options.clock = &ctx.clock;
  options.plugin_migrations = plugins::loop::PluginMigrations();
  auto opened = host::Host::Open(options);
  if (!opened.ok()) return Fail(ctx, opened.status());
  std::unique_ptr<host::Host> host = std::move(opened).value();

  std::string level = flags.log_level.empty() ? host->config().log.level : flags.log_level;
  if (Status st = InitLogging(level); !st.ok()) return Fail(ctx, st);

  std::string token = flags.token;
  if (token.empty()) {
    if (const char* env = std::getenv("DSH_TOKEN"); env && *env) token = env;
  }
  if (token.empty()) {
    auto t = host->profile().LoadOrCreateToken();
    if (!t.ok()) return Fail(ctx, t.status());
    token = *t;
  }

  std::string bind_host = flags.host.empty() ? host->config().server.host : flags.host;
  int port = flags.port >= 0 ? flags.port : host->config().server.port;

  unsigned threads = std::max(2u, std::min(4u, std::thread::hardware_concurrency()));
  // The composition (`plugins` in dsh.yml, docs/CONFIG.md): loop and
  // sessions and workspace by default; time_context and schedule opt-in.
  const host::Config::Plugins& composition = host->config().plugins;
  if (composition.sessions) {
    if (Status st = plugins::sessions::RegisterSessionsPlugin(*host); !st.ok()) return Fail(ctx, st);
  }
  if (composition.loop) {
    if (Status st = plugins::loop::RegisterLoopPlugin(*host); !st.ok()) return Fail(ctx, st);
  }
  if (composition.time_context) {
    if (Status st = plugins::time_context::RegisterTimeContextPlugin(*host); !st.ok()) return Fail(ctx, st);
  }
  if (composition.schedule) {
    if (Status st = plugins::schedule::RegisterSchedulePlugin(*host); !st.ok()) return Fail(ctx, st);
  }
  if (composition.workspace) {
    if (Status st = plugins::workspace::RegisterWorkspacePlugin(*host); !st.ok()) return Fail(ctx, st);
  }
  // Outbound notifications: always on, idle without endpoints.
  if (Status st = plugins::webhooks::RegisterWebhooksPlugin(*host); !st.ok()) return Fail(ctx, st);
  if (Status st = host->Start(threads); !st.ok()) return Fail(ctx, st);
  boost::asio::io_context& ioc = host->io();
  server::Api api({token, kVersion}, server::Api::ServicesOf(*host));
  server::HttpServer::Options http_options{bind_host, static_cast<uint16_t>(port)};
  http_options.websocket = [&api](server::HttpRequest req, server::UpgradeRespond respond) {
    api.HandleUpgrade(std::move(req), std::move(respond));
  };
  server::HttpServer http(ioc, std::move(http_options), [&api](server::HttpRequest req, server::Respond respond) {
    api.Handle(std::move(req), std::move(respond));
  });
  auto bound = http.Listen();
  if (!bound.ok()) return Fail(ctx, bound.status());

  // GET /metrics without a token on an address of the operator's choice
  // (docs/DEPLOY.md, "Metrics").
  std::string metrics_flag = flags.metrics_listen.empty() ? host->config().server.metrics_listen : flags.metrics_listen;
  std::unique_ptr<server::HttpServer> metrics_http;
  std::string metrics_url;
  if (!metrics_flag.empty()) {
    auto address = ParseListenAddress(metrics_flag, flags.metrics_listen.empty() ? "`server.metrics_listen`" : "--metrics-listen");
    if (!address.ok()) return Fail(ctx, address.status());
    metrics_http = std::make_unique<server::HttpServer>(
        ioc, server::HttpServer::Options{address->host, address->port},
        [&api](server::HttpRequest req, server::Respond respond) { api.HandleMetricsListener(std::move(req), std::move(respond)); });
    auto metrics_bound = metrics_http->Listen();
    if (!metrics_bound.ok()) return Fail(ctx, metrics_bound.status().WithContext("--metrics-listen " + metrics_flag));
    metrics_url = "http://" + UrlHost(address->host) + ":" + std::to_string(*metrics_bound) + "/metrics";
  }

  std::string shown_host = bind_host.find(':') != std::string::npos ? "[" + bind_host + "]" : bind_host;
  std::string url = "http://" + shown_host + ":" + std::to_string(*bound) + "/";
  if (Status st = host->profile().WriteRunFile({url, token, getpid()}); !st.ok()) {
    spdlog::warn("cannot record the running host for the CLI: {}", st.ToString());
  }

  std::promise<int> signalled;
  boost::asio::signal_set signals(ioc, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int signo) {
    if (!ec) signalled.set_value(signo);
  });

  // Before the listening line, which tests and scripts wait for.
  if (metrics_http) ctx.out << "dsh web metrics on " << metrics_url << std::endl;
  ctx.out << "dsh web listening on " << url << std::endl;
  // The one address a person opens: it signs the browser in (docs/UI.md).
  ctx.out << "open " << url << "?token=" << token << std::endl;
  std::string plugin_names;
  for (auto [on, name] : {std::pair{composition.sessions, "sessions"}, {composition.loop, "loop"},
                          {composition.time_context, "time_context"}, {composition.schedule, "schedule"},
                          {composition.workspace, "workspace"}}) {
    if (on) plugin_names += (plugin_names.empty() ? "" : ", ") + std::string(name);
  }
  spdlog::info("profile {} ({}), database {}, model {}, plugins: {}, allocator {}", host->profile().home().string(),
               flags.patches.empty() ? "no patches" : std::to_string(flags.patches.size()) + " patch(es)",
               host->database().description(), host->models().Describe(host->models().default_route()),
               plugin_names.empty() ? "none" : plugin_names, AllocatorName());

  int signo = signalled.get_future().get();
  spdlog::info("signal {}: stopping (finishing requests in flight and queued commits)", signo);
  if (metrics_http) metrics_http->Stop();
  http.Stop();
  host->Stop();

  host->profile().RemoveRunFile(getpid());
  host->Close();
  spdlog::info("stopped cleanly");
  return kExitOk;
}

}  // namespace

void AddWebCommand(CLI::App& root, CommandContext& ctx) {
  auto flags = std::make_shared<WebFlags>();
  CLI::App* web = root.add_subcommand("web", "Run a host: HTTP API, browser UI, agents and the scheduler");
  web->add_option("--home", flags->home, "Profile directory (default $DSH_HOME, else ~/.dsh)");
  web->add_option("--host", flags->host, "Address to bind (default 127.0.0.1, or server.host in dsh.yml)");
  web->add_option("--port", flags->port, "Port to bind; 0 picks a free one (default 7433, or server.port)")
      ->check(CLI::Range(0, 65535));
  web->add_option("--patch", flags->patches, "A YAML overlay merged over dsh.yml; repeatable, later wins");
  web->add_option("--token", flags->token, "API token (default $DSH_TOKEN, else <home>/auth-token)");
  web->add_option("--log-level", flags->log_level, "trace, debug, info, warn, error or off (default info)");
  web->add_option("--metrics-listen", flags->metrics_listen,
                  "HOST:PORT of a second listener serving only GET /metrics, without a token (default none, or "
                  "server.metrics_listen); keep it on loopback or a private network");
  web->callback([flags, &ctx] { ctx.exit_code = RunWeb(*flags, ctx); });
}

}  // namespace dsh::app
