// End-to-end tests of the workspace tools through the real `dsh web` binary
// with a scripted Chat Completions server (docs/TOOLS.md): a model that runs
// `df -h`, writes a report and edits it; approvals answered over HTTP; an
// unattended loop run whose call no one approves.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <set>
#include <thread>

#include "agent/testing/fake_chat_server.h"
#include "app/testing/dsh_process.h"
#include "base/json.h"
#include "base/testing/temp_dir.h"
#include "server/http_client.h"
#include "server/testing/ws_client.h"

namespace dsh::app {
namespace {

using agent::ModelToolCall;
using agent::testing::FakeChatServer;
using agent::testing::TextReply;
using agent::testing::ToolCallReply;
using dsh::testing::DshProcess;
using dsh::testing::WsClient;
using namespace std::chrono_literals;

class WorkspaceE2E : public ::testing::Test {
 protected:
  void SetUp() override { std::filesystem::create_directories(Project()); }

  std::string Home() const { return dir_.File("home"); }
  std::string Project() const { return dir_.File("project"); }

  void Start(const std::string& config) {
    std::filesystem::create_directories(Home());
    std::ofstream(Home() + "/dsh.yml") << config;
    std::map<std::string, std::string> env = {{"DSH_TOKEN", "t0ken"},
                                              {"DSH_MODEL", "openai/test-model"},
                                              {"OPENAI_BASE_URL", chat_.base_url()},
                                              {"OPENAI_API_KEY", "sk-secret-of-the-host"}};
    web_ = std::make_unique<DshProcess>(DSH_BINARY, std::vector<std::string>{"web", "--home", Home(), "--port", "0"},
                                        dir_.File("web.log"), env);
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
  std::string CreateSession() {
    return Call("POST", "/api/sessions", {{"cwd", Project()}}, 201)["session"]["id"];
  }
  void Send(const std::string& id, const std::string& text) {
    Call("POST", "/api/sessions/" + id + "/messages", {{"message", text}});
  }

  // Reads the session's stream from the start until `until` holds for an
  // event; every event read.
  std::vector<Json> StreamUntil(const std::string& id, const std::function<bool(const Json&)>& until) {
    std::vector<Json> events;
    auto ws = WsClient::Connect(port_, "/api/sessions/" + id + "/stream?token=t0ken");
    EXPECT_TRUE(ws.ok()) << ws.status().ToString();
    if (!ws.ok()) return events;
    for (;;) {
      auto msg = (*ws)->ReadJson(30s);
      EXPECT_TRUE(msg.ok()) << msg.status().ToString() << "\n" << web_->Stderr();
      if (!msg.ok()) return events;
      if ((*msg)["type"] != "event") continue;
      events.push_back((*msg)["event"]);
      if (until(events.back())) return events;
    }
  }
  std::vector<Json> UntilTurnEnds(const std::string& id, size_t n) {
    size_t ends = 0;
    return StreamUntil(id, [&](const Json& e) { return e["type"] == "turn/end" && ++ends == n; });
  }
  static std::vector<Json> OfType(const std::vector<Json>& events, const std::string& type) {
    std::vector<Json> out;
    for (const auto& e : events) {
      if (e["type"] == type) out.push_back(e["data"]);
    }
    return out;
  }
  static ModelToolCall ToolCall(const std::string& id, const std::string& name, const Json& args) {
    return ModelToolCall{id, name, args.dump()};
  }
  std::string Slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  dsh::testing::TempDir dir_;
  FakeChatServer chat_;
  std::unique_ptr<DshProcess> web_;
  std::string url_;
  uint16_t port_ = 0;
};

constexpr const char* kTrusted = R"(
presets:
  trusted:
    permissions: {bash: allow, write: allow, edit: allow}
default_preset: trusted
)";

// "Check the disk usage of this machine and tell me if any partition is
// above 80%": the model runs df -h, writes a report, then corrects it.
TEST_F(WorkspaceE2E, AModelRunsACommandWritesAReportAndEditsIt) {
  chat_.Enqueue(ToolCallReply({ToolCall("c1", "bash", {{"command", "df -h / && echo key=${OPENAI_API_KEY:-none}"}})}));
  chat_.Enqueue(ToolCallReply({ToolCall("c2", "write", {{"path", "reports/disk.md"}, {"content", "# Disk\nall below 90%\n"}})}));
  chat_.Enqueue(ToolCallReply({ToolCall("c3", "edit", {{"path", "reports/disk.md"}, {"old_string", "90%"}, {"new_string", "80%"}})}));
  chat_.Enqueue(TextReply("No partition is above 80%."));
  Start(kTrusted);
  std::string id = CreateSession();
  Send(id, "Check the disk usage of this machine and tell me if any partition is above 80%");
  auto events = UntilTurnEnds(id, 1);

  auto results = OfType(events, "tool/result");
  ASSERT_EQ(results.size(), 3u) << Json(events).dump(1);
  Json df = results[0]["result"];
  EXPECT_EQ(df["exit_code"], 0) << df.dump();
  EXPECT_NE(df["output"].get<std::string>().find("Filesystem"), std::string::npos) << df.dump();
  // The host's own key never reaches the command.
  EXPECT_NE(df["output"].get<std::string>().find("key=none"), std::string::npos) << df.dump();
  EXPECT_EQ(results[1]["result"]["created"], true) << results[1].dump();
  EXPECT_EQ(results[2]["result"]["replacements"], 1) << results[2].dump();
  EXPECT_EQ(Slurp(Project() + "/reports/disk.md"), "# Disk\nall below 80%\n");
  EXPECT_TRUE(OfType(events, "tool/approval_requested").empty()) << "the preset allows them";
  // The model read df's output in its next request.
  ASSERT_GE(chat_.requests().size(), 2u);
  EXPECT_NE(chat_.requests()[1].body.find("Filesystem"), std::string::npos);
  // The workspace tools are offered to this session; a session without a cwd gets only fetch.
  Json tools = chat_.requests()[0].json["tools"];
  std::set<std::string> names;
  for (const auto& t : tools) names.insert(t["function"]["name"].get<std::string>());
  for (const char* name : {"read", "write", "edit", "list", "grep", "bash", "fetch"}) EXPECT_TRUE(names.count(name)) << name;
  Json host = Call("GET", "/api/host");
  EXPECT_EQ(host["sandbox"]["state"], "on") << host["sandbox"].dump();
}

TEST_F(WorkspaceE2E, AskingWaitsForAPersonWhoAllowsOnceThenDenies) {
  chat_.Enqueue(ToolCallReply({ToolCall("c1", "bash", {{"command", "echo ran > ran.txt"}})}));
  chat_.Enqueue(TextReply("done"));
  chat_.Enqueue(TextReply("Making A File"));  // the title generated after the first turn
  Start("");  // the defaults: bash asks
  std::string id = CreateSession();
  Send(id, "make a file");
  auto waiting = StreamUntil(id, [](const Json& e) { return e["type"] == "tool/approval_requested"; });
  Json request = waiting.back()["data"];
  EXPECT_EQ(request["call_id"], "c1");
  EXPECT_EQ(request["name"], "bash");
  EXPECT_EQ(request["summary"], "echo ran > ran.txt");
  EXPECT_FALSE(std::filesystem::exists(Project() + "/ran.txt")) << "nothing runs before the answer";
  Json status = Call("POST", "/api/tools/session_status", {{"args", {{"session_id", id}}}})["result"]["sessions"][0];
  EXPECT_EQ(status["status"], "running");
  EXPECT_EQ(status["awaiting_approval"], true) << status.dump();
  Call("POST", "/api/sessions/" + id + "/approvals/c1", {{"decision", "allow_once"}});
  auto events = UntilTurnEnds(id, 1);
  EXPECT_TRUE(std::filesystem::exists(Project() + "/ran.txt"));
  EXPECT_EQ(OfType(events, "tool/approval").at(0)["decision"], "allow_once");
  status = Call("POST", "/api/tools/session_status", {{"args", {{"session_id", id}}}})["result"]["sessions"][0];
  EXPECT_FALSE(status.contains("awaiting_approval")) << status.dump();
  Call("POST", "/api/sessions/" + id + "/approvals/c1", {{"decision", "deny"}}, 409);
  StreamUntil(id, [](const Json& e) { return e["type"] == "title/generated"; });

  // Allowed once: the next call asks again, and a denial reaches the model.
  chat_.Enqueue(ToolCallReply({ToolCall("c2", "bash", {{"command", "rm ran.txt"}})}));
  chat_.Enqueue(TextReply("understood"));
  Send(id, "remove it");
  StreamUntil(id, [](const Json& e) { return e["type"] == "tool/approval_requested" && e["data"]["call_id"] == "c2"; });
  Call("POST", "/api/sessions/" + id + "/approvals/c2", {{"decision", "deny"}});
  events = UntilTurnEnds(id, 2);
  EXPECT_TRUE(std::filesystem::exists(Project() + "/ran.txt")) << "a denied call does not run";
  auto results = OfType(events, "tool/result");
  EXPECT_EQ(results.back()["error"]["code"], "tool_denied");
  ASSERT_TRUE(chat_.WaitForRequests(5, 10s));
  EXPECT_NE(chat_.requests()[4].body.find("tool_denied"), std::string::npos);
}

TEST_F(WorkspaceE2E, AnUnattendedLoopRunWhoseCallNoOneApprovesSaysSoInItsOutcome) {
  chat_.Enqueue(ToolCallReply({ToolCall("c1", "bash", {{"command", "df -h"}})}));
  chat_.Enqueue(TextReply("I could not check: no one approved the command."));
  Start("tools:\n  approval_timeout: 1\n");
  std::string id = CreateSession();
  Json loop = Call("POST", "/api/tools/loop_create",
                   {{"args", {{"prompt", "check the disks"}, {"schedule", {{"kind", "after"}, {"after_seconds", 1}}},
                              {"session_id", id}}}})["result"];
  std::string loop_id = loop.value("loop_id", "");
  ASSERT_FALSE(loop_id.empty()) << loop.dump();
  auto events = UntilTurnEnds(id, 1);
  auto decisions = OfType(events, "tool/approval");
  ASSERT_EQ(decisions.size(), 1u);
  EXPECT_EQ(decisions[0]["decision"], "timeout");
  EXPECT_EQ(decisions[0]["by"], "timeout");
  EXPECT_EQ(OfType(events, "tool/result").at(0)["error"]["code"], "approval_timeout");
  // The run's outcome, committed with the turn/end just read: the turn
  // completed, without the call no one approved.
  Json runs = Call("GET", "/api/loops/" + loop_id + "/runs");
  ASSERT_EQ(runs["runs"].size(), 1u) << runs.dump();
  Json outcome = runs["runs"][0]["outcome"];
  EXPECT_EQ(outcome["status"], "completed") << outcome.dump();
  EXPECT_EQ(outcome["error"]["code"], "approval_timeout") << outcome.dump();
}

// An operator without bubblewrap turns the sandbox off: the host says so at
// start, in its log and in GET /api/host, and bash still runs (with a clean
// environment) in the session's directory.
TEST_F(WorkspaceE2E, ASandboxTurnedOffIsSaidAtStartAndBashStillRunsInTheCwd) {
  chat_.Enqueue(ToolCallReply({ToolCall("c1", "bash", {{"command", "pwd; echo key=${OPENAI_API_KEY:-none}"}})}));
  chat_.Enqueue(TextReply("done"));
  Start(std::string(kTrusted) + "tools:\n  sandbox: false\n");
  Json host = Call("GET", "/api/host");
  EXPECT_EQ(host["sandbox"]["state"], "off") << host.dump();
  EXPECT_NE(host["sandbox"].value("reason", "").find("tools.sandbox"), std::string::npos) << host.dump();
  EXPECT_NE(web_->Stderr().find("tools.sandbox is false"), std::string::npos) << web_->Stderr();
  std::string id = CreateSession();
  Send(id, "where are you?");
  auto results = OfType(UntilTurnEnds(id, 1), "tool/result");
  ASSERT_EQ(results.size(), 1u);
  std::string output = results[0]["result"].value("output", "");
  EXPECT_NE(output.find(std::filesystem::canonical(Project()).string()), std::string::npos) << output;
  EXPECT_NE(output.find("key=none"), std::string::npos) << output;
}

}  // namespace
}  // namespace dsh::app
