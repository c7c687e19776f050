// The schedule plugin's tools and reminder owners over a real store and
// AgentManager (scripted model) on a fake wall clock. Owners re-read the
// clock every 20 ms, so a test steps the clock and waits for the outcome;
// nothing sleeps on a schedule.
#include <gtest/gtest.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <future>
#include <thread>

#include "agent/agent_manager.h"
#include "agent/testing/scripted_model.h"
#include "base/testing/temp_dir.h"
#include "plugins/schedule/schedule_plugin.h"
#include "plugins/schedule/schedule_service.h"
#include "store/sqlite_connection.h"
#include "store/testing/faulty_connection.h"

namespace dsh::plugins::schedule {
namespace {

using agent::testing::ScriptedModel;
using namespace std::chrono_literals;

class ScheduleTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }
  void TearDown() override { Close(); }

  void Open() {
    std::vector<store::Migration> migrations = session::SessionStore::Migrations();
    for (auto& m : agent::AgentManager::Migrations()) migrations.push_back(m);
    store::SqliteOptions sqlite{.path = dir_.File("dsh.db")};
    sqlite.synchronous = store::SqliteOptions::Synchronous::kNormal;
    auto db = store::Database::Open(
        store::testing::MakeFaultyFactory(std::make_unique<store::SqliteConnectionFactory>(sqlite), faults_),
        migrations);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(db).value();
    store_ = std::make_unique<session::SessionStore>(*db_, clock_);
    work_.emplace(ioc_.get_executor());
    for (int i = 0; i < 2; ++i) threads_.emplace_back([this] { ioc_.run(); });
    agent::AgentManagerOptions options;
    options.sweep_interval = 20ms;
    options.generate_titles = false;
    options.idle_eviction = idle_eviction_;
    tools_ = std::make_unique<agent::ToolRegistry>();
    manager_ = std::make_unique<agent::AgentManager>(ioc_, *db_, *store_, router_, *tools_, clock_,
                                                     agent::AgentEnvironment{}, options);
    ScheduleOptions schedule_options;
    schedule_options.max_wait = 20ms;
    schedule_options.metrics = &metrics_;
    service_ = std::make_shared<ScheduleService>(ioc_, *store_, *manager_, clock_, "UTC", schedule_options);
    ASSERT_TRUE(RegisterScheduleTools(*tools_, service_).ok());
    agent::AgentObserver observer;
    observer.live = [s = service_](const session::SessionHeader& h) { s->OnLive(h); };
    observer.stopped = [s = service_](const std::string& id) { s->OnStopped(id); };
    observer.keep_live = [s = service_](const std::string& id) { return s->HasActiveReminders(id); };
    manager_->AddObserver(observer);
    manager_->Start();
  }

  // A host shutting down; the database stays.
  void Close() {
    if (!db_) return;
    service_->Stop();
    while (model_.Release()) {
    }
    manager_->Stop();
    db_->Close();
    work_.reset();
    for (auto& t : threads_) t.join();
    threads_.clear();
    service_.reset();
    manager_.reset();
    tools_.reset();
    store_.reset();
    db_.reset();
    ioc_.restart();
  }
  void Restart() {
    Close();
    Open();
  }

  // A live root session (or a delegated one) in `zone`.
  std::string Live(const std::string& zone = "UTC", int64_t depth = 0) {
    session::NewSession s;
    s.route = {"scripted", "m", std::nullopt};
    s.time_zone = zone;
    s.delegation_depth = depth;
    std::promise<Result<session::SessionHeader>> p;
    manager_->Create(s, [&](Result<session::SessionHeader> r) { p.set_value(std::move(r)); });
    auto h = p.get_future().get();
    EXPECT_TRUE(h.ok()) << h.status().ToString();
    return h.ok() ? h->id : "";
  }

  static agent::ToolContext From(const std::string& session_id, std::optional<std::string> client_zone = std::nullopt) {
    agent::ToolContext ctx;
    ctx.session_id = session_id;
    ctx.client_time_zone = std::move(client_zone);
    return ctx;
  }
  Result<Json> Call(const agent::ToolContext& ctx, const std::string& tool, const Json& args) {
    std::promise<Result<Json>> p;
    tools_->Invoke(tool, ctx, args, [&](Result<Json> r) { p.set_value(std::move(r)); });
    return p.get_future().get();
  }
  Json Ok(const agent::ToolContext& ctx, const std::string& tool, const Json& args) {
    auto r = Call(ctx, tool, args);
    EXPECT_TRUE(r.ok()) << tool << " " << args.dump() << ": " << r.status().ToString();
    return r.ok() ? *r : Json();
  }
  Json Schedules(const std::string& session) { return Ok(From(session), "schedule_list", Json::object())["schedules"]; }

