// End-to-end test of `dsh loop …` against a real `dsh web` child: the CLI →
// POST /api/tools/loop_* and GET /api/loops… → the loop plugin's registry.
#include <gtest/gtest.h>

#include <signal.h>

#include <thread>

#include "app/testing/web_host_test.h"

namespace dsh::app {
namespace {

class LoopE2E : public dsh::testing::WebHostTest {
 protected:
  dsh::testing::DshRun Loop(std::vector<std::string> args) { return Cli("loop", std::move(args)); }
};

TEST_F(LoopE2E, CreateListRunsAndDeleteALoopThroughTheCli) {
  auto created = Loop({"create", "check the deploy", "--cron", "0 9 * * *", "--tz", "Asia/Shanghai", "--session", "self"});
  ASSERT_EQ(created.code, 0) << created.err;
  Json view = Json::parse(created.out, nullptr, false);
  ASSERT_TRUE(view.is_object()) << created.out;
  std::string id = view.value("loop_id", "");
  ASSERT_FALSE(id.empty()) << created.out;
  EXPECT_EQ(view["schedule"], (Json{{"kind", "cron"}, {"expr", "0 9 * * *"}, {"tz", "Asia/Shanghai"}}));
  EXPECT_EQ(view["session_id"], "self");
  EXPECT_EQ(view["state"], "scheduled");

  auto listed = Loop({"list"});
  ASSERT_EQ(listed.code, 0) << listed.err;
  EXPECT_EQ(std::count(listed.out.begin(), listed.out.end(), '\n'), 1) << listed.out;
  EXPECT_EQ(listed.out.rfind(id + "  scheduled  cron 0 9 * * * (Asia/Shanghai)  self  ", 0), 0u) << listed.out;
  EXPECT_NE(listed.out.find("check the deploy"), std::string::npos) << listed.out;

  // The automation panel's routes see the same loop.
  Json panel = ApiGet("/api/loops?session_id=global");
  ASSERT_EQ(panel["loops"].size(), 1u) << panel.dump();
  EXPECT_EQ(panel["loops"][0]["loop_id"], id);
  auto runs = Loop({"runs", id, "--limit", "5"});
  EXPECT_EQ(runs.code, 0) << runs.err;
  EXPECT_EQ(runs.out, "no runs\n");

  auto deleted = Loop({"delete", id});
  EXPECT_EQ(deleted.code, 0) << deleted.err;
  EXPECT_EQ(deleted.out, "deleted " + id + "\n");
  auto empty = Loop({"list"});
  EXPECT_EQ(empty.code, 0) << empty.err;
  EXPECT_EQ(empty.out, "no active loops\n");
  EXPECT_TRUE(ApiGet("/api/loops?session_id=global")["loops"].empty());

  auto again = Loop({"delete", id});
  EXPECT_EQ(again.code, 1);
  EXPECT_EQ(again.err.rfind("error: unknown_loop: ", 0), 0u) << again.err;
}

TEST_F(LoopE2E, InvalidArgumentsFromTheHostExitWithStatus2) {
  auto bad = Loop({"create", "x", "--every", "0", "--session", "self"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_EQ(bad.err.rfind("error: invalid_arguments: ", 0), 0u) << bad.err;
  EXPECT_NE(bad.err.find("every_seconds"), std::string::npos) << bad.err;
  auto no_caller = Loop({"create", "x", "--every", "60"});
  EXPECT_EQ(no_caller.code, 2) << "an omitted target needs a calling session (--as)";
  EXPECT_EQ(no_caller.err.rfind("error: invalid_arguments: ", 0), 0u) << no_caller.err;
}

TEST_F(LoopE2E, ACronRuleThatNeverFiresIsTheCallersErrorNotTheServers) {
  auto r = server::HttpRequestSync(
      "POST", url_ + "/api/tools/loop_create",
      Json{{"args", {{"prompt", "x"}, {"schedule", {{"kind", "cron"}, {"expr", "0 0 30 2 *"}}}, {"session_id", "self"}}}}
          .dump(),
      {{"Authorization", "Bearer t0ken"}, {"Content-Type", "application/json"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_EQ(Json::parse(r->body)["error"]["code"], "cron_never_fires") << r->body;
  EXPECT_TRUE(ApiGet("/api/loops?session_id=global")["loops"].empty()) << "nothing was created";
  auto cli = Loop({"create", "x", "--cron", "0 0 30 2 *", "--session", "self"});
  EXPECT_EQ(cli.code, 2) << "an input error: " << cli.err;
}

// The real binary on the real clock: a host that dies right after claiming
// an occurrence (DSH_FAULT makes it SIGKILL itself there) leaves the claim;
// the host started again on the profile sees the claimer is a dead process
// of this machine and delivers at once, not after the 30 s claim expiry.
TEST(LoopCrashE2E, AnOccurrenceClaimedByAKilledHostArrivesRightAfterTheRestart) {
  using namespace std::chrono_literals;
  dsh::testing::TempDir dir;
  std::string home = dir.File("home");
  std::map<std::string, std::string> env = {{"DSH_TOKEN", "t0ken"}};
  auto api = [](const std::string& url, const std::string& method, const std::string& path, const Json& body) {
    auto r = server::HttpRequestSync(method, url + path, body.is_null() ? "" : body.dump(),
                                     {{"Authorization", "Bearer t0ken"}, {"Content-Type", "application/json"}});
    EXPECT_TRUE(r.ok() && r->status / 100 == 2) << path << ": " << (r.ok() ? r->body : r.status().ToString());
    return r.ok() ? Json::parse(r->body, nullptr, false) : Json();
  };

  auto faulty = env;
  faulty["DSH_FAULT"] = "loop_kill_after_claim";
  dsh::testing::DshProcess first(DSH_BINARY, {"web", "--home", home, "--port", "0"}, dir.File("web1.log"), faulty);
  std::string url = first.WaitListening();
  ASSERT_FALSE(url.empty()) << first.Stderr();
  std::string session = api(url, "POST", "/api/sessions", Json::object())["session"].value("id", "");
  ASSERT_FALSE(session.empty());
  Json loop = api(url, "POST", "/api/tools/loop_create",
                  {{"args", {{"prompt", "after the crash"}, {"schedule", {{"kind", "after"}, {"after_seconds", 1}}},
                             {"session_id", session}}}})["result"];
  std::string loop_id = loop.value("loop_id", "");
  ASSERT_FALSE(loop_id.empty()) << loop.dump();
  ASSERT_EQ(first.Wait(15s), 128 + SIGKILL) << "the host should have killed itself after the claim";

  auto restarted = std::chrono::steady_clock::now();
  dsh::testing::DshProcess second(DSH_BINARY, {"web", "--home", home, "--port", "0"}, dir.File("web2.log"), env);
  url = second.WaitListening();
  ASSERT_FALSE(url.empty()) << second.Stderr();
  auto loop_messages = [&] {
    int n = 0;
    Json events = api(url, "GET", "/api/sessions/" + session + "/events?limit=1000", Json())["events"];
    for (const auto& e : events) {
      if (e.value("type", "") == "message/user" && e["data"].value("text", "").find("<loop_id>" + loop_id) != std::string::npos) ++n;
    }
    return n;
  };
  while (loop_messages() == 0 && std::chrono::steady_clock::now() - restarted < 40s) std::this_thread::sleep_for(20ms);
  auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - restarted);
  ASSERT_EQ(loop_messages(), 1) << "not delivered within 40 s of the restart";
  // Waiting out the claim's expiry would take about 29 s; a restarted host
  // that recognises its dead predecessor needs well under a second (the
  // margin is for loaded and sanitizer builds).
  EXPECT_LT(waited, 10s) << "the occurrence waited for the dead host's claim to expire";
  Json runs = api(url, "GET", "/api/loops/" + loop_id + "/runs", Json())["runs"];
  ASSERT_EQ(runs.size(), 1u) << runs.dump();
  EXPECT_EQ(runs[0]["attempts"], 2) << runs.dump();
  EXPECT_EQ(runs[0]["result"], "delivered") << runs.dump();
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(loop_messages(), 1) << "delivered twice";
}

}  // namespace
}  // namespace dsh::app
