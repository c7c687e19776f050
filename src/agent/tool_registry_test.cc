#include "agent/tool_registry.h"

#include <gtest/gtest.h>

namespace dsh::agent {
namespace {

struct AddArgs {
  int64_t a = 0;
  int64_t b = 0;
};

class AddTool final : public TypedTool<AddArgs> {
 public:
  AddTool()
      : TypedTool("add", ObjectSchema<AddArgs>("Adds two positive integers.")
                             .Field("a", &AddArgs::a, "first")
                             .Field("b", &AddArgs::b, "second")) {}
  int runs = 0;

 protected:
  void Run(const ToolContext& ctx, AddArgs args, Done done) override {
    ++runs;
    done(Json{{"sum", args.a + args.b}, {"caller", ctx.session_id.value_or("root")}});
  }
};

Result<Json> Call(const ToolRegistry& r, std::string_view name, const Json& args, ToolContext ctx = {}) {
  std::optional<Result<Json>> out;
  r.Invoke(name, ctx, args, [&](Result<Json> res) { out.emplace(std::move(res)); });
  return std::move(*out);
}

TEST(ToolRegistry, ValidatesArgumentsBeforeTheToolRuns) {
  ToolRegistry r;
  auto tool = std::make_unique<AddTool>();
  AddTool* add = tool.get();
  ASSERT_TRUE(r.Register(std::move(tool)).ok());
  auto bad = Call(r, "add", Json{{"a", 1}, {"b", 0}});
  EXPECT_EQ(bad.status().code(), "invalid_arguments");
  EXPECT_NE(bad.status().message().find("add: `b` must be a positive safe integer"), std::string::npos)
      << bad.status().message();
  EXPECT_EQ(add->runs, 0);
  auto ok = Call(r, "add", Json{{"a", 1}, {"b", 2}}, ToolContext{.session_id = "s1"});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ((*ok)["sum"], 3);
  EXPECT_EQ((*ok)["caller"], "s1");
}

TEST(ToolRegistry, UnknownToolsAndDuplicateNamesAreErrors) {
  ToolRegistry r;
  EXPECT_EQ(Call(r, "nope", Json::object()).status().code(), "unknown_tool");
  ASSERT_TRUE(r.Register(std::make_unique<AddTool>()).ok());
  EXPECT_EQ(r.Register(std::make_unique<AddTool>()).code(), "already_exists");
  EXPECT_EQ(r.List().size(), 1u);
  EXPECT_EQ(r.Find("add")->parameters()["required"], Json::array({"a", "b"}));
}

}  // namespace
}  // namespace dsh::agent
