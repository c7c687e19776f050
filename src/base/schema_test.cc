#include "base/schema.h"

#include <gtest/gtest.h>

namespace dsh {
namespace {

struct Model {
  std::string provider;
  std::string model;
  std::optional<std::string> effort;
};

struct Args {
  std::string prompt;
  std::optional<int64_t> limit;
  std::optional<std::string> mode;
  std::optional<bool> verbose;
  std::optional<Model> model;
};

const ObjectSchema<Model>& ModelSchema() {
  static const auto* s = new ObjectSchema<Model>(
      ObjectSchema<Model>("A model route.")
          .Field("provider", &Model::provider, "Provider id.")
          .Field("model", &Model::model, "Model id.")
          .Optional("reasoningEffort", &Model::effort, "Effort."));
  return *s;
}

const ObjectSchema<Args>& ArgsSchema() {
  static const auto* s = new ObjectSchema<Args>(
      ObjectSchema<Args>("Test tool.")
          .Field("prompt", &Args::prompt, "Prompt.", StringRule{.trim = true})
          .Optional("limit", &Args::limit, "Limit.", IntRule{.max = 200})
          .Optional("mode", &Args::mode, "Mode.", StringRule{.one_of = {"steer", "followup"}})
          .Optional("verbose", &Args::verbose, "Verbose.")
          .Optional("model", &Args::model, ModelSchema()));
  return *s;
}

TEST(Schema, DecodesAValidObject) {
  auto r = ArgsSchema().Decode(Json::parse(
      R"({"prompt": "  hi  ", "limit": 200, "mode": "followup", "verbose": true,
          "model": {"provider": "openai", "model": "gpt", "reasoningEffort": "high"}})"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->prompt, "hi");
  EXPECT_EQ(r->limit, 200);
  EXPECT_EQ(r->mode, "followup");
  EXPECT_EQ(r->verbose, true);
  ASSERT_TRUE(r->model.has_value());
  EXPECT_EQ(r->model->effort, "high");
}

TEST(Schema, AcceptsWholeFloatsAsIntegers) {
  auto r = ArgsSchema().Decode(Json::parse(R"({"prompt": "x", "limit": 5.0})"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->limit, 5);
}

struct BadCase {
  const char* name;
  const char* json;
  const char* message_part;  // the message must name the field
};

TEST(Schema, RejectsEachBadInputWithAMessageNamingTheField) {
  const BadCase cases[] = {
      {"not an object", R"([1])", "arguments must be a JSON object"},
      {"missing required", R"({})", "`prompt` is required"},
      {"unknown property", R"({"prompt": "x", "extra": 1})", "unknown property `extra`"},
      {"nested unknown", R"({"prompt": "x", "model": {"provider": "p", "model": "m", "x": 1}})",
       "unknown property `model.x`"},
      {"wrong type string", R"({"prompt": 5})", "`prompt` must be a string"},
      {"null string", R"({"prompt": null})", "`prompt` must be a string (got null)"},
      {"empty string", R"({"prompt": ""})", "`prompt` must not be empty"},
      {"blank trimmed", R"({"prompt": "   "})", "`prompt` must not be empty or blank"},
      {"zero", R"({"prompt": "x", "limit": 0})", "`limit` must be a positive integer no greater than 200"},
      {"negative", R"({"prompt": "x", "limit": -3})", "`limit` must be a positive integer"},
      {"fractional", R"({"prompt": "x", "limit": 1.5})", "not a whole number"},
      {"unsafe", R"({"prompt": "x", "limit": 9007199254740992})", "beyond 2^53-1"},
      {"huge unsigned", R"({"prompt": "x", "limit": 18446744073709551615})", "beyond 2^53-1"},
      {"over max", R"({"prompt": "x", "limit": 201})", "`limit` must be a positive integer no greater than 200"},
      {"string as int", R"({"prompt": "x", "limit": "5"})", "`limit` must be"},
      {"bool as int", R"({"prompt": "x", "limit": true})", "`limit` must be"},
      {"enum", R"({"prompt": "x", "mode": "later"})", "`mode` must be one of \"steer\", \"followup\""},
      {"bool type", R"({"prompt": "x", "verbose": "yes"})", "`verbose` must be a boolean"},
      {"nested missing", R"({"prompt": "x", "model": {"provider": "p"}})", "`model.model` is required"},
      {"nested empty", R"({"prompt": "x", "model": {"provider": "", "model": "m"}})",
       "`model.provider` must not be empty"},
      {"nested wrong type", R"({"prompt": "x", "model": "openai/gpt"})", "`model` must be a JSON object"},
  };
  for (const auto& c : cases) {
    auto r = ArgsSchema().Decode(Json::parse(c.json));
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_EQ(r.status().code(), "invalid_arguments") << c.name;
    EXPECT_NE(r.status().message().find(c.message_part), std::string::npos)
        << c.name << ": " << r.status().message();
  }
}

TEST(Schema, ChecksRunAfterFields) {
  struct Pair {
    std::optional<int64_t> a;
    std::optional<int64_t> b;
  };
  auto schema = ObjectSchema<Pair>()
                    .Optional("a", &Pair::a, "")
                    .Optional("b", &Pair::b, "")
                    .AddCheck([](const Pair& p) {
                      return p.a && p.b ? InvalidArguments("`a` and `b` cannot both be given") : Status::Ok();
                    });
  EXPECT_TRUE(schema.Decode(Json::parse(R"({"a": 1})")).ok());
  EXPECT_EQ(schema.Decode(Json::parse(R"({"a": 1, "b": 2})")).status().message(),
            "`a` and `b` cannot both be given");
}

TEST(Schema, EmitsTheJsonSchemaFromTheSameDeclaration) {
  Json s = ArgsSchema().ToJsonSchema();
  EXPECT_EQ(s["type"], "object");
  EXPECT_EQ(s["additionalProperties"], false);
  EXPECT_EQ(s["required"], Json::array({"prompt"}));
  EXPECT_EQ(s["properties"]["prompt"]["minLength"], 1);
  EXPECT_EQ(s["properties"]["limit"]["type"], "integer");
  EXPECT_EQ(s["properties"]["limit"]["minimum"], 1);
  EXPECT_EQ(s["properties"]["limit"]["maximum"], 200);
  EXPECT_EQ(s["properties"]["mode"]["enum"], Json::array({"steer", "followup"}));
  EXPECT_EQ(s["properties"]["model"]["required"], Json::array({"provider", "model"}));
  EXPECT_EQ(s["properties"]["model"]["additionalProperties"], false);
}

}  // namespace
}  // namespace dsh