  std::vector<session::Event> Log(const std::string& id) {
    auto r = store_->ReadEvents(id, 0, 100'000);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : std::vector<session::Event>{};
  }
  // The ops of the session's schedule/change events, in order.
  std::vector<std::string> Changes(const std::string& id) {
    std::vector<std::string> out;
    for (const auto& e : Log(id)) {
      if (e.type == kScheduleChange) out.push_back(e.data["op"].get<std::string>());
    }
    return out;
  }
  // The reminder frames that reached the session as user messages.
  std::vector<std::string> Reminders(const std::string& id) {
    std::vector<std::string> out;
    for (const auto& e : Log(id)) {
      if (e.type == "message/user" && e.data.value("text", "").rfind("[SCHEDULE REMINDER]", 0) == 0) {
        out.push_back(e.data["text"]);
      }
    }
    return out;
  }
  // Inbox rows with a reminder key (queued follow-ups, consumed or not).
  int64_t ReminderRows(const std::string& id) {
    auto r = db_->ReadValue<int64_t>([&](store::Tx& tx) -> Result<int64_t> {
      int64_t n = 0;
      DSH_RETURN_IF_ERROR(tx.Query("SELECT COUNT(*) FROM inbox WHERE session_id = ? AND key LIKE 'schedule:%'",
                                   {std::string_view(id)}, [&](const store::Row& row) {
                                     n = row.Int(0);
                                     return Status::Ok();
                                   }));
      return n;
    });
    return r.ok() ? *r : -1;
  }
  // Waits (real time, bounded) until `pred` holds; the owners poll every 20 ms.
  std::string Dump(const std::string& id) {
    std::string out;
    for (const auto& e : Log(id)) out += std::to_string(e.seq) + " " + e.type + " " + e.data.dump() + "\n";
    return out;
  }
  template <typename Pred>
  bool Eventually(Pred pred, std::chrono::milliseconds timeout = 10s) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (pred()) return true;
      std::this_thread::sleep_for(5ms);
    }
    return pred();
  }
  // Every owner looks at the (fake) clock now; waits until that is done.
  void Quiesce() { ASSERT_TRUE(service_->SettleForTesting()); }
  // Starts a turn in `id` whose model reply is held until model_.Release().
  void StartHeldTurn(const std::string& id) {
    size_t requests = model_.requests().size();
    model_.Push(ScriptedModel::Hold(ScriptedModel::Text("long answer")));
    std::promise<Result<agent::Delivered>> p;
    manager_->Deliver(agent::Delivery{id, "a long question", agent::DeliveryMode::kSteer, true, std::nullopt, Json::object()},
                      [&](Result<agent::Delivered> r) { p.set_value(std::move(r)); });
    ASSERT_TRUE(p.get_future().get().ok());
    // The model has the request: the turn has begun (a live status of
    // running can come a moment before the agent takes the turn).
    ASSERT_TRUE(model_.WaitForRequests(requests + 1));
  }
  void WaitIdle(const std::string& id) {
    std::promise<Status> idle;
    manager_->WhenIdle(id, [&](Status st) { idle.set_value(st); });
    ASSERT_TRUE(idle.get_future().get().ok());
  }

  // The fake clock jumps by hours; agents stay live unless evicted by a test.
  std::chrono::milliseconds idle_eviction_ = 24h * 365;
  dsh::testing::TempDir dir_;
  metrics::Registry metrics_;  // outlives every service of the test
  std::shared_ptr<store::testing::Faults> faults_ = std::make_shared<store::testing::Faults>();
  FakeClock clock_;  // 2026-01-01T00:00:00Z
  ScriptedModel model_;
  agent::testing::SingleModelRouter router_{model_};
  std::unique_ptr<agent::ToolRegistry> tools_;
  std::unique_ptr<store::Database> db_;
  std::unique_ptr<session::SessionStore> store_;
  boost::asio::io_context ioc_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
  std::unique_ptr<agent::AgentManager> manager_;
  std::shared_ptr<ScheduleService> service_;
};

