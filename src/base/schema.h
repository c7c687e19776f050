#pragma once

// Tool argument schemas: one declaration per tool gives both a strict decoder
// and the JSON Schema sent to models, so the two cannot drift apart.
//
//   struct ReadArgs { std::string session_id; std::optional<int64_t> limit; };
//   const ObjectSchema<ReadArgs> kReadArgs = ObjectSchema<ReadArgs>("Read a session.")
//       .Field("session_id", &ReadArgs::session_id, "Session to read.")
//       .Optional("limit", &ReadArgs::limit, "At most this many blocks.", IntRule{.max = 200});
//   Result<ReadArgs> args = kReadArgs.Decode(json);   // invalid_arguments on bad input
//   Json schema = kReadArgs.ToJsonSchema();
//
// The decoder rejects, with a message naming the field: unknown properties,
// missing required fields, wrong JSON types (including null), strings that are
// empty (or blank when trimmed) where non-empty is required, values outside an
// enumeration, integers that are fractional, unsafe (|v| > 2^53-1), zero or
// negative where positive is required, or out of [min, max].
//
// Schemas are immutable after construction and safe to use from any thread.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/json.h"
#include "base/status.h"

namespace dsh {

inline constexpr int64_t kMaxSafeInteger = 9'007'199'254'740'991;  // 2^53 - 1

struct StringRule {
  bool non_empty = true;          // "" (and, with trim, blank) is rejected
  bool trim = false;              // strip ASCII whitespace before checks and storing
  std::vector<std::string> one_of;  // when non-empty: the allowed values
};

struct IntRule {
  bool positive = true;           // 0 and negatives are rejected
  std::optional<int64_t> min;
  std::optional<int64_t> max;
};

namespace schema_detail {

// Field decoders, shared by all ObjectSchema instantiations. `path` names the
// field in messages ("model.provider").
Status DecodeString(const Json& v, const std::string& path, const StringRule& rule, std::string& out);
Status DecodeInt(const Json& v, const std::string& path, const IntRule& rule, int64_t& out);
Status DecodeBool(const Json& v, const std::string& path, bool& out);
Json StringSchema(const std::string& description, const StringRule& rule);
Json IntSchema(const std::string& description, const IntRule& rule);
Json BoolSchema(const std::string& description);
std::string JoinPath(const std::string& parent, const std::string& name);
Status NotAnObject(const Json& v, const std::string& path);
Status UnknownProperty(const std::string& path, const std::string& key);
Status MissingField(const std::string& path);

}  // namespace schema_detail

template <typename T>
class ObjectSchema {
 public:
  using Check = std::function<Status(const T&)>;
  // A custom decoder for a raw field: validate `v` and store into `out`.
  using RawDecoder = std::function<Status(const Json& v, const std::string& path, T& out)>;

  explicit ObjectSchema(std::string description = "") : description_(std::move(description)) {}

  ObjectSchema& Field(std::string name, std::string T::*m, std::string description, StringRule rule = {}) {
    return AddString(std::move(name), true, std::move(description), std::move(rule),
                     [m](T& t, std::string v) { t.*m = std::move(v); });
  }
  ObjectSchema& Optional(std::string name, std::optional<std::string> T::*m, std::string description,
                         StringRule rule = {}) {
    return AddString(std::move(name), false, std::move(description), std::move(rule),
                     [m](T& t, std::string v) { t.*m = std::move(v); });
  }
  ObjectSchema& Field(std::string name, int64_t T::*m, std::string description, IntRule rule = {}) {
    return AddInt(std::move(name), true, std::move(description), rule, [m](T& t, int64_t v) { t.*m = v; });
  }
  ObjectSchema& Optional(std::string name, std::optional<int64_t> T::*m, std::string description,
                         IntRule rule = {}) {
    return AddInt(std::move(name), false, std::move(description), rule, [m](T& t, int64_t v) { t.*m = v; });
  }
  ObjectSchema& Field(std::string name, bool T::*m, std::string description) {
    return AddBool(std::move(name), true, std::move(description), [m](T& t, bool v) { t.*m = v; });
  }
  ObjectSchema& Optional(std::string name, std::optional<bool> T::*m, std::string description) {
    return AddBool(std::move(name), false, std::move(description), [m](T& t, bool v) { t.*m = v; });
  }
  template <typename U>
  ObjectSchema& Field(std::string name, U T::*m, const ObjectSchema<U>& sub) {
    return AddObject<U>(std::move(name), true, sub, [m](T& t, U v) { t.*m = std::move(v); });
  }
  template <typename U>
  ObjectSchema& Optional(std::string name, std::optional<U> T::*m, const ObjectSchema<U>& sub) {
    return AddObject<U>(std::move(name), false, sub, [m](T& t, U v) { t.*m = std::move(v); });
  }
  // A field with its own decoder and hand-written JSON Schema, for shapes the
  // typed fields do not cover (discriminated unions, arrays).
  ObjectSchema& Raw(std::string name, bool required, Json json_schema, RawDecoder decode) {
    fields_.push_back(FieldDesc{std::move(name), required, std::move(decode), std::move(json_schema)});
    return *this;
  }
  // A cross-field rule, run after every field decoded.
  ObjectSchema& AddCheck(Check check) {
    checks_.push_back(std::move(check));
    return *this;
  }

