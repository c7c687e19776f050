#include "agent/outbox.h"

#include <gtest/gtest.h>

#include "agent/activity_store.h"
#include "agent/agent_manager.h"
#include "agent/testing/deliver.h"
#include "store/testing/test_backend.h"

namespace dsh::agent::outbox {
namespace {

class OutboxTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto db = store::Database::Open(backend_.Factory(), agent::testing::MigrationsWithBareSessions());
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(db).value();
  }

  void Subscribe(std::vector<std::pair<std::string, std::vector<std::string>>> endpoints) {
    auto subs = std::make_shared<Subscriptions>();
    for (auto& [name, events] : endpoints) subs->Add(name, events);
    source_.Set(subs);
  }

  std::vector<Message> All() {
    auto page = db_->ReadValue<MessagePage>([](store::Tx& tx) { return ListMessages(tx, {}, 100, std::nullopt); });
    EXPECT_TRUE(page.ok()) << page.status().ToString();
    std::vector<Message> out = page.ok() ? page->messages : std::vector<Message>{};
    std::reverse(out.begin(), out.end());  // oldest first
    return out;
  }

  Status Write(std::function<Status(store::Tx&)> job) { return db_->WriteSync(std::move(job)); }

  store::testing::TestBackend backend_{GetParam(), /*fast=*/true};
  std::unique_ptr<store::Database> db_;
  SubscriptionSource source_;
};
INSTANTIATE_TEST_SUITE_P(Backends, OutboxTest, store::testing::BackendNames(), store::testing::BackendTestName);

const activity::Source kLoopRun{"loop_run", std::string("loop_1"), int64_t{1000}, std::nullopt};
const activity::Source kReminder{"reminder", std::nullopt, std::nullopt, std::string("rem_1")};

TEST_P(OutboxTest, NothingIsWrittenWithoutSubscriptions) {
  ASSERT_TRUE(Write([&](store::Tx& tx) {
                return agent::testing::Deliver(tx, kLoopRun, "ses_a", "msg_1", std::string("loop:loop_1:1000"), 5,
                                           std::nullopt, &source_);
              }).ok());
  EXPECT_TRUE(All().empty());
}

TEST_P(OutboxTest, ALoopRunWritesOneMessagePerEndpointForEachOfItsFacts) {
  Subscribe({{"ops", {"loop.run.completed", "loop.run.failed"}}, {"all", {"*"}}, {"phone", {"reminder.dispatched"}}});
  const std::string key = "loop:loop_1:1000";
  ASSERT_TRUE(Write([&](store::Tx& tx) {
                return agent::testing::Deliver(tx, kLoopRun, "ses_a", "msg_1", key, 5, activity::Started{7, 6}, &source_);
              }).ok());
  activity::TurnEnd end{"error", std::string("model_unavailable"), std::string("the model did not answer"), 50,
                        int64_t{120}, int64_t{8}, "the model did not answer"};
  ASSERT_TRUE(Write([&](store::Tx& tx) { return activity::TurnEnded(tx, agent::testing::Refs(tx, {"msg_1"}), 0, end, &source_).status(); }).ok());

  std::vector<Message> all = All();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].endpoint, "all");
  EXPECT_EQ(all[0].event, "activity.created");
  EXPECT_EQ(all[0].data["outcome"]["status"], "running");
  EXPECT_EQ(all[0].data["seq"], 7);
  // The turn's end goes to both endpoints that take it, with its outcome.
  for (const Message& m : {all[1], all[2]}) {
    EXPECT_EQ(m.event, "loop.run.failed");
    EXPECT_EQ(m.state, "pending");
    EXPECT_EQ(m.fact_key, key);
    EXPECT_EQ(m.loop_id, "loop_1");
    EXPECT_EQ(m.session_id, "ses_a");
    EXPECT_EQ(m.data["loop_id"], "loop_1");
    EXPECT_EQ(m.data["outcome"]["error"]["code"], "model_unavailable");
    EXPECT_EQ(m.data["summary"], "the model did not answer");
    EXPECT_EQ(m.data["tokens"]["input_tokens"], 120);
    EXPECT_FALSE(m.data.contains("read"));
    EXPECT_TRUE(m.data.contains("activity_id"));
  }
  EXPECT_NE(all[1].id, all[2].id);
  EXPECT_EQ(all[1].id.rfind("msg_", 0), 0u);

  // A second end of the same message (another host's turn took it) is a
  // conflict and writes nothing.
  Status again = Write([&](store::Tx& tx) { return activity::TurnEnded(tx, agent::testing::Refs(tx, {"msg_1"}), 0, end, &source_).status(); });
  EXPECT_EQ(again.code(), codes::kConflict) << again.ToString();
  EXPECT_EQ(All().size(), 3u);

  auto receipts = db_->ReadValue<std::map<std::string, Json>>([&](store::Tx& tx) { return Receipts(tx, {key}); });
  ASSERT_TRUE(receipts.ok());
  ASSERT_EQ((*receipts)[key].size(), 3u);
  EXPECT_EQ((*receipts)[key][1]["state"], "pending");
}

