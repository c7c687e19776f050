// dsh's agents use MCP servers nobody here wrote (from npm): the official
// filesystem and "everything" servers, configured in dsh.yml and called by a
// scripted model through real turns of a real `dsh web`.
#include <gtest/gtest.h>

#include <dirent.h>
#include <signal.h>

#include <filesystem>
#include <fstream>

#include "agent/testing/fake_chat_server.h"
#include "app/testing/dsh_process.h"
#include "base/json.h"
#include "base/testing/temp_dir.h"
#include "server/http_client.h"
#include "server/testing/ws_client.h"

namespace dsh::app {
namespace {

namespace fs = std::filesystem;
using agent::testing::FakeChatServer;
using agent::testing::TextReply;
using agent::testing::ToolCallReply;
using dsh::testing::DshProcess;
using dsh::testing::WsClient;

fs::path SourceDir() {
  const char* dir = std::getenv("DSH_SOURCE_DIR");
  return dir ? fs::path(dir) : fs::path(DSH_SOURCE_DIR_FALLBACK);
}

// The pids of processes whose command line contains `needle`.
std::vector<pid_t> ProcessesWith(const std::string& needle) {
  std::vector<pid_t> out;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "cmdline", std::ios::binary);
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(needle) != std::string::npos) out.push_back(std::stoi(name));
  }
  return out;
}

class McpE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::path modules = SourceDir() / "node_modules" / "@modelcontextprotocol";
    everything_ = (modules / "server-everything" / "dist" / "index.js").string();
    filesystem_ = (modules / "server-filesystem" / "dist" / "index.js").string();
    ASSERT_TRUE(fs::exists(everything_) && fs::exists(filesystem_))
        << "the MCP servers from npm are missing: run `npm ci` (scripts/test does)";
    files_ = dir_.File("files");
    fs::create_directories(files_);
    fs::create_directories(Home());
    // The files directory in both servers' argv marks this test's children
    // among other node processes (the everything server ignores it).
    std::ofstream(Home() + "/dsh.yml") << "mcp:\n  servers:\n"
                                       << "    ev:\n      command: [node, " << everything_ << ", stdio, " << files_ << "]\n"
                                       << "    fs:\n      command: [node, " << filesystem_ << ", " << files_ << "]\n";
  }
  void TearDown() override {
    if (web_) {
      web_->Signal(SIGTERM);
      EXPECT_EQ(web_->Wait(), 0) << web_->Stderr();
      // Every stdio server was stopped with the host.
      EXPECT_TRUE(ProcessesWith(files_).empty()) << "an MCP server outlived the host";
    }
  }

  std::string Home() const { return dir_.File("home"); }

  void Start() {
    web_ = std::make_unique<DshProcess>(
        DSH_BINARY, std::vector<std::string>{"web", "--home", Home(), "--port", "0"}, dir_.File("web.log"),
        std::map<std::string, std::string>{{"DSH_TOKEN", "t0ken"},
                                           {"DSH_MODEL", "openai/test-model"},
                                           {"OPENAI_BASE_URL", chat_.base_url()},
                                           {"OPENAI_API_KEY", "sk-test"}});
    std::string url = web_->WaitListening();
    ASSERT_FALSE(url.empty()) << web_->Stderr();
    if (url.back() == '/') url.pop_back();
    url_ = url;
    port_ = static_cast<uint16_t>(std::stoi(url.substr(url.rfind(':') + 1)));
  }

  Json Call(const std::string& method, const std::string& path, const Json& body = Json::object(),
            int want_status = 200) {
    auto r = server::HttpRequestSync(method, url_ + path, method == "GET" ? "" : body.dump(),
                                     {{"Authorization", "Bearer t0ken"}, {"Content-Type", "application/json"}});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return Json();
    EXPECT_EQ(r->status, want_status) << method << " " << path << ": " << r->body;
    return Json::parse(r->body, nullptr, false);
  }

  // Opens the session's stream; Next returns its next event.
  std::unique_ptr<WsClient> Stream(const std::string& id) {
    auto ws = WsClient::Connect(port_, "/api/sessions/" + id + "/stream?token=t0ken");
    EXPECT_TRUE(ws.ok()) << ws.status().ToString();
    return ws.ok() ? std::move(*ws) : nullptr;
  }
  Json NextEvent(WsClient& ws, const std::string& type) {
    for (;;) {
      auto msg = ws.ReadJson(std::chrono::seconds(30));
      EXPECT_TRUE(msg.ok()) << msg.status().ToString() << "\n" << web_->Stderr();
      if (!msg.ok()) return Json();
      if ((*msg)["type"] == "event" && (*msg)["event"]["type"] == type) return (*msg)["event"];
    }
  }

  dsh::testing::TempDir dir_;
  FakeChatServer chat_;
  std::unique_ptr<DshProcess> web_;
  std::string url_;
  uint16_t port_ = 0;
  std::string everything_, filesystem_, files_;
};