TEST_F(ScheduleTest, CreateAnswersTheNewRemindersView) {
  std::string me = Live();
  Json made = Ok(From(me), "schedule_create", {{"prompt", "  stretch  "}, {"after_seconds", 30}});
  EXPECT_EQ(made, (Json{{"id", "schedule-1"},
                        {"kind", "after"},
                        {"prompt", "stretch"},
                        {"after_seconds", 30},
                        {"scheduled_at", "2026-01-01T00:00:30.000Z"},
                        {"state", "scheduled"},
                        {"delivery_mode", "session-local"}}));
  Json at = Ok(From(me), "schedule_create", {{"prompt", "tea"}, {"at", "2026-01-01T08:00:01+08:00"}});
  EXPECT_EQ(at, (Json{{"id", "schedule-2"},
                      {"kind", "at"},
                      {"prompt", "tea"},
                      {"scheduled_at", "2026-01-01T00:00:01.000Z"},
                      {"state", "scheduled"},
                      {"delivery_mode", "session-local"}}));
}

TEST_F(ScheduleTest, ToolsListDeleteAndAnswerAnUnknownIdWithoutAnError) {
  std::string me = Live();
  std::string other = Live();
  Ok(From(me), "schedule_create", {{"prompt", "stretch"}, {"after_seconds", 30}});
  Ok(From(me), "schedule_create", {{"prompt", "tea"}, {"at", "2026-01-01T09:00:00+08:00"}});
  Json list = Schedules(me);
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0]["id"], "schedule-1");
  EXPECT_EQ(list[1]["id"], "schedule-2");
  EXPECT_EQ(list[1]["scheduled_at"], "2026-01-01T01:00:00.000Z");
  EXPECT_TRUE(Schedules(other).empty()) << "reminders belong to one session";

  EXPECT_EQ(Ok(From(me), "schedule_delete", {{"id", "schedule-1"}}), (Json{{"id", "schedule-1"}, {"deleted", true}}));
  EXPECT_EQ(Ok(From(me), "schedule_delete", {{"id", "schedule-1"}}),
            (Json{{"id", "schedule-1"}, {"deleted", false}, {"code", "schedule_not_found"}}));
  ASSERT_EQ(Schedules(me).size(), 1u);
  Json third = Ok(From(me), "schedule_create", {{"prompt", "walk"}, {"after_seconds", 60}});
  EXPECT_EQ(third["id"], "schedule-3") << "ids are never reused in a session";
  EXPECT_EQ(Changes(me), (std::vector<std::string>{"create", "create", "delete", "create"}));
  EXPECT_TRUE(Changes(other).empty());

  Restart();
  Json after = Schedules(me);
  ASSERT_EQ(after.size(), 2u) << "the session's log is the record";
  EXPECT_EQ(after[0]["id"], "schedule-2");
  EXPECT_EQ(after[1]["id"], "schedule-3");
}

TEST_F(ScheduleTest, BadInputGetsAStableCodeNamingTheFieldAndAppendsNothing) {
  std::string me = Live("Asia/Shanghai");
  struct Case {
    agent::ToolContext ctx;
    Json args;
    std::string code, mention;
  };
  std::vector<Case> cases = {
      {From(me), {{"prompt", "x"}, {"every_seconds", 60}}, "invalid_arguments", "every_seconds"},
      {From(me), {{"prompt", "x"}, {"cron", "0 9 * * *"}}, "invalid_arguments", "cron"},
      {From(me), {{"prompt", " "}, {"after_seconds", 5}}, "invalid_arguments", "prompt"},
      {From(me), {{"prompt", "x"}, {"after_seconds", 0}}, "invalid_arguments", "after_seconds"},
      {From(me), {{"prompt", "x"}}, "invalid_arguments", "after_seconds"},
      {From(me), {{"prompt", "x"}, {"at", "2025-12-31T00:00:00Z"}}, "not_future", "at"},
      {From(me, "America/New_York"),
       {{"prompt", "x"}, {"at", {{"date", "2026-01-02"}, {"time", "09:00"}}}},
       "timezone_confirmation_required",
       "time_zone"},
      {From(me), {{"prompt", "x"}, {"at", {{"date", "2026-03-08"}, {"time", "02:30"}, {"time_zone", "America/New_York"}}}},
       "nonexistent_local_time",
       "02:30"},
      {agent::ToolContext{}, {{"prompt", "x"}, {"after_seconds", 5}}, "invalid_arguments", "session"},
  };
  for (const Case& c : cases) {
    auto r = Call(c.ctx, "schedule_create", c.args);
    ASSERT_FALSE(r.ok()) << c.args.dump();
    EXPECT_EQ(r.status().code(), c.code) << c.args.dump() << ": " << r.status().ToString();
    EXPECT_NE(r.status().message().find(c.mention), std::string::npos) << r.status().message();
  }
  EXPECT_EQ(Call(From(me), "schedule_list", {{"session", "x"}}).status().code(), "invalid_arguments");
  EXPECT_EQ(Call(From(me), "schedule_delete", Json::object()).status().code(), "invalid_arguments");
  EXPECT_EQ(Call(From("ses_missing"), "schedule_list", Json::object()).status().code(), "not_found");
  EXPECT_TRUE(Changes(me).empty()) << "bad input appends nothing";
}

