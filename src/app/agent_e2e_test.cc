// End-to-end tests of the agent runtime through the real `dsh web` binary:
// sessions and messages over HTTP, the live stream over WebSocket, the
// openai adapter against a scripted Chat Completions server, and recovery
// after SIGKILL.
#include <gtest/gtest.h>

#include <filesystem>

#include "agent/testing/fake_chat_server.h"
#include "app/testing/dsh_process.h"
#include "base/json.h"
#include "base/testing/temp_dir.h"
#include "server/http_client.h"
#include "server/testing/ws_client.h"

namespace dsh::app {
namespace {

using agent::testing::FakeChatServer;
using dsh::testing::DshProcess;
using dsh::testing::WsClient;

class AgentE2E : public ::testing::Test {
 protected:
  std::string Home() const { return dir_.File("home"); }

  // Starts `dsh web` and returns its base URL ("http://127.0.0.1:PORT").
  std::string Start(std::map<std::string, std::string> env = {}) {
    env.emplace("DSH_TOKEN", "t0ken");
    web_ = std::make_unique<DshProcess>(DSH_BINARY, std::vector<std::string>{"web", "--home", Home(), "--port", "0"},
                                        dir_.File("web" + std::to_string(++starts_) + ".log"), env);
    std::string url = web_->WaitListening();
    EXPECT_FALSE(url.empty()) << web_->Stderr();
    if (!url.empty() && url.back() == '/') url.pop_back();
    url_ = url;
    port_ = static_cast<uint16_t>(std::stoi(url.substr(url.rfind(':') + 1)));
    return url;
  }
  std::map<std::string, std::string> OpenAiEnv() const {
    return {{"DSH_MODEL", "openai/test-model"}, {"OPENAI_BASE_URL", chat_.base_url()}, {"OPENAI_API_KEY", "sk-test"}};
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
  std::string CreateSession() { return Call("POST", "/api/sessions", Json::object(), 201)["session"]["id"]; }
  std::string Send(const std::string& id, const std::string& text, const std::string& mode = "steer") {
    return Call("POST", "/api/sessions/" + id + "/messages", {{"message", text}, {"mode", mode}})["message_id"];
  }

  // Reads the session's stream until `n` turns ended; returns every event.
  std::vector<Json> StreamUntilTurnEnds(const std::string& id, size_t n) {
    std::vector<Json> events;
    auto ws = WsClient::Connect(port_, "/api/sessions/" + id + "/stream?token=t0ken");
    EXPECT_TRUE(ws.ok()) << ws.status().ToString();
    if (!ws.ok()) return events;
    size_t ends = 0;
    while (ends < n) {
      auto msg = (*ws)->ReadJson(std::chrono::seconds(30));
      EXPECT_TRUE(msg.ok()) << msg.status().ToString() << "\n" << web_->Stderr();
      if (!msg.ok()) break;
      if ((*msg)["type"] != "event") continue;
      events.push_back((*msg)["event"]);
      if (events.back()["type"] == "turn/end") ++ends;
    }
    return events;
  }
  static std::vector<std::string> Texts(const std::vector<Json>& events, const std::string& type) {
    std::vector<std::string> out;
    for (const auto& e : events) {
      if (e["type"] == type) out.push_back(e["data"].value("text", ""));
    }
    return out;
  }

  dsh::testing::TempDir dir_;
  FakeChatServer chat_;
  std::unique_ptr<DshProcess> web_;
  std::string url_;
  uint16_t port_ = 0;
  int starts_ = 0;
};

TEST_F(AgentE2E, EchoIsTheOfflineDefaultAndAnswersOverHttp) {
  Start();
  Json info = Call("GET", "/api/host");
  EXPECT_EQ(info["default_model"]["provider"], "echo");
  EXPECT_NE(info["default_model"]["description"].get<std::string>().find("offline echo model"), std::string::npos)
      << info.dump();
  std::string id = CreateSession();
  std::string message_id = Send(id, "hello there");
  auto events = StreamUntilTurnEnds(id, 1);
  EXPECT_EQ(Texts(events, "message/user"), std::vector<std::string>{"hello there"});
  EXPECT_EQ(Texts(events, "message/assistant"), std::vector<std::string>{"echo: hello there"});
  // The same events over the plain route.
  Json page = Call("GET", "/api/sessions/" + id + "/events?after=0&limit=100");
  EXPECT_EQ(page["events"].size(), events.size());
  EXPECT_EQ(page["last_seq"], events.back()["seq"]);
}

TEST_F(AgentE2E, GlobalInterfaceSessionIsCreatedOnceAndKept) {
  Start();
  Json first = Call("GET", "/api/host")["global_session_id"];
  ASSERT_TRUE(first.is_string()) << first.dump();
  web_->Signal(SIGTERM);
  ASSERT_EQ(web_->Wait(), 0) << web_->Stderr();
  Start();
  EXPECT_EQ(Call("GET", "/api/host")["global_session_id"], first);
  Call("GET", "/api/sessions/" + first.get<std::string>() + "/events");
}

TEST_F(AgentE2E, MessageErrorsAreClearAndChangeNothing) {
  Start();
  std::string id = CreateSession();
  EXPECT_EQ(Call("POST", "/api/sessions/ses_missing/messages", {{"message", "x"}}, 404)["error"]["code"], "not_found");
  EXPECT_EQ(Call("POST", "/api/sessions/" + id + "/messages", {{"message", "  "}}, 400)["error"]["code"],
            "invalid_arguments");
  EXPECT_EQ(Call("POST", "/api/sessions/" + id + "/messages", {{"message", "x"}, {"mode", "later"}}, 400)["error"]["code"],
            "invalid_arguments");
  EXPECT_EQ(Call("POST", "/api/sessions/" + id + "/messages", {{"message", "x"}, {"extra", 1}}, 400)["error"]["code"],
            "invalid_arguments");
  EXPECT_EQ(Call("POST", "/api/sessions", {{"preset", "nope"}}, 400)["error"]["code"], "invalid_arguments");
  EXPECT_EQ(Call("GET", "/api/sessions/" + id + "/events")["events"].size(), 0u);
}

TEST_F(AgentE2E, DuplicateKeyOverHttpDeliversOnce) {
  Start();
  std::string id = CreateSession();
  Json a = Call("POST", "/api/sessions/" + id + "/messages", {{"message", "once"}, {"key", "k"}});
  Json b = Call("POST", "/api/sessions/" + id + "/messages", {{"message", "once"}, {"key", "k"}});
  EXPECT_EQ(a["message_id"], b["message_id"]);
  EXPECT_FALSE(a["duplicate"].get<bool>());
  EXPECT_TRUE(b["duplicate"].get<bool>());
  Send(id, "after");
  auto events = StreamUntilTurnEnds(id, 2);
  EXPECT_EQ(Texts(events, "message/user"), (std::vector<std::string>{"once", "after"}));
}

TEST_F(AgentE2E, OpenAiTurnStreamsFromAChatCompletionsServerAndGeneratesATitle) {
  chat_.Enqueue(agent::testing::ReasoningThenText("thinking", "Hi! How can I help?"));
  chat_.Enqueue(agent::testing::TextReply("Friendly Greeting"));
  Start(OpenAiEnv());
  std::string id = CreateSession();
  Send(id, "hello");
  auto events = StreamUntilTurnEnds(id, 1);
  EXPECT_EQ(Texts(events, "message/reasoning"), std::vector<std::string>{"thinking"});
  EXPECT_EQ(Texts(events, "message/assistant"), std::vector<std::string>{"Hi! How can I help?"});
  ASSERT_TRUE(chat_.WaitForRequests(2, std::chrono::seconds(30)));
  auto first = chat_.requests().at(0);
  EXPECT_EQ(first.json["model"], "test-model");
  EXPECT_EQ(first.headers["authorization"], "Bearer sk-test");
  // After the first completed turn a short title is generated with the model.
  auto ws = WsClient::Connect(port_, "/api/sessions/" + id + "/stream?token=t0ken");
  ASSERT_TRUE(ws.ok());
  std::string title;
  while (title.empty()) {
    auto msg = (*ws)->ReadJson(std::chrono::seconds(30));
    ASSERT_TRUE(msg.ok()) << msg.status().ToString();
    if ((*msg)["type"] == "event" && (*msg)["event"]["type"] == "title/generated") title = (*msg)["event"]["data"]["title"];
  }
  EXPECT_EQ(title, "Friendly Greeting");
}

TEST_F(AgentE2E, ServerErrorEndsTheTurnWithAnErrorAndTheNextMessageWorks) {
  for (int i = 0; i < 4; ++i) chat_.Enqueue(agent::testing::Error(500, "upstream exploded"));
  chat_.Enqueue(agent::testing::TextReply("back again"));
  Start(OpenAiEnv());
  std::string id = CreateSession();
  Send(id, "first");
  auto events = StreamUntilTurnEnds(id, 1);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back()["data"]["status"], "error");
  EXPECT_EQ(events.back()["data"]["error"]["code"], "model_error");
  EXPECT_NE(events.back()["data"]["error"]["message"].get<std::string>().find("upstream exploded"), std::string::npos);
  Send(id, "second");
  events = StreamUntilTurnEnds(id, 2);
  EXPECT_EQ(Texts(events, "message/assistant"), std::vector<std::string>{"back again"});
}

TEST_F(AgentE2E, SigkillMidTurnLosesNoAcknowledgedMessageAndProcessesItOnce) {
  chat_.Enqueue(agent::testing::Hang());
  Start(OpenAiEnv());
  std::string id = CreateSession();
  Send(id, "do not lose me");
  ASSERT_TRUE(chat_.WaitForRequests(1, std::chrono::seconds(30)));
  web_->Signal(SIGKILL);
  web_->Wait();

  chat_.Enqueue(agent::testing::TextReply("recovered"));
  chat_.Enqueue(agent::testing::TextReply("Recovery Title"));
  Start(OpenAiEnv());
  auto events = StreamUntilTurnEnds(id, 1);
  EXPECT_EQ(Texts(events, "message/user"), std::vector<std::string>{"do not lose me"});
  EXPECT_EQ(Texts(events, "message/assistant"), std::vector<std::string>{"recovered"});
  size_t starts = std::count_if(events.begin(), events.end(), [](const Json& e) { return e["type"] == "turn/start"; });
  EXPECT_EQ(starts, 1u);
  // The model saw the message once in the continued turn's request.
  ASSERT_GE(chat_.requests().size(), 2u);
  const Json messages = chat_.requests()[1].json["messages"];
  size_t seen = std::count_if(messages.begin(), messages.end(),
                              [](const Json& m) { return m.value("content", Json()) == "do not lose me"; });
  EXPECT_EQ(seen, 1u) << messages.dump();
}

TEST_F(AgentE2E, CancelEndsTheRunningTurn) {
  chat_.Enqueue(agent::testing::Hang());
  Start(OpenAiEnv());
  std::string id = CreateSession();
  EXPECT_EQ(Call("POST", "/api/sessions/" + id + "/cancel")["cancelled"], false);
  Send(id, "take your time");
  ASSERT_TRUE(chat_.WaitForRequests(1, std::chrono::seconds(30)));
  Json r = Call("POST", "/api/sessions/" + id + "/cancel");
  EXPECT_EQ(r["status"], "running") << r.dump();
  EXPECT_EQ(r["cancelled"], true);
  auto events = StreamUntilTurnEnds(id, 1);
  EXPECT_EQ(events.back()["data"]["error"]["code"], "cancelled");
  EXPECT_EQ(Call("POST", "/api/sessions/ses_nope/cancel", Json::object(), 404)["error"]["code"], "not_found");
}

TEST_F(AgentE2E, SessionsToolsSeeLiveSessionsAndReadTheirConversation) {
  Start();
  std::string id = CreateSession();
  Send(id, "what is on the list?");
  StreamUntilTurnEnds(id, 1);
  Json status = Call("POST", "/api/tools/session_status", {{"args", {{"session_id", id}}}});
  ASSERT_EQ(status["result"]["sessions"].size(), 1u) << status.dump();
  Json row = status["result"]["sessions"][0];
  EXPECT_EQ(row["session_id"], id);
  EXPECT_EQ(row["title"], "what is on the list?");
  EXPECT_TRUE(row["status"] == "idle" || row["status"] == "running") << row.dump();
  Json read = Call("POST", "/api/tools/session_read", {{"args", {{"session_id", id}}}});
  EXPECT_EQ(read["result"]["total_messages"], 2) << read.dump();
  EXPECT_EQ(Call("POST", "/api/tools/session_status", {{"args", {{"recent_n", 0}}}}, 400)["error"]["code"],
            "invalid_arguments");
}

TEST_F(AgentE2E, SessionCreateAndSendRunTurnsInTheHost) {
  Start();
  Json created = Call("POST", "/api/tools/session_create", {{"args", {{"prompt", "first task"}}}});
  std::string id = created["result"]["session_id"];
  EXPECT_EQ(created["result"]["status"], "queued") << created.dump();
  EXPECT_EQ(Texts(StreamUntilTurnEnds(id, 1), "message/assistant"), std::vector<std::string>{"echo: first task"});
  Json sent = Call("POST", "/api/tools/session_send", {{"args", {{"session_id", id}, {"message", "and more"}}}});
  EXPECT_TRUE(sent["result"]["message_id"].get<std::string>().starts_with("msg_")) << sent.dump();
  auto events = StreamUntilTurnEnds(id, 2);
  EXPECT_EQ(Texts(events, "message/assistant"), (std::vector<std::string>{"echo: first task", "echo: and more"}));
  EXPECT_EQ(Call("POST", "/api/tools/session_send", {{"args", {{"session_id", "ses_nope"}, {"message", "x"}}}}, 404)
                ["error"]["code"],
            "not_found");
  EXPECT_EQ(Call("POST", "/api/tools/session_create", {{"args", {{"prompt", "x"}, {"cwd", "relative"}}}}, 400)
                ["error"]["code"],
            "invalid_arguments");
}

TEST_F(AgentE2E, SessionsCreateAndSendCommandsUseTheSameServicesAsTheTools) {
  Start();
  std::string caller = CreateSession();
  Json created = Call("POST", "/api/commands",
                      {{"text", "/sessions create \"from the command\" --cwd /tmp"}, {"session_id", caller}});
  Json data = created["result"]["data"];
  EXPECT_EQ(data["status"], "queued") << created.dump();
  EXPECT_EQ(data["cwd"], "/tmp");
  EXPECT_EQ(Json::parse(created["result"]["text"].get<std::string>()), data) << "the text is the result as JSON";
  std::string id = data["session_id"];
  EXPECT_EQ(Texts(StreamUntilTurnEnds(id, 1), "message/assistant"), std::vector<std::string>{"echo: from the command"});
  Json sent = Call("POST", "/api/commands", {{"text", "/sessions send " + id + " 'and then' --mode followup"}});
  EXPECT_TRUE(sent["result"]["data"]["message_id"].get<std::string>().starts_with("msg_")) << sent.dump();
  EXPECT_EQ(Texts(StreamUntilTurnEnds(id, 2), "message/assistant"),
            (std::vector<std::string>{"echo: from the command", "echo: and then"}));
  EXPECT_EQ(Call("POST", "/api/commands", {{"text", "/sessions create {\"prompt\": \"x\", \"workspace_id\": \"w\"}"}}, 400)
                ["error"]["code"],
            "invalid_arguments");
}

TEST_F(AgentE2E, ALoopDeliversIntoASessionOfTheRunningHost) {
  Start();
  std::string id = CreateSession();
  Json created = Call("POST", "/api/tools/loop_create",
                      {{"args", {{"prompt", "ping"}, {"schedule", {{"kind", "after"}, {"after_seconds", 1}}}}},
                       {"session_id", id}});
  std::string loop_id = created["result"]["loop_id"];
  EXPECT_EQ(created["result"]["state"], "scheduled") << created.dump();
  auto events = StreamUntilTurnEnds(id, 1);
  EXPECT_EQ(Texts(events, "message/user"),
            std::vector<std::string>{"<loop>\n  <loop_id>" + loop_id + "</loop_id>\n  <prompt>ping</prompt>\n</loop>"});
  Json all = Call("POST", "/api/tools/loop_list", {{"args", {{"session_id", "global"}}}});
  EXPECT_EQ(all["result"], Json::array()) << "a delivered after loop leaves the lists";
  // Its record can still be deleted, once.
  EXPECT_EQ(Call("POST", "/api/tools/loop_delete", {{"args", {{"loop_id", loop_id}}}})["result"]["deleted"], true);
  EXPECT_EQ(Call("POST", "/api/tools/loop_delete", {{"args", {{"loop_id", loop_id}}}}, 404)["error"]["code"],
            "unknown_loop");
}

}  // namespace
}  // namespace dsh::app
