#include "base/json_schema.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace dsh {
namespace {

namespace fs = std::filesystem;

JsonSchema MustCompile(const char* text) {
  auto schema = JsonSchema::Compile(Json::parse(text));
  EXPECT_TRUE(schema.ok()) << schema.status().ToString();
  return schema.ok() ? std::move(schema).value() : JsonSchema::Compile(Json(true)).value();
}

// The message of Validate's error, or "ok".
std::string Check(const JsonSchema& schema, const char* instance) {
  Status status = schema.Validate(Json::parse(instance));
  if (status.ok()) return "ok";
  EXPECT_EQ(status.code(), codes::kInvalidArguments);
  return status.message();
}

std::string CompileError(const char* text) {
  auto schema = JsonSchema::Compile(Json::parse(text));
  if (schema.ok()) return "compiled";
  EXPECT_EQ(schema.status().code(), codes::kInvalidArguments);
  return schema.status().message();
}

// ---- The official JSON-Schema-Test-Suite (Debian: json-schema-test-suite) ----

fs::path SuiteDir() {
  const char* dir = std::getenv("DSH_JSON_SCHEMA_SUITE");  // its tests/draft7 directory
  return dir != nullptr && *dir != '\0' ? fs::path(dir)
                                        : fs::path("/usr/share/json-schema-test-suite/tests/draft7");
}

// What we knowingly do not pass: a whole file (empty group), a whole group of
// cases sharing one schema (empty test), or one case.
struct KnownDifference {
  std::string_view file;
  std::string_view group;
  std::string_view test;
  std::string_view reason;
};

constexpr KnownDifference kKnownDifferences[] = {
    {"refRemote.json", "", "", "remote $ref (http://localhost:1234/...) is out of scope"},
    {"definitions.json", "", "",
     "validates against the draft-07 metaschema, a remote $ref (http://json-schema.org/draft-07/schema#)"},
    {"ref.json", "remote ref, containing refs itself", "",
     "remote $ref to the draft-07 metaschema (http://json-schema.org/draft-07/schema#)"},
    {"ref.json", "Recursive references between schemas", "",
     "$id-based resolution ($ref \"node\" and \"tree\" relative to $id) is out of scope"},
    {"ref.json", "ref overrides any sibling keywords", "ref valid, maxItems ignored",
     "siblings of $ref apply too (2020-12 behaviour, chosen as safer for arguments); draft-07 ignores them"},
};

const KnownDifference* FindKnownDifference(std::string_view file, std::string_view group,
                                           std::string_view test) {
  for (const auto& d : kKnownDifferences) {
    if (d.file == file && (d.group.empty() || d.group == group) && (d.test.empty() || d.test == test)) {
      return &d;
    }
  }
  return nullptr;
}

TEST(JsonSchemaSuite, PassesDraft7) {
  fs::path dir = SuiteDir();
  ASSERT_TRUE(fs::is_directory(dir))
      << "JSON-Schema-Test-Suite not found at " << dir
      << ": install the Debian package json-schema-test-suite (listed in scripts/lib.sh), or set "
         "DSH_JSON_SCHEMA_SUITE to the suite's tests/draft7 directory";
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.path().extension() == ".json") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty()) << "no .json files in " << dir;

  std::set<const KnownDifference*> used;
  int total = 0, passed = 0, excluded = 0;
  for (const auto& path : files) {
    std::string file = path.filename().string();
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    auto groups = ParseJson(text.str());
    ASSERT_TRUE(groups.ok()) << file << ": " << groups.status().ToString();
    for (const auto& group : *groups) {
      std::string group_name = group["description"].get<std::string>();
      auto schema = JsonSchema::Compile(group["schema"]);
      for (const auto& test : group["tests"]) {
        ++total;
        std::string test_name = test["description"].get<std::string>();
        std::string where = file + " / " + group_name + " / " + test_name;
        bool expected = test["valid"].get<bool>();
        if (const auto* difference = FindKnownDifference(file, group_name, test_name)) {
          used.insert(difference);
          ++excluded;
          if (!difference->test.empty()) {  // a single case must still differ, or the table is stale
            ASSERT_TRUE(schema.ok()) << where << ": " << schema.status().ToString();
            EXPECT_NE(schema->Validate(test["data"]).ok(), expected)
                << where << ": now passes; remove it from kKnownDifferences";
          }
          continue;
        }
        if (!schema.ok()) {
          ADD_FAILURE() << where << ": schema does not compile: " << schema.status().ToString();
          continue;
        }
        Status status = schema->Validate(test["data"]);
        if (status.ok() == expected) {
          ++passed;
        } else {
          ADD_FAILURE() << where << ": expected " << (expected ? "valid" : "invalid") << ", got "
                        << status.ToString();
        }
      }
    }
  }
  for (const auto& d : kKnownDifferences) {
    EXPECT_TRUE(used.count(&d)) << "kKnownDifferences entry matches no case: " << d.file << " / " << d.group
                                << " / " << d.test;
  }
  std::cout << "JSON-Schema-Test-Suite draft7 (" << dir.string() << "): " << files.size() << " files, "
            << passed << "/" << (total - excluded) << " cases passed, " << excluded << " of " << total
            << " excluded as known differences\n";
  EXPECT_EQ(passed, total - excluded);
}