TEST_F(ScheduleTest, ALocalAtWithoutZoneNeedsThePersonsZoneToBeTheSessions) {
  std::string shanghai = Live("Asia/Shanghai");
  Json local = {{"date", "2026-01-02"}, {"time", "09:00"}};
  // The browser in the session's own zone: taken as the session's local time.
  Json made = Ok(From(shanghai, "Asia/Shanghai"), "schedule_create", {{"prompt", "standup"}, {"at", local}});
  EXPECT_EQ(made["scheduled_at"], "2026-01-02T01:00:00.000Z");
  // Another zone, or no browser zone while the session's is not the host's
  // (UTC here): the model must ask and say which zone.
  for (const auto& ctx : {From(shanghai, "Europe/London"), From(shanghai)}) {
    auto r = Call(ctx, "schedule_create", {{"prompt", "standup"}, {"at", local}});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), "timezone_confirmation_required") << r.status().ToString();
  }
  Json explicit_zone = local;
  explicit_zone["time_zone"] = "Europe/London";
  EXPECT_EQ(Ok(From(shanghai, "Europe/London"), "schedule_create", {{"prompt", "standup"}, {"at", explicit_zone}})
                ["scheduled_at"],
            "2026-01-02T09:00:00.000Z");
  // A session in the host's zone and a call without a browser zone (the CLI).
  std::string utc = Live("UTC");
  EXPECT_EQ(Ok(From(utc), "schedule_create", {{"prompt", "standup"}, {"at", local}})["scheduled_at"],
            "2026-01-02T09:00:00.000Z");
}

TEST_F(ScheduleTest, TheToolsBelongToRootSessionsOnly) {
  std::string child = Live("UTC", 1);
  for (const char* tool : {"schedule_create", "schedule_list", "schedule_delete"}) {
    Json args = std::string(tool) == "schedule_create" ? Json{{"prompt", "x"}, {"after_seconds", 5}}
                : std::string(tool) == "schedule_delete" ? Json{{"id", "schedule-1"}}
                                                          : Json::object();
    auto r = Call(From(child), tool, args);
    ASSERT_FALSE(r.ok()) << tool;
    EXPECT_EQ(r.status().code(), "unknown_tool") << tool;
  }
  EXPECT_TRUE(Changes(child).empty());
}

