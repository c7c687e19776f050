// McpServers and the conversion of MCP tool results for the model.
#include "mcp/mcp_tools.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace dsh::mcp {
namespace {

TEST(ToolResultForModel, FieldsOfTheWrongTypeAreIgnoredNotThrown) {
  // What a careless server may send: none of it may take the host down.
  for (const Json& result : {Json{{"content", {{{"type", "text"}, {"text", "hi"}}}}, {"isError", nullptr}},
                             Json{{"content", {{{"type", "text"}, {"text", "hi"}}}}, {"isError", "yes"}},
                             Json{{"content", {{{"type", "text"}, {"text", "hi"}}}}, {"isError", 1}}}) {
    auto r = ToolResultForModel("s__t", result);
    ASSERT_TRUE(r.ok()) << result << " -> " << r.status().ToString();
    EXPECT_EQ(*r, "hi") << result;
  }
  for (const Json& result : {Json{{"content", nullptr}}, Json{{"content", "hi"}}, Json{{"content", {{"a", 1}}}},
                             Json{{"content", {1, "x", nullptr}}}}) {
    auto r = ToolResultForModel("s__t", result);
    ASSERT_TRUE(r.ok()) << result << " -> " << r.status().ToString();
    EXPECT_EQ(*r, "") << result;
  }
}

TEST(ToolResultForModel, ImageSizesAreRightForShortAndUnpaddedData) {
  auto size_of = [](const std::string& base64) {
    auto r = ToolResultForModel("s__t", Json{{"content", {{{"type", "image"},
                                                           {"mimeType", "image/png"},
                                                           {"data", base64}}}}});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? (*r)["content"][0]["summary"].get<std::string>() : std::string();
  };
  EXPECT_EQ(size_of(""), "image (image/png, 0 bytes, not shown)");
  EXPECT_EQ(size_of("=="), "image (image/png, 0 bytes, not shown)");
  EXPECT_EQ(size_of("QQ=="), "image (image/png, 1 bytes, not shown)");
  EXPECT_EQ(size_of("QUI="), "image (image/png, 2 bytes, not shown)");
  EXPECT_EQ(size_of("QUJD"), "image (image/png, 3 bytes, not shown)");
  EXPECT_EQ(size_of("QQ"), "image (image/png, 1 bytes, not shown)");
  EXPECT_EQ(size_of("QUJDRA"), "image (image/png, 4 bytes, not shown)");
}

// A server that answers initialize and tools/list, and whose Close waits
// until every server of the test is closing at once (or 10 s pass).
struct StopRendezvous {
  std::mutex mu;
  std::condition_variable cv;
  int closing = 0;   // GUARDED_BY(mu)
  int met = 0;       // GUARDED_BY(mu): Closes that saw all the others closing too
  int servers = 0;
};

class SlowToCloseTransport final : public Transport {
 public:
  explicit SlowToCloseTransport(StopRendezvous& rendezvous) : rendezvous_(rendezvous) {}
  ~SlowToCloseTransport() override { Close(); }

  Status Start(OnMessage on_message, OnClosed) override {
    on_message_ = std::move(on_message);
    worker_ = std::thread([this] { Serve(); });
    return Status::Ok();
  }
  void Send(Json message, OnSent sent) override {
    std::lock_guard lock(mu_);
    queue_.push_back({std::move(message), std::move(sent)});
    cv_.notify_all();
  }
  void SetProtocolVersion(std::string) override {}
  void Close() override {
    {
      std::lock_guard lock(mu_);
      if (closed_) return;
      closed_ = true;
      cv_.notify_all();
    }
    if (worker_.joinable()) worker_.join();
    std::unique_lock lock(rendezvous_.mu);
    ++rendezvous_.closing;
    rendezvous_.cv.notify_all();
    if (rendezvous_.cv.wait_for(lock, std::chrono::seconds(10),
                                [&] { return rendezvous_.closing == rendezvous_.servers; })) {
      ++rendezvous_.met;
    }
  }

 private:
  void Serve() {
    for (;;) {
      std::pair<Json, OnSent> item;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return closed_ || !queue_.empty(); });
        if (closed_) return;
        item = std::move(queue_.front());
        queue_.pop_front();
      }
      if (item.second) item.second(Status::Ok());
      const Json& m = item.first;
      if (!m.contains("id")) continue;
      Json result = Json::object();
      if (m["method"] == "initialize") {
        result = {{"protocolVersion", "2025-06-18"}, {"capabilities", Json::object()},
                  {"serverInfo", {{"name", "slow"}, {"version", "1"}}}};
      } else if (m["method"] == "tools/list") {
        result = {{"tools", Json::array()}};
      }
      on_message_(Json{{"jsonrpc", "2.0"}, {"id", m["id"]}, {"result", result}});
    }
  }

  StopRendezvous& rendezvous_;
  OnMessage on_message_;
  std::thread worker_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<Json, OnSent>> queue_;  // GUARDED_BY(mu_)
  bool closed_ = false;                        // GUARDED_BY(mu_)
};

TEST(McpServers, StopsItsServersAllAtOnce) {
  StopRendezvous rendezvous;
  rendezvous.servers = 3;
  std::vector<ServerSpec> specs;
  for (const char* name : {"a", "b", "c"}) {
    ServerSpec spec;
    spec.name = name;
    spec.command = {"unused"};
    specs.push_back(spec);
  }
  agent::ToolRegistry registry;
  McpServers servers(registry, specs, "test", nullptr,
                     [&](const ServerSpec&) { return std::make_unique<SlowToCloseTransport>(rendezvous); });
  servers.Start();
  for (const Json& s : servers.Describe()) EXPECT_EQ(s["state"], "ready") << s;
  servers.Stop();
  std::lock_guard lock(rendezvous.mu);
  EXPECT_EQ(rendezvous.met, 3) << "the servers were stopped one after another";
}

}  // namespace
}  // namespace dsh::mcp
