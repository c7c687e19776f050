#include "host/http_route.h"

#include <charconv>

#include "base/schema.h"

namespace dsh::host {

Result<int64_t> QueryInt(const std::map<std::string, std::string>& query, std::string_view name, int64_t fallback,
                         int64_t min, int64_t max) {
  auto it = query.find(std::string(name));
  if (it == query.end()) return fallback;
  const std::string& text = it->second;
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < min || value > max) {
    std::string range = max == kMaxSafeInteger
                            ? "an integer >= " + std::to_string(min)
                            : "an integer from " + std::to_string(min) + " to " + std::to_string(max);
    return InvalidArguments("`" + std::string(name) + "` must be " + range + " (got \"" + text + "\")");
  }
  return value;
}

}  // namespace dsh::host
