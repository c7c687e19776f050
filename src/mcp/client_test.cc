// The MCP client's protocol logic against a scripted in-process server:
// negotiation, tool lists, timeouts, cancellation, deaths and restarts. The
// transports themselves are tested against real servers in transport_test.cc.
#include "mcp/client.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <stdexcept>

#include "mcp/mcp_tools.h"

namespace dsh::mcp {
namespace {

using namespace std::chrono_literals;

// The server side of every connection the client makes. Answers
// `initialize` and `tools/list` itself (unless told to hold them) and hands
// `tools/call` to the test.
class FakeServer {
 public:
  Json version = "2025-06-18";  // initialize's protocolVersion
  Json tools = Json::array({{{"name", "echo"},
                             {"description", "Echoes"},
                             {"inputSchema",
                              {{"type", "object"},
                               {"properties", {{"message", {{"type", "string"}}}}},
                               {"required", {"message"}}}}}});
  Status start_error = Status::Ok();
  bool hold_initialize = false;
  bool hold_list = false;  // tools/list is left to the test
  // When set, answers tools/list with list_page(params) instead of `tools`.
  std::function<Json(const Json& params)> list_page;
  // Notifications' `sent` callbacks wait for ReleaseAcks.
  bool hold_notification_acks = false;
  // The server dies right after answering tools/list (each connection).
  bool die_after_list = false;

  class Transport final : public mcp::Transport {
   public:
    explicit Transport(FakeServer& server) : server_(server) {}
    Status Start(OnMessage on_message, OnClosed on_closed) override {
      std::lock_guard lock(server_.mu_);
      ++server_.starts_;
      server_.start_times_.push_back(std::chrono::steady_clock::now());
      server_.cv_.notify_all();
      if (!server_.start_error.ok()) return server_.start_error;
      server_.on_message_ = std::move(on_message);
      server_.on_closed_ = std::move(on_closed);
      return Status::Ok();
    }
    void Send(Json message, OnSent sent) override {
      bool notification = !message.contains("id");
      server_.Receive(std::move(message));
      if (!sent) return;
      {
        std::lock_guard lock(server_.mu_);
        if (notification && server_.hold_notification_acks) {
          server_.held_acks_.push_back(std::move(sent));
          return;
        }
      }
      sent(Status::Ok());
    }
    void SetProtocolVersion(std::string) override {}
    void Close() override {
      std::lock_guard lock(server_.mu_);
      server_.on_message_ = nullptr;
      server_.on_closed_ = nullptr;
    }

   private:
    FakeServer& server_;
  };

  std::unique_ptr<mcp::Transport> Make() { return std::make_unique<Transport>(*this); }

  // Sends a message to the client as the server.
  void Push(Json message) {
    Transport::OnMessage fn;
    {
      std::lock_guard lock(mu_);
      fn = on_message_;
    }
    ASSERT_TRUE(fn) << "no connection";
    fn(std::move(message));
  }
  void Answer(const Json& id, Json result) {
    Push({{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}});
  }
  // The server dies.
  void Die() {
    Transport::OnClosed fn;
    {
      std::lock_guard lock(mu_);
      fn = std::move(on_closed_);
      on_message_ = nullptr;
    }
    ASSERT_TRUE(fn);
    fn(Status(codes::kMcpUnavailable, "MCP server t exited (signal 9)"));
  }

  // Waits for the `n`th (1-based) message with `method`; returns it.
  Json WaitFor(const std::string& method, size_t n = 1) {
    std::unique_lock lock(mu_);
    Json found;
    bool ok = cv_.wait_for(lock, 5s, [&] {
      size_t seen = 0;
      for (const auto& m : received_) {
        if (m.value("method", "") == method && ++seen == n) {
          found = m;
          return true;
        }
      }
      return false;
    });
    EXPECT_TRUE(ok) << "no " << method << " #" << n;
    return found;
  }
  size_t Count(const std::string& method) {
    std::lock_guard lock(mu_);
    return std::count_if(received_.begin(), received_.end(),
                         [&](const Json& m) { return m.value("method", "") == method; });
  }
  std::vector<Json> Received() {
    std::lock_guard lock(mu_);
    return received_;
  }
  int starts() {
    std::lock_guard lock(mu_);
    return starts_;
  }
  std::vector<std::chrono::steady_clock::time_point> start_times() {
    std::lock_guard lock(mu_);
    return start_times_;
  }
  // Reports the held notifications as sent.
  void ReleaseAcks() {
    std::vector<Transport::OnSent> acks;
    {
      std::lock_guard lock(mu_);
      hold_notification_acks = false;
      acks.swap(held_acks_);
    }
    for (auto& ack : acks) ack(Status::Ok());
  }
  // Waits until `pred(received messages, starts)` holds.
  bool WaitUntil(const std::function<bool(const std::vector<Json>&, int)>& pred) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, 5s, [&] { return pred(received_, starts_); });
  }

