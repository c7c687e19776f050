#include "server/api.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <iterator>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <initializer_list>
#include <map>
#include <optional>
#include <variant>

#include "base/schema.h"
#include "session/export.h"
#include "server/change_feed.h"
#include "server/web_assets.h"
#include "time/cron_expr.h"
#include "time/errors.h"
#include "time/rfc3339.h"
#include "time/time_zone.h"

namespace dsh::server {
namespace {

// Compares in time independent of where the strings differ.
bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

std::string CookieValue(const std::string& header, std::string_view name) {
  size_t pos = 0;
  while (pos < header.size()) {
    size_t end = header.find(';', pos);
    if (end == std::string::npos) end = header.size();
    std::string_view part(header.data() + pos, end - pos);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    if (part.size() > name.size() && part.substr(0, name.size()) == name && part[name.size()] == '=') {
      return std::string(part.substr(name.size() + 1));
    }
    pos = end + 1;
  }
  return "";
}

HttpResponse MethodNotAllowed(const std::string& allowed) {
  HttpResponse r = HttpResponse::FromError(Status("method_not_allowed", "use " + allowed + " for this path"));
  r.headers.emplace_back("Allow", allowed);
  return r;
}

HttpResponse Unauthorized() {
  HttpResponse r = HttpResponse::FromError(
      Status("unauthorized",
             "missing or wrong token: send `Authorization: Bearer TOKEN` (the token is in "
             "<home>/auth-token unless the host was started with --token or $DSH_TOKEN)"));
  r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

// `forbidden` when the request has an `Origin` other than this host's own
// (`http://` or `https://` + its `Host`): a page of another site. Clients
// that are not browsers send no Origin and pass. A page whose name was
// rebound to this address (DNS rebinding) has a matching Origin and Host;
// what stops it is the token, which it has neither as a header nor as the
// cookie (cookies belong to the name the browser signed in with).
Status CheckOrigin(const HttpRequest& req, std::string_view what) {
  const std::string* origin = req.Header("origin");
  if (origin == nullptr) return Status::Ok();
  const std::string* host = req.Header("host");
  if (host == nullptr || (*origin != "http://" + *host && *origin != "https://" + *host)) {
    return Status("forbidden", std::string(what) + " from another origin (" + *origin + ") is refused");
  }
  return Status::Ok();
}

// Keeps a WebSocket in dsh_websocket_clients from its OnOpen to its OnClose.
class CountedSession final : public WebSocketSession {
 public:
  CountedSession(std::shared_ptr<WebSocketSession> inner, metrics::Gauge& open) : inner_(std::move(inner)), open_(open) {}
  void OnOpen(std::shared_ptr<WebSocketConnection> connection) override {
    open_.Inc();
    inner_->OnOpen(std::move(connection));
  }
  void OnMessage(std::string message) override { inner_->OnMessage(std::move(message)); }
  void OnDrained() override { inner_->OnDrained(); }
  void OnClose() override {
    inner_->OnClose();
    open_.Dec();
  }

 private:
  std::shared_ptr<WebSocketSession> inner_;
  metrics::Gauge& open_;
};

std::shared_ptr<WebSocketSession> Counted(std::shared_ptr<WebSocketSession> session, metrics::Gauge* open) {
  if (open == nullptr) return session;
  return std::make_shared<CountedSession>(std::move(session), *open);
}

HttpResponse Unavailable(std::string_view what) {
  return HttpResponse::FromError(
      Status(codes::kUnavailable, std::string(what) + " is not available on this host"));
}

// Splits on '/', keeping empty segments ("/a//b" has an empty one).
std::vector<std::string_view> Segments(std::string_view path) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (true) {
    size_t slash = path.find('/', pos);
    out.push_back(path.substr(pos, slash == std::string_view::npos ? std::string_view::npos : slash - pos));
    if (slash == std::string_view::npos) return out;
    pos = slash + 1;
  }
}

// Matches `path` against a pattern such as "/api/sessions/{id}/events",
// where `{x}` stands for one non-empty segment.
template <typename Params>
std::optional<Params> MatchPath(std::string_view pattern, std::string_view path) {
  std::vector<std::string_view> want = Segments(pattern), got = Segments(path);
  if (want.size() != got.size()) return std::nullopt;
  Params params;
  for (size_t i = 0; i < want.size(); ++i) {
    std::string_view w = want[i];
    if (w.size() > 2 && w.front() == '{' && w.back() == '}') {
      if (got[i].empty()) return std::nullopt;
      params.emplace(std::string(w.substr(1, w.size() - 2)), std::string(got[i]));
    } else if (w != got[i]) {
      return std::nullopt;
    }
  }
  return params;
}

// Refuses query parameters a route does not know, naming the first one.
Status CheckQuery(const HttpRequest& req, std::initializer_list<std::string_view> known) {
  for (const auto& [name, value] : req.query) {
    bool ok = false;
    for (std::string_view k : known) ok = ok || name == k;
    if (!ok) {
      std::string list;
      for (std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      return InvalidArguments("unknown query parameter `" + name + "` (expected " + (list.empty() ? "none" : list) +
                              ")");
    }
  }
  return Status::Ok();
}

Result<int64_t> QueryInt(const HttpRequest& req, std::string_view name, int64_t fallback, int64_t min,
                         int64_t max) {
  return host::QueryInt(req.query, name, fallback, min, max);
}

// `client_time_zone`, accepted by the routes that act for a person: the zone
// of their browser, as an IANA name the time layer accepts; stored canonical
// (a link such as "Asia/Calcutta" becomes "Asia/Kolkata").
constexpr const char* kClientTimeZone = "client_time_zone";

Status DecodeClientTimeZone(const Json& value, std::optional<std::string>& out) {
  std::string name;
  DSH_RETURN_IF_ERROR(
      schema_detail::DecodeString(value, kClientTimeZone, StringRule{.non_empty = false}, name));
  auto zone = ResolveTimeZone(name);
  if (!zone.ok()) {
    return Status(zone.status().code(), "`" + std::string(kClientTimeZone) + "`: " + zone.status().message());
  }
  out = zone->name();
  return Status::Ok();
}

// The field of a body schema holding DecodeClientTimeZone's result.
template <typename T>
ObjectSchema<T>& WithClientTimeZone(ObjectSchema<T>& schema, std::optional<std::string> T::*member) {
  Json json_schema = {{"type", "string"},
                      {"description", "the IANA time zone of the person's browser, e.g. \"Europe/Paris\""}};
  return schema.Raw(
      kClientTimeZone, false, std::move(json_schema),
      [member](const Json& v, const std::string&, T& out) { return DecodeClientTimeZone(v, out.*member); });
}

// The body of POST /api/sessions/{id}/messages.
struct MessageBody {
  std::string message;
  std::optional<std::string> mode;
  std::optional<std::string> key;
  std::optional<std::string> client_time_zone;
};
const ObjectSchema<MessageBody>& MessageBodySchema() {
  static const auto* schema = new ObjectSchema<MessageBody>(WithClientTimeZone(
      ObjectSchema<MessageBody>("A message for a session's agent.")
          .Field("message", &MessageBody::message, "the text", StringRule{.non_empty = true, .trim = true})
          .Optional("mode", &MessageBody::mode, "steer (default) or followup",
                    StringRule{.non_empty = true, .trim = false, .one_of = {"steer", "followup"}})
          .Optional("key", &MessageBody::key, "idempotency key: a second message with it is not delivered"),
      &MessageBody::client_time_zone));
  return *schema;
}

// The body of POST /api/sessions/{id}/approvals/{call_id}.
struct ApprovalBody {
  std::string decision;
};
const ObjectSchema<ApprovalBody>& ApprovalBodySchema() {
  static const auto* schema = new ObjectSchema<ApprovalBody>(
      ObjectSchema<ApprovalBody>("A person's answer to a tool call waiting for approval.")
          .Field("decision", &ApprovalBody::decision, "allow_once, allow_session or deny",
                 StringRule{.non_empty = true, .trim = false, .one_of = {"allow_once", "allow_session", "deny"}}));
  return *schema;
}

// The body of POST /api/sessions.
struct CreateBody {
  std::optional<std::string> preset;
  std::optional<std::string> cwd;
  std::optional<std::string> client_time_zone;  // the new session's time_zone
};
const ObjectSchema<CreateBody>& CreateBodySchema() {
  static const auto* schema = new ObjectSchema<CreateBody>(WithClientTimeZone(
      ObjectSchema<CreateBody>("A new session with the default model.")
          .Optional("preset", &CreateBody::preset, "preset id (default: the profile's default preset)")
          .Optional("cwd", &CreateBody::cwd, "the session's directory: an existing absolute path"),
      &CreateBody::client_time_zone));
  return *schema;
}

constexpr size_t kMaxUserTitle = 200;  // characters

// The title a rename (PATCH /api/sessions/{id}) sets, trimmed; nullopt
// clears it (back to the generated or fallback title); invalid_arguments
// naming `title` otherwise.
Result<std::optional<std::string>> UserTitle(const Json& title) {
  if (title.is_null()) return std::optional<std::string>();
  if (!title.is_string()) return InvalidArguments("`title` must be a string or null");
  std::string t = title.get<std::string>();
  const size_t first = t.find_first_not_of(" \t\r\n\f\v");
  if (first == std::string::npos) return InvalidArguments("`title` must not be empty (null returns to the generated title)");
  t = t.substr(first, t.find_last_not_of(" \t\r\n\f\v") - first + 1);
  size_t chars = 0;
  for (unsigned char c : t) chars += (c & 0xC0) != 0x80;
  if (chars > kMaxUserTitle) {
    return InvalidArguments("`title` has " + std::to_string(chars) + " characters; at most " +
                            std::to_string(kMaxUserTitle) + " are allowed");
  }
  return std::optional<std::string>(std::move(t));
}

// The body of POST /api/sessions/{id}/fork.
struct ForkBody {
  std::optional<int64_t> seed_length;
};
const ObjectSchema<ForkBody>& ForkBodySchema() {
  static const auto* schema = new ObjectSchema<ForkBody>(
      ObjectSchema<ForkBody>("A fork of a session.")
          .Optional("seed_length", &ForkBody::seed_length,
                    "how many of the parent's events the child starts with, a turn boundary "
                    "(default: all, up to the end of the last whole turn)",
                    IntRule{.positive = false, .min = 0}));
  return *schema;
}

template <typename T>
Result<T> DecodeBody(const HttpRequest& req, const ObjectSchema<T>& schema) {
  DSH_ASSIGN_OR_RETURN(Json body, ParseJson(req.body.empty() ? std::string_view("{}") : std::string_view(req.body)));
  if (!body.is_object()) return Status(codes::kInvalidJson, "the request body must be a JSON object");
  return schema.Decode(body);
}

constexpr int64_t kDefaultEventsLimit = 200;
constexpr int64_t kMaxEventsLimit = 1000;
constexpr int64_t kDefaultPreviewCount = 5;
constexpr int64_t kMaxPreviewCount = 20;
constexpr std::string_view kStreamPattern = "/api/sessions/{id}/stream";
constexpr std::string_view kChangesPath = "/api/changes";
constexpr std::string_view kMcpPath = "/mcp";

// A JSON-RPC error as the whole body of an HTTP error status (MCP's
// Streamable HTTP: input the server cannot accept is a 4xx).
HttpResponse McpFailure(int status, const Json& response) { return HttpResponse::FromJson(status, response); }

}  // namespace

const std::vector<Api::Route>& Api::Routes() {
  // To add a route: a line here and a member function. Paths under
  // /api/sessions/{id}/ name the session as `id`.
  static const std::vector<Route> kRoutes = {
      {"POST", "/api/tools/{name}", &Api::CallTool},
      {"POST", "/api/commands", &Api::RunCommand},
      {"GET", "/api/sessions/{id}", &Api::ReadHeader},
      {"PATCH", "/api/sessions/{id}", &Api::UpdateSession},
      {"GET", "/api/sessions/{id}/events", &Api::ReadEvents},
      {"GET", "/api/sessions/{id}/export", &Api::ExportSession},
      {"GET", kStreamPattern, &Api::StreamWithoutUpgrade},
      {"GET", kChangesPath, &Api::StreamWithoutUpgrade},
      {"POST", "/api/sessions/{id}/messages", &Api::PostMessage},
      {"POST", "/api/sessions", &Api::CreateSession},
      {"POST", "/api/sessions/{id}/cancel", &Api::CancelTurn},
      {"POST", "/api/sessions/{id}/approvals/{call_id}", &Api::AnswerApproval},
      {"POST", "/api/sessions/{id}/fork", &Api::ForkSession},
      {"POST", "/api/sessions/{id}/resume", &Api::ResumeSession},
      {"GET", "/api/host", &Api::HostInfo},
      {"GET", "/api/cron/preview", &Api::CronPreview},
  };
  return kRoutes;
}

bool Api::Authorized(const HttpRequest& req, bool allow_query_token) const {
  if (allow_query_token) {
    auto it = req.query.find("token");
    if (it != req.query.end()) return !it->second.empty() && ConstantTimeEquals(it->second, options_.token);
  }
  if (const std::string* auth = req.Header("authorization")) {
    constexpr std::string_view kBearer = "Bearer ";
    if (auth->size() > kBearer.size() && std::string_view(*auth).substr(0, kBearer.size()) == kBearer) {
      return ConstantTimeEquals(std::string_view(*auth).substr(kBearer.size()), options_.token);
    }
    return false;
  }
  if (const std::string* cookie = req.Header("cookie")) {
    std::string value = CookieValue(*cookie, "dsh_token");
    return !value.empty() && ConstantTimeEquals(value, options_.token);
  }
  return false;
}

void Api::Handle(HttpRequest req, Respond respond) const {
  if (req.path == "/healthz") {
    if (req.method != "GET" && req.method != "HEAD") return respond(MethodNotAllowed("GET"));
    return respond(HttpResponse::FromJson(200, Json{{"status", "ok"}, {"version", options_.version}}));
  }
  if (req.path == "/readyz") {
    if (req.method != "GET" && req.method != "HEAD") return respond(MethodNotAllowed("GET"));
    return Readiness(req, std::move(respond));
  }
  if (req.path == kMcpPath) return HandleMcp(std::move(req), std::move(respond));
  if (req.path == "/metrics") {
    if (!Authorized(req, false)) return respond(Unauthorized());
    return ServeMetrics(req, std::move(respond));
  }
  if (req.path.rfind("/api/", 0) != 0 && (req.method == "GET" || req.method == "HEAD")) {
    return ServeWeb(req, std::move(respond));
  }
  if (req.path.rfind("/api/", 0) == 0) {
    if (!Authorized(req, false)) return respond(Unauthorized());
    std::string allowed;
    for (const Route& route : Routes()) {
      auto params = MatchPath<PathParams>(route.pattern, req.path);
      if (!params) continue;
      if (req.method == route.method) return (this->*route.fn)(*params, std::move(req), std::move(respond));
      allowed += (allowed.empty() ? "" : ", ") + std::string(route.method);
    }
    for (const host::HttpRoute& route : services_.extra_routes) {
      auto params = MatchPath<PathParams>(route.pattern, req.path);
      if (!params) continue;
      if (req.method == route.method) return CallExtraRoute(route, std::move(*params), std::move(req), std::move(respond));
      allowed += (allowed.empty() ? "" : ", ") + route.method;
    }
    if (!allowed.empty()) return respond(MethodNotAllowed(allowed));
  }
  respond(HttpResponse::FromError(NotFound("no route for " + req.method + " " + req.path)));
}

namespace {

// One /readyz request: answered once, by the store's reply or by the timer,
// whichever comes first. Shared (shared_ptr) because both the reader
// thread's callback and the timer's handler hold it until they ran.
struct ReadyCheck {
  ReadyCheck(boost::asio::io_context& io, Respond r, bool h) : timer(io), respond(std::move(r)), head(h) {}

