#include <gtest/gtest.h>

#include <optional>

#include "agent/model.h"

namespace dsh::agent {
namespace {

ModelMessage Msg(ModelMessage::Role role, std::string text) {
  ModelMessage m;
  m.role = role;
  m.text = std::move(text);
  return m;
}

TEST(EchoModel, RepliesWithTheLastUserMessageOnTheCallersThread) {
  auto model = MakeEchoModel();
  ModelRequest req;
  req.model = "echo";
  req.messages = {Msg(ModelMessage::Role::kSystem, "be brief"), Msg(ModelMessage::Role::kUser, "first"),
                  Msg(ModelMessage::Role::kAssistant, "echo: first"), Msg(ModelMessage::Role::kUser, "second"),
                  Msg(ModelMessage::Role::kTool, "tool output")};
  std::optional<Result<ModelResponse>> out;
  std::string streamed;
  model->Stream(
      req, std::make_shared<CancelToken>(), [&](const ModelDelta& d) { streamed += d.text; },
      [&](Result<ModelResponse> r) { out.emplace(std::move(r)); });
  ASSERT_TRUE(out.has_value()) << "the echo model completes before Stream returns";
  ASSERT_TRUE(out->ok()) << out->status().ToString();
  EXPECT_EQ((*out)->text, "echo: second");
  EXPECT_EQ((*out)->finish_reason, "stop");
  EXPECT_TRUE((*out)->tool_calls.empty());
  EXPECT_EQ(streamed, "echo: second");
}

TEST(EchoModel, EchoesAnEmptyStringWithoutAUserMessage) {
  auto model = MakeEchoModel();
  ModelRequest req;
  req.messages = {Msg(ModelMessage::Role::kSystem, "sys")};
  std::optional<Result<ModelResponse>> out;
  model->Stream(req, nullptr, nullptr, [&](Result<ModelResponse> r) { out.emplace(std::move(r)); });
  ASSERT_TRUE(out.has_value() && out->ok());
  EXPECT_EQ((*out)->text, "echo: ");
}

TEST(EchoModel, ACancelledCallCompletesWithCancelled) {
  auto model = MakeEchoModel();
  auto cancel = std::make_shared<CancelToken>();
  cancel->Cancel();
  ModelRequest req;
  req.messages = {Msg(ModelMessage::Role::kUser, "hi")};
  std::optional<Result<ModelResponse>> out;
  model->Stream(req, cancel, nullptr, [&](Result<ModelResponse> r) { out.emplace(std::move(r)); });
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->status().code(), "cancelled");
}

TEST(EchoModel, DescribesItselfAsTheOfflineEchoModel) {
  EXPECT_EQ(MakeEchoModel()->Describe("echo"), "echo (offline echo model: replies with your last message)");
}

}  // namespace
}  // namespace dsh::agent
