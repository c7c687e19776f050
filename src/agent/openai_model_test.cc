#include <gtest/gtest.h>

#include <cstdlib>
#include <future>
#include <mutex>

#include "agent/model.h"
#include "agent/testing/fake_chat_server.h"

namespace dsh::agent {
namespace {

using std::chrono::milliseconds;
using testing::FakeChatServer;
using testing::SseChunk;
using testing::SseData;

constexpr auto kGenerous = std::chrono::seconds(20);

// curl honours proxy variables; the fake server is on loopback and must be
// reached directly whatever the machine running the tests has set.
const bool kProxiesCleared = [] {
  for (const char* name : {"http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"}) {
    unsetenv(name);
  }
  return true;
}();

// One Stream() call observed from the test thread. The callbacks share its
// state, so a failing test that drops the call before the adapter is safe.
class PendingCall {
 public:
  PendingCall() : state_(std::make_shared<State>()) {
    future_ = state_->done.get_future();
    first_delta_ = state_->first_delta.get_future();
  }

  ModelAdapter::OnDelta OnDelta() {
    return [state = state_](const ModelDelta& d) {
      std::lock_guard lock(state->mu);
      state->deltas.push_back(d);
      if (state->deltas.size() == 1) state->first_delta.set_value();
    };
  }
  ModelAdapter::Done Done() {
    return [state = state_](Result<ModelResponse> r) { state->done.set_value(std::move(r)); };
  }

  // The result, or a timeout error when `done` was not called in time.
  Result<ModelResponse> Get(std::chrono::milliseconds timeout = kGenerous) {
    if (future_.wait_for(timeout) != std::future_status::ready) {
      return Status("test_timeout", "done was not called in time");
    }
    return future_.get();
  }
  bool ready() { return future_.wait_for(milliseconds(0)) == std::future_status::ready; }
  bool WaitForFirstDelta() { return first_delta_.wait_for(kGenerous) == std::future_status::ready; }
  std::string Joined(ModelDelta::Kind kind) {
    std::lock_guard lock(state_->mu);
    std::string out;
    for (const auto& d : state_->deltas) {
      if (d.kind == kind) out += d.text;
    }
    return out;
  }
  size_t DeltaCount(ModelDelta::Kind kind) {
    std::lock_guard lock(state_->mu);
    return std::count_if(state_->deltas.begin(), state_->deltas.end(),
                         [&](const ModelDelta& d) { return d.kind == kind; });
  }

