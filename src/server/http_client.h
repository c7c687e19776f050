#pragma once

#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace dsh::server {

struct HttpClientResponse {
  int status = 0;
  std::string body;
  std::map<std::string, std::string> headers = {};  // lower-case names; the last of repeated ones
};

// A blocking HTTP/1.1 request to `url` ("http://HOST:PORT/...") for the CLI
// and tests. Errors: `unavailable` when the host cannot be reached,
// `invalid_arguments` for a URL it cannot use.
Result<HttpClientResponse> HttpRequestSync(const std::string& method, const std::string& url, const std::string& body,
                                           const std::vector<std::pair<std::string, std::string>>& headers,
                                           std::chrono::seconds timeout = std::chrono::seconds(60));

}  // namespace dsh::server
