#include "app/host_client.h"

#include "host/profile.h"
#include "server/http_client.h"

namespace dsh::app {

Result<HostClient> HostClient::ForProfile(const std::optional<std::string>& home) {
  DSH_ASSIGN_OR_RETURN(host::Profile profile, host::Profile::Open(home));
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
  if (parsed.ok() && parsed->is_object() && parsed->contains("error") && (*parsed)["error"].is_object()) {
    const Json& e = (*parsed)["error"];
    return Status(e.value("code", "internal"), e.value("message", "(no message)"));
  }
  return Status(codes::kInternal, "the host answered HTTP " + std::to_string(res.status));
}

}  // namespace dsh::app