 private:
  struct State {
    std::promise<Result<ModelResponse>> done;
    std::promise<void> first_delta;
    std::mutex mu;
    std::vector<ModelDelta> deltas;  // GUARDED_BY(mu)
  };
  std::shared_ptr<State> state_;
  std::future<Result<ModelResponse>> future_;
  std::future<void> first_delta_;
};

ModelMessage Msg(ModelMessage::Role role, std::string text) {
  ModelMessage m;
  m.role = role;
  m.text = std::move(text);
  return m;
}

ModelRequest Hello() {
  ModelRequest r;
  r.model = "fake-model";
  r.messages = {Msg(ModelMessage::Role::kUser, "hello")};
  return r;
}

OpenAiOptions Options(const FakeChatServer& server) {
  OpenAiOptions o;
  o.base_url = server.base_url();
  o.workers = 2;
  o.connect_timeout = milliseconds(5'000);
  o.idle_timeout = milliseconds(10'000);
  o.max_retries = 2;
  o.backoff_initial = milliseconds(1);
  o.backoff_max = milliseconds(20);
  return o;
}

std::unique_ptr<PendingCall> Start(ModelAdapter& model, ModelRequest request = Hello(),
                                   std::shared_ptr<CancelToken> cancel = std::make_shared<CancelToken>()) {
  auto call = std::make_unique<PendingCall>();
  model.Stream(std::move(request), std::move(cancel), call->OnDelta(), call->Done());
  return call;
}

TEST(OpenAiModel, StreamsTextAsDeltas) {
  FakeChatServer server;
  server.Enqueue(testing::TextReply("Hello there, world!"));
  auto model = MakeOpenAiModel(Options(server));
  auto call = Start(*model);
  auto r = call->Get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->text, "Hello there, world!");
  EXPECT_EQ(r->finish_reason, "stop");
  EXPECT_TRUE(r->reasoning.empty());
  EXPECT_TRUE(r->tool_calls.empty());
  EXPECT_EQ(call->Joined(ModelDelta::Kind::kText), "Hello there, world!");
  EXPECT_GE(call->DeltaCount(ModelDelta::Kind::kText), 3u);
}

// The usage chunk OpenAI sends last when asked (`stream_options`), with
// `choices` empty; providers that send none leave the counts unset.
TEST(OpenAiModel, AsksForAndReportsTheTokensTheProviderCounted) {
  FakeChatServer server;
  Json chunk = {{"id", "c"}, {"object", "chat.completion.chunk"}, {"choices", Json::array()},
                {"usage", {{"prompt_tokens", 12}, {"completion_tokens", 5}, {"total_tokens", 17}}}};
  server.Enqueue(testing::Sse({{SseData(Json{{"choices", {{{"index", 0}, {"delta", {{"content", "hi"}}}}}}})},
                               {SseData(Json{{"choices", {{{"index", 0}, {"delta", Json::object()}, {"finish_reason", "stop"}}}}})},
                               {SseData(chunk)},
                               {"data: [DONE]\n\n"}}));
  server.Enqueue(testing::TextReply("no usage"));
  auto model = MakeOpenAiModel(Options(server));
  auto r = Start(*model)->Get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->text, "hi");
  EXPECT_EQ(r->input_tokens, 12);
  EXPECT_EQ(r->output_tokens, 5);
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_EQ(server.requests()[0].json["stream_options"], (Json{{"include_usage", true}}));
  auto without = Start(*model)->Get();
  ASSERT_TRUE(without.ok()) << without.status().ToString();
  EXPECT_EQ(without->input_tokens, std::nullopt);
  EXPECT_EQ(without->output_tokens, std::nullopt);
}

// Some OpenAI-compatible servers (older Azure OpenAI API versions among
// them) refuse `stream_options` with a 400: the call is made again without
// it, and the adapter stops asking for usage from then on.
TEST(OpenAiModel, AServerThatRefusesStreamOptionsIsAskedAgainWithoutThem) {
  FakeChatServer server;
  server.Enqueue(testing::Error(400, "Unrecognized request argument supplied: stream_options"));
  server.Enqueue(testing::TextReply("first"));
  server.Enqueue(testing::TextReply("second"));
  auto model = MakeOpenAiModel(Options(server));
  auto first = Start(*model)->Get();
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->text, "first");
  auto second = Start(*model)->Get();
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->text, "second");
  auto requests = server.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_TRUE(requests[0].json.contains("stream_options"));
  EXPECT_FALSE(requests[1].json.contains("stream_options"));
  EXPECT_FALSE(requests[2].json.contains("stream_options"));
  EXPECT_EQ(requests[1].json["messages"], requests[0].json["messages"]);
}

// Another 400 is the caller's error, made once.
TEST(OpenAiModel, ABadRequestForAnotherReasonIsNotMadeAgain) {
  FakeChatServer server;
  server.Enqueue(testing::Error(400, "messages: too long"));
  auto model = MakeOpenAiModel(Options(server));
  auto r = Start(*model)->Get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), "model_error");
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST(OpenAiModel, KeepsReasoningApartFromText) {
  FakeChatServer server;
  server.Enqueue(testing::ReasoningThenText("Think about it carefully.", "The answer is 4."));
  auto model = MakeOpenAiModel(Options(server));
  auto call = Start(*model);
  auto r = call->Get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->reasoning, "Think about it carefully.");
  EXPECT_EQ(r->text, "The answer is 4.");
  EXPECT_EQ(call->Joined(ModelDelta::Kind::kReasoning), "Think about it carefully.");
  EXPECT_EQ(call->Joined(ModelDelta::Kind::kText), "The answer is 4.");
}

