#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/json.h"
#include "base/status.h"

namespace dsh::server {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // decoded path without the query: "/api/tools/x"
  std::map<std::string, std::string> query;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;

  const std::string* Header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? nullptr : &it->second;
  }
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;

  static HttpResponse FromJson(int status, const Json& body);
  // `{"error": {"code", "message"}}` with the HTTP status that fits the code.
  static HttpResponse FromError(const Status& error);
};

// Called once per response; may be called from any thread.
using Respond = std::function<void(HttpResponse)>;
using HttpHandler = std::function<void(HttpRequest, Respond)>;

// The HTTP status for an error code (docs/API.md has the table).
int HttpStatusFor(const std::string& code);

}  // namespace dsh::server
