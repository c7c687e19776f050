#include "server/http_types.h"

namespace dsh::server {

HttpResponse HttpResponse::FromJson(int status, const Json& body) {
  HttpResponse r;
  r.status = status;
  r.body = DumpJson(body) + "\n";
  return r;
}

HttpResponse HttpResponse::FromError(const Status& error) {
  return FromJson(HttpStatusFor(error.code()),
                  Json{{"error", {{"code", error.code()}, {"message", error.message()}}}});
}

int HttpStatusFor(const std::string& code) {
  static const std::map<std::string, int, std::less<>> kTable = {
      {"invalid_json", 400},       {"invalid_arguments", 400}, {"unauthorized", 401},
      {"forbidden", 403},          {"not_found", 404},         {"unknown_tool", 404},
      {"unknown_command", 404},
      {"method_not_allowed", 405}, {"already_exists", 409},    {"conflict", 409},
      {"payload_too_large", 413},  {"upgrade_required", 426},   {"unavailable", 503},       {"shutting_down", 503},
      {"persistence_uncertain", 503},
  };
  auto it = kTable.find(code);
  if (it != kTable.end()) return it->second;
  if (code.rfind("invalid_", 0) == 0) return 400;  // invalid_time_zone, invalid_cron, ...
  if (code.rfind("unknown_", 0) == 0) return 404;  // unknown_loop, unknown_preset, ...
  return 500;
}

}  // namespace dsh::server
