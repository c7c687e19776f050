// End-to-end test of GET /metrics (docs/DEPLOY.md, "Metrics") on the real
// `dsh web` binary: the token route and the --metrics-listen address, read
// by a real Prometheus parser (Debian's python3-prometheus-client), after a
// turn and a loop occurrence moved the counters.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <thread>

#include "app/testing/dsh_process.h"
#include "base/json.h"
#include "base/testing/temp_dir.h"
#include "server/http_client.h"
#include "server/testing/ws_client.h"

namespace dsh::app {
namespace {

using namespace std::chrono_literals;
using dsh::testing::DshProcess;
using dsh::testing::WsClient;

// Debian's interpreter: python3-prometheus-client is installed for it
// (scripts/lib.sh), not for a python3 earlier on PATH (pyenv and the like).
constexpr const char* kPython = "/usr/bin/python3";

// Prints {family: {"type", "samples": [[name, labels, value], ...]}} for the
// exposition in argv[1], as prometheus_client's text parser reads it.
constexpr const char* kParser = R"(import json, math, sys
from prometheus_client.parser import text_string_to_metric_families
out = {}
for family in text_string_to_metric_families(open(sys.argv[1]).read()):
    out[family.name] = {
        "type": family.type,
        "help": family.documentation,
        "samples": [[s.name, s.labels, s.value if math.isfinite(s.value) else str(s.value)] for s in family.samples],
    }
print(json.dumps(out))
)";

class MetricsE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    web_ = std::make_unique<DshProcess>(DSH_BINARY,
                                        std::vector<std::string>{"web", "--home", dir_.File("home"), "--port",
                                                                 "0", "--metrics-listen", "127.0.0.1:0"},
                                        dir_.File("web.log"),
                                        std::map<std::string, std::string>{{"DSH_TOKEN", "t0ken"}});
    std::string line = web_->ReadLine();
    const std::string prefix = "dsh web metrics on ";
    ASSERT_EQ(line.rfind(prefix, 0), 0u) << line << web_->Stderr();
    metrics_url_ = line.substr(prefix.size());
    url_ = web_->WaitListening();
    ASSERT_FALSE(url_.empty()) << web_->Stderr();
    port_ = static_cast<uint16_t>(std::stoi(url_.substr(url_.rfind(':') + 1)));
    std::ofstream(dir_.File("parse.py")) << kParser;
  }

  Json Call(const std::string& method, const std::string& path, const Json& body = Json::object()) {
    auto r =
        server::HttpRequestSync(method, url_ + path, method == "GET" ? "" : body.dump(),
                                {{"Authorization", "Bearer t0ken"}, {"Content-Type", "application/json"}});
    EXPECT_TRUE(r.ok() && r->status / 100 == 2) << path << ": " << (r.ok() ? r->body : r.status().ToString());
    return r.ok() ? Json::parse(r->body, nullptr, false) : Json();
  }

  // The exposition, parsed by prometheus_client; null (and a failure) when
  // the scrape or the parser failed.
  Json Parse(const std::string& text) {
    std::string file = dir_.File("scrape.txt");
    std::ofstream(file) << text;
    std::string command =
        std::string(kPython) + " " + dir_.File("parse.py") + " " + file + " 2>" + dir_.File("py.err");
    FILE* pipe = popen(command.c_str(), "r");
    EXPECT_NE(pipe, nullptr);
    if (pipe == nullptr) return Json();
    std::string out;
    char buf[4096];
    while (size_t n = fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
    int status = pclose(pipe);
    std::ifstream err(dir_.File("py.err"));
    std::string err_text((std::istreambuf_iterator<char>(err)), std::istreambuf_iterator<char>());
    EXPECT_EQ(status, 0) << "prometheus_client could not parse the scrape (is python3-prometheus-client "
                            "installed? scripts/lib.sh installs it):\n"
                         << err_text << "\n"
                         << text;
    Json parsed = Json::parse(out, nullptr, false);
    EXPECT_TRUE(parsed.is_object()) << out;
    return parsed.is_object() ? parsed : Json();
  }

  // GET /metrics with the token.
  Json Scrape() {
    auto r = server::HttpRequestSync("GET", url_ + "/metrics", "", {{"Authorization", "Bearer t0ken"}});
    EXPECT_TRUE(r.ok() && r->status == 200) << (r.ok() ? r->body : r.status().ToString());
    if (!r.ok()) return Json();
    EXPECT_EQ(r->headers["content-type"], "text/plain; version=0.0.4; charset=utf-8");
    return Parse(r->body);
  }

  // The value of sample `name` with exactly `labels` in family `family` (as
  // the parser names it: a counter without `_total`); NaN when absent.
  static double Value(const Json& parsed, const std::string& family, const std::string& name,
                      const Json& labels = Json::object()) {
    if (!parsed.contains(family)) return std::nan("");
    for (const auto& s : parsed[family]["samples"]) {
      if (s[0] == name && s[1] == labels && s[2].is_number()) return s[2].get<double>();
    }
    return std::nan("");
  }

  // Scrapes until `pred` holds or 30 s passed; the last scrape.
  template <typename Pred>
  Json ScrapeUntil(Pred pred) {
    auto deadline = std::chrono::steady_clock::now() + 30s;
    Json parsed = Scrape();
    while (!pred(parsed) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(20ms);
      parsed = Scrape();
    }
    return parsed;
  }

  dsh::testing::TempDir dir_;
  std::unique_ptr<DshProcess> web_;
  std::string url_;
  std::string metrics_url_;
  uint16_t port_ = 0;
};