// ---- Messages ----

TEST(JsonSchema, NamesTheFailingLocationAndWhy) {
  JsonSchema schema = MustCompile(R"({
    "type": "object",
    "properties": {
      "message": {"type": "string", "minLength": 1},
      "count": {"type": "integer", "minimum": 1, "maximum": 10},
      "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
      "mode": {"enum": ["fast", "slow"]},
      "id": {"type": "string", "pattern": "^[a-z]+$"}
    },
    "required": ["message"]
  })");
  EXPECT_EQ(Check(schema, R"({"message": "hi", "count": 10, "tags": ["a", "b"], "mode": "fast", "id": "x"})"),
            "ok");
  EXPECT_EQ(Check(schema, R"({})"), "`/`: missing required property `message`");
  EXPECT_EQ(Check(schema, R"({"message": "hi", "count": 12})"), "`/count`: must be at most 10 (got 12)");
  EXPECT_EQ(Check(schema, R"({"message": "hi", "count": 2.5})"), "`/count`: must be an integer (got 2.5)");
  EXPECT_EQ(Check(schema, R"({"message": "hi", "tags": ["a", 3]})"), "`/tags/1`: must be a string (got 3)");
  EXPECT_EQ(Check(schema, R"({"message": "hi", "tags": ["a", "a"]})"),
            "`/tags`: must not contain duplicates (items 0 and 1 are equal)");
  EXPECT_EQ(Check(schema, R"({"message": ""})"), "`/message`: must be at least 1 character long (got 0)");
  EXPECT_EQ(Check(schema, R"({"message": "hi", "mode": "medium"})"),
            R"(`/mode`: must be one of "fast", "slow" (got "medium"))");
  EXPECT_EQ(Check(schema, R"({"message": "hi", "id": "A1"})"),
            R"(`/id`: must match the pattern `^[a-z]+$` (got "A1"))");
  EXPECT_EQ(Check(schema, R"([])"), "`/`: must be an object (got [])");
}

TEST(JsonSchema, ShortensLongValuesInMessages) {
  JsonSchema schema = MustCompile(R"({"type": "integer"})");
  EXPECT_EQ(schema.Validate(Json(std::string(1000, 'x'))).message(),
            R"(`/`: must be an integer (got "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx..."))");
  EXPECT_EQ(Check(schema, R"([1, 2])"), "`/`: must be an integer (got [1,2])");
  EXPECT_EQ(schema.Validate(Json(std::vector<int>(100, 7))).message(),
            "`/`: must be an integer (got an array of 100 items)");
}

TEST(JsonSchema, ListsWhyEachAlternativeFailed) {
  JsonSchema schema = MustCompile(R"({
    "properties": {"shape": {"anyOf": [
      {"type": "object", "properties": {"kind": {"const": "circle"}, "r": {"type": "number"}}, "required": ["kind", "r"]},
      {"type": "string"}
    ]}}
  })");
  EXPECT_EQ(Check(schema, R"({"shape": {"kind": "circle", "r": 2}})"), "ok");
  EXPECT_EQ(Check(schema, R"({"shape": {"kind": "circle", "r": "2"}})"),
            "`/shape`: must match at least one of the `anyOf` schemas: [0] `/shape/r`: must be a number (got "
            "\"2\"); "
            "[1] must be a string (got {\"kind\":\"circle\",\"r\":\"2\"})");
}

TEST(JsonSchema, CountsCharactersNotBytes) {
  JsonSchema schema = MustCompile(R"({"maxLength": 2, "minLength": 2})");
  EXPECT_EQ(Check(schema, R"("éé")"), "ok");  // 4 bytes
  EXPECT_EQ(Check(schema, R"("日本語")"), "`/`: must be at most 2 characters long (got 3)");
}