TEST(OpenAiModel, AssemblesStreamedToolCallsFromInterleavedFragments) {
  FakeChatServer server;
  server.Enqueue(testing::ToolCallReply({{"call_1", "read_file", R"({"path":"/tmp/a.txt","limit":10})"},
                                         {"call_2", "list_dir", R"({"path":"/home/user/projects"})"}}));
  auto model = MakeOpenAiModel(Options(server));
  auto r = Start(*model)->Get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->finish_reason, "tool_calls");
  EXPECT_EQ(r->text, "");
  ASSERT_EQ(r->tool_calls.size(), 2u);
  EXPECT_EQ(r->tool_calls[0].id, "call_1");
  EXPECT_EQ(r->tool_calls[0].name, "read_file");
  EXPECT_EQ(r->tool_calls[0].arguments, R"({"path":"/tmp/a.txt","limit":10})");
  EXPECT_EQ(r->tool_calls[1].id, "call_2");
  EXPECT_EQ(r->tool_calls[1].name, "list_dir");
  EXPECT_EQ(r->tool_calls[1].arguments, R"({"path":"/home/user/projects"})");
}

TEST(OpenAiModel, JoinsFragmentedIdsAndOrdersCallsByIndex) {
  FakeChatServer server;
  auto tc = [](Json entries) { return SseData(Json{{"choices", {{{"index", 0}, {"delta", {{"tool_calls", entries}}}}}}}); };
  server.Enqueue(testing::Sse({
      {tc(Json::array({{{"index", 1}, {"id", "call_"}, {"function", {{"name", "second"}, {"arguments", "{}"}}}}})), {}},
      {tc(Json::array({{{"index", 1}, {"id", "b"}, {"function", {{"name", "second"}}}}})), {}},
      {tc(Json::array({{{"index", 0}, {"id", "call_a"}, {"function", {{"name", "first"}, {"arguments", "{\"x\""}}}}})),
       {}},
      {tc(Json::array({{{"index", 0}, {"function", {{"arguments", ":1}"}}}}})), {}},
      {SseData(Json{{"choices", {{{"index", 0}, {"delta", Json::object()}, {"finish_reason", "tool_calls"}}}}}), {}},
  }));
  auto model = MakeOpenAiModel(Options(server));
  auto r = Start(*model)->Get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();  // finish_reason without [DONE] is a complete stream
  ASSERT_EQ(r->tool_calls.size(), 2u);
  EXPECT_EQ(r->tool_calls[0].id, "call_a");
  EXPECT_EQ(r->tool_calls[0].name, "first");
  EXPECT_EQ(r->tool_calls[0].arguments, "{\"x\":1}");
  EXPECT_EQ(r->tool_calls[1].id, "call_b");
  EXPECT_EQ(r->tool_calls[1].name, "second");  // repeated whole, not doubled
  EXPECT_EQ(r->tool_calls[1].arguments, "{}");
}

TEST(OpenAiModel, SendsChatCompletionsRequestsWithToolsAndToolResults) {
  FakeChatServer server;
  auto options = Options(server);
  options.api_key = "sk-test-123";
  auto model = MakeOpenAiModel(options);

  ModelRequest req;
  req.model = "gpt-test";
  req.messages.push_back(Msg(ModelMessage::Role::kSystem, "You are terse."));
  req.messages.push_back(Msg(ModelMessage::Role::kUser, "read a.txt"));
  ModelMessage assistant = Msg(ModelMessage::Role::kAssistant, "");
  assistant.tool_calls = {{"call_9", "read_file", R"({"path":"a.txt"})"}};
  req.messages.push_back(assistant);
  ModelMessage tool = Msg(ModelMessage::Role::kTool, R"({"content":"hi"})");
  tool.tool_call_id = "call_9";
  tool.name = "read_file";
  req.messages.push_back(tool);
  req.tools.push_back({"read_file", "Reads a file.",
                       Json{{"type", "object"}, {"properties", {{"path", {{"type", "string"}}}}}, {"required", {"path"}}}});
  ASSERT_TRUE(Start(*model, req)->Get().ok());

  ASSERT_EQ(server.requests().size(), 1u);
  auto sent = server.requests()[0];
  EXPECT_EQ(sent.method, "POST");
  EXPECT_EQ(sent.target, "/v1/chat/completions");
  EXPECT_EQ(sent.headers["authorization"], "Bearer sk-test-123");
  EXPECT_EQ(sent.headers["content-type"], "application/json");
  const Json& body = sent.json;
  EXPECT_EQ(body["model"], "gpt-test");
  EXPECT_EQ(body["stream"], true);
  EXPECT_FALSE(body.contains("reasoning_effort"));
  ASSERT_EQ(body["messages"].size(), 4u);
  EXPECT_EQ(body["messages"][0], (Json{{"role", "system"}, {"content", "You are terse."}}));
  EXPECT_EQ(body["messages"][1], (Json{{"role", "user"}, {"content", "read a.txt"}}));
  EXPECT_EQ(body["messages"][2],
            (Json{{"role", "assistant"},
                  {"content", nullptr},
                  {"tool_calls",
                   {{{"id", "call_9"},
                     {"type", "function"},
                     {"function", {{"name", "read_file"}, {"arguments", R"({"path":"a.txt"})"}}}}}}}));
  EXPECT_EQ(body["messages"][3], (Json{{"role", "tool"}, {"tool_call_id", "call_9"}, {"content", R"({"content":"hi"})"}}));
  ASSERT_EQ(body["tools"].size(), 1u);
  EXPECT_EQ(body["tools"][0]["type"], "function");
  EXPECT_EQ(body["tools"][0]["function"]["name"], "read_file");
  EXPECT_EQ(body["tools"][0]["function"]["description"], "Reads a file.");
  EXPECT_EQ(body["tools"][0]["function"]["parameters"]["required"], Json::array({"path"}));
}