TEST_F(MetricsE2E, NeedsTheTokenExceptOnTheMetricsListener) {
  auto without = server::HttpRequestSync("GET", url_ + "/metrics", "", {});
  ASSERT_TRUE(without.ok()) << without.status().ToString();
  EXPECT_EQ(without->status, 401);
  EXPECT_EQ(Json::parse(without->body)["error"]["code"], "unauthorized");
  auto wrong = server::HttpRequestSync("GET", url_ + "/metrics", "", {{"Authorization", "Bearer nope"}});
  EXPECT_EQ(wrong->status, 401);
  auto post = server::HttpRequestSync("POST", url_ + "/metrics", "", {{"Authorization", "Bearer t0ken"}});
  EXPECT_EQ(post->status, 405);

  EXPECT_EQ(metrics_url_.rfind("http://127.0.0.1:", 0), 0u) << metrics_url_;
  auto open = server::HttpRequestSync("GET", metrics_url_, "", {});
  ASSERT_TRUE(open.ok()) << open.status().ToString();
  EXPECT_EQ(open->status, 200);
  EXPECT_EQ(open->headers["content-type"], "text/plain; version=0.0.4; charset=utf-8");
  Json parsed = Parse(open->body);
  EXPECT_EQ(parsed["dsh_build_info"]["type"], "gauge");
  // That listener serves nothing else.
  std::string base = metrics_url_.substr(0, metrics_url_.size() - std::string("/metrics").size());
  EXPECT_EQ(
      server::HttpRequestSync("GET", base + "/api/host", "", {{"Authorization", "Bearer t0ken"}})->status,
      404);
  EXPECT_EQ(server::HttpRequestSync("GET", base + "/healthz", "", {})->status, 404);
}

