#include "app/host_client.h"

#include "host/profile.h"

namespace dsh::app {

Result<HostClient> HostClient::ForProfile(const std::optional<std::string>& home) {
  DSH_ASSIGN_OR_RETURN(host::Profile profile, host::Profile::Find(home));
  DSH_ASSIGN_OR_RETURN(host::Profile::RunningHost running, profile.FindRunningHost());
  std::string url = running.url;
  if (!url.empty() && url.back() == '/') url.pop_back();
  return HostClient(url, running.token);
}

Result<Json> HostClient::Post(const std::string& path, const Json& body) const {
  return Send("POST", path, DumpJson(body));
}

Result<Json> HostClient::Get(const std::string& path) const { return Send("GET", path, ""); }

Result<Json> HostClient::Send(const std::string& method, const std::string& path, const std::string& body) const {
  DSH_ASSIGN_OR_RETURN(server::HttpClientResponse res,
                       server::HttpRequestSync(method, url_ + path, body, {{"Authorization", "Bearer " + token_}}));
  auto parsed = ParseJson(res.body);
  if (res.status >= 200 && res.status < 300) {
    if (!parsed.ok()) return Status(codes::kInternal, "the host answered with malformed JSON");
    return std::move(parsed).value();
  }
  return ErrorFromBody(parsed.ok() ? *parsed : Json(),
                       Status(codes::kInternal, "the host answered HTTP " + std::to_string(res.status)));
}

Result<server::HttpClientResponse> HostClient::PostRaw(const std::string& path, const std::string& body,
                                                       std::chrono::seconds timeout) const {
  return server::HttpRequestSync(
      "POST", url_ + path, body,
      {{"Authorization", "Bearer " + token_}, {"Accept", "application/json, text/event-stream"}}, timeout);
}

Status HostClient::ErrorFromBody(const Json& body, Status fallback) {
  if (!body.is_object()) return fallback;
  auto e = body.find("error");
  if (e == body.end() || !e->is_object()) return fallback;
  auto code = e->find("code");
  auto message = e->find("message");
  if (code == e->end() || !code->is_string() || code->get<std::string>().empty()) return fallback;
  return Status(code->get<std::string>(),
                message != e->end() && message->is_string() ? message->get<std::string>() : "(no message)");
}

}  // namespace dsh::app