TEST_F(ScheduleTest, ADueReminderQueuesOneFollowupTurnAndRecordsItsDispatch) {
  std::string me = Live();
  Ok(From(me), "schedule_create", {{"prompt", "say \"hi\""}, {"after_seconds", 10}});
  clock_.Advance(9s);
  Quiesce();
  EXPECT_TRUE(Reminders(me).empty()) << "nothing early";
  EXPECT_EQ(Schedules(me)[0]["state"], "scheduled");
  clock_.Advance(1s);
  ASSERT_TRUE(Eventually([&] { return Changes(me).size() == 2; })) << "dispatched";
  ASSERT_TRUE(Eventually([&] { return Reminders(me).size() == 1; }));
  EXPECT_EQ(Reminders(me)[0],
            "[SCHEDULE REMINDER] schedule_id: \"schedule-1\" occurrence_at: 2026-01-01T00:00:10.000Z prompt: "
            "\"say \\\"hi\\\"\"");
  EXPECT_EQ(Changes(me), (std::vector<std::string>{"create", "dispatch"}));
  EXPECT_TRUE(Schedules(me).empty()) << "a dispatched reminder is done";
  WaitIdle(me);
  // The reminder ran as an ordinary turn of the session (echoed by the model).
  bool answered = false;
  for (const auto& e : Log(me)) {
    if (e.type == "message/user" && e.data.contains("meta")) {
      EXPECT_EQ(e.data["meta"]["origin"], "schedule");
      EXPECT_EQ(e.data["meta"]["schedule_id"], "schedule-1");
      EXPECT_EQ(e.data["mode"], "followup");
    }
    answered = answered || e.type == "message/assistant";
  }
  EXPECT_TRUE(answered);
  clock_.Advance(1h);
  Quiesce();
  EXPECT_EQ(Reminders(me).size(), 1u) << "once";
  EXPECT_EQ(ReminderRows(me), 1);
}

TEST_F(ScheduleTest, CountsActiveAndDispatchedRemindersForItsMetrics) {
  std::string me = Live();
  Ok(From(me), "schedule_create", {{"prompt", "soon"}, {"after_seconds", 10}});
  Ok(From(me), "schedule_create", {{"prompt", "later"}, {"after_seconds", 3600}});
  Quiesce();
  EXPECT_EQ(service_->ActiveReminders(), 2);
  EXPECT_NE(metrics_.Render().find("dsh_reminders_dispatched_total 0\n"), std::string::npos) << metrics_.Render();
  clock_.Advance(10s);
  ASSERT_TRUE(Eventually([&] { return Changes(me).size() == 3; })) << "dispatched";
  Quiesce();
  EXPECT_EQ(service_->ActiveReminders(), 1);
  EXPECT_NE(metrics_.Render().find("dsh_reminders_dispatched_total 1\n"), std::string::npos) << metrics_.Render();
  // A session that stops here takes its reminders out of the count.
  WaitIdle(me);
  manager_->EvictIdleForTesting();
  ASSERT_TRUE(Eventually([&] { return service_->ActiveReminders() == 0; }));
}

TEST_F(ScheduleTest, TheWallClockSteppedBackFiresNothingEarlyAndSteppedForwardFiresOnce) {
  std::string me = Live();
  Ok(From(me), "schedule_create", {{"prompt", "a"}, {"after_seconds", 60}});
  Ok(From(me), "schedule_create", {{"prompt", "b"}, {"after_seconds", 120}});
  clock_.Advance(-1h);
  Quiesce();
  clock_.Advance(1h + 59s);
  Quiesce();
  EXPECT_TRUE(Reminders(me).empty()) << "a step back fires nothing early";
  clock_.Advance(1h);  // both now overdue
  ASSERT_TRUE(Eventually([&] { return Reminders(me).size() == 2; })) << Dump(me);
  Quiesce();
  EXPECT_EQ(Reminders(me).size(), 2u) << "each overdue reminder fires once";
  EXPECT_EQ(Changes(me), (std::vector<std::string>{"create", "create", "dispatch", "dispatch"}));
}

TEST_F(ScheduleTest, ABusyAgentGetsTheReminderWhenItsTurnEnds) {
  std::string me = Live();
  Ok(From(me), "schedule_create", {{"prompt", "later"}, {"after_seconds", 5}});
  StartHeldTurn(me);
  clock_.Advance(10s);
  Quiesce();
  EXPECT_EQ(Changes(me), std::vector<std::string>{"create"}) << "no dispatch while a turn runs";
  ASSERT_TRUE(model_.Release());
  ASSERT_TRUE(Eventually([&] { return Reminders(me).size() == 1; }));
  EXPECT_EQ(Changes(me), (std::vector<std::string>{"create", "dispatch"}));
}