 private:
  void Receive(Json message) {
    std::string method = message.value("method", "");
    {
      std::lock_guard lock(mu_);
      received_.push_back(message);
      cv_.notify_all();
    }
    if (method == "initialize" && !hold_initialize) {
      Answer(message["id"], {{"protocolVersion", version},
                             {"capabilities", {{"tools", {{"listChanged", true}}}}},
                             {"serverInfo", {{"name", "fake"}, {"version", "1"}}}});
    } else if (method == "tools/list" && !hold_list) {
      Answer(message["id"], list_page ? list_page(message["params"]) : Json{{"tools", tools}});
      if (die_after_list) Die();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Json> received_;
  Transport::OnMessage on_message_;
  Transport::OnClosed on_closed_;
  int starts_ = 0;
  std::vector<std::chrono::steady_clock::time_point> start_times_;
  std::vector<Transport::OnSent> held_acks_;
};

class McpClientTest : public ::testing::Test {
 protected:
  // `adjust` may change the options before the client is made.
  std::unique_ptr<McpClient> MakeClient(std::chrono::milliseconds call_timeout = 10s,
                                        const std::function<void(McpClient::Options&)>& adjust = nullptr) {
    McpClient::Options o;
    o.spec.name = "t";
    o.spec.command = {"unused"};
    o.spec.call_timeout = call_timeout;
    o.make_transport = [this](const ServerSpec&) { return server_.Make(); };
    o.min_backoff = 20ms;
    o.max_backoff = 40ms;
    o.client_version = "9.9";
    if (adjust) adjust(o);
    return std::make_unique<McpClient>(std::move(o), [this](std::vector<ToolInfo> tools) {
      std::lock_guard lock(mu_);
      lists_.push_back(std::move(tools));
      cv_.notify_all();
    });
  }
  // Waits until on_tools was called `n` times; returns the last list.
  std::vector<ToolInfo> WaitForLists(size_t n) {
    std::unique_lock lock(mu_);
    EXPECT_TRUE(cv_.wait_for(lock, 5s, [&] { return lists_.size() >= n; }))
        << "tool lists: " << lists_.size();
    return lists_.empty() ? std::vector<ToolInfo>{} : lists_.back();
  }
  static std::future<Result<Json>> Call(McpClient& c, const std::string& tool, Json args,
                                        std::shared_ptr<agent::CancelToken> cancel = nullptr) {
    auto p = std::make_shared<std::promise<Result<Json>>>();
    c.CallTool(tool, std::move(args), std::move(cancel), [p](Result<Json> r) { p->set_value(std::move(r)); });
    return p->get_future();
  }
  // The call's result; a failure (not a hang) when it does not complete.
  static Result<Json> Get(std::future<Result<Json>>& f) {
    if (f.wait_for(5s) != std::future_status::ready) {
      ADD_FAILURE() << "the call never completed";
      return Status("test_no_answer", "the call never completed");
    }
    return f.get();
  }

  FakeServer server_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::vector<ToolInfo>> lists_;
};

TEST_F(McpClientTest, ConnectsListsToolsAndCalls) {
  auto client = MakeClient();
  client->Start();
  auto tools = WaitForLists(1);
  ASSERT_EQ(tools.size(), 1u);
  EXPECT_EQ(tools[0].name, "echo");
  EXPECT_EQ(tools[0].input_schema["required"], Json::array({"message"}));
  EXPECT_TRUE(client->WaitSettled(5s));  // the tools are registered just before
  EXPECT_EQ(client->state(), McpClient::State::kReady);
  EXPECT_EQ(client->protocol_version(), "2025-06-18");

  Json init = server_.WaitFor("initialize");
  EXPECT_EQ(init["params"]["protocolVersion"], "2025-06-18");
  EXPECT_EQ(init["params"]["clientInfo"]["version"], "9.9");
  // initialized comes after initialize's answer and before anything else.
  auto received = server_.Received();
  ASSERT_GE(received.size(), 3u);
  EXPECT_EQ(received[1]["method"], "notifications/initialized");
  EXPECT_FALSE(received[1].contains("id"));
  EXPECT_EQ(received[2]["method"], "tools/list");

  auto f = Call(*client, "echo", {{"message", "hi"}});
  Json call = server_.WaitFor("tools/call");
  EXPECT_EQ(call["params"]["name"], "echo");
  EXPECT_EQ(call["params"]["arguments"]["message"], "hi");
  server_.Answer(call["id"], {{"content", {{{"type", "text"}, {"text", "hi"}}}}});
  auto r = Get(f);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)["content"][0]["text"], "hi");
}

