#include "server/api.h"

namespace dsh::server {
namespace {

constexpr std::string_view kToolsPrefix = "/api/tools/";

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

}  // namespace

bool Api::Authorized(const HttpRequest& req) const {
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
  if (req.path.rfind("/api/", 0) == 0) {
    if (!Authorized(req)) {
      HttpResponse r = HttpResponse::FromError(
          Status("unauthorized", "missing or wrong token: send `Authorization: Bearer TOKEN` (the token is in "
                                 "<home>/auth-token unless the host was started with --token or $DSH_TOKEN)"));
      r.headers.emplace_back("WWW-Authenticate", "Bearer");
      return respond(std::move(r));
    }
    if (req.path.rfind(kToolsPrefix, 0) == 0 && req.path.size() > kToolsPrefix.size()) {
      std::string name = req.path.substr(kToolsPrefix.size());
      if (req.method != "POST") return respond(MethodNotAllowed("POST"));
      return CallTool(name, req, std::move(respond));
    }
  }
  respond(HttpResponse::FromError(NotFound("no route for " + req.method + " " + req.path)));
}

void Api::CallTool(const std::string& name, const HttpRequest& req, Respond respond) const {
  auto body = ParseJson(req.body.empty() ? std::string_view("{}") : std::string_view(req.body));
  if (!body.ok()) return respond(HttpResponse::FromError(body.status()));
  if (!body->is_object()) {
    return respond(HttpResponse::FromError(Status(codes::kInvalidJson, "the request body must be a JSON object")));
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
    } else {
      return respond(HttpResponse::FromError(
          InvalidArguments("unknown property `" + key + "` in the request body (expected args, session_id)")));
    }
  }
  tools_.Invoke(name, ctx, args, [respond = std::move(respond)](Result<Json> result) {
    if (!result.ok()) return respond(HttpResponse::FromError(result.status()));
    respond(HttpResponse::FromJson(200, Json{{"result", std::move(result).value()}}));
  });
}

}  // namespace dsh::server