  // Decodes `args`, which must be a JSON object. `path` prefixes field names
  // in messages when this schema is nested.
  Result<T> Decode(const Json& args, const std::string& path = "") const {
    if (!args.is_object()) return schema_detail::NotAnObject(args, path);
    for (const auto& [key, value] : args.items()) {
      bool known = false;
      for (const auto& f : fields_) known = known || f.name == key;
      if (!known) return schema_detail::UnknownProperty(path, key);
    }
    T out{};
    for (const auto& f : fields_) {
      auto it = args.find(f.name);
      std::string field_path = schema_detail::JoinPath(path, f.name);
      if (it == args.end()) {
        if (f.required) return schema_detail::MissingField(field_path);
        continue;
      }
      DSH_RETURN_IF_ERROR(f.decode(*it, field_path, out));
    }
    for (const auto& check : checks_) DSH_RETURN_IF_ERROR(check(out));
    return out;
  }

  Json ToJsonSchema() const {
    Json schema = {{"type", "object"}, {"properties", Json::object()}, {"additionalProperties", false}};
    if (!description_.empty()) schema["description"] = description_;
    Json required = Json::array();
    for (const auto& f : fields_) {
      schema["properties"][f.name] = f.json_schema;
      if (f.required) required.push_back(f.name);
    }
    if (!required.empty()) schema["required"] = required;
    return schema;
  }

  const std::string& description() const { return description_; }

 private:
  struct FieldDesc {
    std::string name;
    bool required;
    RawDecoder decode;
    Json json_schema;
  };

  template <typename Store>
  ObjectSchema& AddString(std::string name, bool required, std::string description, StringRule rule,
                          Store store) {
    Json js = schema_detail::StringSchema(description, rule);
    return Raw(std::move(name), required, std::move(js),
               [rule = std::move(rule), store](const Json& v, const std::string& path, T& out) {
                 std::string s;
                 DSH_RETURN_IF_ERROR(schema_detail::DecodeString(v, path, rule, s));
                 store(out, std::move(s));
                 return Status::Ok();
               });
  }
  template <typename Store>
  ObjectSchema& AddInt(std::string name, bool required, std::string description, IntRule rule, Store store) {
    Json js = schema_detail::IntSchema(description, rule);
    return Raw(std::move(name), required, std::move(js),
               [rule, store](const Json& v, const std::string& path, T& out) {
                 int64_t i = 0;
                 DSH_RETURN_IF_ERROR(schema_detail::DecodeInt(v, path, rule, i));
                 store(out, i);
                 return Status::Ok();
               });
  }
  template <typename Store>
  ObjectSchema& AddBool(std::string name, bool required, std::string description, Store store) {
    Json js = schema_detail::BoolSchema(description);
    return Raw(std::move(name), required, std::move(js), [store](const Json& v, const std::string& path, T& out) {
      bool b = false;
      DSH_RETURN_IF_ERROR(schema_detail::DecodeBool(v, path, b));
      store(out, b);
      return Status::Ok();
    });
  }
  template <typename U, typename Store>
  ObjectSchema& AddObject(std::string name, bool required, const ObjectSchema<U>& sub, Store store) {
    return Raw(std::move(name), required, sub.ToJsonSchema(),
               [sub, store](const Json& v, const std::string& path, T& out) {
                 auto decoded = sub.Decode(v, path);
                 if (!decoded.ok()) return decoded.status();
                 store(out, std::move(decoded).value());
                 return Status::Ok();
               });
  }

  std::string description_;
  std::vector<FieldDesc> fields_;
  std::vector<Check> checks_;
};

}  // namespace dsh
