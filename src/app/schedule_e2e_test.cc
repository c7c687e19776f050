// Session-local reminders on the real binary and the real clock (issue 17's
// restart lane): `dsh web --patch examples/web-schedule/cordis.yml`, a 2 s
// reminder, a host that is down when it comes due, a cold session that is
// read but not woken, a message that wakes it, and a fork that never
// inherits the reminder.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "app/testing/web_host_test.h"

namespace dsh::app {
namespace {

using namespace std::chrono_literals;

std::string SourceDir() {
  const char* dir = std::getenv("DSH_SOURCE_DIR");  // set by CTest
  return dir ? dir : DSH_SOURCE_DIR_FALLBACK;
}

class ScheduleE2E : public ::testing::Test {
 protected:
  void Start(bool with_schedule = true) {
    std::vector<std::string> args = {"web", "--home", dir_.File("home"), "--port", "0"};
    if (with_schedule) args.insert(args.end(), {"--patch", SourceDir() + "/examples/web-schedule/cordis.yml"});
    web_.reset();
    web_ = std::make_unique<dsh::testing::DshProcess>(DSH_BINARY, args, dir_.File("web" + std::to_string(++runs_) + ".log"),
                                                      std::map<std::string, std::string>{{"DSH_TOKEN", "t0ken"}});
    url_ = web_->WaitListening();
    ASSERT_FALSE(url_.empty()) << web_->Stderr();
  }
  void Stop() {
    web_->Signal(SIGTERM);
    ASSERT_EQ(web_->Wait(), 0) << web_->Stderr();
  }
  // The response status and body of a request with the token.
  std::pair<int, Json> Api(const std::string& method, const std::string& path, const Json& body = Json()) {
    auto r = server::HttpRequestSync(method, url_ + path, body.is_null() ? "" : body.dump(),
                                     {{"Authorization", "Bearer t0ken"}, {"Content-Type", "application/json"}});
    EXPECT_TRUE(r.ok()) << path << ": " << r.status().ToString();
    if (!r.ok()) return {0, Json()};
    return {r->status, Json::parse(r->body, nullptr, false)};
  }
  Json Ok(const std::string& method, const std::string& path, const Json& body = Json()) {
    auto [status, json] = Api(method, path, body);
    EXPECT_EQ(status / 100, 2) << path << ": " << json.dump();
    return json;
  }
  Json Tool(const std::string& name, const std::string& session, const Json& args) {
    return Ok("POST", "/api/tools/" + name, {{"session_id", session}, {"args", args}})["result"];
  }
  // [SCHEDULE REMINDER] user messages and dispatch events in a session's log.
  std::pair<int, int> Delivered(const std::string& session) {
    int reminders = 0, dispatches = 0;
    Json log = Ok("GET", "/api/sessions/" + session + "/events?limit=1000");
    for (const Json& e : log["events"]) {
      if (e["type"] == "message/user" && e["data"].value("text", "").rfind("[SCHEDULE REMINDER]", 0) == 0) ++reminders;
      if (e["type"] == "schedule/change" && e["data"].value("op", "") == "dispatch") ++dispatches;
    }
    return {reminders, dispatches};
  }

  dsh::testing::TempDir dir_;
  std::unique_ptr<dsh::testing::DshProcess> web_;
  std::string url_;
  int runs_ = 0;
};

TEST_F(ScheduleE2E, WithoutTheOverlayTheScheduleToolsDoNotExist) {
  Start(/*with_schedule=*/false);
  auto [status, body] = Api("POST", "/api/tools/schedule_create", {{"args", {{"prompt", "x"}, {"after_seconds", 2}}}});
  EXPECT_EQ(status, 404);
  EXPECT_EQ(body["error"]["code"], "unknown_tool") << body.dump();
}

TEST_F(ScheduleE2E, AReminderDueWhileTheHostIsDownFiresOnceWhenTheSessionIsWokenAndNeverInAFork) {
  Start();
  std::string session = Ok("POST", "/api/sessions", {{"client_time_zone", "UTC"}})["session"]["id"];
  ASSERT_FALSE(session.empty());
  Json made = Tool("schedule_create", session, {{"prompt", "check the oven"}, {"after_seconds", 2}});
  EXPECT_EQ(made["id"], "schedule-1") << made.dump();
  EXPECT_EQ(made["delivery_mode"], "session-local");
  std::string fork = Ok("POST", "/api/sessions/" + session + "/fork", Json::object())["session"]["id"];
  ASSERT_FALSE(fork.empty());
  Stop();

  std::this_thread::sleep_for(3s);  // past the target while no host runs
  Start();
  Json listed = Tool("schedule_list", session, Json::object())["schedules"];
  ASSERT_EQ(listed.size(), 1u) << listed.dump();
  EXPECT_EQ(listed[0]["state"], "overdue");
  EXPECT_TRUE(Tool("schedule_list", fork, Json::object())["schedules"].empty()) << "a fork inherits no reminder";
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(Delivered(session), std::make_pair(0, 0)) << "reading a cold session does not wake it";

  Ok("POST", "/api/sessions/" + session + "/messages", {{"message", "I am back"}});
  Ok("POST", "/api/sessions/" + fork + "/messages", {{"message", "and the fork too"}});
  auto deadline = std::chrono::steady_clock::now() + 15s;
  while (Delivered(session).first == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(50ms);
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(Delivered(session), std::make_pair(1, 1)) << "the overdue reminder, once, when the session is live again";
  EXPECT_EQ(Delivered(fork), std::make_pair(0, 0)) << "the fork never delivers its parent's reminder";
  EXPECT_TRUE(Tool("schedule_list", session, Json::object())["schedules"].empty());
  Stop();

  Start();
  Ok("POST", "/api/sessions/" + session + "/messages", {{"message", "again"}});
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(Delivered(session), std::make_pair(1, 1)) << "another restart delivers nothing more";
  Stop();
}

}  // namespace
}  // namespace dsh::app