TEST(JsonSchema, TreatsWholeFloatsAsIntegersAndComparesNumbersByValue) {
  EXPECT_EQ(Check(MustCompile(R"({"type": "integer"})"), "1.0"), "ok");
  EXPECT_EQ(Check(MustCompile(R"({"const": 1})"), "1.0"), "ok");
  EXPECT_EQ(Check(MustCompile(R"({"enum": [[1, {"a": 2}]]})"), R"([1.0, {"a": 2.0}])"), "ok");
  EXPECT_EQ(Check(MustCompile(R"({"const": 1})"), "true"), "`/`: must be 1 (got true)");
}

// ---- MCP tool schemas, as zod-to-json-schema writes them ----

TEST(JsonSchema, ValidatesAZodToolSchema) {
  JsonSchema schema = MustCompile(R"({
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    "required": ["a", "b"]
  })");
  EXPECT_EQ(Check(schema, R"({"a": 1, "b": 2.5})"), "ok");
  EXPECT_EQ(Check(schema, R"({"a": 1, "b": 2, "c": 3})"), "ok");  // additionalProperties not given
  EXPECT_EQ(Check(schema, R"({"a": 1})"), "`/`: missing required property `b`");
  EXPECT_EQ(Check(schema, R"({"a": "1", "b": 2})"), R"(`/a`: must be a number (got "1"))");
}

TEST(JsonSchema, RejectsUnknownPropertiesWhenAdditionalPropertiesIsFalse) {
  JsonSchema schema = MustCompile(R"({
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {
      "path": {"type": "string", "description": "File to read"},
      "options": {"type": "object", "properties": {"head": {"type": "integer"}}, "additionalProperties": false}
    },
    "required": ["path"],
    "additionalProperties": false
  })");
  EXPECT_EQ(Check(schema, R"({"path": "/tmp/x", "options": {"head": 3}})"), "ok");
  EXPECT_EQ(Check(schema, R"({"path": "/tmp/x", "verbose": true})"), "`/`: unexpected property `verbose`");
  EXPECT_EQ(Check(schema, R"({"path": "/tmp/x", "options": {"tail": 3}})"),
            "`/options`: unexpected property `tail`");
}

TEST(JsonSchema, FollowsRecursiveRefsToDefinitions) {
  // zod-to-json-schema's shape for a recursive type.
  JsonSchema schema = MustCompile(R"({
    "$ref": "#/definitions/Node",
    "definitions": {"Node": {
      "type": "object",
      "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/definitions/Node"}}},
      "required": ["name"], "additionalProperties": false
    }}
  })");
  EXPECT_EQ(Check(schema, R"({"name": "a", "children": [{"name": "b", "children": [{"name": "c"}]}]})"),
            "ok");
  EXPECT_EQ(Check(schema, R"({"name": "a", "children": [{"name": "b", "children": [{"name": 3}]}]})"),
            "`/children/0/children/0/name`: must be a string (got 3)");

  Json deep = {{"name", "leaf"}};
  for (int i = 0; i < 1000; ++i) {
    Json parent = {{"name", "n"}, {"children", Json::array()}};
    parent["children"].push_back(std::move(deep));
    deep = std::move(parent);
  }
  EXPECT_NE(schema.Validate(deep).message().find("is nested too deeply"), std::string::npos);
}

TEST(JsonSchema, SupportsDraft2020Keywords) {
  JsonSchema tuple = MustCompile(R"({
    "$defs": {"n": {"type": "integer"}},
    "prefixItems": [{"$ref": "#/$defs/n"}, {"type": "string"}],
    "items": false
  })");
  EXPECT_EQ(Check(tuple, R"([1, "a"])"), "ok");
  EXPECT_EQ(Check(tuple, R"(["x"])"), R"(`/0`: must be an integer (got "x"))");
  EXPECT_EQ(Check(tuple, R"([1, "a", 2])"), "`/`: must have at most 2 items (got 3)");

  JsonSchema dependent = MustCompile(R"({
    "dependentRequired": {"start": ["end"]},
    "dependentSchemas": {"end": {"properties": {"start": {"type": "integer"}}}}
  })");
  EXPECT_EQ(Check(dependent, R"({"start": 1, "end": 2})"), "ok");
  EXPECT_EQ(Check(dependent, R"({"start": 1})"),
            "`/`: missing property `end`, which is required when `start` is present");
  EXPECT_EQ(Check(dependent, R"({"start": "1", "end": 2})"), R"(`/start`: must be an integer (got "1"))");
}