TEST_F(McpClientTest, AcceptsTheOlderRevisionAndRefusesAnUnknownOne) {
  server_.version = "2025-03-26";
  auto client = MakeClient();
  client->Start();
  WaitForLists(1);
  EXPECT_EQ(client->protocol_version(), "2025-03-26");
  client->Stop();

  FakeServer old;
  old.version = "2024-11-05";
  McpClient::Options o;
  o.spec.name = "old";
  o.spec.command = {"unused"};
  o.make_transport = [&](const ServerSpec&) { return old.Make(); };
  o.min_backoff = 20ms;
  McpClient refused(std::move(o), nullptr);
  refused.Start();
  old.WaitFor("initialize", 2);  // it was retried
  EXPECT_NE(refused.state(), McpClient::State::kReady);
  EXPECT_NE(refused.last_error().find("2024-11-05"), std::string::npos) << refused.last_error();
  EXPECT_EQ(old.Count("tools/list"), 0u);
}

TEST_F(McpClientTest, AChangedToolListIsListedAgain) {
  auto client = MakeClient();
  client->Start();
  WaitForLists(1);
  server_.tools.push_back({{"name", "add"}, {"inputSchema", {{"type", "object"}}}});
  server_.Push({{"jsonrpc", "2.0"}, {"method", "notifications/tools/list_changed"}});
  auto tools = WaitForLists(2);
  ASSERT_EQ(tools.size(), 2u);
  EXPECT_EQ(tools[1].name, "add");
}

TEST_F(McpClientTest, ACallWithoutAnswerTimesOutAndTheServerIsTold) {
  auto client = MakeClient(150ms);
  client->Start();
  WaitForLists(1);
  auto f = Call(*client, "echo", {{"message", "slow"}});
  Json call = server_.WaitFor("tools/call");
  auto r = Get(f);
  EXPECT_EQ(r.status().code(), "mcp_timeout");
  EXPECT_NE(r.status().message().find("MCP server t did not answer tools/call echo within 0.1"),
            std::string::npos)
      << r.status().message();
  Json cancelled = server_.WaitFor("notifications/cancelled");
  EXPECT_EQ(cancelled["params"]["requestId"], call["id"]);
  // A late answer is dropped; the connection goes on.
  server_.Answer(call["id"], {{"content", Json::array()}});
  auto f2 = Call(*client, "echo", {{"message", "again"}});
  Json call2 = server_.WaitFor("tools/call", 2);
  server_.Answer(call2["id"], {{"content", Json::array()}});
  EXPECT_TRUE(Get(f2).ok());
}

TEST_F(McpClientTest, CancellingTheCallerTellsTheServer) {
  auto client = MakeClient();
  client->Start();
  WaitForLists(1);
  auto token = std::make_shared<agent::CancelToken>();
  auto f = Call(*client, "echo", {{"message", "x"}}, token);
  Json call = server_.WaitFor("tools/call");
  token->Cancel();
  EXPECT_EQ(Get(f).status().code(), "cancelled");
  EXPECT_EQ(server_.WaitFor("notifications/cancelled")["params"]["requestId"], call["id"]);
}

TEST_F(McpClientTest, AServerDyingMidCallFailsTheCallAndIsRestartedAtOnce) {
  auto client = MakeClient();
  client->Start();
  WaitForLists(1);
  auto f = Call(*client, "echo", {{"message", "x"}});
  server_.WaitFor("tools/call");
  server_.Die();
  auto r = Get(f);
  EXPECT_EQ(r.status().code(), "mcp_unavailable");
  EXPECT_NE(r.status().message().find("exited (signal 9)"), std::string::npos) << r.status().message();
  // The next call waits for the restart and works.
  auto f2 = Call(*client, "echo", {{"message", "y"}});
  WaitForLists(2);
  Json call2 = server_.WaitFor("tools/call", 2);
  server_.Answer(call2["id"], {{"content", Json::array()}});
  EXPECT_TRUE(Get(f2).ok());
  EXPECT_EQ(client->connections(), 2);
  EXPECT_EQ(server_.starts(), 2);
}

TEST_F(McpClientTest, ACallMadeWhileTheServerStartsWaitsForIt) {
  server_.hold_initialize = true;
  auto client = MakeClient();
  client->Start();
  Json init = server_.WaitFor("initialize");
  auto f = Call(*client, "echo", {{"message", "early"}});
  EXPECT_EQ(f.wait_for(50ms), std::future_status::timeout);
  server_.Answer(init["id"], {{"protocolVersion", "2025-06-18"}, {"capabilities", Json::object()}});
  Json call = server_.WaitFor("tools/call");
  server_.Answer(call["id"], {{"content", Json::array()}});
  EXPECT_TRUE(Get(f).ok());
}