TEST_F(McpE2E, AScriptedModelUsesTheFilesystemAndEverythingServersThroughATurn) {
  chat_.SetDefault(TextReply("Title"));
  chat_.Enqueue(ToolCallReply({{"c1", "fs__write_file", Json{{"path", files_ + "/note.txt"}, {"content", "hello mcp"}}.dump()}}));
  chat_.Enqueue(ToolCallReply({{"c2", "fs__read_text_file", Json{{"path", files_ + "/note.txt"}}.dump()},
                               {"c3", "ev__get-sum", R"({"a": 2, "b": 40})"},
                               {"c4", "ev__get-sum", R"({"a": "two"})"},
                               {"c5", "ev__get-tiny-image", "{}"}}));
  chat_.Enqueue(TextReply("all done"));
  Start();
  std::string id = Call("POST", "/api/sessions", Json::object(), 201)["session"]["id"];
  auto ws = Stream(id);
  ASSERT_TRUE(ws);
  Call("POST", "/api/sessions/" + id + "/messages", {{"message", "use your tools"}});
  std::map<std::string, Json> results;
  for (int i = 0; i < 5; ++i) {
    Json r = NextEvent(*ws, "tool/result");
    results[r["data"]["call_id"]] = r["data"];
  }
  EXPECT_EQ(NextEvent(*ws, "turn/end")["data"]["status"], "completed");

  // The model was offered the servers' tools with their schemas unchanged.
  ASSERT_TRUE(chat_.WaitForRequests(1, std::chrono::seconds(5)));
  auto requests = chat_.requests();
  Json offered = requests[0].json["tools"];
  std::map<std::string, Json> by_name;
  for (const auto& t : offered) by_name[t["function"]["name"]] = t["function"];
  ASSERT_TRUE(by_name.count("ev__get-sum")) << requests[0].target << " " << requests[0].body.substr(0, 3000);
  ASSERT_TRUE(by_name.count("fs__read_text_file"));
  EXPECT_EQ(by_name["ev__get-sum"]["parameters"]["required"], Json::array({"a", "b"}));
  EXPECT_EQ(by_name["ev__get-sum"]["parameters"]["$schema"], "http://json-schema.org/draft-07/schema#");

  EXPECT_FALSE(results["c1"].contains("error")) << results["c1"].dump();
  std::ifstream written(files_ + "/note.txt");
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(written)), std::istreambuf_iterator<char>()), "hello mcp");
  // Its text and its structured content both reach the model.
  EXPECT_EQ(results["c2"]["result"]["content"][0]["text"], "hello mcp") << results["c2"].dump();
  EXPECT_EQ(results["c2"]["result"]["structured_content"]["content"], "hello mcp");
  EXPECT_NE(results["c3"]["result"].dump().find("42"), std::string::npos) << results["c3"].dump();
  // Bad arguments are refused by dsh before the call, with the place named.
  EXPECT_EQ(results["c4"]["error"]["code"], "invalid_arguments") << results["c4"].dump();
  EXPECT_NE(results["c4"]["error"]["message"].get<std::string>().find("ev__get-sum"), std::string::npos);
  // An image is summarized by its type, its bytes left out.
  std::string image = results["c5"]["result"].dump();
  EXPECT_NE(image.find("image/png"), std::string::npos) << image;
  EXPECT_EQ(image.find("iVBOR"), std::string::npos) << "the base64 reached the model";
}

