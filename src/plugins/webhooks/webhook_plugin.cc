#include "plugins/webhooks/webhook_plugin.h"

#include <spdlog/spdlog.h>

#include <memory>
#include <regex>
#include <utility>

#include "agent/outbox.h"
#include "base/ids.h"
#include "base/schema.h"
#include "host/host.h"
#include "plugins/webhooks/webhook_endpoints.h"
#include "plugins/webhooks/webhook_sender.h"

namespace dsh::plugins::webhooks {

using dsh::webhooks::Endpoint;
using dsh::webhooks::EndpointSet;
using dsh::webhooks::Sender;
using host::HttpRoute;
using host::HttpRouteDone;
using host::HttpRouteRequest;
using host::HttpRouteResponse;
namespace outbox = agent::outbox;

namespace {

constexpr int64_t kDefaultLimit = 50;
constexpr int64_t kMaxLimit = 500;

// What the plugin keeps alive for its routes and hooks.
struct Plugin {
  std::unique_ptr<EndpointSet> endpoints;
  std::unique_ptr<Sender> sender;
  std::unique_ptr<session::EventHub::Subscription> changes;
  std::unique_ptr<session::EventHub::Subscription> events;
};

Result<std::optional<int64_t>> Before(const HttpRouteRequest& req) {
  if (!req.query.contains("before")) return std::optional<int64_t>();
  auto value = host::QueryInt(req, "before", 0, 0, kMaxSafeInteger);
  if (!value.ok()) return value.status();
  return std::optional<int64_t>(*value);
}

// PUT /api/notifications/endpoints/{name}'s body.
Result<std::pair<host::Config::Webhook, std::optional<std::optional<std::string>>>> ParseEndpoint(const std::string& name,
                                                                                           const std::string& body) {
  auto json = ParseJson(body);
  const char* example = R"({"url": "https://…", "format": "standard", "events": ["loop.run.failed"], "secret": "whsec_…"})";
  if (!json.ok() || !json->is_object()) return InvalidArguments(std::string("the body must be a JSON object: ") + example);
  host::Config::Webhook w;
  w.name = name;
  std::optional<std::optional<std::string>> secret;
  for (const auto& [key, value] : json->items()) {
    if (key == "url" || key == "format") {
      if (!value.is_string()) return InvalidArguments("`" + key + "` must be a string");
      (key == "url" ? w.url : w.format) = value.get<std::string>();
    } else if (key == "events") {
      if (!value.is_array()) return InvalidArguments("`events` must be a list of event names");
      for (const auto& e : value) {
        if (!e.is_string()) return InvalidArguments("`events` must be a list of event names");
        w.events.push_back(e.get<std::string>());
      }
    } else if (key == "allow_private") {
      if (!value.is_boolean()) return InvalidArguments("`allow_private` must be true or false");
      w.allow_private = value.get<bool>();
    } else if (key == "secret") {
      if (value.is_null()) {
        secret = std::optional<std::string>();
      } else if (value.is_string()) {
        secret = value.get<std::string>();
      } else {
        return InvalidArguments("`secret` must be a string, or null to forget it");
      }
    } else {
      return InvalidArguments("unknown field `" + key + "` (known: url, format, events, allow_private, secret)");
    }
  }
  if (w.format.empty()) w.format = "standard";
  return std::make_pair(std::move(w), std::move(secret));
}

void ListEndpoints(host::Host& host, Plugin& plugin, HttpRouteDone done) {
  auto stats = std::make_shared<std::map<std::string, outbox::EndpointStats>>();
  host.database().Read(
      [stats](store::Tx& tx) -> Status {
        DSH_ASSIGN_OR_RETURN(*stats, outbox::Stats(tx));
        return Status::Ok();
      },
      [&host, &plugin, stats, done = std::move(done)](Status st) {
        if (!st.ok()) return done(st);
        int64_t now = ToUnixMillis(host.clock().Now());
        Json list = Json::array();
        for (const auto& [name, endpoint] : *plugin.endpoints->Get()) {
          Json j = dsh::webhooks::EndpointJson(endpoint);
          outbox::EndpointStats s;
          if (auto it = stats->find(name); it != stats->end()) s = it->second;
          j["state"] = outbox::EndpointState(s, now);
          j["pending"] = s.pending;
          if (s.last_delivered_at) j["last_delivered_at"] = *s.last_delivered_at;
          if (s.last_failed_at) {
            j["last_failure"] = {{"at", *s.last_failed_at}, {"error", s.last_failure.value_or("failed")}};
          }
          list.push_back(std::move(j));
        }
        done(HttpRouteResponse{200, Json{{"endpoints", std::move(list)}}});
      });
}

std::vector<HttpRoute> Routes(host::Host& host, Plugin& plugin) {
  std::vector<HttpRoute> out;
  out.push_back(HttpRoute{.method = "GET",
                          .pattern = "/api/notifications",
                          .handler = [&host, &plugin](HttpRouteRequest, HttpRouteDone done) {
                            ListEndpoints(host, plugin, std::move(done));
                          }});
  out.push_back(HttpRoute{
      .method = "GET",
      .pattern = "/api/notifications/messages",
      .query_keys = {"endpoint", "state", "limit", "before"},
      .handler =
          [&host](HttpRouteRequest req, HttpRouteDone done) {
            auto limit = host::QueryInt(req, "limit", kDefaultLimit, 1, kMaxLimit);
            if (!limit.ok()) return done(limit.status());
            auto before = Before(req);
            if (!before.ok()) return done(before.status());
            outbox::MessageFilter filter;
            if (auto e = req.query.find("endpoint"); e != req.query.end()) filter.endpoint = e->second;
            if (auto s = req.query.find("state"); s != req.query.end()) {
              if (s->second != "pending" && s->second != "delivered" && s->second != "failed") {
                return done(InvalidArguments("`state` must be pending, delivered or failed (got \"" + s->second + "\")"));
              }
              filter.state = s->second;
            }
            auto page = std::make_shared<outbox::MessagePage>();
            host.database().Read(
                [page, filter, limit = *limit, before = *before](store::Tx& tx) -> Status {
                  DSH_ASSIGN_OR_RETURN(*page, outbox::ListMessages(tx, filter, limit, before));
                  return Status::Ok();
                },
                [page, done = std::move(done)](Status st) {
                  if (!st.ok()) return done(st);
                  Json list = Json::array();
                  for (const auto& m : page->messages) list.push_back(outbox::MessageJson(m));
                  Json body = {{"messages", std::move(list)}};
                  if (page->next) body["next"] = *page->next;
                  done(HttpRouteResponse{200, std::move(body)});
                });
          },
  });
  out.push_back(HttpRoute{
      .method = "GET",
      .pattern = "/api/notifications/messages/{id}",
      .handler =
          [&host](HttpRouteRequest req, HttpRouteDone done) {
            struct Read {
              std::optional<outbox::Message> message;
              std::vector<outbox::Attempt> attempts;
            };
            auto read = std::make_shared<Read>();
            host.database().Read(
                [read, id = req.path_params.at("id")](store::Tx& tx) -> Status {
                  DSH_ASSIGN_OR_RETURN(read->message, outbox::GetMessage(tx, id));
                  if (read->message) {
                    DSH_ASSIGN_OR_RETURN(read->attempts, outbox::Attempts(tx, read->message->num));
                  }
                  return Status::Ok();
                },
                [read, id = req.path_params.at("id"), done = std::move(done)](Status st) {
                  if (!st.ok()) return done(st);
                  if (!read->message) return done(Status(codes::kNotFound, "no notification message " + id));
                  Json j = outbox::MessageJson(*read->message);
                  Json attempts = Json::array();
                  for (const auto& a : read->attempts) attempts.push_back(outbox::AttemptJson(a));
                  j["attempts_log"] = std::move(attempts);
                  j["payload"] = {{"type", read->message->event}, {"data", read->message->data}};
                  done(HttpRouteResponse{200, std::move(j)});
                });
          },
  });
  out.push_back(HttpRoute{
      .method = "POST",
      .pattern = "/api/notifications/endpoints/{name}/test",
      .handler =
          [&host, &plugin](HttpRouteRequest req, HttpRouteDone done) {
            const std::string name = req.path_params.at("name");
            if (!plugin.endpoints->Get()->contains(name)) {
              return done(Status(codes::kNotFound, "no endpoint `" + name + "` (GET /api/notifications lists them)"));
            }
            int64_t now = ToUnixMillis(host.clock().Now());
            Json data = {{"endpoint", name}, {"message", "Test notification from dsh: this endpoint works."}};
            auto id = std::make_shared<std::string>();
            host.database().Write(
                [id, name, data, now](store::Tx& tx) -> Status {
                  DSH_ASSIGN_OR_RETURN(*id, outbox::EnqueueTo(tx, name, "webhook.test", outbox::Fact{}, data, now));
                  return Status::Ok();
                },
                [&plugin, id, done = std::move(done)](Status st) {
                  if (!st.ok()) return done(st);
                  plugin.sender->SendNow(*id, [done](Result<outbox::Message> m) {
                    if (!m.ok()) return done(m.status());
                    done(HttpRouteResponse{200, Json{{"message", outbox::MessageJson(*m)}}});
                  });
                });
          },
  });
  out.push_back(HttpRoute{
      .method = "PUT",
      .pattern = "/api/notifications/endpoints/{name}",
      .handler =
          [&host, &plugin](HttpRouteRequest req, HttpRouteDone done) {
            auto parsed = ParseEndpoint(req.path_params.at("name"), req.body);
            if (!parsed.ok()) return done(parsed.status());
            if (Status st = plugin.endpoints->Put(std::move(parsed->first), std::move(parsed->second)); !st.ok()) {
              return done(st);
            }
            host.events().PublishChange({"notifications", ""});
            ListEndpoints(host, plugin, std::move(done));
          },
  });
  out.push_back(HttpRoute{
      .method = "DELETE",
      .pattern = "/api/notifications/endpoints/{name}",
      .handler =
          [&host, &plugin](HttpRouteRequest req, HttpRouteDone done) {
            if (!req.body.empty()) return done(InvalidArguments("DELETE takes no body"));
            if (Status st = plugin.endpoints->Delete(req.path_params.at("name")); !st.ok()) return done(st);
            host.events().PublishChange({"notifications", ""});
            ListEndpoints(host, plugin, std::move(done));
          },
  });
  return out;
}

}  // namespace

Status RegisterWebhooksPlugin(host::Host& host) {
  const host::Config& config = host.config();
  DSH_ASSIGN_OR_RETURN(auto declared, dsh::webhooks::DeclaredEndpoints(config));
  DSH_ASSIGN_OR_RETURN(auto saved, dsh::webhooks::LoadSaved(host.profile().home()));
  for (const auto& s : saved) {
    for (const auto& d : declared) {
      if (d.spec.name == s.spec.name) {
        spdlog::warn("webhooks: the saved endpoint `{}` is ignored: dsh.yml declares one of that name", s.spec.name);
      }
    }
  }
  auto plugin = std::make_shared<Plugin>();
  plugin->endpoints =
      std::make_unique<EndpointSet>(host.profile().home(), std::move(declared), std::move(saved), host.agents().webhooks());

  dsh::webhooks::SenderOptions options;
  options.owner = NewId("host_");
  options.retry_for_ms = config.notifications.retry_for_seconds * 1000;
  options.timeout = std::chrono::seconds(config.notifications.timeout_seconds);
  options.lease_ms = config.notifications.timeout_seconds * 1000 + 5'000;
  options.public_url = config.server.public_url;
  options.metrics = &host.metrics();
  options.on_change = [&host] { host.events().PublishChange({"notifications", ""}); };
  plugin->sender = std::make_unique<Sender>(host.database(), host.clock(), *plugin->endpoints, std::move(options));

  metrics::Gauge& pending = host.metrics().AddGauge(
      "dsh_webhook_outbox_pending", "Webhook messages written and not yet delivered or failed (retrying ones included).");
  host.AddMetricsRefresh([&pending](store::Tx& tx) -> Status {
    DSH_ASSIGN_OR_RETURN(int64_t n, outbox::CountPending(tx));
    pending.Set(static_cast<double>(n));
    return Status::Ok();
  });
  host.AddPruneTask(outbox::PruneTask(config.retention.loop_run_days * 86'400'000));
  for (auto& route : Routes(host, *plugin)) host.AddHttpRoute(std::move(route));

  // A message is looked for once the transaction that wrote it committed:
  // every commit that may write one is followed by a change or an event
  // here, and the senders coalesce the wake-ups (one look per round). Not a
  // flag raised inside the transaction: an earlier commit's event could take
  // it before the message committed, leaving it to the 1 s look.
  Plugin* p = plugin.get();
  auto wake_if_written = [p, &host] {
    if (host.agents().webhooks().Get()) p->sender->Wake();
  };
  host.OnStart([p, &host, wake_if_written]() -> Status {
    p->changes = host.events().SubscribeChanges([wake_if_written](const session::EventHub::Change&) { wake_if_written(); });
    p->events = host.events().SubscribeAll(
        [wake_if_written](const std::string&, const std::vector<session::Event>&) { wake_if_written(); });
    p->sender->Start();
    return Status::Ok();
  });
  host.OnStop([p] {
    p->changes.reset();
    p->events.reset();
    p->sender->Stop();
  });
  host.Own(std::move(plugin));
  return Status::Ok();
}

}  // namespace dsh::plugins::webhooks
