#include "server/mcp_endpoint.h"

#include <algorithm>
#include <memory>
#include <utility>

namespace dsh::server {
namespace {

constexpr const char* kInstructions =
    "dsh is a self-hosted agent session host: it keeps durable conversations (sessions) with LLM agents. "
    "These tools list, read, create and message sessions, and manage loops, which deliver a prompt to a "
    "session on a schedule (every N seconds, once after N seconds, or on a cron rule in a time zone), waking "
    "it when it is not running. Loops are durable and catch-up-safe: they live in the profile database and "
    "survive restarts, each occurrence is delivered at most once, and after downtime a loop delivers only "
    "the latest missed occurrence, never a burst.";

Json Success(const Json& id, Json result) {
  return Json{{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

// -32602 carrying a dsh error, so a client sees the same code as the HTTP API.
Json InvalidParams(const Json& id, const Status& error) {
  return McpEndpoint::ErrorResponse(id, McpEndpoint::kInvalidParams, error.message(),
                                    Json{{"code", error.code()}, {"message", error.message()}});
}

// A tool's outcome as an MCP CallToolResult. Tool errors are results with
// isError (not JSON-RPC errors), so a model sees them and can correct its call.
Json ToolResult(Result<Json> result) {
  if (!result.ok()) {
    const Status& st = result.status();
    return Json{{"content", Json::array({Json{{"type", "text"}, {"text", st.ToString()}}})},
                {"structuredContent", Json{{"error", Json{{"code", st.code()}, {"message", st.message()}}}}},
                {"isError", true}};
  }
  Json out = {{"content", Json::array({Json{{"type", "text"}, {"text", DumpJson(*result)}}})}};
  if (result->is_object()) out["structuredContent"] = std::move(result).value();
  out["isError"] = false;
  return out;
}

}  // namespace

const std::vector<std::string>& McpEndpoint::SupportedVersions() {
  static const std::vector<std::string> kVersions = {"2025-06-18", "2025-03-26"};
  return kVersions;
}

bool McpEndpoint::SupportsVersion(std::string_view version) {
  const auto& all = SupportedVersions();
  return std::find(all.begin(), all.end(), version) != all.end();
}

const std::vector<std::string>& McpEndpoint::ExposedTools() {
  static const std::vector<std::string> kTools = {
      "loop_create",  "loop_list",      "loop_delete",   "session_status",       "session_read",
      "session_send", "session_create", "list_sessions", "check_session_status",
  };
  return kTools;
}

Json McpEndpoint::ErrorResponse(const Json& id, int code, const std::string& message, Json data) {
  Json error = {{"code", code}, {"message", message}};
  if (!data.is_null()) error["data"] = std::move(data);
  return Json{{"jsonrpc", "2.0"}, {"id", id}, {"error", std::move(error)}};
}

Json McpEndpoint::ParseErrorResponse(const std::string& detail) {
  return ErrorResponse(nullptr, kParseError, "parse error: " + detail);
}

std::variant<McpMessage, Json> McpEndpoint::Parse(const Json& message) {
  if (message.is_array()) {
    return ErrorResponse(nullptr, kInvalidRequest, "batches are not supported: send one JSON-RPC message");
  }
  if (!message.is_object()) {
    return ErrorResponse(nullptr, kInvalidRequest, "a JSON-RPC message must be an object");
  }
  auto id_it = message.find("id");
  const bool has_id = id_it != message.end();
  const bool good_id = has_id && (id_it->is_string() || id_it->is_number_integer());
  Json reply_id = good_id ? *id_it : Json(nullptr);
  auto invalid = [&reply_id](const std::string& why) {
    return ErrorResponse(reply_id, kInvalidRequest, why);
  };

  auto version = message.find("jsonrpc");
  if (version == message.end() || !version->is_string() || *version != "2.0") {
    return invalid("`jsonrpc` must be \"2.0\"");
  }
  auto method = message.find("method");
  if (method == message.end()) {
    if (has_id && (message.contains("result") || message.contains("error"))) {
      return McpMessage{McpMessage::Kind::kResponse, *id_it, "", Json::object()};
    }
    return invalid("a request or notification needs a `method`");
  }
  if (!method->is_string()) return invalid("`method` must be a string");
  if (has_id && !good_id) {
    return invalid("`id` must be a string or an integer (got " + DescribeJson(*id_it) + ")");
  }
  Json params = Json::object();
  // A null `params` is taken as none: some clients send it with notifications.
  if (auto p = message.find("params"); p != message.end() && !p->is_null()) {
    if (!p->is_object()) return invalid("`params` must be an object");
    params = *p;
  }
  return McpMessage{has_id ? McpMessage::Kind::kRequest : McpMessage::Kind::kNotification,
                    has_id ? *id_it : Json(nullptr), method->get<std::string>(), std::move(params)};
}

void McpEndpoint::Handle(const McpMessage& message, const McpCaller& caller, Reply reply) const {
  // Notifications (notifications/initialized, cancelled, ...) and responses
  // change nothing in a stateless server.
  if (message.kind != McpMessage::Kind::kRequest) return;
  const Json& id = message.id;
  const std::string& method = message.method;
  if (method == "initialize") return reply(Success(id, Initialize(message.params)));
  if (method == "ping") return reply(Success(id, Json::object()));
  if (method == "tools/list") return reply(Success(id, ListTools()));  // `cursor` ignored: one page
  if (method == "tools/call") return CallTool(id, message.params, caller, std::move(reply));
  reply(ErrorResponse(id, kMethodNotFound, "method not found: " + method));
}

Json McpEndpoint::Initialize(const Json& params) const {
  std::string version = SupportedVersions().front();
  auto asked = params.find("protocolVersion");
  if (asked != params.end() && asked->is_string() && SupportsVersion(asked->get<std::string>())) {
    version = asked->get<std::string>();
  }
  return Json{{"protocolVersion", version},
              {"capabilities", Json{{"tools", Json{{"listChanged", false}}}}},
              {"serverInfo", Json{{"name", "dsh"}, {"version", version_}}},
              {"instructions", kInstructions}};
}

Json McpEndpoint::ListTools() const {
  Json list = Json::array();
  for (const std::string& name : ExposedTools()) {
    std::shared_ptr<agent::Tool> tool = tools_.Find(name);
    if (!tool) continue;  // its plugin is off
    list.push_back(Json{
        {"name", tool->name()}, {"description", tool->description()}, {"inputSchema", tool->parameters()}});
  }
  return Json{{"tools", std::move(list)}};
}

void McpEndpoint::CallTool(const Json& id, const Json& params, const McpCaller& caller, Reply reply) const {
  auto name_it = params.find("name");
  if (name_it == params.end() || !name_it->is_string() || name_it->get<std::string>().empty()) {
    return reply(
        InvalidParams(id, InvalidArguments("`name` must be the name of a tool (a non-empty string)")));
  }
  const std::string name = name_it->get<std::string>();
  const auto& exposed = ExposedTools();
  if (std::find(exposed.begin(), exposed.end(), name) == exposed.end() || tools_.Find(name) == nullptr) {
    return reply(
        InvalidParams(id, Status(codes::kUnknownTool, "no tool named '" + name + "' (see tools/list)")));
  }
  Json args = Json::object();
  if (auto a = params.find("arguments"); a != params.end() && !a->is_null()) {
    if (!a->is_object()) {
      return reply(InvalidParams(
          id, InvalidArguments("`arguments` must be a JSON object (got " + DescribeJson(*a) + ")")));
    }
    args = *a;
  }
  // The context POST /api/tools/{name} gives: a root call unless a session is named.
  agent::ToolContext ctx;
  ctx.session_id = caller.session_id;
  ctx.client_time_zone = caller.client_time_zone;
  tools_.Invoke(name, ctx, args, [id, reply = std::move(reply)](Result<Json> result) {
    reply(Success(id, ToolResult(std::move(result))));
  });
}

}  // namespace dsh::server