TEST_F(McpClientTest, AServerThatCannotStartFailsCallsAtOnceAndIsRetried) {
  server_.start_error =
      Status(codes::kMcpUnavailable, "MCP server t: cannot run `nope`: No such file or directory");
  auto client = MakeClient();
  client->Start();
  // Retried with backoff (20 ms, 40 ms, 40 ms...).
  EXPECT_TRUE(server_.WaitUntil([](const std::vector<Json>&, int starts) { return starts >= 3; }));
  EXPECT_NE(client->state(), McpClient::State::kReady);
  auto f = Call(*client, "echo", {{"message", "x"}});
  auto r = Get(f);
  EXPECT_EQ(r.status().code(), "mcp_unavailable");
  EXPECT_NE(r.status().message().find("No such file"), std::string::npos) << r.status().message();
}

TEST_F(McpClientTest, StopAnswersPendingCallsAndLaterOnes) {
  auto client = MakeClient();
  client->Start();
  WaitForLists(1);
  auto f = Call(*client, "echo", {{"message", "x"}});
  server_.WaitFor("tools/call");
  client->Stop();
  EXPECT_EQ(Get(f).status().code(), "shutting_down");
  auto later = Call(*client, "echo", {{"message", "x"}});
  EXPECT_EQ(Get(later).status().code(), "shutting_down");
  EXPECT_EQ(client->state(), McpClient::State::kStopped);
}

TEST_F(McpClientTest, TheServersPingIsAnsweredAndOtherRequestsRefused) {
  auto client = MakeClient();
  client->Start();
  WaitForLists(1);
  // A server request comes to the client; its answer goes back via Send.
  server_.Push({{"jsonrpc", "2.0"}, {"id", "p1"}, {"method", "ping"}});
  server_.Push(
      {{"jsonrpc", "2.0"}, {"id", 7}, {"method", "sampling/createMessage"}, {"params", Json::object()}});
  EXPECT_TRUE(server_.WaitUntil([](const std::vector<Json>& got, int) {
    return std::count_if(got.begin(), got.end(), [](const Json& m) { return !m.contains("method"); }) >= 2;
  }));
  std::vector<Json> answers;
  for (const auto& m : server_.Received()) {
    if (!m.contains("method")) answers.push_back(m);
  }
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(answers[0]["id"], "p1");
  EXPECT_EQ(answers[0]["result"], Json::object());
  EXPECT_EQ(answers[1]["id"], 7);
  EXPECT_EQ(answers[1]["error"]["code"], -32601);
}

TEST_F(McpClientTest, AProtocolVersionThatIsNotAStringIsRefused) {
  server_.version = 20250618;
  auto client = MakeClient();
  client->Start();
  server_.WaitFor("initialize", 2);  // refused, retried, and the host lives on
  EXPECT_NE(client->state(), McpClient::State::kReady);
  EXPECT_EQ(client->last_error(),
            "MCP server t is unavailable: it answered initialize with protocolVersion integer 20250618, "
            "dsh speaks 2025-06-18 and 2025-03-26");
  EXPECT_EQ(server_.Count("tools/list"), 0u);
}

TEST_F(McpClientTest, AnErrorWithWrongTypedFieldsIsReportedClearly) {
  auto client = MakeClient();
  client->Start();
  WaitForLists(1);
  auto f = Call(*client, "echo", {{"message", "x"}});
  Json call = server_.WaitFor("tools/call");
  server_.Push({{"jsonrpc", "2.0"}, {"id", call["id"]}, {"error", {{"code", "x"}, {"message", nullptr}}}});
  auto r = Get(f);
  EXPECT_EQ(r.status().code(), "mcp_error");
  EXPECT_EQ(r.status().message(), "MCP server t refused tools/call echo: an error without a message");

  auto f2 = Call(*client, "echo", {{"message", "y"}});
  Json call2 = server_.WaitFor("tools/call", 2);
  server_.Push({{"jsonrpc", "2.0"}, {"id", call2["id"]}, {"error", {{"code", -32602}, {"message", "bad"}}}});
  EXPECT_EQ(Get(f2).status().message(), "MCP server t refused tools/call echo: bad (-32602)");
}

