#include "base/schema.h"

#include <cmath>

namespace dsh::schema_detail {
namespace {


std::string Field(const std::string& path) { return path.empty() ? "arguments" : "`" + path + "`"; }

std::string TrimAscii(const std::string& s) {
  const char* ws = " \t\r\n\f\v";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

std::string Range(const IntRule& rule) {
  int64_t lo = rule.min.value_or(rule.positive ? 1 : -kMaxSafeInteger);
  if (rule.positive && lo < 1) lo = 1;
  int64_t hi = rule.max.value_or(kMaxSafeInteger);
  if (lo == 1 && hi == kMaxSafeInteger) return "a positive safe integer";
  if (hi == kMaxSafeInteger) return "an integer >= " + std::to_string(lo);
  if (lo == 1 && rule.positive) return "a positive integer no greater than " + std::to_string(hi);
  return "an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
}

}  // namespace

std::string JoinPath(const std::string& parent, const std::string& name) {
  return parent.empty() ? name : parent + "." + name;
}

Status NotAnObject(const Json& v, const std::string& path) {
  return InvalidArguments(Field(path) + " must be a JSON object (got " + DescribeJson(v) + ")");
}

Status UnknownProperty(const std::string& path, const std::string& key) {
  return InvalidArguments("unknown property `" + JoinPath(path, key) + "`");
}

Status MissingField(const std::string& path) { return InvalidArguments(Field(path) + " is required"); }

Status DecodeString(const Json& v, const std::string& path, const StringRule& rule, std::string& out) {
  if (!v.is_string()) return InvalidArguments(Field(path) + " must be a string (got " + DescribeJson(v) + ")");
  std::string s = v.get<std::string>();
  if (rule.trim) s = TrimAscii(s);
  if (rule.non_empty && s.empty()) {
    return InvalidArguments(Field(path) + (rule.trim ? " must not be empty or blank" : " must not be empty"));
  }
  if (!rule.one_of.empty()) {
    bool found = false;
    for (const auto& allowed : rule.one_of) found = found || allowed == s;
    if (!found) {
      std::string list;
      for (const auto& allowed : rule.one_of) list += (list.empty() ? "\"" : ", \"") + allowed + "\"";
      return InvalidArguments(Field(path) + " must be one of " + list + " (got " + DescribeJson(v) + ")");
    }
  }
  out = std::move(s);
  return Status::Ok();
}

Status DecodeInt(const Json& v, const std::string& path, const IntRule& rule, int64_t& out) {
  auto bad = [&](const std::string& why) {
    return InvalidArguments(Field(path) + " must be " + Range(rule) + " (got " + DescribeJson(v) + (why.empty() ? "" : ", " + why) + ")");
  };
  int64_t i = 0;
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(kMaxSafeInteger)) return bad("beyond 2^53-1");
    i = static_cast<int64_t>(u);
  } else if (v.is_number_integer()) {
    i = v.get<int64_t>();
    if (i > kMaxSafeInteger || i < -kMaxSafeInteger) return bad("beyond 2^53-1");
  } else if (v.is_number_float()) {
    double d = v.get<double>();
    if (!std::isfinite(d) || std::trunc(d) != d) return bad("not a whole number");
    if (std::fabs(d) > static_cast<double>(kMaxSafeInteger)) return bad("beyond 2^53-1");
    i = static_cast<int64_t>(d);
  } else {
    return bad("");
  }
  if (rule.positive && i <= 0) return bad("");
  if (rule.min && i < *rule.min) return bad("");
  if (rule.max && i > *rule.max) return bad("");
  out = i;
  return Status::Ok();
}

Status DecodeBool(const Json& v, const std::string& path, bool& out) {
  if (!v.is_boolean()) return InvalidArguments(Field(path) + " must be a boolean (got " + DescribeJson(v) + ")");
  out = v.get<bool>();
  return Status::Ok();
}

Json StringSchema(const std::string& description, const StringRule& rule) {
  Json s = {{"type", "string"}};
  if (!description.empty()) s["description"] = description;
  if (rule.non_empty) s["minLength"] = 1;
  if (!rule.one_of.empty()) s["enum"] = rule.one_of;
  return s;
}

Json IntSchema(const std::string& description, const IntRule& rule) {
  Json s = {{"type", "integer"}};
  if (!description.empty()) s["description"] = description;
  int64_t lo = rule.min.value_or(rule.positive ? 1 : -kMaxSafeInteger);
  if (rule.positive && lo < 1) lo = 1;
  s["minimum"] = lo;
  s["maximum"] = rule.max.value_or(kMaxSafeInteger);
  return s;
}

Json BoolSchema(const std::string& description) {
  Json s = {{"type", "boolean"}};
  if (!description.empty()) s["description"] = description;
  return s;
}

}  // namespace dsh::schema_detail