TEST(OpenAiModel, SendsReasoningEffortOnlyWhenSetAndNoAuthorizationWithoutAKey) {
  FakeChatServer server;
  auto model = MakeOpenAiModel(Options(server));  // no api key
  ModelRequest req = Hello();
  req.reasoning_effort = "high";
  ASSERT_TRUE(Start(*model, req)->Get().ok());
  ASSERT_EQ(server.requests().size(), 1u);
  auto sent = server.requests()[0];
  EXPECT_EQ(sent.json["reasoning_effort"], "high");
  EXPECT_FALSE(sent.json.contains("tools"));
  EXPECT_EQ(sent.headers.count("authorization"), 0u);
}

TEST(OpenAiModel, RetriesAServerErrorAndThenSucceeds) {
  FakeChatServer server;
  server.Enqueue(testing::Error(500, "boom"));
  server.Enqueue(testing::CloseConnection());
  server.Enqueue(testing::TextReply("recovered"));
  auto model = MakeOpenAiModel(Options(server));
  auto r = Start(*model)->Get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->text, "recovered");
  EXPECT_EQ(server.requests().size(), 3u);
}

TEST(OpenAiModel, GivesUpWithModelErrorAfterMaxRetries) {
  FakeChatServer server;
  server.SetDefault(testing::Error(500, "boom"));
  auto options = Options(server);
  options.max_retries = 3;
  auto model = MakeOpenAiModel(options);
  auto r = Start(*model)->Get();
  EXPECT_EQ(r.status().code(), "model_error");
  EXPECT_NE(r.status().message().find("HTTP 500"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("boom"), std::string::npos) << r.status().message();
  EXPECT_EQ(server.requests().size(), 4u);
}

TEST(OpenAiModel, DoesNotRetryAClientError) {
  FakeChatServer server;
  server.SetDefault(testing::Error(400, "bad messages"));
  auto model = MakeOpenAiModel(Options(server));
  auto r = Start(*model)->Get();
  EXPECT_EQ(r.status().code(), "model_error");
  EXPECT_NE(r.status().message().find("HTTP 400"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("bad messages"), std::string::npos) << r.status().message();
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST(OpenAiModel, RateLimitingHonoursRetryAfterThenFailsWithModelRateLimited) {
  FakeChatServer server;
  server.SetDefault(testing::Error(429, "slow down", 1));
  auto options = Options(server);
  options.max_retries = 1;
  options.backoff_initial = milliseconds(1);
  options.backoff_max = milliseconds(5'000);
  auto model = MakeOpenAiModel(options);
  auto r = Start(*model)->Get();
  EXPECT_EQ(r.status().code(), "model_rate_limited");
  EXPECT_NE(r.status().message().find("slow down"), std::string::npos) << r.status().message();
  auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_GE(requests[1].received - requests[0].received, milliseconds(950)) << "Retry-After: 1 was not honoured";
}

TEST(OpenAiModel, RetryAfterIsCappedByBackoffMax) {
  FakeChatServer server;
  server.Enqueue(testing::Error(429, "slow down", 3600));
  server.Enqueue(testing::TextReply("done"));
  auto model = MakeOpenAiModel(Options(server));  // backoff_max 20 ms
  auto r = Start(*model)->Get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->text, "done");
}

TEST(OpenAiModel, ConnectionRefusedIsModelUnavailable) {
  std::string url;
  {
    FakeChatServer closed;
    url = closed.base_url();
  }  // nothing listens on that port any more
  OpenAiOptions options;
  options.base_url = url;
  options.max_retries = 2;
  options.backoff_initial = milliseconds(1);
  options.backoff_max = milliseconds(5);
  auto model = MakeOpenAiModel(options);
  auto r = Start(*model)->Get();
  EXPECT_EQ(r.status().code(), "model_unavailable") << r.status().ToString();
  EXPECT_NE(r.status().message().find("3 attempts"), std::string::npos) << r.status().message();
}

TEST(OpenAiModel, AServerThatNeverAnswersTimesOutWithoutRetrying) {
  FakeChatServer server;
  server.SetDefault(testing::Hang());
  auto options = Options(server);
  options.idle_timeout = milliseconds(300);
  auto model = MakeOpenAiModel(options);
  auto started = std::chrono::steady_clock::now();
  auto r = Start(*model)->Get();
  EXPECT_EQ(r.status().code(), "model_timeout") << r.status().ToString();
  EXPECT_GE(std::chrono::steady_clock::now() - started, milliseconds(300));
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST(OpenAiModel, AServerThatStopsAnsweringOnAReusedConnectionTimesOut) {
  FakeChatServer server;
  server.Enqueue(testing::TextReply("first"));
  server.SetDefault(testing::Hang());
  auto options = Options(server);
  options.workers = 1;  // one worker, so the second call reuses the first call's connection
  options.idle_timeout = milliseconds(300);
  auto model = MakeOpenAiModel(options);
  ASSERT_TRUE(Start(*model)->Get().ok());
  auto r = Start(*model)->Get();
  EXPECT_EQ(r.status().code(), "model_timeout") << r.status().ToString();
}

TEST(OpenAiModel, AStreamThatKeepsTricklingDoesNotTimeOut) {
  FakeChatServer server;
  // Seven writes 150 ms apart: over a second in all, never 300 ms silent.
  server.Enqueue(testing::TextReply("a slow but steady answer", milliseconds(150)));
  auto options = Options(server);
  options.idle_timeout = milliseconds(300);
  auto model = MakeOpenAiModel(options);
  auto started = std::chrono::steady_clock::now();
  auto r = Start(*model)->Get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->text, "a slow but steady answer");
  EXPECT_GE(std::chrono::steady_clock::now() - started, milliseconds(600));
}

TEST(OpenAiModel, CancellingDuringASlowStreamCompletesPromptly) {
  FakeChatServer server;
  std::vector<SseChunk> chunks;
  for (int i = 0; i < 100; ++i) {
    chunks.push_back({SseData(Json{{"choices", {{{"index", 0}, {"delta", {{"content", "tick "}}}}}}}),
                      milliseconds(i == 0 ? 0 : 200)});
  }
  server.Enqueue(testing::Sse(chunks));
  auto model = MakeOpenAiModel(Options(server));
  auto cancel = std::make_shared<CancelToken>();
  auto call = Start(*model, Hello(), cancel);
  ASSERT_TRUE(call->WaitForFirstDelta());
  auto cancelled_at = std::chrono::steady_clock::now();
  cancel->Cancel();
  auto r = call->Get();
  EXPECT_EQ(r.status().code(), "cancelled");
  EXPECT_LT(std::chrono::steady_clock::now() - cancelled_at, milliseconds(1'000));
}

TEST(OpenAiModel, CancellingDuringBackoffCompletesPromptly) {
  FakeChatServer server;
  server.SetDefault(testing::Error(503, "overloaded"));
  auto options = Options(server);
  options.backoff_initial = milliseconds(60'000);
  options.backoff_max = milliseconds(60'000);
  auto model = MakeOpenAiModel(options);
  auto cancel = std::make_shared<CancelToken>();
  auto call = Start(*model, Hello(), cancel);
  ASSERT_TRUE(server.WaitForRequests(1, kGenerous));
  cancel->Cancel();
  EXPECT_EQ(call->Get(milliseconds(5'000)).status().code(), "cancelled");
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST(OpenAiModel, ShutdownCancelsCallsInFlightAndQueued) {
  FakeChatServer server;
  server.SetDefault(testing::Hang());
  auto options = Options(server);
  options.workers = 2;
  options.backoff_initial = milliseconds(60'000);
  auto model = MakeOpenAiModel(options);
  auto a = Start(*model);
  auto b = Start(*model);
  auto queued = Start(*model);
  ASSERT_TRUE(server.WaitForRequests(2, kGenerous));
  model->Shutdown();
  // Shutdown joins the workers, so every call has completed by now.
  ASSERT_TRUE(a->ready() && b->ready() && queued->ready());
  EXPECT_EQ(a->Get().status().code(), "cancelled");
  EXPECT_EQ(b->Get().status().code(), "cancelled");
  EXPECT_EQ(queued->Get().status().code(), "cancelled");
  auto late = Start(*model);
  ASSERT_TRUE(late->ready());
  EXPECT_EQ(late->Get().status().code(), "cancelled");
  model->Shutdown();  // idempotent
}

TEST(OpenAiModel, DestroyingTheAdapterCancelsACallInFlight) {
  FakeChatServer server;
  server.SetDefault(testing::Hang());
  auto model = MakeOpenAiModel(Options(server));
  auto call = Start(*model);
  ASSERT_TRUE(server.WaitForRequests(1, kGenerous));
  model.reset();
  ASSERT_TRUE(call->ready());
  EXPECT_EQ(call->Get().status().code(), "cancelled");
}

TEST(OpenAiModel, AChunkThatIsNotJsonIsABadResponse) {
  FakeChatServer server;
  server.Enqueue(testing::Sse({{"data: {\"choices\": [\n\n", {}}, {"data: [DONE]\n\n", {}}}));
  auto model = MakeOpenAiModel(Options(server));
  auto r = Start(*model)->Get();
  EXPECT_EQ(r.status().code(), "model_bad_response") << r.status().ToString();
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST(OpenAiModel, AStreamThatStopsWithoutFinishingIsABadResponse) {
  FakeChatServer server;
  server.Enqueue(testing::Sse({{SseData(Json{{"choices", {{{"index", 0}, {"delta", {{"content", "half"}}}}}}}), {}}}));
  auto model = MakeOpenAiModel(Options(server));
  auto r = Start(*model)->Get();
  EXPECT_EQ(r.status().code(), "model_bad_response") << r.status().ToString();
}

TEST(OpenAiModel, AnErrorInsideTheStreamIsAModelError) {
  FakeChatServer server;
  server.Enqueue(testing::Sse({{SseData(Json{{"error", {{"message", "context length exceeded"}}}}), {}}}));
  auto model = MakeOpenAiModel(Options(server));
  auto r = Start(*model)->Get();
  EXPECT_EQ(r.status().code(), "model_error") << r.status().ToString();
  EXPECT_NE(r.status().message().find("context length exceeded"), std::string::npos);
}

TEST(OpenAiModel, ServesConcurrentCallsOnItsWorkers) {
  FakeChatServer server;
  auto model = MakeOpenAiModel(Options(server));  // default reply "ok"
  std::vector<std::unique_ptr<PendingCall>> calls;
  for (int i = 0; i < 6; ++i) calls.push_back(Start(*model));
  for (auto& c : calls) {
    auto r = c->Get();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->text, "ok");
  }
  EXPECT_EQ(server.requests().size(), 6u);
}

TEST(OpenAiModel, DescribesTheModelAndEndpoint) {
  OpenAiOptions options;
  options.base_url = "http://127.0.0.1:1/v1";
  auto model = MakeOpenAiModel(options);
  EXPECT_EQ(model->Describe("gpt-test"), "gpt-test (Chat Completions at http://127.0.0.1:1/v1)");
}

}  // namespace
}  // namespace dsh::agent
