#pragma once

#include <string>

#include "agent/tool_registry.h"
#include "server/http_types.h"

namespace dsh::server {

// The JSON API of docs/API.md over the host's services: token auth for
// /api/*, /healthz, and POST /api/tools/{name}. Thread-safe; Handle may be
// called concurrently and responds once, possibly from another thread.
class Api {
 public:
  struct Options {
    std::string token;    // required for every /api/* request
    std::string version;  // reported by /healthz
  };

  Api(Options options, const agent::ToolRegistry& tools) : options_(std::move(options)), tools_(tools) {}

  void Handle(HttpRequest req, Respond respond) const;

 private:
  bool Authorized(const HttpRequest& req) const;
  void CallTool(const std::string& name, const HttpRequest& req, Respond respond) const;

  Options options_;
  const agent::ToolRegistry& tools_;
};

}  // namespace dsh::server
