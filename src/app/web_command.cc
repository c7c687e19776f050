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
};

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
  // sessions by default; time_context and schedule opt-in.
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
  if (Status st = host->Start(threads); !st.ok()) return Fail(ctx, st);
  boost::asio::io_context& ioc = host->io();
  server::Api api({token, kVersion}, {.tools = host->tools(),
                                      .sessions = &host->sessions(),
                                      .events = &host->events(),
                                      .host = host.get(),
                                      .commands = &host->commands(),
                                      .extra_routes = host->http_routes()});
  server::HttpServer::Options http_options{bind_host, static_cast<uint16_t>(port)};
  http_options.websocket = [&api](server::HttpRequest req, server::UpgradeRespond respond) {
    api.HandleUpgrade(std::move(req), std::move(respond));
  };
  server::HttpServer http(ioc, std::move(http_options), [&api](server::HttpRequest req, server::Respond respond) {
    api.Handle(std::move(req), std::move(respond));
  });
  auto bound = http.Listen();
  if (!bound.ok()) return Fail(ctx, bound.status());

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

  ctx.out << "dsh web listening on " << url << std::endl;
  // The one address a person opens: it signs the browser in (docs/UI.md).
  ctx.out << "open " << url << "?token=" << token << std::endl;
  std::string plugin_names;
  for (auto [on, name] : {std::pair{composition.sessions, "sessions"}, {composition.loop, "loop"},
                          {composition.time_context, "time_context"}, {composition.schedule, "schedule"}}) {
    if (on) plugin_names += (plugin_names.empty() ? "" : ", ") + std::string(name);
  }
  spdlog::info("profile {} ({}), database {}, model {}, plugins: {}, allocator {}", host->profile().home().string(),
               flags.patches.empty() ? "no patches" : std::to_string(flags.patches.size()) + " patch(es)",
               host->database().description(), host->models().Describe(host->models().default_route()),
               plugin_names.empty() ? "none" : plugin_names, AllocatorName());

  int signo = signalled.get_future().get();
  spdlog::info("signal {}: stopping (finishing requests in flight and queued commits)", signo);
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
  web->callback([flags, &ctx] { ctx.exit_code = RunWeb(*flags, ctx); });
}

}  // namespace dsh::app