TEST_F(ScheduleTest, ADeleteBeforeTheAgentIsIdleWinsOverTheDueDispatch) {
  std::string me = Live();
  Ok(From(me), "schedule_create", {{"prompt", "later"}, {"after_seconds", 5}});
  StartHeldTurn(me);
  clock_.Advance(10s);
  Quiesce();
  EXPECT_EQ(Ok(From(me), "schedule_delete", {{"id", "schedule-1"}})["deleted"], true);
  ASSERT_TRUE(model_.Release());
  WaitIdle(me);
  Quiesce();
  EXPECT_TRUE(Reminders(me).empty());
  EXPECT_EQ(Changes(me), (std::vector<std::string>{"create", "delete"}));
}

TEST_F(ScheduleTest, AColdSessionDoesNothingAndFiresAnOverdueReminderOnceWhenLiveAgain) {
  std::string me = Live();
  Ok(From(me), "schedule_create", {{"prompt", "overdue"}, {"after_seconds", 5}});
  manager_->EvictIdleForTesting();
  ASSERT_TRUE(manager_->WaitUntilNotLive(me, 5s));
  clock_.Advance(1h);
  Quiesce();
  EXPECT_TRUE(Reminders(me).empty()) << "a cold session has no timer";
  EXPECT_EQ(Schedules(me)[0]["state"], "overdue") << "reading it reports, and activates nothing";
  EXPECT_FALSE(manager_->LiveStatus(me).has_value());
  Restart();
  Quiesce();
  EXPECT_TRUE(Reminders(me).empty()) << "no scan at host start";
  std::promise<Status> resumed;
  manager_->Resume(me, [&](Status st) { resumed.set_value(st); });
  ASSERT_TRUE(resumed.get_future().get().ok());
  ASSERT_TRUE(Eventually([&] { return Reminders(me).size() == 1; })) << "live again: the overdue reminder fires";
  Restart();
  std::promise<Status> again;
  manager_->Resume(me, [&](Status st) { again.set_value(st); });
  ASSERT_TRUE(again.get_future().get().ok());
  Quiesce();
  EXPECT_EQ(Reminders(me).size(), 1u) << "and only once";
}

TEST_F(ScheduleTest, ASessionWithAPendingReminderIsNotEvictedForIdlenessAndItFires) {
  Close();
  idle_eviction_ = 10s;
  Open();
  std::string me = Live();
  std::string other = Live();
  Ok(From(me), "schedule_create", {{"prompt", "remind me"}, {"after_seconds", 1200}});
  Quiesce();
  clock_.Advance(11min);  // both idle past agents.idle_eviction
  ASSERT_TRUE(manager_->WaitUntilNotLive(other, 10s)) << "the sweep evicts an idle session without reminders";
  EXPECT_TRUE(manager_->LiveStatus(me).has_value()) << "but keeps the one with a pending reminder";
  clock_.Advance(10min);  // the reminder is due
  ASSERT_TRUE(Eventually([&] { return Reminders(me).size() == 1; })) << Dump(me);
  WaitIdle(me);
  Quiesce();
  clock_.Advance(1min);  // nothing pending any more: evicted like any other
  EXPECT_TRUE(manager_->WaitUntilNotLive(me, 10s));
}

TEST_F(ScheduleTest, AForkNeverInheritsItsParentsReminders) {
  std::string parent = Live();
  Ok(From(parent), "schedule_create", {{"prompt", "parent's"}, {"after_seconds", 5}});
  auto parent_header = store_->Get(parent);
  ASSERT_TRUE(parent_header.ok());
  session::NewSession child;
  child.route = parent_header->route;
  child.time_zone = parent_header->time_zone;
  auto fork = store_->Fork(parent, parent_header->last_seq, child);
  ASSERT_TRUE(fork.ok()) << fork.status().ToString();
  EXPECT_TRUE(Schedules(fork->id).empty());
  Json own = Ok(From(fork->id), "schedule_create", {{"prompt", "fork's"}, {"after_seconds", 10}});
  EXPECT_EQ(own["id"], "schedule-1") << "the fork's own id space";
  std::promise<Status> resumed;
  manager_->Resume(fork->id, [&](Status st) { resumed.set_value(st); });
  ASSERT_TRUE(resumed.get_future().get().ok());
  clock_.Advance(1h);
  ASSERT_TRUE(Eventually([&] { return Reminders(parent).size() == 1 && Reminders(fork->id).size() == 1; }))
      << Dump(parent) << "\n" << Dump(fork->id);
  Quiesce();
  auto fork_reminders = Reminders(fork->id);
  ASSERT_EQ(fork_reminders.size(), 1u);
  EXPECT_NE(fork_reminders[0].find("fork's"), std::string::npos) << fork_reminders[0];
}

