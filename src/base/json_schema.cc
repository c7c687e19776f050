#include "base/json_schema.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <utility>

#include "base/strings.h"

namespace dsh {
namespace {

using Id = size_t;  // index of a node in JsonSchema::nodes_

// Instance nesting Validate follows before it gives up (recursive schemas
// could otherwise descend as deep as a hostile value and overflow the stack).
constexpr int kMaxDepth = 512;

// A `pattern` or `patternProperties` key with its compiled form.
struct Pattern {
  std::string source;
  std::regex regex;
};

std::string EscapeToken(std::string_view token) {
  std::string out;
  for (char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

// A JSON pointer as messages show it: "`/a/0`", and the root as "`/`".
std::string Quote(const std::string& pointer) { return "`" + (pointer.empty() ? "/" : pointer) + "`"; }

// "1 item", "2 items", "3 properties".
std::string Plural(size_t n, std::string noun) {
  if (n != 1) noun = noun.back() == 'y' ? noun.substr(0, noun.size() - 1) + "ies" : noun + "s";
  return std::to_string(n) + " " + noun;
}

// A value as messages quote it: its JSON text when short, else a summary.
std::string Got(const Json& v) {
  std::string text = DumpJson(v);
  if (text.size() <= 40) return text;
  if (v.is_string() && v.get_ref<const std::string&>().size() > 32) {
    const auto& s = v.get_ref<const std::string&>();
    return DumpJson(Json(std::string(Utf8Prefix(s, 32)) + "..."));  // whole code points
  }
  if (v.is_array()) return "an array of " + Plural(v.size(), "item");
  if (v.is_object()) return "an object with " + Plural(v.size(), "property");
  return text;
}

size_t CountCodePoints(const std::string& s) {
  return std::count_if(s.begin(), s.end(),
                       [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; });
}

// JSON Schema's integer: any number with no fractional part (1.0 included).
bool IsInteger(const Json& v) {
  if (v.is_number_integer()) return true;  // signed and unsigned
  if (!v.is_number_float()) return false;
  double d = v.get<double>();
  return std::isfinite(d) && std::floor(d) == d;
}

bool HasType(const Json& v, const std::string& type) {
  if (type == "integer") return IsInteger(v);
  if (type == "number") return v.is_number();
  if (type == "string") return v.is_string();
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "boolean") return v.is_boolean();
  return type == "null" && v.is_null();
}

std::string TypeNoun(const std::string& type) {
  if (type == "null") return "null";
  bool vowel = type == "integer" || type == "object" || type == "array";
  return (vowel ? "an " : "a ") + type;
}

bool IsMultipleOf(double x, double m) {
  double q = x / m;
  if (!std::isfinite(q)) return false;
  return std::fabs(q - std::round(q)) <= 1e-9 * std::max(1.0, std::fabs(q));
}

Result<Pattern> CompilePattern(const std::string& source, const std::string& at, const std::string& keyword) {
  auto flags = std::regex::ECMAScript;
#ifdef __GLIBCXX__
  // libstdc++'s default engine backtracks recursively, one stack frame per
  // character: a long argument string would overflow the stack. This mode is
  // linear in the input and rejects back-references instead.
  flags |= std::regex_constants::__polynomial;
#endif
  try {
    return Pattern{source, std::regex(source, flags)};
  } catch (const std::regex_error& e) {
    return InvalidArguments(Quote(at) + ": `" + keyword + "` " + DumpJson(Json(source)) +
                            " is not a supported regular expression (" + e.what() + ")");
  }
}

// The reference tokens of a local `$ref` ("#", "#/definitions/a%25b~1c"), or
// nothing when it is not one.
std::optional<std::vector<std::string>> ParseLocalRef(const std::string& ref) {
  if (ref.empty() || ref[0] != '#') return std::nullopt;
  std::string pointer;
  for (size_t i = 1; i < ref.size(); ++i) {
    if (ref[i] == '%' && i + 2 < ref.size() && std::isxdigit(static_cast<unsigned char>(ref[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(ref[i + 2]))) {
      pointer += static_cast<char>(std::stoi(ref.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      pointer += ref[i];
    }
  }
  std::vector<std::string> tokens;
  if (pointer.empty()) return tokens;
  if (pointer[0] != '/') return std::nullopt;
  for (size_t start = 1;;) {
    size_t end = std::min(pointer.find('/', start), pointer.size());
    std::string token;
    for (size_t i = start; i < end; ++i) {
      if (pointer[i] != '~') {
        token += pointer[i];
      } else if (i + 1 < end && (pointer[i + 1] == '0' || pointer[i + 1] == '1')) {
        token += pointer[++i] == '0' ? '~' : '/';
      } else {
        return std::nullopt;
      }
    }
    tokens.push_back(std::move(token));
    if (end == pointer.size()) return tokens;
    start = end + 1;
  }
}

const Json* Resolve(const Json& root, const std::vector<std::string>& tokens) {
  const Json* at = &root;
  for (const auto& token : tokens) {
    if (at->is_object()) {
      auto it = at->find(token);
      if (it == at->end()) return nullptr;
      at = &*it;
    } else if (at->is_array()) {
      bool digits = !token.empty() &&
                    std::all_of(token.begin(), token.end(), [](char c) { return c >= '0' && c <= '9'; });
      if (!digits || (token.size() > 1 && token[0] == '0') || token.size() > 9) return nullptr;
      size_t index = std::stoul(token);
      if (index >= at->size()) return nullptr;
      at = &(*at)[index];
    } else {
      return nullptr;
    }
  }
  return at;
}

// Where a value sits in the instance: a chain of stack frames, turned into a
// JSON pointer only when a check fails.
struct Location {
  const Location* parent = nullptr;
  std::string_view key;
  size_t index = 0;
  bool is_index = false;
  int depth = 0;

  Location Key(std::string_view k) const { return {this, k, 0, false, depth + 1}; }
  Location Index(size_t i) const { return {this, {}, i, true, depth + 1}; }
  std::string Pointer() const {
    std::vector<std::string> tokens;
    for (const Location* l = this; l->parent != nullptr; l = l->parent) {
      tokens.push_back(l->is_index ? std::to_string(l->index) : EscapeToken(l->key));
    }
    std::string out;
    for (auto it = tokens.rbegin(); it != tokens.rend(); ++it) out += "/" + *it;
    return out;
  }
};

struct Failure {
  std::string pointer;  // into the instance; "" is the root
  std::string reason;
};

std::optional<Failure> Fail(const Location& at, std::string reason) {
  return Failure{at.Pointer(), std::move(reason)};
}

}  // namespace

struct JsonSchema::Node {
  std::optional<bool> always;  // a boolean schema: true accepts everything, false nothing
  std::vector<std::string> types;
  std::optional<Json> enum_values;  // an array
  std::optional<Json> const_value;
  std::optional<Json> multiple_of, maximum, exclusive_maximum, minimum, exclusive_minimum;
  std::optional<size_t> max_length, min_length, max_items, min_items, max_properties, min_properties;
  std::optional<Pattern> pattern;
  std::vector<Id> prefix_items;  // `prefixItems`, or `items` in array form
  std::optional<Id> rest_items;  // items past prefix_items (`items` schema or `additionalItems`)
  bool unique_items = false;
  std::optional<Id> contains;
  std::vector<std::string> required;
  std::map<std::string, Id, std::less<>> properties;
  std::vector<std::pair<Pattern, Id>> pattern_properties;
  std::optional<Id> additional_properties;
  std::vector<std::pair<std::string, std::vector<std::string>>> dependent_required;
  std::vector<std::pair<std::string, Id>> dependent_schemas;
  std::optional<Id> property_names;
  std::optional<Id> if_schema, then_schema, else_schema, not_schema;
  std::vector<Id> all_of, any_of, one_of;
  std::optional<Id> ref;

  // The subschemas applied to the same value as this one (not to a part of it).
  std::vector<Id> SameValueChildren() const {
    std::vector<Id> out = all_of;
    out.insert(out.end(), any_of.begin(), any_of.end());
    out.insert(out.end(), one_of.begin(), one_of.end());
    for (const auto& [key, id] : dependent_schemas) out.push_back(id);
    for (const auto& id : {ref, if_schema, then_schema, else_schema, not_schema}) {
      if (id) out.push_back(*id);
    }
    return out;
  }
};

// Turns the schema document into nodes_: one node per schema location (JSON
// pointer), so a `$ref` to a location compiled elsewhere shares its node.
class JsonSchema::Compiler {
 public:
  Compiler(const Json& root, std::vector<Node>& nodes) : root_(root), nodes_(nodes) {}

  Status Run() {
    DSH_RETURN_IF_ERROR(CompileAt(root_, "").status());
    for (size_t i = 0; i < refs_.size(); ++i) {  // compiling a target may add refs
      PendingRef ref = refs_[i];
      auto tokens = ParseLocalRef(ref.target);
      if (!tokens) {
        return InvalidArguments(Quote(ref.at) + ": only local $ref is supported (a JSON pointer such as " +
                                "`#/definitions/x`), got `" + ref.target + "`");
      }
      const Json* target = Resolve(root_, *tokens);
      if (target == nullptr) {
        return InvalidArguments(Quote(ref.at) + ": `$ref` target `" + ref.target + "` does not exist");
      }
      std::string pointer;
      for (const auto& token : *tokens) pointer += "/" + EscapeToken(token);
      DSH_ASSIGN_OR_RETURN(Id id, CompileAt(*target, pointer));
      nodes_[ref.node].ref = id;
    }
    std::vector<uint8_t> state(nodes_.size(), 0);
    for (Id id = 0; id < nodes_.size(); ++id) DSH_RETURN_IF_ERROR(CheckCycles(id, state));
    return Status::Ok();
  }

 private:
  struct PendingRef {
    Id node;
    std::string at;
    std::string target;
  };

  static Status Bad(const std::string& at, const std::string& keyword, const std::string& expected,
                    const Json& got) {
    return InvalidArguments(Quote(at) + ": `" + keyword + "` must be " + expected + " (got " + Got(got) +
                            ")");
  }

  Result<Id> CompileAt(const Json& s, const std::string& at) {
    if (auto it = ids_.find(at); it != ids_.end()) return it->second;
    if (!s.is_object() && !s.is_boolean()) {
      return InvalidArguments(Quote(at) + ": a schema must be an object or a boolean (got " + Got(s) + ")");
    }
    Id id = nodes_.size();
    nodes_.emplace_back();
    pointers_.push_back(at);
    ids_.emplace(at, id);
    Node node;  // filled here and moved in last: compiling children grows nodes_
    if (s.is_boolean()) {
      node.always = s.get<bool>();
    } else {
      DSH_RETURN_IF_ERROR(CompileKeywords(s, at, node));
      if (s.contains("$ref")) refs_.push_back(PendingRef{id, at, s["$ref"].get<std::string>()});
    }
    nodes_[id] = std::move(node);
    return id;
  }

  Status CompileKeywords(const Json& s, const std::string& at, Node& n) {
    auto sub = [&](const std::string& keyword) {
      return CompileAt(s[keyword], at + "/" + EscapeToken(keyword));
    };
    if (s.contains("type")) {
      const Json& t = s["type"];
      Json names = t.is_array() ? t : Json::array({t});
      for (const auto& name : names) {
        if (!name.is_string()) return Bad(at, "type", "a type name or an array of them", t);
        static const std::string kTypeNames[] = {"null",   "boolean", "object", "array",
                                                 "number", "string",  "integer"};
        if (std::find(std::begin(kTypeNames), std::end(kTypeNames), name.get<std::string>()) ==
            std::end(kTypeNames)) {
          return InvalidArguments(Quote(at) + ": `type` has an unknown type name " + DumpJson(name));
        }
        n.types.push_back(name.get<std::string>());
      }
    }
    if (s.contains("enum")) {
      if (!s["enum"].is_array()) return Bad(at, "enum", "an array", s["enum"]);
      n.enum_values = s["enum"];
    }
    if (s.contains("const")) n.const_value = s["const"];

    static constexpr std::pair<const char*, std::optional<Json> Node::*> kNumbers[] = {
        {"multipleOf", &Node::multiple_of},
        {"maximum", &Node::maximum},
        {"exclusiveMaximum", &Node::exclusive_maximum},
        {"minimum", &Node::minimum},
        {"exclusiveMinimum", &Node::exclusive_minimum}};
    for (const auto& [keyword, field] : kNumbers) {
      if (!s.contains(keyword)) continue;
      const Json& v = s[keyword];
      if (!v.is_number()) return Bad(at, keyword, "a number", v);
      if (field == &Node::multiple_of && v.get<double>() <= 0) return Bad(at, keyword, "greater than 0", v);
      n.*field = v;
    }

    static constexpr std::pair<const char*, std::optional<size_t> Node::*> kCounts[] = {
        {"maxLength", &Node::max_length},         {"minLength", &Node::min_length},
        {"maxItems", &Node::max_items},           {"minItems", &Node::min_items},
        {"maxProperties", &Node::max_properties}, {"minProperties", &Node::min_properties}};
    for (const auto& [keyword, field] : kCounts) {
      if (!s.contains(keyword)) continue;
      const Json& v = s[keyword];
      if (!IsInteger(v) || v.get<double>() < 0) return Bad(at, keyword, "a non-negative integer", v);
      n.*field = static_cast<size_t>(std::min(v.get<double>(), 1e15));
    }

    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) return Bad(at, "pattern", "a string", s["pattern"]);
      DSH_ASSIGN_OR_RETURN(n.pattern, CompilePattern(s["pattern"].get<std::string>(), at, "pattern"));
    }

    // Arrays. Draft-07: `items` is a schema for every item, or an array of
    // schemas for the first ones followed by `additionalItems`. 2020-12:
    // `prefixItems` for the first ones followed by `items`.
    if (s.contains("prefixItems")) {
      DSH_ASSIGN_OR_RETURN(n.prefix_items, SchemaList(s, at, "prefixItems", false));
      if (s.contains("items")) {
        if (s["items"].is_array()) {
          return Bad(at, "items", "a schema when `prefixItems` is present", s["items"]);
        }
        DSH_ASSIGN_OR_RETURN(n.rest_items, sub("items"));
      }
    } else if (s.contains("items") && s["items"].is_array()) {
      DSH_ASSIGN_OR_RETURN(n.prefix_items, SchemaList(s, at, "items", false));
      if (s.contains("additionalItems")) {
        DSH_ASSIGN_OR_RETURN(n.rest_items, sub("additionalItems"));
      }
    } else if (s.contains("items")) {
      DSH_ASSIGN_OR_RETURN(n.rest_items, sub("items"));
    }
    if (s.contains("uniqueItems")) {
      if (!s["uniqueItems"].is_boolean()) return Bad(at, "uniqueItems", "a boolean", s["uniqueItems"]);
      n.unique_items = s["uniqueItems"].get<bool>();
    }

    // Objects.
    if (s.contains("required")) {
      DSH_ASSIGN_OR_RETURN(n.required, Strings(s["required"], at, "required"));
    }
    if (s.contains("properties")) {
      DSH_ASSIGN_OR_RETURN(auto properties, SchemaMap(s, at, "properties"));
      n.properties.insert(properties.begin(), properties.end());
    }
    if (s.contains("patternProperties")) {
      DSH_ASSIGN_OR_RETURN(auto schemas, SchemaMap(s, at, "patternProperties"));
      for (auto& [source, id] : schemas) {
        DSH_ASSIGN_OR_RETURN(Pattern pattern, CompilePattern(source, at, "patternProperties"));
        n.pattern_properties.emplace_back(std::move(pattern), id);
      }
    }
    if (s.contains("dependencies")) {  // draft-07: names or a schema per property
      const Json& deps = s["dependencies"];
      if (!deps.is_object()) return Bad(at, "dependencies", "an object", deps);
      std::string deps_at = at + "/dependencies";
      for (auto it = deps.begin(); it != deps.end(); ++it) {
        if (it->is_array()) {
          DSH_ASSIGN_OR_RETURN(auto names, Strings(*it, at, "dependencies/" + EscapeToken(it.key())));
          n.dependent_required.emplace_back(it.key(), std::move(names));
        } else {
          DSH_ASSIGN_OR_RETURN(Id id, CompileAt(*it, deps_at + "/" + EscapeToken(it.key())));
          n.dependent_schemas.emplace_back(it.key(), id);
        }
      }
    }
    if (s.contains("dependentRequired")) {
      const Json& deps = s["dependentRequired"];
      if (!deps.is_object()) return Bad(at, "dependentRequired", "an object", deps);
      for (auto it = deps.begin(); it != deps.end(); ++it) {
        DSH_ASSIGN_OR_RETURN(auto names, Strings(*it, at, "dependentRequired/" + EscapeToken(it.key())));
        n.dependent_required.emplace_back(it.key(), std::move(names));
      }
    }
    if (s.contains("dependentSchemas")) {
      DSH_ASSIGN_OR_RETURN(auto schemas, SchemaMap(s, at, "dependentSchemas"));
      n.dependent_schemas.insert(n.dependent_schemas.end(), schemas.begin(), schemas.end());
    }

    static constexpr std::pair<const char*, std::optional<Id> Node::*> kSubschemas[] = {
        {"contains", &Node::contains},
        {"additionalProperties", &Node::additional_properties},
        {"propertyNames", &Node::property_names},
        {"if", &Node::if_schema},
        {"then", &Node::then_schema},
        {"else", &Node::else_schema},
        {"not", &Node::not_schema}};
    for (const auto& [keyword, field] : kSubschemas) {
      if (!s.contains(keyword)) continue;
      DSH_ASSIGN_OR_RETURN(n.*field, sub(keyword));
    }
    static constexpr std::pair<const char*, std::vector<Id> Node::*> kLists[] = {
        {"allOf", &Node::all_of}, {"anyOf", &Node::any_of}, {"oneOf", &Node::one_of}};
    for (const auto& [keyword, field] : kLists) {
      if (!s.contains(keyword)) continue;
      DSH_ASSIGN_OR_RETURN(n.*field, SchemaList(s, at, keyword, true));
    }
    for (const char* keyword : {"definitions", "$defs"}) {
      if (!s.contains(keyword)) continue;
      DSH_RETURN_IF_ERROR(SchemaMap(s, at, keyword).status());  // compiled for errors and as $ref targets
    }

    if (s.contains("$ref") && !s["$ref"].is_string()) return Bad(at, "$ref", "a string", s["$ref"]);
    return Status::Ok();
  }

  Result<std::vector<std::string>> Strings(const Json& v, const std::string& at, const std::string& keyword) {
    std::vector<std::string> out;
    if (!v.is_array()) return Bad(at, keyword, "an array of strings", v);
    for (const auto& e : v) {
      if (!e.is_string()) return Bad(at, keyword, "an array of strings", v);
      out.push_back(e.get<std::string>());
    }
    return out;
  }

  Result<std::vector<Id>> SchemaList(const Json& s, const std::string& at, const std::string& keyword,
                                     bool non_empty) {
    const Json& v = s[keyword];
    if (!v.is_array() || (non_empty && v.empty())) {
      return Bad(at, keyword, non_empty ? "a non-empty array of schemas" : "an array of schemas", v);
    }
    std::vector<Id> out;
    for (size_t i = 0; i < v.size(); ++i) {
      DSH_ASSIGN_OR_RETURN(Id id, CompileAt(v[i], at + "/" + EscapeToken(keyword) + "/" + std::to_string(i)));
      out.push_back(id);
    }
    return out;
  }

  Result<std::vector<std::pair<std::string, Id>>> SchemaMap(const Json& s, const std::string& at,
                                                            const std::string& keyword) {
    const Json& v = s[keyword];
    if (!v.is_object()) return Bad(at, keyword, "an object of schemas", v);
    std::vector<std::pair<std::string, Id>> out;
    for (auto it = v.begin(); it != v.end(); ++it) {
      DSH_ASSIGN_OR_RETURN(Id id,
                           CompileAt(*it, at + "/" + EscapeToken(keyword) + "/" + EscapeToken(it.key())));
      out.emplace_back(it.key(), id);
    }
    return out;
  }

  // A cycle of subschemas applied to the same value (through `$ref`) would
  // make Validate recurse forever.
  Status CheckCycles(Id id, std::vector<uint8_t>& state) {
    enum : uint8_t { kNew, kOnPath, kDone };
    if (state[id] == kDone) return Status::Ok();
    if (state[id] == kOnPath) {
      return InvalidArguments(Quote(pointers_[id]) +
                              ": `$ref` loops back here without descending into the value");
    }
    state[id] = kOnPath;
    for (Id next : nodes_[id].SameValueChildren()) DSH_RETURN_IF_ERROR(CheckCycles(next, state));
    state[id] = kDone;
    return Status::Ok();
  }

  const Json& root_;
  std::vector<Node>& nodes_;
  std::vector<std::string> pointers_;  // by node id: where in the schema
  std::map<std::string, Id> ids_;      // by schema pointer
  std::vector<PendingRef> refs_;
};

// Checks a value against nodes_; stateless, so any number may run at once.
class JsonSchema::Validator {
 public:
  explicit Validator(const std::vector<Node>& nodes) : nodes_(nodes) {}

  // The first failure of `v` against node `id`, or nothing when it is valid.
  std::optional<Failure> Check(Id id, const Json& v, const Location& at) const {
    const Node& n = nodes_[id];
    if (n.always) return *n.always ? std::nullopt : Fail(at, "no value is allowed here");
    if (at.depth > kMaxDepth) {
      return Fail(at, "is nested too deeply (more than " + std::to_string(kMaxDepth) + " levels)");
    }
    if (!n.types.empty() &&
        std::none_of(n.types.begin(), n.types.end(), [&](const auto& t) { return HasType(v, t); })) {
      std::string expected;
      for (size_t i = 0; i < n.types.size(); ++i) {
        if (i > 0) expected += i + 1 == n.types.size() ? " or " : ", ";
        expected += TypeNoun(n.types[i]);
      }
      return Fail(at, "must be " + expected + " (got " + Got(v) + ")");
    }
    if (n.enum_values && std::find(n.enum_values->begin(), n.enum_values->end(), v) == n.enum_values->end()) {
      std::string values;
      for (const auto& e : *n.enum_values) values += (values.empty() ? "" : ", ") + DumpJson(e);
      if (values.size() > 200) {
        values = "the " + std::to_string(n.enum_values->size()) + " values the schema lists";
      }
      return Fail(at, "must be one of " + values + " (got " + Got(v) + ")");
    }
    if (n.const_value && *n.const_value != v) {
      std::string expected = DumpJson(*n.const_value);
      if (expected.size() > 60) expected = "the `const` value of the schema";
      return Fail(at, "must be " + expected + " (got " + Got(v) + ")");
    }
    std::optional<Failure> failure;
    if (v.is_number()) {
      failure = CheckNumber(n, v, at);
    } else if (v.is_string()) {
      failure = CheckString(n, v.get_ref<const std::string&>(), at);
    } else if (v.is_array()) {
      failure = CheckArray(n, v, at);
    } else if (v.is_object()) {
      failure = CheckObject(n, v, at);
    }
    if (failure) return failure;
    return CheckApplicators(n, v, at);
  }

 private:
  std::optional<Failure> CheckNumber(const Node& n, const Json& v, const Location& at) const {
    double x = v.get<double>();
    auto fail = [&](const std::string& what, const Json& limit) {
      return Fail(at, "must be " + what + " " + DumpJson(limit) + " (got " + Got(v) + ")");
    };
    if (n.multiple_of && !IsMultipleOf(x, n.multiple_of->get<double>())) {
      return fail("a multiple of", *n.multiple_of);
    }
    if (n.maximum && x > n.maximum->get<double>()) return fail("at most", *n.maximum);
    if (n.exclusive_maximum && x >= n.exclusive_maximum->get<double>()) {
      return fail("less than", *n.exclusive_maximum);
    }
    if (n.minimum && x < n.minimum->get<double>()) return fail("at least", *n.minimum);
    if (n.exclusive_minimum && x <= n.exclusive_minimum->get<double>()) {
      return fail("greater than", *n.exclusive_minimum);
    }
    return std::nullopt;
  }

  std::optional<Failure> CheckString(const Node& n, const std::string& s, const Location& at) const {
    if (n.max_length || n.min_length) {
      size_t length = CountCodePoints(s);
      if (n.max_length && length > *n.max_length) {
        return Fail(at, "must be at most " + Plural(*n.max_length, "character") + " long (got " +
                            std::to_string(length) + ")");
      }
      if (n.min_length && length < *n.min_length) {
        return Fail(at, "must be at least " + Plural(*n.min_length, "character") + " long (got " +
                            std::to_string(length) + ")");
      }
    }
    if (n.pattern && !std::regex_search(s, n.pattern->regex)) {
      return Fail(at, "must match the pattern `" + n.pattern->source + "` (got " + Got(Json(s)) + ")");
    }
    return std::nullopt;
  }

  std::optional<Failure> CheckArray(const Node& n, const Json& v, const Location& at) const {
    if (n.max_items && v.size() > *n.max_items) {
      return Fail(at, "must have at most " + Plural(*n.max_items, "item") + " (got " +
                          std::to_string(v.size()) + ")");
    }
    if (n.min_items && v.size() < *n.min_items) {
      return Fail(at, "must have at least " + Plural(*n.min_items, "item") + " (got " +
                          std::to_string(v.size()) + ")");
    }
    for (size_t i = 0; i < v.size(); ++i) {
      bool in_prefix = i < n.prefix_items.size();
      if (!in_prefix && !n.rest_items) break;
      Id id = in_prefix ? n.prefix_items[i] : *n.rest_items;
      if (!in_prefix && nodes_[id].always == false) {
        return Fail(at, "must have at most " + Plural(n.prefix_items.size(), "item") + " (got " +
                            std::to_string(v.size()) + ")");
      }
      if (auto failure = Check(id, v[i], at.Index(i))) return failure;
    }
    if (n.unique_items) {
      for (size_t i = 0; i < v.size(); ++i) {
        for (size_t j = i + 1; j < v.size(); ++j) {
          if (v[i] == v[j]) {
            return Fail(at, "must not contain duplicates (items " + std::to_string(i) + " and " +
                                std::to_string(j) + " are equal)");
          }
        }
      }
    }
    if (n.contains) {
      bool found = false;
      for (size_t i = 0; i < v.size() && !found; ++i) found = !Check(*n.contains, v[i], at.Index(i));
      if (!found) return Fail(at, "must contain an item that matches the `contains` schema");
    }
    return std::nullopt;
  }

  std::optional<Failure> CheckObject(const Node& n, const Json& v, const Location& at) const {
    if (n.max_properties && v.size() > *n.max_properties) {
      return Fail(at, "must have at most " + Plural(*n.max_properties, "property") + " (got " +
                          std::to_string(v.size()) + ")");
    }
    if (n.min_properties && v.size() < *n.min_properties) {
      return Fail(at, "must have at least " + Plural(*n.min_properties, "property") + " (got " +
                          std::to_string(v.size()) + ")");
    }
    for (const auto& name : n.required) {
      if (!v.contains(name)) return Fail(at, "missing required property `" + name + "`");
    }
    for (const auto& [key, names] : n.dependent_required) {
      if (!v.contains(key)) continue;
      for (const auto& name : names) {
        if (!v.contains(name)) {
          return Fail(at, "missing property `" + name + "`, which is required when `" + key + "` is present");
        }
      }
    }
    for (auto it = v.begin(); it != v.end(); ++it) {
      const std::string& key = it.key();
      Location child = at.Key(key);
      if (n.property_names) {
        if (auto failure = Check(*n.property_names, Json(key), child)) {
          return Fail(at, "property name " + Got(Json(key)) + " is not allowed: " + failure->reason);
        }
      }
      bool matched = false;
      if (auto p = n.properties.find(key); p != n.properties.end()) {
        matched = true;
        if (auto failure = Check(p->second, *it, child)) return failure;
      }
      for (const auto& [pattern, id] : n.pattern_properties) {
        if (!std::regex_search(key, pattern.regex)) continue;
        matched = true;
        if (auto failure = Check(id, *it, child)) return failure;
      }
      if (matched || !n.additional_properties) continue;
      if (nodes_[*n.additional_properties].always == false) {
        return Fail(at, "unexpected property `" + key + "`");
      }
      if (auto failure = Check(*n.additional_properties, *it, child)) return failure;
    }
    for (const auto& [key, id] : n.dependent_schemas) {
      if (!v.contains(key)) continue;
      if (auto failure = Check(id, v, at)) return failure;
    }
    return std::nullopt;
  }

  std::optional<Failure> CheckApplicators(const Node& n, const Json& v, const Location& at) const {
    for (Id id : n.all_of) {
      if (auto failure = Check(id, v, at)) return failure;
    }
    if (!n.any_of.empty()) {
      std::vector<Failure> failures;
      for (Id id : n.any_of) {
        auto failure = Check(id, v, at);
        if (!failure) break;
        failures.push_back(std::move(*failure));
      }
      if (failures.size() == n.any_of.size()) {
        return Fail(at, "must match at least one of the `anyOf` schemas: " + ListFailures(failures, at));
      }
    }
    if (!n.one_of.empty()) {
      std::vector<Failure> failures;
      std::vector<size_t> matches;
      for (size_t i = 0; i < n.one_of.size(); ++i) {
        auto failure = Check(n.one_of[i], v, at);
        if (failure) {
          failures.push_back(std::move(*failure));
        } else {
          matches.push_back(i);
        }
      }
      if (matches.empty()) {
        return Fail(at, "must match exactly one of the `oneOf` schemas: " + ListFailures(failures, at));
      }
      if (matches.size() > 1) {
        return Fail(at, "must match exactly one of the `oneOf` schemas (matches [" +
                            std::to_string(matches[0]) + "] and [" + std::to_string(matches[1]) + "])");
      }
    }
    if (n.not_schema && !Check(*n.not_schema, v, at)) return Fail(at, "must not match the `not` schema");
    if (n.if_schema) {
      bool matched = !Check(*n.if_schema, v, at);
      std::optional<Id> branch = matched ? n.then_schema : n.else_schema;
      if (branch) {
        if (auto failure = Check(*branch, v, at)) return failure;
      }
    }
    if (n.ref) return Check(*n.ref, v, at);
    return std::nullopt;
  }

  // "[0] must be a string (got 1); [1] `/a/b`: ..." for the failed alternatives
  // of anyOf/oneOf, naming a location only when it is below `at`.
  static std::string ListFailures(const std::vector<Failure>& failures, const Location& at) {
    constexpr size_t kMaxListed = 5;
    std::string here = at.Pointer();
    std::string out;
    for (size_t i = 0; i < failures.size() && i < kMaxListed; ++i) {
      if (i > 0) out += "; ";
      out += "[" + std::to_string(i) + "] ";
      if (failures[i].pointer != here) out += Quote(failures[i].pointer) + ": ";
      out += failures[i].reason;
    }
    if (failures.size() > kMaxListed) out += "; ...";
    return out;
  }

  const std::vector<Node>& nodes_;
};

JsonSchema::JsonSchema() = default;
JsonSchema::JsonSchema(const JsonSchema&) = default;
JsonSchema::JsonSchema(JsonSchema&&) noexcept = default;
JsonSchema& JsonSchema::operator=(const JsonSchema&) = default;
JsonSchema& JsonSchema::operator=(JsonSchema&&) noexcept = default;
JsonSchema::~JsonSchema() = default;

Result<JsonSchema> JsonSchema::Compile(const Json& schema) {
  JsonSchema out;
  out.schema_ = schema;
  DSH_RETURN_IF_ERROR(Compiler(out.schema_, out.nodes_).Run());
  return out;
}

Status JsonSchema::Validate(const Json& instance) const {
  auto failure = Validator(nodes_).Check(0, instance, Location{});
  if (failure) return InvalidArguments(Quote(failure->pointer) + ": " + failure->reason);
  return Status::Ok();
}

}  // namespace dsh