TEST_P(OutboxTest, AFailedDeliveryIsAFailedRunAndItsRetryAnotherFact) {
  Subscribe({{"ops", {"loop.run.failed", "loop.run.completed"}}});
  const std::string key = "loop:loop_1:1000";
  ASSERT_TRUE(Write([&](store::Tx& tx) {
                return activity::DeliveryFailed(tx, kLoopRun, std::string("ses_a"), key, "no such session", 5,
                                                &source_);
              }).ok());
  // A second failed attempt of the occurrence says nothing new.
  ASSERT_TRUE(Write([&](store::Tx& tx) {
                return activity::DeliveryFailed(tx, kLoopRun, std::string("ses_a"), key, "still none", 6, &source_);
              }).ok());
  ASSERT_TRUE(Write([&](store::Tx& tx) {
                return agent::testing::Deliver(tx, kLoopRun, "ses_a", "msg_1", key, 7, std::nullopt, &source_);
              }).ok());
  activity::TurnEnd end{"completed", std::nullopt, std::nullopt, 50, std::nullopt, std::nullopt, "Done."};
  ASSERT_TRUE(Write([&](store::Tx& tx) { return activity::TurnEnded(tx, agent::testing::Refs(tx, {"msg_1"}), 0, end, &source_).status(); }).ok());
  std::vector<Message> all = All();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].event, "loop.run.failed");
  EXPECT_EQ(all[0].data["outcome"]["status"], "none");
  EXPECT_EQ(all[0].data["outcome"]["error"]["message"], "no such session");
  EXPECT_EQ(all[1].event, "loop.run.completed");
  EXPECT_EQ(all[1].data["summary"], "Done.");
}

TEST_P(OutboxTest, AReminderSaysItWasDispatched) {
  Subscribe({{"phone", {"reminder.dispatched"}}});
  ASSERT_TRUE(Write([&](store::Tx& tx) {
                return agent::testing::Deliver(tx, kReminder, "ses_a", "msg_1", std::string("schedule:rem_1"), 5,
                                           std::nullopt, &source_);
              }).ok());
  std::vector<Message> all = All();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].event, "reminder.dispatched");
  EXPECT_EQ(all[0].data["schedule_id"], "rem_1");
  EXPECT_EQ(all[0].data["outcome"]["status"], "pending");
}

TEST_P(OutboxTest, ClaimsLeaseDueMessagesAndAttemptsAreRecorded) {
  std::string id;
  ASSERT_TRUE(Write([&](store::Tx& tx) -> Status {
                DSH_ASSIGN_OR_RETURN(id, EnqueueTo(tx, "ops", "webhook.test", Fact{}, Json{{"endpoint", "ops"}}, 100));
                return Status::Ok();
              }).ok());
  auto claim = [&](const std::string& owner, int64_t now) {
    auto c = db_->WriteValue<std::vector<Claimed>>([&](store::Tx& tx) { return Claim(tx, owner, now, 1000, 10); });
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? *c : std::vector<Claimed>{};
  };
  EXPECT_TRUE(claim("a", 99).empty());  // not due yet
  auto mine = claim("a", 100);
  ASSERT_EQ(mine.size(), 1u);
  EXPECT_EQ(mine[0].id, id);
  EXPECT_EQ(mine[0].data["endpoint"], "ops");
  EXPECT_TRUE(claim("b", 500).empty());  // leased to a
  // A 500: retried at 2,100.
  ASSERT_TRUE(Write([&](store::Tx& tx) {
                return Record(tx, mine[0].num, Attempt{200, 500, std::string("HTTP 500: oops"), 12}, After{"pending", 2100});
              }).ok());
  auto m = db_->ReadValue<std::optional<Message>>([&](store::Tx& tx) { return GetMessage(tx, id); });
  ASSERT_TRUE(m.ok() && *m);
  Json j = MessageJson(**m);
  EXPECT_EQ(j["state"], "retrying");
  EXPECT_EQ(j["attempts"], 1);
  EXPECT_EQ(j["next_attempt_at"], 2100);
  EXPECT_EQ(j["last_attempt"]["status"], 500);
  EXPECT_TRUE(claim("b", 2000).empty());
  auto again = claim("b", 2100);  // the lease ended with the attempt
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].attempts, 1);
  ASSERT_TRUE(Write([&](store::Tx& tx) {
                return Record(tx, again[0].num, Attempt{2100, 204, std::nullopt, 3}, After{"delivered", 2100});
              }).ok());
  auto attempts = db_->ReadValue<std::vector<Attempt>>([&](store::Tx& tx) { return Attempts(tx, again[0].num); });
  ASSERT_TRUE(attempts.ok());
  ASSERT_EQ(attempts->size(), 2u);
  EXPECT_EQ((*attempts)[0].status, 500);
  EXPECT_EQ((*attempts)[1].status, 204);
  auto stats = db_->ReadValue<std::map<std::string, EndpointStats>>([](store::Tx& tx) { return Stats(tx); });
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(EndpointState((*stats)["ops"], 3000), "ok");
  EXPECT_EQ((*stats)["ops"].last_delivered_at, 2100);
  auto pending = db_->ReadValue<int64_t>([](store::Tx& tx) { return CountPending(tx); });
  EXPECT_EQ(*pending, 0);
}

TEST(OutboxEndpointState, FailingWhenTheLatestFinishedMessageFailedOrARetryTakesOverAnHour) {
  EXPECT_EQ(EndpointState(EndpointStats{}, 0), "idle");
  EndpointStats s;
  s.messages = 2;
  s.last_delivered_at = 100;
  s.last_failed_at = 200;
  EXPECT_EQ(EndpointState(s, 300), "failing");
  s.last_delivered_at = 300;  // delivered since: healthy again
  EXPECT_EQ(EndpointState(s, 400), "ok");
  s.retrying = 1;
  s.oldest_retrying_at = 1000;
  EXPECT_EQ(EndpointState(s, 2000), "retrying");
  EXPECT_EQ(EndpointState(s, 1000 + 3'600'001), "failing");
}

}  // namespace
}  // namespace dsh::agent::outbox