TEST_F(MetricsE2E, ATurnALoopAndAWebSocketMoveTheirMetrics) {
  Json before = Scrape();
  ASSERT_TRUE(before.is_object());
  for (const char* family :
       {"dsh_store_commits", "dsh_store_commit_jobs", "dsh_store_commit_seconds", "dsh_turns",
        "dsh_turn_seconds", "dsh_model_calls", "dsh_model_call_seconds", "dsh_model_tokens",
        "dsh_agents_live", "dsh_inbox_pending_messages", "dsh_loops_active", "dsh_loops_due",
        "dsh_loop_occurrences", "dsh_loop_delivery_lateness_seconds", "dsh_websocket_clients",
        "dsh_metrics_refresh_failures", "dsh_build_info"}) {
    EXPECT_TRUE(before.contains(family)) << family;
  }
  EXPECT_EQ(before["dsh_store_commit_seconds"]["type"], "histogram");
  EXPECT_EQ(before["dsh_loop_occurrences"]["type"], "counter");
  EXPECT_EQ(Value(before, "dsh_loop_occurrences", "dsh_loop_occurrences_total", {{"event", "delivered"}}), 0);
  EXPECT_EQ(Value(before, "dsh_websocket_clients", "dsh_websocket_clients", {{"feed", "stream"}}), 0);
  double commits_before =
      Value(before, "dsh_store_commits", "dsh_store_commits_total", {{"result", "committed"}});

  // A turn, watched over the session's stream.
  std::string id = Call("POST", "/api/sessions")["session"]["id"];
  ASSERT_FALSE(id.empty());
  auto ws = WsClient::Connect(port_, "/api/sessions/" + id + "/stream?token=t0ken");
  ASSERT_TRUE(ws.ok()) << ws.status().ToString();
  Call("POST", "/api/sessions/" + id + "/messages", {{"message", "hello"}});
  for (bool ended = false; !ended;) {
    auto msg = (*ws)->ReadJson(30s);
    ASSERT_TRUE(msg.ok()) << msg.status().ToString() << web_->Stderr();
    ended = (*msg)["type"] == "event" && (*msg)["event"]["type"] == "turn/end";
  }
  Json during = Scrape();
  EXPECT_EQ(Value(during, "dsh_websocket_clients", "dsh_websocket_clients", {{"feed", "stream"}}), 1);
  EXPECT_EQ(Value(during, "dsh_turns", "dsh_turns_total", {{"route", "echo/echo"}, {"result", "completed"}}),
            1);
  ASSERT_TRUE((*ws)->Close().ok());

  // A loop that fires once into the session, and one that waits an hour.
  Json once = Call(
      "POST", "/api/tools/loop_create",
      {{"args",
        {{"prompt", "ping"}, {"schedule", {{"kind", "after"}, {"after_seconds", 1}}}, {"session_id", id}}}});
  std::string loop_id = once["result"].value("loop_id", "");
  ASSERT_FALSE(loop_id.empty()) << once.dump();
  Call("POST", "/api/tools/loop_create",
       {{"args",
         {{"prompt", "later"},
          {"schedule", {{"kind", "every"}, {"every_seconds", 3600}}},
          {"session_id", id}}}});

  // Everything settles: the occurrence delivered, its turn ended, the
  // stream's socket closed on the server's side. The gauges read from the
  // store come from a read that began before the counters were rendered, so
  // one scrape may show the turn counted and its message still pending:
  // they are waited for too.
  Json after = ScrapeUntil([](const Json& m) {
    return Value(m, "dsh_loop_occurrences", "dsh_loop_occurrences_total", {{"event", "delivered"}}) == 1 &&
           Value(m, "dsh_turns", "dsh_turns_total", {{"route", "echo/echo"}, {"result", "completed"}}) == 2 &&
           Value(m, "dsh_websocket_clients", "dsh_websocket_clients", {{"feed", "stream"}}) == 0 &&
           Value(m, "dsh_inbox_pending_messages", "dsh_inbox_pending_messages") == 0 &&
           Value(m, "dsh_agents_live", "dsh_agents_live", {{"status", "running"}}) == 0 &&
           Value(m, "dsh_loops_active", "dsh_loops_active") == 1;
  });
  const Json echo = {{"route", "echo/echo"}};
  EXPECT_EQ(Value(after, "dsh_turns", "dsh_turns_total", {{"route", "echo/echo"}, {"result", "completed"}}),
            2);
  EXPECT_TRUE(std::isnan(
      Value(after, "dsh_turns", "dsh_turns_total", {{"route", "echo/echo"}, {"result", "error"}})));
  EXPECT_EQ(Value(after, "dsh_turn_seconds", "dsh_turn_seconds_count", echo), 2);
  EXPECT_EQ(
      Value(after, "dsh_model_calls", "dsh_model_calls_total", {{"route", "echo/echo"}, {"result", "ok"}}),
      2);
  EXPECT_EQ(Value(after, "dsh_model_call_seconds", "dsh_model_call_seconds_count", echo), 2);
  EXPECT_EQ(Value(after, "dsh_model_call_seconds", "dsh_model_call_seconds_bucket",
                  {{"route", "echo/echo"}, {"le", "+Inf"}}),
            2);
  EXPECT_TRUE(after["dsh_model_tokens"]["samples"].empty()) << "echo reports no usage";
  EXPECT_EQ(Value(after, "dsh_loop_occurrences", "dsh_loop_occurrences_total", {{"event", "claimed"}}), 1);
  EXPECT_EQ(Value(after, "dsh_loop_occurrences", "dsh_loop_occurrences_total", {{"event", "delivered"}}), 1);
  EXPECT_EQ(Value(after, "dsh_loop_occurrences", "dsh_loop_occurrences_total", {{"event", "failed"}}), 0);
  EXPECT_EQ(Value(after, "dsh_loop_occurrences", "dsh_loop_occurrences_total", {{"event", "skipped"}}), 0);
  EXPECT_EQ(Value(after, "dsh_loop_delivery_lateness_seconds", "dsh_loop_delivery_lateness_seconds_count"),
            1);
  EXPECT_LT(Value(after, "dsh_loop_delivery_lateness_seconds", "dsh_loop_delivery_lateness_seconds_sum"), 10);
  EXPECT_EQ(Value(after, "dsh_loops_active", "dsh_loops_active"), 1)
      << "the `after` loop completed; the hourly one waits";
  EXPECT_EQ(Value(after, "dsh_loops_due", "dsh_loops_due"), 0);
  EXPECT_EQ(Value(after, "dsh_inbox_pending_messages", "dsh_inbox_pending_messages"), 0);
  EXPECT_GE(Value(after, "dsh_agents_live", "dsh_agents_live", {{"status", "idle"}}), 1);
  EXPECT_EQ(Value(after, "dsh_agents_live", "dsh_agents_live", {{"status", "running"}}), 0);
  EXPECT_GT(Value(after, "dsh_store_commits", "dsh_store_commits_total", {{"result", "committed"}}),
            commits_before);
  EXPECT_EQ(Value(after, "dsh_store_commits", "dsh_store_commits_total", {{"result", "failed"}}), 0);
  EXPECT_EQ(Value(after, "dsh_store_commit_jobs", "dsh_store_commit_jobs_count"),
            Value(after, "dsh_store_commits", "dsh_store_commits_total", {{"result", "committed"}}));
  EXPECT_EQ(Value(after, "dsh_metrics_refresh_failures", "dsh_metrics_refresh_failures_total"), 0);
  EXPECT_EQ(Value(after, "dsh_build_info", "dsh_build_info", {{"version", "0.1.0"}}), 1);

  // The --metrics-listen address answers the same, without a token.
  auto open = server::HttpRequestSync("GET", metrics_url_, "", {});
  ASSERT_TRUE(open.ok() && open->status == 200);
  Json listener = Parse(open->body);
  EXPECT_EQ(Value(listener, "dsh_loop_occurrences", "dsh_loop_occurrences_total", {{"event", "delivered"}}),
            1);
}

}  // namespace
}  // namespace dsh::app