TEST_F(ScheduleTest, ARetryAfterTheFollowupWasQueuedDoesNotQueueItTwice) {
  // The crash window: the follow-up is durable, the dispatch is not.
  std::string me = Live();
  Ok(From(me), "schedule_create", {{"prompt", "once"}, {"after_seconds", 5}});
  manager_->EvictIdleForTesting();
  ASSERT_TRUE(manager_->WaitUntilNotLive(me, 5s));
  Record record{"schedule-1", Kind::kAfter, "once", 5, ToUnixMillis(clock_.Now()) + 5000};
  std::promise<Result<agent::Delivered>> p;
  manager_->Deliver(agent::Delivery{me, ReminderFrame(record), agent::DeliveryMode::kFollowup, true,
                                    ReminderKey(me, "schedule-1"), Json::object()},
                    [&](Result<agent::Delivered> r) { p.set_value(std::move(r)); });
  ASSERT_TRUE(p.get_future().get().ok());
  clock_.Advance(10s);
  std::promise<Status> resumed;
  manager_->Resume(me, [&](Status st) { resumed.set_value(st); });
  ASSERT_TRUE(resumed.get_future().get().ok());
  ASSERT_TRUE(Eventually([&] { return Changes(me).size() == 2; })) << Dump(me);
  ASSERT_TRUE(Eventually([&] { return Reminders(me).size() == 1; })) << Dump(me);
  Quiesce();
  EXPECT_EQ(ReminderRows(me), 1) << "the inbox key found the follow-up queued before the crash";
  EXPECT_EQ(Reminders(me).size(), 1u);
}

TEST_F(ScheduleTest, AFailedTurnAfterTheDispatchDoesNotRetractIt) {
  std::string me = Live();
  Ok(From(me), "schedule_create", {{"prompt", "x"}, {"after_seconds", 5}});
  model_.Push(ScriptedModel::Error("model_unavailable", "the provider is down"));
  clock_.Advance(5s);
  ASSERT_TRUE(Eventually([&] {
    auto log = Log(me);
    return !log.empty() && log.back().type == "turn/end";
  }));
  EXPECT_EQ(Log(me).back().data["status"], "error");
  EXPECT_EQ(Changes(me), (std::vector<std::string>{"create", "dispatch"}));
  Quiesce();
  EXPECT_EQ(Reminders(me).size(), 1u) << "the reminder is not queued again";
  EXPECT_TRUE(Schedules(me).empty());
}

TEST_F(ScheduleTest, ACreateWhoseCommitFailsIsReportedAndLeavesNoReminder) {
  std::string me = Live();
  // Every commit fails while the call runs (background writers such as WAL
  // checkpoints would otherwise take a single injected fault first).
  faults_->fail_commits = 1'000'000;
  auto r = Call(From(me), "schedule_create", {{"prompt", "x"}, {"after_seconds", 5}});
  faults_->fail_commits = 0;
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), "commit_failed") << r.status().ToString();
  EXPECT_EQ(r.status().message().rfind("schedule_create: ", 0), 0u) << r.status().message();
  EXPECT_TRUE(Schedules(me).empty());
  EXPECT_EQ(Ok(From(me), "schedule_create", {{"prompt", "x"}, {"after_seconds", 5}})["id"], "schedule-1");
}

TEST_F(ScheduleTest, ACorruptLogIsAClearErrorNamingSessionAndSeq) {
  std::string me = Live();
  auto bad = store_->Append(me, {{std::string(kScheduleChange), {{"version", 2}, {"op", "create"}}}});
  ASSERT_TRUE(bad.ok());
  int64_t seq = bad->front().seq;
  auto r = Call(From(me), "schedule_list", Json::object());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), "corrupt_schedule_log");
  EXPECT_NE(r.status().message().find("session " + me + ": event " + std::to_string(seq)), std::string::npos)
      << r.status().message();
  auto create = Call(From(me), "schedule_create", {{"prompt", "x"}, {"after_seconds", 5}});
  EXPECT_EQ(create.status().code(), "corrupt_schedule_log") << "nothing is decided from a log it cannot read";
}

}  // namespace
}  // namespace dsh::plugins::schedule
