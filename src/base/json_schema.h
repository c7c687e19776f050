#pragma once

// A small JSON Schema validator for the arguments of MCP servers' tools, which
// publish their `inputSchema` as JSON Schema (mostly draft-07, as written by
// zod-to-json-schema, sometimes draft 2020-12).
//
//   DSH_ASSIGN_OR_RETURN(JsonSchema schema, JsonSchema::Compile(tool["inputSchema"]));
//   DSH_RETURN_IF_ERROR(schema.Validate(arguments));   // before sending the call
//
// Supported: the draft-07 validation keywords (type, enum, const, the numeric,
// string, array and object keywords, dependencies, propertyNames, if/then/else,
// allOf/anyOf/oneOf/not, boolean schemas, definitions), plus 2020-12's `$defs`,
// `prefixItems`, `dependentRequired` and `dependentSchemas`. `$ref` must be a
// local JSON pointer ("#", "#/definitions/x", "#/$defs/x"; ~0 ~1 and %-escapes
// decoded); recursion through `$ref` is fine as long as every cycle descends
// into the value. Siblings of `$ref` apply as well (2020-12 behaviour; draft-07
// would ignore them), which can only reject more. `format`, `$id`, `$schema`
// and unknown keywords are annotations and ignored.
//
// Known limits: `pattern` uses std::regex (ECMAScript syntax) on UTF-8 bytes,
// so `.` matches one byte rather than one character, and back-references are
// rejected at Compile (the regex engine runs in its linear-time mode, which
// long strings cannot overflow the stack of). Numbers are compared as doubles.

#include <cstddef>
#include <vector>

#include "base/json.h"
#include "base/status.h"

namespace dsh {

// A compiled JSON Schema. An immutable value type: copyable and movable;
// Validate is const and safe to call from several threads at once.
class JsonSchema {
 public:
  // Errors: `invalid_arguments` for a schema that is not an object or boolean,
  // whose keyword values have the wrong type, whose `pattern` does not compile,
  // whose `$ref` is not a local JSON pointer or points nowhere, or whose `$ref`s
  // form a cycle that never descends into the value. The message names the
  // place as a JSON pointer into the schema: "`/properties/n`: `maxLength` must
  // be a non-negative integer (got -1)".
  static Result<JsonSchema> Compile(const Json& schema);

  // Ok, or `invalid_arguments` naming the first failing place in `instance`
  // as a JSON pointer and why: "`/count`: must be at most 10 (got 12)",
  // "`/`: missing required property `message`". Written for a model that must
  // fix its call: short, plain, with the offending value when it is short.
  Status Validate(const Json& instance) const;

  // The schema as given to Compile.
  const Json& schema() const { return schema_; }

  JsonSchema(const JsonSchema&);
  JsonSchema(JsonSchema&&) noexcept;
  JsonSchema& operator=(const JsonSchema&);
  JsonSchema& operator=(JsonSchema&&) noexcept;
  ~JsonSchema();

 private:
  struct Node;  // one compiled (sub)schema; nodes_[0] is the root
  class Compiler;
  class Validator;

  JsonSchema();

  Json schema_;
  std::vector<Node> nodes_;
};

}  // namespace dsh
