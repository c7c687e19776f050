#pragma once

#include <optional>
#include <string>

#include "base/json.h"
#include "base/status.h"
#include "server/http_client.h"

namespace dsh::app {

// Calls the API of the running host of a profile (found through its run
// file) the way the browser does. An API error comes back as its Status
// (code and message unchanged).
class HostClient {
 public:
  // Finds the profile's running host; creates nothing. Errors: `unavailable`
  // when none runs.
  static Result<HostClient> ForProfile(const std::optional<std::string>& home);

  // The Status an API error body `{"error": {"code", "message"}}` stands
  // for; `fallback` when the body has no such error.
  static Status ErrorFromBody(const Json& body, Status fallback);

  // POST `path` with a JSON body; returns the response body on 2xx.
  Result<Json> Post(const std::string& path, const Json& body) const;
  // GET `path` (with its query, already encoded); the response body on 2xx.
  Result<Json> Get(const std::string& path) const;
  // POST `body` as is to `path` and return the response whatever its status.
  Result<server::HttpClientResponse> PostRaw(const std::string& path, const std::string& body,
                                             std::chrono::seconds timeout) const;

 private:
  Result<Json> Send(const std::string& method, const std::string& path, const std::string& body) const;

  HostClient(std::string url, std::string token) : url_(std::move(url)), token_(std::move(token)) {}
  std::string url_;
  std::string token_;
};

}  // namespace dsh::app