TEST(JsonSchema, AppliesSiblingsOfRef) {
  JsonSchema schema =
      MustCompile(R"({"definitions": {"s": {"type": "string"}}, "$ref": "#/definitions/s", "maxLength": 3})");
  EXPECT_EQ(Check(schema, R"("abc")"), "ok");
  EXPECT_EQ(Check(schema, R"("abcd")"), "`/`: must be at most 3 characters long (got 4)");
  EXPECT_EQ(Check(schema, "4"), "`/`: must be a string (got 4)");
}

TEST(JsonSchema, MatchesPatternsOnLongStringsWithoutOverflowingTheStack) {
  JsonSchema schema = MustCompile(R"({"pattern": "^(a|b)*$"})");
  // 256 KiB is enough to overflow libstdc++'s default (backtracking) engine.
  EXPECT_TRUE(schema.Validate(Json(std::string(256 << 10, 'a'))).ok());
  EXPECT_FALSE(schema.Validate(Json(std::string(256 << 10, 'a') + "c")).ok());
}

TEST(JsonSchema, StaysUsableAfterTheOriginalIsGone) {
  std::optional<JsonSchema> original = MustCompile(R"({"properties": {"x": {"pattern": "^a"}}})");
  JsonSchema copy = *original;
  original.reset();
  EXPECT_EQ(Check(copy, R"({"x": "b"})"), R"(`/x`: must match the pattern `^a` (got "b"))");
}

// ---- Compile errors ----

TEST(JsonSchema, RejectsSchemasItCannotCompile) {
  EXPECT_EQ(CompileError("3"), "`/`: a schema must be an object or a boolean (got 3)");
  EXPECT_EQ(CompileError(R"({"properties": {"n": {"maxLength": -1}}})"),
            "`/properties/n`: `maxLength` must be a non-negative integer (got -1)");
  EXPECT_EQ(CompileError(R"({"type": "strin"})"), R"(`/`: `type` has an unknown type name "strin")");
  EXPECT_EQ(CompileError(R"({"required": "a"})"), R"(`/`: `required` must be an array of strings (got "a"))");
  EXPECT_EQ(CompileError(R"({"items": [{"type": 5}]})"),
            "`/items/0`: `type` must be a type name or an array of them (got 5)");
  EXPECT_EQ(CompileError(R"({"anyOf": []})"), "`/`: `anyOf` must be a non-empty array of schemas (got [])");
  EXPECT_EQ(CompileError(R"({"multipleOf": 0})"), "`/`: `multipleOf` must be greater than 0 (got 0)");

  std::string bad_pattern = CompileError(R"({"properties": {"id": {"pattern": "(a"}}})");
  EXPECT_EQ(bad_pattern.rfind(R"(`/properties/id`: `pattern` "(a" is not a supported regular expression)", 0),
            0u)
      << bad_pattern;
  std::string bad_key = CompileError(R"({"patternProperties": {"[": {}}})");
  EXPECT_EQ(bad_key.rfind(R"(`/`: `patternProperties` "[" is not a supported regular expression)", 0), 0u)
      << bad_key;
}

TEST(JsonSchema, AcceptsOnlyLocalRefsThatResolve) {
  EXPECT_EQ(CompileError(R"({"properties": {"a": {"$ref": "http://example.com/s.json#/x"}}})"),
            "`/properties/a`: only local $ref is supported (a JSON pointer such as `#/definitions/x`), got "
            "`http://example.com/s.json#/x`");
  EXPECT_EQ(CompileError(R"({"$ref": "#foo"})"),
            "`/`: only local $ref is supported (a JSON pointer such as `#/definitions/x`), got `#foo`");
  EXPECT_EQ(CompileError(R"({"$ref": "#/definitions/missing"})"),
            "`/`: `$ref` target `#/definitions/missing` does not exist");
  EXPECT_EQ(CompileError(R"({"$ref": 1})"), "`/`: `$ref` must be a string (got 1)");
}

TEST(JsonSchema, RejectsRefCyclesThatNeverDescendIntoTheValue) {
  EXPECT_EQ(CompileError(R"({"$ref": "#"})"),
            "`/`: `$ref` loops back here without descending into the value");
  std::string error = CompileError(
      R"({"definitions": {"a": {"$ref": "#/definitions/b"}, "b": {"anyOf": [{"type": "string"}, {"$ref": "#/definitions/a"}]}},
          "properties": {"x": {"$ref": "#/definitions/a"}}})");
  EXPECT_NE(error.find("`$ref` loops back here"), std::string::npos) << error;
  // A cycle through `properties` descends, so it is fine.
  EXPECT_EQ(CompileError(R"({"properties": {"next": {"$ref": "#"}}})"), "compiled");
}

}  // namespace
}  // namespace dsh
