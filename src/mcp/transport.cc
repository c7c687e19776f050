#include "mcp/transport.h"

#include <spdlog/spdlog.h>

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
  size_t cut = max;
  // Do not split a UTF-8 sequence: back up over continuation bytes.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "...";
}

}  // namespace internal
}  // namespace dsh::mcp
