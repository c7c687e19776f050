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

// A tool with a given name that answers with it (an MCP server's tool).
class NamedTool final : public Tool {
 public:
  explicit NamedTool(std::string name) : name_(std::move(name)) {}
  const std::string& name() const override { return name_; }
  const std::string& description() const override { return name_; }
  const Json& parameters() const override { return params_; }
  void Invoke(const ToolContext&, const Json&, Done done) override { done(Json(name_)); }

 private:
  std::string name_;
  Json params_ = Json{{"type", "object"}};
};

TEST(ToolRegistry, ReplacingAGroupSwapsItsToolsOnlyAndKeepsHeldOnesAlive) {
  ToolRegistry r;
  ASSERT_TRUE(r.Register(std::make_unique<AddTool>()).ok());
  ASSERT_TRUE(r.ReplaceGroup("mcp:ev", {std::make_shared<NamedTool>("ev__echo"), std::make_shared<NamedTool>("ev__get-sum")}).ok());
  EXPECT_EQ(r.GroupOf("ev__get-sum"), "mcp:ev");
  std::shared_ptr<Tool> held = r.Find("ev__echo");
  ASSERT_TRUE(r.ReplaceGroup("mcp:ev", {std::make_shared<NamedTool>("ev__Other")}).ok());
  EXPECT_EQ(r.Find("ev__echo"), nullptr);
  EXPECT_EQ(held->name(), "ev__echo");  // still usable by whoever held it
  EXPECT_EQ(*Call(r, "ev__Other", Json::object()), "ev__Other");
  EXPECT_EQ(r.List().size(), 2u);
  // A name of another group, a bad name or a repeated one changes nothing.
  EXPECT_EQ(r.ReplaceGroup("mcp:ev", {std::make_shared<NamedTool>("add")}).code(), "already_exists");
  EXPECT_EQ(r.ReplaceGroup("mcp:ev", {std::make_shared<NamedTool>("a.b")}).code(), "invalid_arguments");
  EXPECT_EQ(r.ReplaceGroup("mcp:ev", {std::make_shared<NamedTool>("x"), std::make_shared<NamedTool>("x")}).code(),
            "already_exists");
  EXPECT_EQ(r.ReplaceGroup("mcp:ev", {std::make_shared<NamedTool>(std::string(65, 'a'))}).code(), "invalid_arguments");
  EXPECT_NE(r.Find("ev__Other"), nullptr);
  ASSERT_TRUE(r.ReplaceGroup("mcp:ev", {}).ok());
  EXPECT_EQ(r.List().size(), 1u);
}

}  // namespace
}  // namespace dsh::agent
