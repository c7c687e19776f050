#include "base/json.h"

namespace dsh {

Result<Json> ParseJson(std::string_view text) {
  Json value = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    // Re-parse with exceptions only to get the position for the message.
    try {
      Json ignored = Json::parse(text);
      (void)ignored;
    } catch (const Json::parse_error& e) {
      return Status(codes::kInvalidJson, "malformed JSON at byte " + std::to_string(e.byte));
    }
    return Status(codes::kInvalidJson, "malformed JSON");
  }
  return value;
}

std::string DumpJson(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string DescribeJson(const Json& value, size_t max_chars) {
  std::string type = JsonTypeName(value);
  if (value.is_string() || value.is_number() || value.is_boolean()) {
    std::string text = DumpJson(value);
    if (text.size() > max_chars) text = text.substr(0, max_chars > 3 ? max_chars - 3 : 0) + "...";
    return type + " " + text;
  }
  return type;
}

std::string JsonTypeName(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "integer";
    case Json::value_t::number_float: return "number";
    case Json::value_t::string: return "string";
    case Json::value_t::array: return "array";
    case Json::value_t::object: return "object";
    case Json::value_t::binary: return "binary";
    case Json::value_t::discarded: return "invalid";
  }
  return "unknown";
}

const std::string* StringMember(const Json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get_ptr<const std::string*>() : nullptr;
}

}  // namespace dsh
