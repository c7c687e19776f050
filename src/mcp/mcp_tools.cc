#include "mcp/mcp_tools.h"

#include <set>
#include <thread>

#include "base/json_schema.h"
#include "base/log.h"

namespace dsh::mcp {
namespace {

constexpr size_t kMaxToolName = 64;

// One tool of an MCP server, as the registry holds it.
class McpTool final : public agent::Tool {
 public:
  McpTool(std::string name, std::shared_ptr<McpClient> client, ToolInfo info)
      : name_(std::move(name)), client_(std::move(client)), info_(std::move(info)) {
    auto schema = JsonSchema::Compile(info_.input_schema);
    if (schema.ok()) {
      schema_ = std::move(schema).value();
    } else {
      // The server still checks its arguments; we only lose the early check.
      spdlog::warn("mcp {}: the schema of tool {} cannot be used to check arguments: {}", client_->name(),
                   info_.name, schema.status().message());
    }
  }

  const std::string& name() const override { return name_; }
  const std::string& description() const override { return info_.description; }
  const Json& parameters() const override { return info_.input_schema; }

  void Invoke(const agent::ToolContext& ctx, const Json& args, Done done) override {
    if (schema_) {
      if (Status st = schema_->Validate(args); !st.ok()) return done(st.WithContext(name_));
    }
    client_->CallTool(info_.name, args, ctx.cancel, [name = name_, done = std::move(done)](Result<Json> r) {
      if (!r.ok()) return done(r.status());
      done(ToolResultForModel(name, *r));
    });
  }

 private:
  std::string name_;
  std::shared_ptr<McpClient> client_;
  ToolInfo info_;
  std::optional<JsonSchema> schema_;
};

std::string Str(const Json& object, const char* key) {
  const std::string* s = StringMember(object, key);
  return s ? *s : "";
}

// The size of base64 `data` once decoded (padded or not; for a summary, so
// malformed data gives a guess, never an underflow).
size_t DecodedSize(const std::string& data) {
  size_t pad = 0;
  while (pad < data.size() && pad < 2 && data[data.size() - 1 - pad] == '=') ++pad;
  const size_t chars = data.size() - pad;
  return chars / 4 * 3 + (chars % 4) * 3 / 4;
}

std::string Summary(const std::string& what, const std::string& mime, const std::string& base64) {
  return what + " (" + (mime.empty() ? "unknown type" : mime) + ", " + std::to_string(DecodedSize(base64)) +
         " bytes, not shown)";
}

Json ConvertItem(const Json& item, bool& text_only) {
  std::string type = Str(item, "type");
  if (type == "text") return {{"type", "text"}, {"text", Str(item, "text")}};
  text_only = false;
  if (type == "image" || type == "audio") {
    std::string mime = Str(item, "mimeType");
    return {{"type", type}, {"mime_type", mime}, {"summary", Summary(type, mime, Str(item, "data"))}};
  }
  if (type == "resource" && item.contains("resource") && item["resource"].is_object()) {
    const Json& r = item["resource"];
    Json out = {{"type", "resource"}, {"uri", Str(r, "uri")}, {"mime_type", Str(r, "mimeType")}};
    if (r.contains("text") && r["text"].is_string()) {
      out["text"] = r["text"];
    } else {
      out["summary"] = Summary("resource", Str(r, "mimeType"), Str(r, "blob"));
    }
    return out;
  }
  if (type == "resource_link") {
    Json out = {{"type", "resource_link"}, {"uri", Str(item, "uri")}, {"name", Str(item, "name")}};
    if (!Str(item, "mimeType").empty()) out["mime_type"] = Str(item, "mimeType");
    if (!Str(item, "description").empty()) out["description"] = Str(item, "description");
    return out;
  }
  return {{"type", type.empty() ? "unknown" : type}, {"summary", "content of a kind dsh does not show"}};
}

}  // namespace

std::string ToolName(const std::string& server, const std::string& tool) {
  std::string name = server + "__" + tool;
  for (char& c : name) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) c = '_';
  }
  if (name.size() > kMaxToolName) name.resize(kMaxToolName);
  return name;
}

