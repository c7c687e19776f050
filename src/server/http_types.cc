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
  // The same table as docs/API.md "Errors" (ErrorCodes.* tests check both
  // against every code in the sources). The caller's mistakes are 4xx.
  static const std::map<std::string, int, std::less<>> kTable = {
      // The request or its arguments are wrong.
      {"invalid_json", 400}, {"invalid_arguments", 400}, {"invalid_time_zone", 400}, {"invalid_timestamp", 400},
      {"invalid_local_time", 400}, {"invalid_cron", 400}, {"cron_never_fires", 400},
      {"invalid_reasoning_effort", 400}, {"invalid_config", 400}, {"no_default_model", 400},
      {"timezone_confirmation_required", 400}, {"nonexistent_local_time", 400}, {"not_future", 400},
      {"unauthorized", 401}, {"forbidden", 403},
      // Refused by the workspace rules (docs/TOOLS.md).
      {"path_outside_workspace", 403}, {"address_not_allowed", 403}, {"tool_denied", 403},
      {"not_found", 404}, {"unknown_tool", 404}, {"unknown_command", 404}, {"unknown_loop", 404},
      {"unknown_provider", 404}, {"unknown_model", 404},
      {"method_not_allowed", 405},
      // The request is fine but the state is not (retry later or elsewhere).
      {"already_exists", 409}, {"conflict", 409}, {"duplicate_key", 409}, {"session_busy", 409},
      {"agent_busy", 409}, {"not_live", 409}, {"lease_lost", 409},
      {"payload_too_large", 413}, {"upgrade_required", 426}, {"model_rate_limited", 429},
      // The model provider failed.
      {"model_error", 502}, {"model_bad_response", 502}, {"model_timeout", 504},
      {"unavailable", 503}, {"contended", 503}, {"shutting_down", 503}, {"persistence_uncertain", 503}, {"model_unavailable", 503},
      {"sandbox_unavailable", 503},
      // An MCP server failed.
      {"mcp_error", 502}, {"mcp_unavailable", 503}, {"mcp_timeout", 504},
      // Everything else is ours: internal, io_error, storage_error, commit_failed, corrupt_event,
      // corrupt_loop, schema_too_new, and the turn outcomes step_limit, interrupted, cancelled,
      // and the tool outcome approval_timeout.
      {"corrupt_schedule_log", 500},
  };
  auto it = kTable.find(code);
  if (it != kTable.end()) return it->second;
  if (code.rfind("invalid_", 0) == 0) return 400;  // a plugin's own invalid_* code
  if (code.rfind("unknown_", 0) == 0) return 404;  // a plugin's own unknown_* code
  return 500;
}

}  // namespace dsh::server