TEST_F(McpClientTest, AnExceptionEscapingAHandlerDoesNotEndTheProcess) {
  auto client = MakeClient();
  client->Start();
  WaitForLists(1);
  std::promise<void> threw;
  client->CallTool("echo", {{"message", "x"}}, nullptr, [&](Result<Json>) {
    threw.set_value();
    throw std::runtime_error("boom");
  });
  Json call = server_.WaitFor("tools/call");
  server_.Answer(call["id"], {{"content", Json::array()}});
  ASSERT_EQ(threw.get_future().wait_for(5s), std::future_status::ready);
  // The client's thread goes on.
  auto f = Call(*client, "echo", {{"message", "y"}});
  Json call2 = server_.WaitFor("tools/call", 2);
  server_.Answer(call2["id"], {{"content", Json::array()}});
  EXPECT_TRUE(Get(f).ok());
  EXPECT_EQ(client->state(), McpClient::State::kReady);
}

TEST_F(McpClientTest, CancellingACallWaitingForTheServerToStartAnswersAtOnce) {
  server_.hold_initialize = true;
  auto client = MakeClient();  // start_timeout: 30 s
  client->Start();
  Json init = server_.WaitFor("initialize");
  auto token = std::make_shared<agent::CancelToken>();
  auto f = Call(*client, "echo", {{"message", "early"}}, token);
  token->Cancel();
  EXPECT_EQ(Get(f).status().code(), "cancelled");
  // The cancelled call is never sent, the next one is.
  server_.Answer(init["id"], {{"protocolVersion", "2025-06-18"}, {"capabilities", Json::object()}});
  WaitForLists(1);
  auto f2 = Call(*client, "echo", {{"message", "later"}});
  Json call = server_.WaitFor("tools/call");
  EXPECT_EQ(call["params"]["arguments"]["message"], "later");
  server_.Answer(call["id"], {{"content", Json::array()}});
  EXPECT_TRUE(Get(f2).ok());
  EXPECT_EQ(server_.Count("tools/call"), 1u);
}

TEST_F(McpClientTest, ToolsAreListedOnlyOnceInitializedWasDelivered) {
  // Over HTTP every message is its own POST: tools/list must wait until the
  // server has acknowledged `notifications/initialized`.
  server_.hold_notification_acks = true;
  auto client = MakeClient();
  client->Start();
  server_.WaitFor("notifications/initialized");
  // The client answers this ping after it has handled initialize's answer.
  server_.Push({{"jsonrpc", "2.0"}, {"id", "p1"}, {"method", "ping"}});
  EXPECT_TRUE(server_.WaitUntil([](const std::vector<Json>& got, int) {
    return std::any_of(got.begin(), got.end(), [](const Json& m) { return m.value("id", Json()) == "p1"; });
  }));
  EXPECT_EQ(server_.Count("tools/list"), 0u);
  server_.ReleaseAcks();
  EXPECT_EQ(WaitForLists(1).size(), 1u);
  EXPECT_TRUE(client->WaitSettled(5s));
  EXPECT_EQ(client->state(), McpClient::State::kReady);
}

TEST_F(McpClientTest, BackoffGrowsForAServerThatDiesRightAfterStarting) {
  server_.die_after_list = true;
  auto client = MakeClient(10s, [](McpClient::Options& o) {
    o.min_backoff = 20ms;
    o.max_backoff = 1s;
  });
  client->Start();
  // The first start, 3 restarts at once, then 20, 40, 80, 160 ms.
  ASSERT_TRUE(server_.WaitUntil([](const std::vector<Json>&, int starts) { return starts >= 8; }));
  client->Stop();
  auto t = server_.start_times();
  std::chrono::milliseconds expected = 20ms;
  for (size_t i = 4; i < 8; ++i, expected *= 2) {
    EXPECT_GE(t[i] - t[i - 1], expected) << "before start " << i + 1;
  }
}

TEST_F(McpClientTest, AToolListChangedWhileConnectingIsListedAgain) {
  server_.hold_list = true;
  auto client = MakeClient();
  client->Start();
  Json first = server_.WaitFor("tools/list");
  // The server adds a tool while the client is still connecting.
  server_.Push({{"jsonrpc", "2.0"}, {"method", "notifications/tools/list_changed"}});
  server_.Answer(first["id"], {{"tools", server_.tools}});
  Json tools = server_.tools;
  tools.push_back({{"name", "add"}, {"inputSchema", {{"type", "object"}}}});
  Json second = server_.WaitFor("tools/list", 2);
  server_.Answer(second["id"], {{"tools", tools}});
  auto listed = WaitForLists(2);
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[1].name, "add");
}

// Answers tools/list with one tool a page: a, b and c when the cursor runs
// "", "2", "3".
Json ThreePages(const Json& params) {
  std::string cursor = params.value("cursor", "");
  if (cursor.empty())
    return {{"tools", {{{"name", "a"}, {"inputSchema", {{"type", "object"}}}}}}, {"nextCursor", "2"}};
  if (cursor == "2")
    return {{"tools", {{{"name", "b"}, {"inputSchema", {{"type", "object"}}}}}}, {"nextCursor", "3"}};
  return {{"tools", {{{"name", "c"}, {"inputSchema", {{"type", "object"}}}}}}};
}