Result<Json> ToolResultForModel(const std::string& tool, const Json& result) {
  if (!result.is_object())
    return Status(codes::kMcpError, tool + ": the MCP server answered with no result object");
  bool text_only = true;
  Json items = Json::array();
  std::string text;
  auto content = result.find("content");
  for (const Json& item : content != result.end() && content->is_array() ? *content : Json::array()) {
    if (!item.is_object()) continue;
    items.push_back(ConvertItem(item, text_only));
    if (items.back()["type"] == "text")
      text += (text.empty() ? "" : "\n") + items.back()["text"].get<std::string>();
  }
  // Read with a type check: a server's `"isError": null` must not throw.
  auto is_error = result.find("isError");
  if (is_error != result.end() && is_error->is_boolean() && is_error->get<bool>()) {
    return Status(codes::kMcpError,
                  tool + ": " + (text.empty() ? std::string("the tool reported an error") : text));
  }
  auto structured = result.find("structuredContent");
  bool has_structured = structured != result.end() && !structured->is_null();
  if (text_only && !has_structured) return Json(text);
  Json out = {{"content", std::move(items)}};
  if (has_structured) out["structured_content"] = *structured;
  return out;
}

McpServers::McpServers(agent::ToolRegistry& tools, std::vector<ServerSpec> specs, std::string version,
                       OnChange on_change,
                       std::function<std::unique_ptr<Transport>(const ServerSpec&)> make_transport)
    : registry_(tools), on_change_(std::move(on_change)) {
  for (auto& spec : specs) {
    auto server = std::make_unique<Server>();
    Server* raw = server.get();
    McpClient::Options options{std::move(spec), make_transport};
    options.client_version = version;
    options.on_state_change = on_change_;
    server->client = std::make_shared<McpClient>(
        std::move(options), [this, raw](std::vector<ToolInfo> tools) { Register(*raw, std::move(tools)); });
    servers_.push_back(std::move(server));
  }
}

McpServers::~McpServers() { Stop(); }

void McpServers::Start() {
  for (auto& s : servers_) s->client->Start();
  // The first turn should see every working server's tools: wait for each
  // first attempt (in parallel), each at most its start timeout.
  for (auto& s : servers_) {
    if (!s->client->WaitSettled(s->client->spec().start_timeout + std::chrono::seconds(1))) {
      spdlog::warn("mcp {}: still starting; its tools come when it is ready", s->client->name());
    } else if (s->client->state() != McpClient::State::kReady) {
      spdlog::warn("mcp {}: not available at start: {}", s->client->name(), s->client->last_error());
    }
  }
}

void McpServers::Stop() {
  // All at once: a stdio server that ignores the end of its input takes up
  // to 4 s to end (SIGTERM after 2 s, SIGKILL after 2 more).
  std::vector<std::thread> stopping;
  for (auto& s : servers_) stopping.emplace_back([client = s->client] { client->Stop(); });
  for (auto& t : stopping) t.join();
  bool had_tools = false;
  for (auto& s : servers_) {
    (void)registry_.ReplaceGroup("mcp:" + s->client->name(), {});
    had_tools = s->tools.exchange(0) != 0 || had_tools;
  }
  if (had_tools && on_change_) on_change_();
}

void McpServers::Register(Server& server, std::vector<ToolInfo> tools) {
  const std::string& name = server.client->name();
  std::vector<std::shared_ptr<agent::Tool>> out;
  std::set<std::string> seen;
  for (auto& info : tools) {
    std::string tool_name = ToolName(name, info.name);
    if (!seen.insert(tool_name).second) {
      spdlog::warn("mcp {}: tool {} is left out: its name {} is taken by another of its tools", name,
                   info.name, tool_name);
      continue;
    }
    out.push_back(std::make_shared<McpTool>(std::move(tool_name), server.client, std::move(info)));
  }
  size_t n = out.size();
  if (Status st = registry_.ReplaceGroup("mcp:" + name, std::move(out)); !st.ok()) {
    spdlog::error("mcp {}: its tools cannot be registered: {}", name, st.message());
    return;
  }
  server.tools = static_cast<int64_t>(n);
  if (on_change_) on_change_();
}

McpClient* McpServers::Find(const std::string& name) const {
  for (const auto& s : servers_) {
    if (s->client->name() == name) return s->client.get();
  }
  return nullptr;
}

Json McpServers::Describe() const {
  Json out = Json::array();
  for (const auto& s : servers_) {
    const McpClient& c = *s->client;
    const char* state = "stopped";
    switch (c.state()) {
      case McpClient::State::kConnecting:
        state = "starting";
        break;
      case McpClient::State::kReady:
        state = "ready";
        break;
      case McpClient::State::kDown:
        state = "down";
        break;
      case McpClient::State::kStopped:
        state = "stopped";
        break;
    }
    out.push_back({{"name", c.name()},
                   {"transport", c.spec().stdio() ? "stdio" : "http"},
                   {"state", state},
                   {"tools", s->tools.load()},
                   {"protocol_version", c.protocol_version()},
                   {"last_error", c.last_error()}});
  }
  return out;
}

}  // namespace dsh::mcp
