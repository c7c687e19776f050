#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "base/status.h"

namespace dsh {

using Json = nlohmann::json;

// Parses `text` as one JSON value. Malformed input is `invalid_json` with the
// parser's byte offset; never throws.
Result<Json> ParseJson(std::string_view text);

// Compact serialization that never throws: invalid UTF-8 is replaced (U+FFFD).
std::string DumpJson(const Json& value);

// A JSON type name for messages: "string", "integer", "number", "object", ...
std::string JsonTypeName(const Json& value);

// A value as error messages quote it: its type, and for a scalar its JSON
// text cut to `max_chars` ("string \"abc\"", "number 1.5", "object").
std::string DescribeJson(const Json& value, size_t max_chars = 40);

// The member `key` of `object` when it is a string; nullptr when `object` is
// not an object or the member is missing or of another type. For reading
// what a peer sent without the exceptions of `value()` and `get()`.
const std::string* StringMember(const Json& object, std::string_view key);

}  // namespace dsh