  // `reasons` empty = ready.
  void Answer(const std::vector<Status>& reasons) {
    if (answered.exchange(true)) return;
    HttpResponse r;
    if (reasons.empty()) {
      r = HttpResponse::FromJson(200, Json{{"status", "ready"}});
    } else {
      Json list = Json::array();
      for (const Status& st : reasons) list.push_back(Json{{"code", st.code()}, {"message", st.message()}});
      r = HttpResponse::FromJson(503, Json{{"status", "not_ready"}, {"reasons", std::move(list)}});
    }
    r.headers.emplace_back("Cache-Control", "no-store");
    if (head) r.body.clear();
    respond(std::move(r));
  }

  boost::asio::steady_timer timer;  // touched on the io_context only, after Readiness started it
  Respond respond;
  bool head;
  std::atomic<bool> answered{false};
  std::map<std::string, int64_t> versions;  // dsh_schema, filled by the read job
};

// A /readyz reason, not an error code: no route answers with it.
constexpr const char* kMigrationPending = "migration_pending";

// The host's own schema modules must be exactly at the versions this binary
// knows: an older one is a migration that has not run, a newer one was
// written by a newer dsh sharing the database. Plugin modules are not
// checked (the host does not keep their migrations).
std::vector<Status> SchemaReasons(const std::map<std::string, int64_t>& versions) {
  std::map<std::string, int64_t> known;
  for (const store::Migration& m : host::Host::AllMigrations()) {
    known[m.module] = std::max<int64_t>(known[m.module], m.version);
  }
  std::vector<Status> reasons;
  for (const auto& [module, want] : known) {
    auto it = versions.find(module);
    int64_t have = it == versions.end() ? 0 : it->second;
    std::string where = "schema module '" + module + "' is at version " + std::to_string(have) +
                        ", this dsh knows " + std::to_string(want);
    if (have < want) reasons.emplace_back(kMigrationPending, where + ": restart the host to migrate");
    if (have > want) reasons.emplace_back(std::string(codes::kSchemaTooNew), where + ": upgrade dsh");
  }
  return reasons;
}

}  // namespace

void Api::Readiness(const HttpRequest& req, Respond respond) const {
  if (services_.host == nullptr) {
    HttpResponse r = HttpResponse::FromJson(
        503,
        Json{{"status", "not_ready"},
             {"reasons",
              Json::array({Json{{"code", codes::kUnavailable}, {"message", "this server has no store"}}})}});
    if (req.method == "HEAD") r.body.clear();
    return respond(std::move(r));
  }
  auto check = std::make_shared<ReadyCheck>(services_.host->io(), std::move(respond), req.method == "HEAD");
  const auto timeout = options_.ready_timeout;
  check->timer.expires_after(timeout);
  check->timer.async_wait([check, timeout](const boost::system::error_code& ec) {
    if (ec) return;  // cancelled: the store answered
    check->Answer({Status(codes::kUnavailable, "the store did not answer a read within " +
                                                   std::to_string(timeout.count()) + " ms")});
  });
  services_.host->database().Read(
      [check](store::Tx& tx) {
        return tx.Query("SELECT module, version FROM dsh_schema", {}, [&](const store::Row& row) {
          check->versions[row.String(0)] = row.Int(1);
          return Status::Ok();
        });
      },
      [check](Status st) {
        // The timer is only ever touched on its io_context.
        boost::asio::post(check->timer.get_executor(), [check] { check->timer.cancel(); });
        check->Answer(st.ok() ? SchemaReasons(check->versions) : std::vector<Status>{st});
      });
}

namespace {

// The page a browser without the cookie gets (also for a wrong token).
HttpResponse SignInPage(int status, const std::string& why) {
  HttpResponse r;
  r.status = status;
  r.content_type = "text/html; charset=utf-8";
  r.body =
      "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" "
      "content=\"width=device-width, initial-scale=1\"><meta name=\"color-scheme\" content=\"light dark\">"
      "<title>dsh: sign in</title></head><body style=\"font-family:system-ui,sans-serif;max-width:36rem;"
      "margin:3rem auto;padding:0 1rem;line-height:1.5\"><h1>dsh</h1><p>" +
      why +
      "</p><p>Open the URL printed by <code>dsh web</code> (it ends with <code>?token=…</code>), or run "
      "<code>scripts/run</code> again to see it. The token is also in the profile's <code>auth-token</code> "
      "file.</p></body></html>\n";
  return r;
}

HttpResponse AssetResponse(const WebAsset& asset, const HttpRequest& req) {
  HttpResponse r;
  r.content_type = std::string(asset.content_type);
  const std::string* accept = req.Header("accept-encoding");
  bool gzip = !asset.gzip.empty() && accept != nullptr && accept->find("gzip") != std::string::npos;
  r.body = std::string(gzip ? asset.gzip : asset.body);
  if (gzip) r.headers.emplace_back("Content-Encoding", "gzip");
  if (!asset.gzip.empty()) r.headers.emplace_back("Vary", "Accept-Encoding");
  // Hashed names never change content; the page itself is checked every time.
  r.headers.emplace_back("Cache-Control", asset.immutable ? "public, max-age=31536000, immutable" : "no-cache");
  if (req.method == "HEAD") r.body.clear();
  return r;
}

}  // namespace

void Api::ServeWeb(const HttpRequest& req, Respond respond) const {
  if (req.path.rfind("/assets/", 0) == 0) {
    const WebAsset* asset = FindWebAsset(req.path);
    if (asset == nullptr) return respond(HttpResponse::FromError(NotFound("no file " + req.path)));
    return respond(AssetResponse(*asset, req));
  }
  if (req.path != "/" && req.path != "/index.html") {
    return respond(HttpResponse::FromError(NotFound("no route for " + req.method + " " + req.path)));
  }
  auto token = req.query.find("token");
  if (token != req.query.end()) {
    if (token->second.empty() || !ConstantTimeEquals(token->second, options_.token)) {
      return respond(SignInPage(401, "That token is not this host's."));
    }
    // Jupyter-style: the token URL sets the cookie and leaves the address
    // without the token.
    HttpResponse r;
    r.status = 303;
    r.content_type = "text/plain; charset=utf-8";
    r.headers.emplace_back("Location", "/");
    r.headers.emplace_back("Set-Cookie", "dsh_token=" + options_.token + "; Path=/; HttpOnly; SameSite=Strict");
    return respond(std::move(r));
  }
  if (!Authorized(req, false)) return respond(SignInPage(401, "This browser is not signed in to this dsh host."));
  const WebAsset* index = FindWebAsset("/index.html");
  if (index == nullptr) return respond(HttpResponse::FromError(NotFound("the web UI is not embedded")));
  respond(AssetResponse(*index, req));
}

void Api::HandleUpgrade(HttpRequest req, UpgradeRespond respond) const {
  auto params = MatchPath<PathParams>(kStreamPattern, req.path);
  const bool changes = req.path == kChangesPath;
  if (!params && !changes) {
    return respond(
        HttpResponse::FromError(NotFound("no WebSocket route for " + req.method + " " + req.path)));
  }
  if (!Authorized(req, true)) return respond(Unauthorized());
  // A browser's WebSocket carries the cookie to any page's request: only
  // this host's own pages may open one (CSWSH).
  if (Status st = CheckOrigin(req, "a WebSocket"); !st.ok()) return respond(HttpResponse::FromError(st));
  if (req.method != "GET") return respond(MethodNotAllowed("GET"));
  if (changes) {
    if (services_.events == nullptr) return respond(Unavailable("the change feed"));
    if (Status st = CheckQuery(req, {"token"}); !st.ok()) return respond(HttpResponse::FromError(st));
    return respond(Counted(std::make_shared<ChangeFeed>(*services_.events), changes_clients_));
  }
  if (services_.sessions == nullptr || services_.events == nullptr)
    return respond(Unavailable("the event stream"));
  if (Status st = CheckQuery(req, {"after", "token"}); !st.ok()) return respond(HttpResponse::FromError(st));
  auto after = QueryInt(req, "after", 0, 0, kMaxSafeInteger);
  if (!after.ok()) return respond(HttpResponse::FromError(after.status()));
  std::string id = params->at("id");
  session::SessionStore& store = *services_.sessions;
  session::EventHub& hub = *services_.events;
  store.GetAsync(id, [&store, &hub, id, after = *after, options = options_.stream, open = stream_clients_,
                      respond = std::move(respond)](Result<session::SessionHeader> header) {
    if (!header.ok()) return respond(HttpResponse::FromError(header.status()));
    if (after > header->last_seq) {
      return respond(HttpResponse::FromError(
          InvalidArguments("`after` (" + std::to_string(after) + ") is beyond the last seq of session " + id +
                           " (" + std::to_string(header->last_seq) + ")")));
    }
    respond(Counted(std::make_shared<EventStream>(store, hub, id, after, options), open));
  });
}

void Api::HandleMetricsListener(HttpRequest req, Respond respond) const {
  if (req.path != "/metrics") {
    return respond(HttpResponse::FromError(NotFound("this address serves only GET /metrics")));
  }
  ServeMetrics(req, std::move(respond));
}

void Api::ServeMetrics(const HttpRequest& req, Respond respond) const {
  if (req.method != "GET" && req.method != "HEAD") return respond(MethodNotAllowed("GET"));
  if (Status st = CheckQuery(req, {}); !st.ok()) return respond(HttpResponse::FromError(st));
  if (services_.host == nullptr) return respond(Unavailable("metrics"));
  services_.host->ScrapeMetrics([respond = std::move(respond), head = req.method == "HEAD"](std::string text) {
    HttpResponse r;
    r.content_type = std::string(metrics::Registry::kContentType);
    if (!head) r.body = std::move(text);
    respond(std::move(r));
  });
}

void Api::AddMetrics() {
  if (services_.host == nullptr) return;
  auto& clients = services_.host->metrics().AddGaugeFamily(
      "dsh_websocket_clients", "Open WebSocket connections, by feed (stream: a session's events; changes: the change feed).",
      {"feed"});
  stream_clients_ = &clients.WithLabels({"stream"});
  changes_clients_ = &clients.WithLabels({"changes"});
}

void Api::StreamWithoutUpgrade(const PathParams&, HttpRequest, Respond respond) const {
  respond(HttpResponse::FromError(Status(
      "upgrade_required", "this route is a WebSocket: send `Connection: Upgrade` and `Upgrade: websocket`")));
}

void Api::ReadHeader(const PathParams& params, HttpRequest req, Respond respond) const {
  if (services_.sessions == nullptr) return respond(Unavailable("the session store"));
  if (Status st = CheckQuery(req, {}); !st.ok()) return respond(HttpResponse::FromError(st));
  // From the store only: reading a header never resumes the session.
  services_.sessions->GetAsync(params.at("id"), [respond = std::move(respond)](Result<session::SessionHeader> h) {
    if (!h.ok()) return respond(HttpResponse::FromError(h.status()));
    respond(HttpResponse::FromJson(200, Json{{"session", session::HeaderToJson(*h)}}));
  });
}

void Api::UpdateSession(const PathParams& params, HttpRequest req, Respond respond) const {
  if (services_.sessions == nullptr) return respond(Unavailable("the session store"));
  if (Status st = CheckQuery(req, {}); !st.ok()) return respond(HttpResponse::FromError(st));
  auto body = ParseJson(req.body.empty() ? std::string_view("{}") : std::string_view(req.body));
  if (!body.ok()) return respond(HttpResponse::FromError(body.status()));
  if (!body->is_object()) {
    return respond(HttpResponse::FromError(Status(codes::kInvalidJson, "the request body must be a JSON object")));
  }
  // Every check before the first write: a bad body changes nothing.
  for (const auto& [key, value] : body->items()) {
    if (key != "title" && key != "archived") {
      return respond(HttpResponse::FromError(
          InvalidArguments("unknown property `" + key + "` (a session takes `title` and `archived`)")));
    }
  }
  std::vector<session::EventDraft> drafts;  // the title's event first, then the archiving's
  if (auto it = body->find("title"); it != body->end()) {
    auto title = UserTitle(*it);
    if (!title.ok()) return respond(HttpResponse::FromError(title.status()));
    drafts.push_back({std::string(session::event_types::kTitleUser), Json{{"title", *title ? Json(**title) : Json()}}});
  }
  if (auto it = body->find("archived"); it != body->end()) {
    if (!it->is_boolean()) return respond(HttpResponse::FromError(InvalidArguments("`archived` must be true or false")));
    drafts.push_back({std::string(session::event_types::kArchived), Json{{"archived", it->get<bool>()}}});
  }
  if (drafts.empty()) {
    return respond(HttpResponse::FromError(InvalidArguments("nothing to change: give `title` and/or `archived`")));
  }
  session::SessionStore& store = *services_.sessions;
  const std::string& id = params.at("id");
  // Straight to the log, live or cold (like a reminder's change): nothing
  // here wakes the session, and other hosts read it from the store.
  store.AppendAsync(id, std::move(drafts), [&store, id, respond = std::move(respond)](Result<std::vector<session::Event>> r) {
    if (!r.ok()) return respond(HttpResponse::FromError(r.status()));
    store.GetAsync(id, [&store, id, respond](Result<session::SessionHeader> h) {
      if (!h.ok()) return respond(HttpResponse::FromError(h.status()));
      store.ReadTitlesAsync({id}, [h = *h, id, respond](Result<std::map<std::string, session::Titles>> titles) {
        std::optional<std::string> title;
        std::optional<std::string_view> source;
        if (titles.ok()) {
          if (auto t = titles->find(id); t != titles->end()) {
            title = t->second.Effective();
            source = t->second.Source();
          }
        }
        respond(HttpResponse::FromJson(200, Json{{"session", session::HeaderToJson(h)},
                                                 {"title", title ? Json(*title) : Json()},
                                                 {"title_source", source ? Json(std::string(*source)) : Json()}}));
      });
    });
  });
}

void Api::ReadEvents(const PathParams& params, HttpRequest req, Respond respond) const {
  if (services_.sessions == nullptr) return respond(Unavailable("the session store"));
  if (Status st = CheckQuery(req, {"after", "limit"}); !st.ok()) return respond(HttpResponse::FromError(st));
  auto after = QueryInt(req, "after", 0, 0, kMaxSafeInteger);
  if (!after.ok()) return respond(HttpResponse::FromError(after.status()));
  auto limit = QueryInt(req, "limit", kDefaultEventsLimit, 1, kMaxEventsLimit);
  if (!limit.ok()) return respond(HttpResponse::FromError(limit.status()));
  session::SessionStore& store = *services_.sessions;
  const std::string& id = params.at("id");
  // Events first, then the header: last_seq is then at least the seq of
  // every event returned.
  store.ReadEventsAsync(
      id, *after, *limit,
      [&store, id, respond = std::move(respond)](Result<std::vector<session::Event>> events) mutable {
        if (!events.ok()) return respond(HttpResponse::FromError(events.status()));
        store.GetAsync(id, [events = std::move(events).value(),
                            respond = std::move(respond)](Result<session::SessionHeader> header) {
          if (!header.ok()) return respond(HttpResponse::FromError(header.status()));
          Json list = Json::array();
          for (const session::Event& e : events) list.push_back(session::EventToJson(e));
          respond(
              HttpResponse::FromJson(200, Json{{"events", std::move(list)}, {"last_seq", header->last_seq}}));
        });
      });
}

namespace {

// One export: the header and title first, then the whole log a page at a time.
struct ExportJob {
  session::SessionStore& store;
  std::string id;
  bool markdown = true;
  Respond respond;
  session::SessionHeader header;
  std::optional<std::string> title;
  std::vector<session::Event> events;
};

// A file name from the session's title: letters, digits, '-' and '_' kept,
// runs of anything else one '-', at most 60 bytes; the id when none is left.
std::string ExportFileName(const ExportJob& job) {
  std::string name;
  for (char c : job.title.value_or("")) {
    const bool keep = std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
    if (keep) {
      name.push_back(c);
    } else if (!name.empty() && name.back() != '-') {
      name.push_back('-');
    }
    if (name.size() >= 60) break;
  }
  while (!name.empty() && name.back() == '-') name.pop_back();
  return (name.empty() ? job.id : name) + (job.markdown ? ".md" : ".json");
}

void FinishExport(const std::shared_ptr<ExportJob>& job) {
  HttpResponse r;
  if (job->markdown) {
    r.content_type = "text/markdown; charset=utf-8";
    r.body = session::ExportMarkdown(job->header, job->title, job->events);
  } else {
    Json list = Json::array();
    for (const session::Event& e : job->events) list.push_back(session::EventToJson(e));
    Json body = {{"session", session::HeaderToJson(job->header)}, {"title", job->title ? Json(*job->title) : Json()},
                 {"events", std::move(list)}};
    r = HttpResponse::FromJson(200, body);
  }
  r.headers.emplace_back("Content-Disposition", "attachment; filename=\"" + ExportFileName(*job) + "\"");
  job->respond(std::move(r));
}

void ReadExportEvents(const std::shared_ptr<ExportJob>& job) {
  constexpr int64_t kPage = 1000;
  const int64_t after = job->events.empty() ? 0 : job->events.back().seq;
  job->store.ReadEventsAsync(job->id, after, kPage, [job](Result<std::vector<session::Event>> page) {
    if (!page.ok()) return job->respond(HttpResponse::FromError(page.status()));
    const bool more = static_cast<int64_t>(page->size()) == kPage;
    std::move(page->begin(), page->end(), std::back_inserter(job->events));
    // Up to the seq the header named: a session still being written exports
    // as it was when the export began.
    if (more && job->events.back().seq < job->header.last_seq) return ReadExportEvents(job);
    std::erase_if(job->events, [&](const session::Event& e) { return e.seq > job->header.last_seq; });
    FinishExport(job);
  });
}

}  // namespace

void Api::ExportSession(const PathParams& params, HttpRequest req, Respond respond) const {
  if (services_.sessions == nullptr) return respond(Unavailable("the session store"));
  if (Status st = CheckQuery(req, {"format"}); !st.ok()) return respond(HttpResponse::FromError(st));
  std::string format = "markdown";
  if (auto it = req.query.find("format"); it != req.query.end()) format = it->second;
  if (format != "markdown" && format != "json") {
    return respond(HttpResponse::FromError(InvalidArguments("`format` must be \"markdown\" or \"json\"")));
  }
  auto job = std::make_shared<ExportJob>(
      ExportJob{.store = *services_.sessions, .id = params.at("id"), .markdown = format == "markdown",
                .respond = std::move(respond)});
  job->store.GetAsync(job->id, [job](Result<session::SessionHeader> h) {
    if (!h.ok()) return job->respond(HttpResponse::FromError(h.status()));
    job->header = std::move(h).value();
    job->store.ReadTitlesAsync({job->id}, [job](Result<std::map<std::string, session::Titles>> titles) {
      if (titles.ok()) {
        if (auto t = titles->find(job->id); t != titles->end()) job->title = t->second.Effective();
      }
      ReadExportEvents(job);
    });
  });
}

void Api::CallTool(const PathParams& params, HttpRequest req, Respond respond) const {
  const std::string& name = params.at("name");
  auto body = ParseJson(req.body.empty() ? std::string_view("{}") : std::string_view(req.body));
  if (!body.ok()) return respond(HttpResponse::FromError(body.status()));
  if (!body->is_object()) {
    return respond(
        HttpResponse::FromError(Status(codes::kInvalidJson, "the request body must be a JSON object")));
  }
  agent::ToolContext ctx;
  Json args = Json::object();
  for (const auto& [key, value] : body->items()) {
    if (key == "args") {
      if (!value.is_object()) {
        return respond(HttpResponse::FromError(InvalidArguments("`args` must be a JSON object")));
      }
      args = value;
    } else if (key == "session_id") {
      if (!value.is_string() || value.get<std::string>().empty()) {
        return respond(HttpResponse::FromError(InvalidArguments("`session_id` must be a non-empty string")));
      }
      ctx.session_id = value.get<std::string>();
    } else if (key == kClientTimeZone) {
      if (Status st = DecodeClientTimeZone(value, ctx.client_time_zone); !st.ok()) {
        return respond(HttpResponse::FromError(st));
      }
    } else {
      return respond(HttpResponse::FromError(
          InvalidArguments("unknown property `" + key +
                           "` in the request body (expected args, session_id, client_time_zone)")));
    }
  }
  services_.tools.Invoke(name, ctx, args, [respond = std::move(respond)](Result<Json> result) {
    if (!result.ok()) return respond(HttpResponse::FromError(result.status()));
    respond(HttpResponse::FromJson(200, Json{{"result", std::move(result).value()}}));
  });
}

void Api::HandleMcp(HttpRequest req, Respond respond) const {
  if (!Authorized(req, false)) return respond(Unauthorized());
  // The Origin check MCP's Streamable HTTP transport requires.
  if (Status st = CheckOrigin(req, "an MCP request"); !st.ok()) return respond(HttpResponse::FromError(st));
  // No server-initiated stream (GET) and no MCP sessions to end (DELETE).
  if (req.method != "POST") return respond(MethodNotAllowed("POST"));
  if (Status st = CheckQuery(req, {"session_id", kClientTimeZone}); !st.ok()) {
    return respond(HttpResponse::FromError(st));
  }
  McpCaller caller;
  if (auto it = req.query.find("session_id"); it != req.query.end()) {
    if (it->second.empty()) {
      return respond(HttpResponse::FromError(
          InvalidArguments("query parameter `session_id` must name the calling session (a non-empty id)")));
    }
    caller.session_id = it->second;
  }
  if (auto it = req.query.find(kClientTimeZone); it != req.query.end()) {
    if (Status st = DecodeClientTimeZone(Json(it->second), caller.client_time_zone); !st.ok()) {
      return respond(HttpResponse::FromError(st));
    }
  }
  auto body = ParseJson(req.body);
  if (!body.ok()) return respond(McpFailure(400, McpEndpoint::ParseErrorResponse(body.status().message())));
  auto parsed = McpEndpoint::Parse(*body);
  if (const Json* error = std::get_if<Json>(&parsed)) return respond(McpFailure(400, *error));
  const McpMessage& message = std::get<McpMessage>(parsed);
  // The header is the revision negotiated by `initialize`, so it binds every
  // message after it; `initialize` itself negotiates in its params.
  if (const std::string* version = req.Header("mcp-protocol-version");
      version != nullptr && message.method != "initialize") {
    if (!McpEndpoint::SupportsVersion(*version)) {
      std::string supported;
      for (const auto& v : McpEndpoint::SupportedVersions()) supported += (supported.empty() ? "" : ", ") + v;
      const Json id = message.kind == McpMessage::Kind::kRequest ? message.id : Json(nullptr);
      return respond(McpFailure(
          400, McpEndpoint::ErrorResponse(id, McpEndpoint::kInvalidRequest,
                                          "unsupported MCP-Protocol-Version \"" + *version +
                                              "\" (supported: " + supported + ")")));
    }
  }
  if (message.kind != McpMessage::Kind::kRequest) {
    mcp_.Handle(message, caller, nullptr);  // never answers
    HttpResponse accepted;
    accepted.status = 202;
    accepted.content_type = "text/plain; charset=utf-8";
    return respond(std::move(accepted));
  }
  mcp_.Handle(message, caller, [respond = std::move(respond)](Json response) {
    respond(HttpResponse::FromJson(200, response));
  });
}

void Api::RunCommand(const PathParams&, HttpRequest req, Respond respond) const {
  if (services_.commands == nullptr) return respond(Unavailable("slash commands"));
  if (Status st = CheckQuery(req, {}); !st.ok()) return respond(HttpResponse::FromError(st));
  auto body = ParseJson(req.body.empty() ? std::string_view("{}") : std::string_view(req.body));
  if (!body.ok()) return respond(HttpResponse::FromError(body.status()));
  if (!body->is_object()) {
    return respond(
        HttpResponse::FromError(Status(codes::kInvalidJson, "the request body must be a JSON object")));
  }
  std::optional<std::string> text;
  host::CommandCall call;
  for (const auto& [key, value] : body->items()) {
    if (key == "text") {
      if (!value.is_string() || value.get<std::string>().empty()) {
        return respond(HttpResponse::FromError(InvalidArguments("`text` must be a non-empty string")));
      }
      text = value.get<std::string>();
    } else if (key == "session_id") {
      if (!value.is_string() || value.get<std::string>().empty()) {
        return respond(HttpResponse::FromError(InvalidArguments("`session_id` must be a non-empty string")));
      }
      call.session_id = value.get<std::string>();
    } else if (key == kClientTimeZone) {
      if (Status st = DecodeClientTimeZone(value, call.client_time_zone); !st.ok()) {
        return respond(HttpResponse::FromError(st));
      }
    } else {
      return respond(HttpResponse::FromError(
          InvalidArguments("unknown property `" + key +
                           "` in the request body (expected text, session_id, client_time_zone)")));
    }
  }
  if (!text) {
    return respond(HttpResponse::FromError(InvalidArguments("`text` is required, e.g. \"/sessions status\"")));
  }
  services_.commands->Run(*text, call, [respond = std::move(respond)](Result<host::CommandResult> result) {
    if (!result.ok()) return respond(HttpResponse::FromError(result.status()));
    respond(HttpResponse::FromJson(200, Json{{"result", {{"text", result->text}, {"data", result->data}}}}));
  });
}

void Api::PostMessage(const PathParams& params, HttpRequest req, Respond respond) const {
  if (services_.host == nullptr) return respond(Unavailable("the agent runtime"));
  if (Status st = CheckQuery(req, {}); !st.ok()) return respond(HttpResponse::FromError(st));
  auto body = DecodeBody(req, MessageBodySchema());
  if (!body.ok()) return respond(HttpResponse::FromError(body.status()));
  agent::Delivery d;
  d.session_id = params.at("id");
  d.text = std::move(body->message);
  d.mode = agent::ParseDeliveryMode(body->mode.value_or("steer")).value_or(agent::DeliveryMode::kSteer);
  d.key = std::move(body->key);
  d.meta = Json{{"origin", "api"}};
  // The agent reads the zone of a turn from the message that started it.
  if (body->client_time_zone) d.meta[kClientTimeZone] = *body->client_time_zone;
  services_.host->agents().Deliver(std::move(d), [respond = std::move(respond)](Result<agent::Delivered> r) {
    if (!r.ok()) return respond(HttpResponse::FromError(r.status()));
    respond(HttpResponse::FromJson(200, Json{{"message_id", r->message_id}, {"duplicate", r->duplicate}}));
  });
}

void Api::CreateSession(const PathParams&, HttpRequest req, Respond respond) const {
  if (services_.host == nullptr) return respond(Unavailable("the agent runtime"));
  if (Status st = CheckQuery(req, {}); !st.ok()) return respond(HttpResponse::FromError(st));
  auto body = DecodeBody(req, CreateBodySchema());
  if (!body.ok()) return respond(HttpResponse::FromError(body.status()));
  host::Host& host = *services_.host;
  session::NewSession s = host.DefaultNewSession();
  if (body->preset) {
    if (host.config().FindPreset(*body->preset) == nullptr) {
      return respond(HttpResponse::FromError(InvalidArguments("`preset`: no preset named '" + *body->preset + "'")));
    }
    s.preset = body->preset;
  }
  if (body->client_time_zone) s.time_zone = *body->client_time_zone;  // else the host's zone
  if (body->cwd) {
    auto cwd = session::CanonicalCwd(*body->cwd);
    if (!cwd.ok()) return respond(HttpResponse::FromError(cwd.status()));
    s.cwd = *cwd;
  }
  s.origin = "api";
  host.agents().Create(std::move(s), [respond = std::move(respond)](Result<session::SessionHeader> h) {
    if (!h.ok()) return respond(HttpResponse::FromError(h.status()));
    respond(HttpResponse::FromJson(201, Json{{"session", session::HeaderToJson(*h)}}));
  });
}

void Api::ForkSession(const PathParams& params, HttpRequest req, Respond respond) const {
  if (services_.sessions == nullptr) return respond(Unavailable("the session store"));
  if (Status st = CheckQuery(req, {}); !st.ok()) return respond(HttpResponse::FromError(st));
  auto body = DecodeBody(req, ForkBodySchema());
  if (!body.ok()) return respond(HttpResponse::FromError(body.status()));
  session::SessionStore& store = *services_.sessions;
  const std::string& id = params.at("id");
  // The child is cold: nothing here reaches the agents. The parent's header
  // gives the default seed and what the child inherits; its log only grows,
  // so a seed checked against it stays valid for the fork.
  store.GetAsync(id, [&store, id, seed_length = body->seed_length,
                      respond = std::move(respond)](Result<session::SessionHeader> parent) mutable {
    if (!parent.ok()) return respond(HttpResponse::FromError(parent.status()));
    if (seed_length && *seed_length > parent->last_seq) {
      return respond(HttpResponse::FromError(
          InvalidArguments("`seed_length` (" + std::to_string(*seed_length) + ") is beyond the last seq of session " +
                           id + " (" + std::to_string(parent->last_seq) + ")")));
    }
    session::NewSession child;
    child.cwd = parent->cwd;
    child.preset = parent->preset;
    child.route = parent->route;
    child.time_zone = parent->time_zone;
    child.delegation_depth = parent->delegation_depth;
    child.origin = "fork";
    store.ForkAsync(id, seed_length, std::move(child),
                    [respond = std::move(respond)](Result<session::SessionHeader> h) {
                      if (!h.ok()) {
                        Status st = h.status();
                        // The store's range and turn-boundary checks (seed_length is
                        // the only input left).
                        if (st.code() == codes::kInvalidArguments)
                          st = InvalidArguments("`seed_length`: " + st.message());
                        return respond(HttpResponse::FromError(st));
                      }
                      respond(HttpResponse::FromJson(201, Json{{"session", session::HeaderToJson(*h)}}));
                    });
  });
}

void Api::CancelTurn(const PathParams& params, HttpRequest req, Respond respond) const {
  if (services_.host == nullptr) return respond(Unavailable("the agent runtime"));
  if (Status st = CheckQuery(req, {}); !st.ok()) return respond(HttpResponse::FromError(st));
  const std::string& id = params.at("id");
  auto& agents = services_.host->agents();
  agents.GetStatus(id, [&agents, id, respond = std::move(respond)](agent::AgentStatus status) {
    if (status == agent::AgentStatus::kMissing) return respond(HttpResponse::FromError(NotFound("no session " + id)));
    bool running = status == agent::AgentStatus::kRunning;
    if (running) agents.Cancel(id);
    respond(HttpResponse::FromJson(200, Json{{"cancelled", running}, {"status", agent::AgentStatusName(status)}}));
  });
}

void Api::AnswerApproval(const PathParams& params, HttpRequest req, Respond respond) const {
  if (services_.host == nullptr) return respond(Unavailable("the agent runtime"));
  if (Status st = CheckQuery(req, {}); !st.ok()) return respond(HttpResponse::FromError(st));
  auto body = DecodeBody(req, ApprovalBodySchema());
  if (!body.ok()) return respond(HttpResponse::FromError(body.status()));
  const std::string& id = params.at("id");
  const std::string& call_id = params.at("call_id");
  auto& agents = services_.host->agents();
  agents.AnswerApproval(id, call_id, body->decision,
                        [&agents, id, call_id, decision = body->decision, respond = std::move(respond)](Status st) {
                          if (st.ok()) {
                            return respond(HttpResponse::FromJson(
                                200, Json{{"session_id", id}, {"call_id", call_id}, {"decision", decision}}));
                          }
                          if (st.code() != "not_live") return respond(HttpResponse::FromError(st));
                          // Not live here: a missing session is a 404; otherwise
                          // nothing waits here (cold, or live on another host).
                          agents.GetStatus(id, [id, call_id, respond](agent::AgentStatus status) {
                            if (status == agent::AgentStatus::kMissing) {
                              return respond(HttpResponse::FromError(NotFound("no session " + id)));
                            }
                            respond(HttpResponse::FromError(Status(
                                codes::kConflict, "no tool call " + call_id + " waits for approval in session " + id +
                                                      " on this host (its turn ended, or it runs on another host)")));
                          });
                        });
}

void Api::ResumeSession(const PathParams& params, HttpRequest req, Respond respond) const {
  if (services_.host == nullptr) return respond(Unavailable("the agent runtime"));
  if (Status st = CheckQuery(req, {}); !st.ok()) return respond(HttpResponse::FromError(st));
  if (req.body.find_first_not_of(" \t\r\n") != std::string::npos) {
    auto body = ParseJson(req.body);
    if (!body.ok() || !body->is_object()) {
      return respond(HttpResponse::FromError(InvalidArguments("the body must be empty or {}")));
    }
    if (!body->empty()) {
      return respond(HttpResponse::FromError(
          InvalidArguments("unknown property `" + body->begin().key() + "`: resume takes no arguments")));
    }
  }
  const std::string& id = params.at("id");
  auto& agents = services_.host->agents();
  agents.Resume(id, [&agents, id, respond = std::move(respond)](Status st) {
    if (!st.ok()) return respond(HttpResponse::FromError(st));
    auto status = agents.LiveStatus(id).value_or(agent::AgentStatus::kIdle);
    respond(HttpResponse::FromJson(200, Json{{"status", agent::AgentStatusName(status)}}));
  });
}

void Api::HostInfo(const PathParams&, HttpRequest req, Respond respond) const {
  if (services_.host == nullptr) return respond(Unavailable("host information"));
  if (Status st = CheckQuery(req, {}); !st.ok()) return respond(HttpResponse::FromError(st));
  host::Host& host = *services_.host;
  const auto& route = host.models().default_route();
  Json presets = Json::array();
  for (const auto& p : host.config().presets) presets.push_back(p.id);
  std::vector<std::string> tool_names;
  for (const auto& t : services_.tools.List()) tool_names.push_back(t->name());
  std::sort(tool_names.begin(), tool_names.end());
  Json tools = tool_names;
  Json providers = Json::array();
  for (const auto& choice : host.models().Choices()) {
    Json models = nullptr;  // any model name
    if (!choice.models.empty()) {
      models = Json::array();
      for (const auto& m : choice.models) models.push_back({{"name", m.name}, {"reasoning_efforts", m.reasoning_efforts}});
    }
    providers.push_back({{"name", choice.name},
                         {"models", std::move(models)},
                         {"available", choice.available},
                         {"key_env", choice.api_key_env.empty() ? Json(nullptr) : Json(choice.api_key_env)}});
  }
  Json info = {{"version", options_.version},
               {"default_model",
                {{"provider", route.provider}, {"model", route.model}, {"description", host.models().Describe(route)}}},
               {"presets", std::move(presets)},
               {"providers", std::move(providers)},
               {"default_preset", host.config().default_preset},
               {"global_session_id", host.global_session_id() ? Json(*host.global_session_id()) : Json(nullptr)},
               {"mcp_servers", host.mcp_servers().Describe()},
               {"tools", std::move(tools)}};
  Json workspaces = Json::array();
  for (const auto& w : host.config().workspaces) workspaces.push_back({{"id", w.id}, {"path", w.path}});
  info["workspaces"] = std::move(workspaces);
  for (const auto& [key, value] : host.host_info().items()) info[key] = value;
  respond(HttpResponse::FromJson(200, info));
}

void Api::CronPreview(const PathParams&, HttpRequest req, Respond respond) const {
  if (services_.host == nullptr) return respond(Unavailable("the host clock"));
  if (Status st = CheckQuery(req, {"expr", "tz", "count"}); !st.ok()) {
    return respond(HttpResponse::FromError(st));
  }
  auto expr_it = req.query.find("expr");
  if (expr_it == req.query.end() || expr_it->second.empty()) {
    return respond(HttpResponse::FromError(
        InvalidArguments("query parameter `expr` is required: a five-field cron rule or @macro")));
  }
  auto count = QueryInt(req, "count", kDefaultPreviewCount, 1, kMaxPreviewCount);
  if (!count.ok()) return respond(HttpResponse::FromError(count.status()));
  // The time layer's checks and codes, as `dsh cron next` gives them.
  auto expr = CronExpr::Parse(expr_it->second);
  if (!expr.ok()) return respond(HttpResponse::FromError(expr.status().WithContext("`expr`")));
  auto tz_it = req.query.find("tz");
  auto zone = tz_it == req.query.end() ? Result<TimeZone>(HostTimeZone()) : ResolveTimeZone(tz_it->second);
  if (!zone.ok()) return respond(HttpResponse::FromError(zone.status().WithContext("`tz`")));
  const WallTime now = services_.host->clock().Now();
  Json next = Json::array();
  WallTime t = now;
  for (int64_t i = 0; i < *count; ++i) {
    std::optional<WallTime> occurrence = expr->Next(t, *zone);
    if (!occurrence) break;  // none left before the year 10000
    next.push_back(FormatRfc3339InZone(*occurrence, *zone));
    t = *occurrence;
  }
  if (next.empty()) {
    // A loop with this rule would be refused with the same code.
    return respond(HttpResponse::FromError(
        Status(codes::kCronNeverFires,
               "`expr`: the cron rule has no occurrence after " + FormatRfc3339InZone(now, *zone))));
  }
  respond(HttpResponse::FromJson(
      200, Json{{"description", expr->Describe()}, {"tz", zone->name()}, {"next", std::move(next)}}));
}

void Api::CallExtraRoute(const host::HttpRoute& route, PathParams params, HttpRequest req, Respond respond) const {
  for (const auto& [name, value] : req.query) {
    bool known = false;
    for (const std::string& k : route.query_keys) known = known || name == k;
    if (!known) {
      std::string list;
      for (const std::string& k : route.query_keys) list += (list.empty() ? "" : ", ") + k;
      return respond(HttpResponse::FromError(InvalidArguments(
          "unknown query parameter `" + name + "` (expected " + (list.empty() ? "none" : list) + ")")));
    }
  }
  host::HttpRouteRequest request{std::move(params), std::move(req.query), std::move(req.body)};
  route.handler(std::move(request), [respond = std::move(respond)](Result<host::HttpRouteResponse> r) {
    if (!r.ok()) return respond(HttpResponse::FromError(r.status()));
    respond(HttpResponse::FromJson(r->status, r->body));
  });
}

}  // namespace dsh::server