TEST_F(McpClientTest, ToolListsAreReadAcrossPagesAndARelistingThatRepeatsACursorKeepsTheOldList) {
  server_.list_page = ThreePages;
  auto client = MakeClient();
  client->Start();
  auto tools = WaitForLists(1);
  ASSERT_EQ(tools.size(), 3u);
  EXPECT_EQ(tools[0].name, "a");
  EXPECT_EQ(tools[1].name, "b");
  EXPECT_EQ(tools[2].name, "c");
  EXPECT_FALSE(server_.WaitFor("tools/list", 1)["params"].contains("cursor"));
  EXPECT_EQ(server_.WaitFor("tools/list", 2)["params"]["cursor"], "2");
  EXPECT_EQ(server_.WaitFor("tools/list", 3)["params"]["cursor"], "3");
  EXPECT_TRUE(client->WaitSettled(5s));
  EXPECT_EQ(client->state(), McpClient::State::kReady);

  // The server's list changes and now pages "", "x", "again", "again"...
  server_.list_page = [](const Json& params) {
    std::string cursor = params.value("cursor", "");
    return Json{{"tools", Json::array()}, {"nextCursor", cursor.empty() ? "x" : "again"}};
  };
  server_.Push({{"jsonrpc", "2.0"}, {"method", "notifications/tools/list_changed"}});
  server_.WaitFor("tools/list", 6);
  // The client answers this ping after it has handled the 6th page.
  server_.Push({{"jsonrpc", "2.0"}, {"id", "p1"}, {"method", "ping"}});
  EXPECT_TRUE(server_.WaitUntil([](const std::vector<Json>& got, int) {
    return std::any_of(got.begin(), got.end(), [](const Json& m) { return m.value("id", Json()) == "p1"; });
  }));
  EXPECT_EQ(server_.Count("tools/list"), 6u);
  EXPECT_EQ(client->state(), McpClient::State::kReady);
  std::lock_guard lock(mu_);
  EXPECT_EQ(lists_.size(), 1u);  // the old list stays
}

TEST_F(McpClientTest, AServerThatRepeatsACursorIsRefused) {
  server_.list_page = [](const Json& params) {
    std::string cursor = params.value("cursor", "");
    return Json{{"tools", Json::array()}, {"nextCursor", cursor.empty() ? "x" : "again"}};
  };
  auto client = MakeClient(10s, [](McpClient::Options& o) { o.min_backoff = o.max_backoff = 60s; });
  client->Start();
  ASSERT_TRUE(client->WaitSettled(5s));
  EXPECT_EQ(client->state(), McpClient::State::kDown);
  EXPECT_EQ(client->last_error(),
            "MCP server t is unavailable: its tools/list repeated the cursor \"again\"");
  EXPECT_EQ(server_.Count("tools/list"), 3u);
  std::lock_guard lock(mu_);
  EXPECT_TRUE(lists_.empty());
}

TEST_F(McpClientTest, AServerThatPagesWithoutEndIsRefused) {
  server_.list_page = [](const Json& params) {
    std::string cursor = params.value("cursor", "");
    return Json{{"tools", Json::array()}, {"nextCursor", cursor + "+"}};
  };
  auto client = MakeClient(10s, [](McpClient::Options& o) { o.min_backoff = o.max_backoff = 60s; });
  client->Start();
  ASSERT_TRUE(client->WaitSettled(5s));
  EXPECT_EQ(client->state(), McpClient::State::kDown);
  EXPECT_EQ(client->last_error(), "MCP server t is unavailable: its tools/list did not end within 100 pages");
  EXPECT_EQ(server_.Count("tools/list"), 100u);
}

TEST_F(McpClientTest, ToolsWithoutAnObjectSchemaAreLeftOut) {
  server_.tools.push_back({{"name", "text_schema"}, {"inputSchema", "object"}});
  server_.tools.push_back({{"name", "null_schema"}, {"inputSchema", nullptr}});
  server_.tools.push_back({{"name", "no_schema"}});
  server_.tools.push_back({{"name", "ok"}, {"inputSchema", {{"type", "object"}}}});
  auto client = MakeClient();
  client->Start();
  auto tools = WaitForLists(1);
  ASSERT_EQ(tools.size(), 2u);
  EXPECT_EQ(tools[0].name, "echo");
  EXPECT_EQ(tools[1].name, "ok");
}