TEST_F(McpE2E, AServerKilledMidCallGivesMcpUnavailableAndTheNextCallWorksAfterItsRestart) {
  chat_.SetDefault(TextReply("Title"));
  chat_.Enqueue(ToolCallReply({{"c1", "ev__trigger-long-running-operation", R"({"duration": 60, "steps": 2})"}}));
  chat_.Enqueue(ToolCallReply({{"c2", "ev__echo", R"({"message": "back"})"}}));
  chat_.Enqueue(TextReply("recovered"));
  Start();
  std::string id = Call("POST", "/api/sessions", Json::object(), 201)["session"]["id"];
  auto ws = Stream(id);
  ASSERT_TRUE(ws);
  Call("POST", "/api/sessions/" + id + "/messages", {{"message", "go"}});
  NextEvent(*ws, "tool/call");
  // The call is in flight (it lasts a minute): kill the server under it.
  auto pids = ProcessesWith(everything_ + " stdio " + files_);
  ASSERT_EQ(pids.size(), 1u);
  ASSERT_EQ(kill(pids[0], SIGKILL), 0);
  Json first = NextEvent(*ws, "tool/result");
  EXPECT_EQ(first["data"]["error"]["code"], "mcp_unavailable") << first.dump();
  EXPECT_NE(first["data"]["error"]["message"].get<std::string>().find("ev"), std::string::npos);
  Json second = NextEvent(*ws, "tool/result");
  EXPECT_EQ(second["data"]["result"], "Echo: back") << second.dump();
  EXPECT_EQ(NextEvent(*ws, "turn/end")["data"]["status"], "completed");
  auto after = ProcessesWith(everything_ + " stdio " + files_);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_NE(after[0], pids[0]);
}

TEST_F(McpE2E, CancellingATurnEndsItsMcpCallAtOnce) {
  chat_.SetDefault(TextReply("Title"));
  chat_.Enqueue(ToolCallReply({{"c1", "ev__trigger-long-running-operation", R"({"duration": 120, "steps": 2})"}}));
  Start();
  std::string id = Call("POST", "/api/sessions", Json::object(), 201)["session"]["id"];
  auto ws = Stream(id);
  ASSERT_TRUE(ws);
  Call("POST", "/api/sessions/" + id + "/messages", {{"message", "go"}});
  NextEvent(*ws, "tool/call");
  auto cancelled_at = std::chrono::steady_clock::now();
  EXPECT_EQ(Call("POST", "/api/sessions/" + id + "/cancel")["cancelled"], true);
  // The call would last two minutes; the stream's read gives up after 30 s.
  Json result = NextEvent(*ws, "tool/result");
  EXPECT_EQ(result["data"]["error"]["code"], "cancelled") << result.dump();
  Json end = NextEvent(*ws, "turn/end");
  EXPECT_EQ(end["data"]["error"]["code"], "cancelled") << end.dump();
  EXPECT_LT(std::chrono::steady_clock::now() - cancelled_at, std::chrono::seconds(10));
  // The server lives on and serves the next turn.
  chat_.Enqueue(ToolCallReply({{"c2", "ev__echo", R"({"message": "still here"})"}}));
  chat_.Enqueue(TextReply("ok"));
  Call("POST", "/api/sessions/" + id + "/messages", {{"message", "again"}});
  EXPECT_EQ(NextEvent(*ws, "tool/result")["data"]["result"], "Echo: still here");
}

}  // namespace
}  // namespace dsh::app
