#include "mcp/transport.h"

#include <spdlog/spdlog.h>

#include "base/strings.h"
#include "mcp/http_transport.h"
#include "mcp/stdio_transport.h"

namespace dsh::mcp {

std::unique_ptr<Transport> MakeTransport(const ServerSpec& spec) {
  if (spec.stdio()) return std::make_unique<StdioTransport>(spec);
  return std::make_unique<HttpTransport>(spec);
}

namespace internal {

void ForEachMessage(const std::string& server, Json payload, const std::function<void(Json)>& deliver) {
  auto deliver_object = [&](Json& message) {
    if (message.is_object()) {
      deliver(std::move(message));
    } else {
      spdlog::warn("mcp {}: skipped a message that is not a JSON object: {}", server,
                   Excerpt(DumpJson(message)));
    }
  };
  if (!payload.is_array()) {
    deliver_object(payload);
    return;
  }
  for (Json& message : payload) deliver_object(message);
}

std::string Excerpt(std::string_view text, size_t max) {
  if (text.size() <= max) return std::string(text);
  return std::string(Utf8Prefix(text, max)) + "...";  // never a split UTF-8 sequence
}

}  // namespace internal
}  // namespace dsh::mcp