TEST_F(McpClientTest, ACallWhileTheServerIsDownSaysWhyOnce) {
  server_.hold_initialize = true;
  auto client = MakeClient(10s, [](McpClient::Options& o) {
    o.spec.start_timeout = 100ms;
    o.min_backoff = o.max_backoff = 60s;
  });
  client->Start();
  ASSERT_TRUE(client->WaitSettled(5s));
  EXPECT_EQ(client->state(), McpClient::State::kDown);
  auto f = Call(*client, "echo", {{"message", "x"}});
  auto r = Get(f);
  EXPECT_EQ(r.status().code(), "mcp_unavailable");
  EXPECT_EQ(r.status().message(), "MCP server t is unavailable: it did not finish starting within 0.1 s");
}

// What on_state_change saw, in order: the state and last error it read.
class StateChanges {
 public:
  using Seen = std::pair<McpClient::State, std::string>;
  std::function<void()> Recorder(McpClient*& client) {
    return [this, &client] {
      std::lock_guard lock(mu_);
      seen_.emplace_back(client->state(), client->last_error());
      cv_.notify_all();
    };
  }
  // Waits until `n` changes were reported; returns them all.
  std::vector<Seen> WaitFor(size_t n) {
    std::unique_lock lock(mu_);
    EXPECT_TRUE(cv_.wait_for(lock, 5s, [&] { return seen_.size() >= n; })) << seen_.size() << " changes";
    return seen_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Seen> seen_;
};

TEST_F(McpClientTest, EveryChangeOfStateIsReportedOnce) {
  using State = McpClient::State;
  server_.hold_initialize = true;  // the report of Start comes before the next
  StateChanges changes;
  McpClient* raw = nullptr;
  auto client = MakeClient(10s, [&](McpClient::Options& o) { o.on_state_change = changes.Recorder(raw); });
  raw = client.get();
  client->Start();
  Json init = server_.WaitFor("initialize");
  server_.hold_initialize = false;
  server_.Answer(init["id"], {{"protocolVersion", "2025-06-18"}, {"capabilities", Json::object()}});
  auto started = changes.WaitFor(2);
  ASSERT_EQ(started.size(), 2u);
  EXPECT_EQ(started[1], StateChanges::Seen(State::kReady, ""));
  // A re-listing is no change of state.
  server_.Push({{"jsonrpc", "2.0"}, {"method", "notifications/tools/list_changed"}});
  WaitForLists(2);
  server_.Die();  // restarted at once
  WaitForLists(3);
  ASSERT_TRUE(client->WaitSettled(5s));
  client->Stop();
  const std::string died = "MCP server t exited (signal 9)";
  EXPECT_EQ(changes.WaitFor(6), (std::vector<StateChanges::Seen>{{State::kConnecting, ""},
                                                                 {State::kReady, ""},
                                                                 {State::kDown, died},
                                                                 {State::kConnecting, died},
                                                                 {State::kReady, died},
                                                                 {State::kStopped, died}}));
}

TEST_F(McpClientTest, AServerThatCannotStartReportsEachAttempt) {
  server_.start_error =
      Status(codes::kMcpUnavailable, "MCP server t: cannot run `nope`: No such file or directory");
  StateChanges changes;
  McpClient* raw = nullptr;
  auto client = MakeClient(10s, [&](McpClient::Options& o) { o.on_state_change = changes.Recorder(raw); });
  raw = client.get();
  client->Start();
  // Starting, then down; starting and down again on each retry: a view
  // sees it try. (What a report reads may be a later state already.)
  auto seen = changes.WaitFor(5);
  EXPECT_GE(server_.starts(), 2);
  EXPECT_NE(std::find(seen.begin(), seen.end(),
                      StateChanges::Seen(McpClient::State::kDown, server_.start_error.message())),
            seen.end());
}

TEST(McpTools, NamesAreWhatModelApisAccept) {
  EXPECT_EQ(ToolName("ev", "get-sum"), "ev__get-sum");
  EXPECT_EQ(ToolName("fs", "read.file/x"), "fs__read_file_x");
  EXPECT_EQ(ToolName("s", std::string(100, 'a')).size(), 64u);
}

TEST(McpTools, ResultsReachTheModelAsTextOrSummarized) {
  EXPECT_EQ(*ToolResultForModel(
                "t", {{"content", {{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}}}}),
            Json("a\nb"));
  Json mixed = *ToolResultForModel(
      "t", {{"content",
             {{{"type", "text"}, {"text", "see"}},
              {{"type", "image"}, {"mimeType", "image/png"}, {"data", "aGVsbG8="}},
              {{"type", "resource"},
               {"resource", {{"uri", "file:///a"}, {"mimeType", "text/plain"}, {"text", "A"}}}},
              {{"type", "resource"},
               {"resource", {{"uri", "file:///b"}, {"mimeType", "application/zip"}, {"blob", "AAAA"}}}},
              {{"type", "resource_link"}, {"uri", "file:///c"}, {"name", "c"}}}},
            {"structuredContent", {{"n", 1}}}});
  EXPECT_EQ(mixed["content"][1]["summary"], "image (image/png, 5 bytes, not shown)");
  EXPECT_FALSE(mixed["content"][1].contains("data"));
  EXPECT_EQ(mixed["content"][2]["text"], "A");
  EXPECT_EQ(mixed["content"][3]["summary"], "resource (application/zip, 3 bytes, not shown)");
  EXPECT_EQ(mixed["content"][4]["uri"], "file:///c");
  EXPECT_EQ(mixed["structured_content"]["n"], 1);
  auto err = ToolResultForModel("fs__read",
                                {{"isError", true}, {"content", {{{"type", "text"}, {"text", "ENOENT"}}}}});
  EXPECT_EQ(err.status().code(), "mcp_error");
  EXPECT_EQ(err.status().message(), "fs__read: ENOENT");
}

TEST_F(McpClientTest, ServersToolsBecomeAGroupAndArgumentsAreCheckedBeforeSending) {
  agent::ToolRegistry registry;
  ServerSpec spec;
  spec.name = "ev";
  spec.command = {"unused"};
  McpServers servers(registry, {spec}, "1", nullptr, [this](const ServerSpec&) { return server_.Make(); });
  servers.Start();  // returns once the server is ready, its tools registered
  ASSERT_NE(registry.Find("ev__echo"), nullptr);
  EXPECT_EQ(registry.GroupOf("ev__echo"), "mcp:ev");
  EXPECT_EQ(registry.Find("ev__echo")->parameters()["required"], Json::array({"message"}));
  EXPECT_EQ(servers.Describe()[0]["state"], "ready");
  EXPECT_EQ(servers.Describe()[0]["tools"], 1);

  std::promise<Result<Json>> bad;
  registry.Invoke("ev__echo", {}, {{"message", 5}}, [&](Result<Json> r) { bad.set_value(std::move(r)); });
  auto r = bad.get_future().get();
  EXPECT_EQ(r.status().code(), "invalid_arguments");
  EXPECT_NE(r.status().message().find("ev__echo"), std::string::npos) << r.status().message();
  EXPECT_EQ(server_.Count("tools/call"), 0u);

  std::promise<Result<Json>> good;
  registry.Invoke("ev__echo", {}, {{"message", "hi"}}, [&](Result<Json> r) { good.set_value(std::move(r)); });
  Json call = server_.WaitFor("tools/call");
  server_.Answer(call["id"], {{"content", {{{"type", "text"}, {"text", "Echo: hi"}}}}});
  EXPECT_EQ(*good.get_future().get(), Json("Echo: hi"));

  servers.Stop();
  EXPECT_EQ(registry.Find("ev__echo"), nullptr);
  EXPECT_EQ(servers.Describe()[0]["state"], "stopped");
}

TEST_F(McpClientTest, ServersReportEveryChangeOfWhatTheyDescribe) {
  agent::ToolRegistry registry;
  ServerSpec spec;
  spec.name = "ev";
  spec.command = {"unused"};
  std::mutex mu;
  std::condition_variable cv;
  McpServers* servers_ptr = nullptr;
  // Reports come from the thread that made the change (Start's, the
  // client's): as the change feed does, each one reads what is true now,
  // so two reports racing each other cannot leave a stale view behind. A
  // change no report followed would time out here.
  auto wait_for = [&](const std::function<bool(const Json&)>& pred) {
    std::unique_lock lock(mu);
    EXPECT_TRUE(cv.wait_for(lock, 5s, [&] { return pred(servers_ptr->Describe()[0]); }))
        << servers_ptr->Describe()[0];
  };
  McpServers servers(
      registry, {spec}, "1",
      [&] {
        std::lock_guard lock(mu);
        cv.notify_all();
      },
      [this](const ServerSpec&) { return server_.Make(); });
  servers_ptr = &servers;
  servers.Start();
  wait_for([](const Json& s) { return s["state"] == "ready" && s["tools"] == 1; });
  // A new tool list is a change even though the state stays.
  server_.tools.push_back({{"name", "add"}, {"inputSchema", {{"type", "object"}}}});
  server_.Push({{"jsonrpc", "2.0"}, {"method", "notifications/tools/list_changed"}});
  wait_for([](const Json& s) { return s["state"] == "ready" && s["tools"] == 2; });
  servers.Stop();
  wait_for([](const Json& s) { return s["state"] == "stopped" && s["tools"] == 0; });
}

}  // namespace
}  // namespace dsh::mcp
