#include "agent/activity_store.h"

#include <gtest/gtest.h>

#include "agent/agent_manager.h"
#include "agent/testing/deliver.h"
#include "store/testing/test_backend.h"

namespace dsh::agent::activity {
namespace {

TEST(ActivitySummary, IsTheFirstNonBlankLineCutAtTwoHundredCharacters) {
  EXPECT_EQ(Summary("  \n\n  All good.  \nmore"), "All good.");
  EXPECT_EQ(Summary(" \n\t "), "");
  std::string long_line(250, 'a');
  std::string cut = Summary(long_line);
  EXPECT_EQ(cut, std::string(199, 'a') + "…");
  // Characters, not bytes: 200 two-byte letters are kept whole.
  std::string letters;
  for (int i = 0; i < 200; ++i) letters += "é";
  EXPECT_EQ(Summary(letters), letters);
  EXPECT_EQ(Summary(letters + "é"), letters.substr(0, 199 * 2) + "…");
}

TEST(ActivityFilter, ParsesTheThreeNames) {
  EXPECT_EQ(ParseFilter("all"), Filter::kAll);
  EXPECT_EQ(ParseFilter("unread"), Filter::kUnread);
  EXPECT_EQ(ParseFilter("failed"), Filter::kFailed);
  EXPECT_FALSE(ParseFilter("Failed"));
}

class ActivityStoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto db = store::Database::Open(backend_.Factory(), agent::testing::MigrationsWithBareSessions());
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(db).value();
  }
  store::testing::TestBackend backend_{GetParam(), /*fast=*/true};
  std::unique_ptr<store::Database> db_;
};
INSTANTIATE_TEST_SUITE_P(Backends, ActivityStoreTest, store::testing::BackendNames(), store::testing::BackendTestName);

// A profile from before the counts were split into rows per host keeps its
// counts (SQLite kept "no session" as NULL rows, several of them).
TEST_P(ActivityStoreTest, UnreadCountsOfAVersion1ProfileAreKept) {
  db_.reset();
  backend_.Recreate();
  std::vector<store::Migration> v1;
  for (const auto& m : agent::testing::MigrationsWithBareSessions()) {
    if (m.module != "activity" || m.version == 1) v1.push_back(m);
  }
  {
    auto old = store::Database::Open(backend_.Factory(), v1);
    ASSERT_TRUE(old.ok()) << old.status().ToString();
    ASSERT_TRUE((*old)->WriteSync([](store::Tx& tx) -> Status {
                     DSH_RETURN_IF_ERROR(tx.Exec("INSERT INTO activity_unread_counts VALUES ('ses_a', 3), ('ses_b', 0)").status());
                     if (tx.dialect() == store::Dialect::kSqlite) {
                       return tx.Exec("INSERT INTO activity_unread_counts VALUES (NULL, 1), (NULL, 1)").status();
                     }
                     return tx.Exec("INSERT INTO activity_unread_counts VALUES ('', 2)").status();
                   }).ok());
  }
  SetUp();
  auto u = db_->ReadValue<Unread>([](store::Tx& tx) { return CountUnread(tx); });
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->total, 5);
  EXPECT_EQ(u->sessions, (std::map<std::string, int64_t>{{"ses_a", 3}}));
}

// A profile from before items were inbox rows keeps every item: those of a
// message in it, a failed delivery's and one whose message was pruned.
TEST_P(ActivityStoreTest, ItemsOfAProfileWithTheirOwnTableBecomeInboxRows) {
  db_.reset();
  backend_.Recreate();
  std::vector<store::Migration> before;
  for (const auto& m : agent::testing::MigrationsWithBareSessions()) {
    if (m.module != "agent" || m.version < 3) before.push_back(m);
  }
  {
    auto old = store::Database::Open(backend_.Factory(), before);
    ASSERT_TRUE(old.ok()) << old.status().ToString();
    ASSERT_TRUE((*old)->WriteSync([](store::Tx& tx) -> Status {
                     for (const char* sql : {
                              "INSERT INTO sessions (id) VALUES ('ses_a'), ('ses_b')",
                              "INSERT INTO inbox (message_id, session_id, key, mode, wakeup, text, meta, created_at,"
                              " consumed_at) VALUES ('msg_1', 'ses_a', 'loop:l:1', 'followup', 1, 'x', '{}', 10, 20),"
                              " ('msg_2', 'ses_b', NULL, 'steer', 1, 'y', '{}', 30, NULL),"
                              " ('msg_plain', 'ses_b', NULL, 'steer', 1, 'z', '{}', 35, 36)",
                              "INSERT INTO activity (key, message_id, kind, session_id, loop_id, nominal_at, at,"
                              " status, error_code, error_message, ended_at, input_tokens, output_tokens, summary,"
                              " read) VALUES"
                              " ('loop:l:1', 'msg_1', 'loop_run', 'ses_a', 'l', 1, 10, 'completed', NULL, NULL, 20,"
                              " 100, 7, 'done', 0),"
                              " ('loop:l:2', NULL, 'loop_run', 'ses_a', 'l', 2, 40, 'none', 'delivery_failed',"
                              " 'refused', NULL, NULL, NULL, NULL, 0),"
                              " ('msg:msg_2', 'msg_2', 'agent_message', 'ses_b', NULL, NULL, 30, 'pending', NULL, NULL,"
                              " NULL, NULL, NULL, NULL, 1),"
                              " ('msg:msg_gone', 'msg_gone', 'agent_message', 'ses_b', NULL, NULL, 5, 'completed',"
                              " NULL, NULL, 6, NULL, NULL, 'old', 1)",
                              "INSERT INTO activity_unread_shards (session_id, shard, n) VALUES ('ses_a', 0, 2)",
                          }) {
                       DSH_RETURN_IF_ERROR(tx.Exec(sql).status());
                     }
                     return Status::Ok();
                   }).ok());
  }
  SetUp();
  auto all = db_->ReadValue<Page>([](store::Tx& tx) { return List(tx, Filter::kAll, 10, std::nullopt); });
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  std::map<std::string, Item> by_key;
  for (const Item& item : all->items) by_key[item.key] = item;
  ASSERT_EQ(by_key.size(), 4u) << "the plain message is no item";
  const Item& run = by_key["loop:l:1"];
  EXPECT_EQ(run.outcome.status, "completed");
  EXPECT_EQ(run.outcome.input_tokens, std::optional<int64_t>(100));
  EXPECT_EQ(run.summary, std::optional<std::string>("done"));
  EXPECT_EQ(run.at, 10);
  EXPECT_FALSE(run.read);
  const Item& failed = by_key["loop:l:2"];
  EXPECT_EQ(failed.outcome.status, "none");
  EXPECT_EQ(failed.outcome.error_message, std::optional<std::string>("refused"));
  EXPECT_EQ(failed.outcome.session_id, std::optional<std::string>("ses_a"));
  EXPECT_EQ(failed.nominal_at, std::optional<int64_t>(2));
  EXPECT_EQ(by_key["msg:msg_2"].outcome.status, "pending");
  EXPECT_TRUE(by_key["msg:msg_2"].read);
  EXPECT_EQ(by_key["msg:msg_gone"].summary, std::optional<std::string>("old"));
  auto unread = db_->ReadValue<Unread>([](store::Tx& tx) { return CountUnread(tx); });
  EXPECT_EQ(unread->sessions, (std::map<std::string, int64_t>{{"ses_a", 2}}));
  // The pending message is still pending; the failed occurrence's retry
  // takes over its row, which stays unread (and counted once).
  ASSERT_TRUE(db_->WriteSync([](store::Tx& tx) {
                   return agent::testing::Deliver(tx, Source{"loop_run", "l", 2, std::nullopt}, "ses_a", "msg_3",
                                                  std::string("loop:l:2"), 50);
                 }).ok());
  auto pending = db_->ReadValue<std::vector<InboxMessage>>([](store::Tx& tx) {
    return agent_store::Pending(tx, "ses_b");
  });
  ASSERT_EQ(pending->size(), 1u);
  EXPECT_EQ((*pending)[0].message_id, "msg_2");
  EXPECT_EQ(db_->ReadValue<Unread>([](store::Tx& tx) { return CountUnread(tx); })->sessions,
            (std::map<std::string, int64_t>{{"ses_a", 2}}));
  auto failures = db_->ReadValue<Page>([](store::Tx& tx) { return List(tx, Filter::kFailed, 10, std::nullopt); });
  EXPECT_TRUE(failures->items.empty());
}

TEST_P(ActivityStoreTest, AFailedAttemptBecomesTheDeliveryOfALaterOneAndPagesAreNewestFirst) {
  Source loop{"loop_run", "loop_1", 1000, std::nullopt};
  ASSERT_TRUE(db_->WriteSync([&](store::Tx& tx) -> Status {
                   DSH_RETURN_IF_ERROR(DeliveryFailed(tx, loop, "ses_a", "loop:loop_1:1000", "refused", 10));
                   // A second failed attempt updates the same row.
                   return DeliveryFailed(tx, loop, "ses_a", "loop:loop_1:1000", "refused again", 20);
                 }).ok());
  auto failed = db_->ReadValue<Page>([](store::Tx& tx) { return List(tx, Filter::kFailed, 10, std::nullopt); });
  ASSERT_TRUE(failed.ok()) << failed.status().ToString();
  ASSERT_EQ(failed->items.size(), 1u);
  EXPECT_EQ(failed->items[0].outcome.status, "none");
  EXPECT_EQ(failed->items[0].outcome.error_code, std::optional<std::string>("delivery_failed"));
  EXPECT_EQ(failed->items[0].outcome.error_message, std::optional<std::string>("refused again"));
  // The retry got through: the same item is now pending, no longer failed.
  ASSERT_TRUE(db_->WriteSync([&](store::Tx& tx) -> Status {
                   DSH_RETURN_IF_ERROR(agent::testing::Deliver(tx, loop, "ses_a", "msg_1", std::string("loop:loop_1:1000"), 30));
                   for (int i = 2; i <= 5; ++i) {
                     std::string id = "msg_" + std::to_string(i);
                     DSH_RETURN_IF_ERROR(agent::testing::Deliver(tx, Source{"agent_message", {}, {}, {}}, "ses_b", id, std::nullopt, 30 + i));
                   }
                   return Status::Ok();
                 }).ok());
  failed = db_->ReadValue<Page>([](store::Tx& tx) { return List(tx, Filter::kFailed, 10, std::nullopt); });
  EXPECT_TRUE(failed->items.empty());
  auto first = db_->ReadValue<Page>([](store::Tx& tx) { return List(tx, Filter::kAll, 3, std::nullopt); });
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->items.size(), 3u);
  ASSERT_TRUE(first->next);
  EXPECT_GT(first->items[0].id, first->items[1].id);
  auto second = db_->ReadValue<Page>([&](store::Tx& tx) { return List(tx, Filter::kAll, 3, first->next); });
  ASSERT_EQ(second->items.size(), 2u);
  EXPECT_FALSE(second->next);
  EXPECT_EQ(second->items.back().loop_id, std::optional<std::string>("loop_1"));
  EXPECT_EQ(second->items.back().outcome.status, "pending");
  // Marking by id.
  auto marked = db_->WriteValue<int64_t>([&](store::Tx& tx) { return MarkRead(tx, {first->items[0].id, 999}); });
  EXPECT_EQ(*marked, 1);
  auto total = db_->ReadValue<int64_t>([](store::Tx& tx) { return CountUnreadTotal(tx); });
  EXPECT_EQ(*total, 4);
  EXPECT_EQ(*db_->WriteValue<int64_t>([](store::Tx& tx) { return MarkAllRead(tx); }), 4);
  EXPECT_EQ(*db_->ReadValue<int64_t>([](store::Tx& tx) { return CountUnreadTotal(tx); }), 0);
}

// A failed attempt whose target was not known has no session; the retry
// that got through supersedes it when its run is recorded.
TEST_P(ActivityStoreTest, AFailedAttemptWithoutASessionGoesOnceTheOccurrenceIsDelivered) {
  Source loop{"loop_run", "l", 1, std::nullopt};
  ASSERT_TRUE(db_->WriteSync([&](store::Tx& tx) {
                   return DeliveryFailed(tx, loop, std::nullopt, "loop:l:1", "no target yet", 10);
                 }).ok());
  auto failed = db_->ReadValue<Page>([](store::Tx& tx) { return List(tx, Filter::kFailed, 10, std::nullopt); });
  ASSERT_EQ(failed->items.size(), 1u);
  EXPECT_FALSE(failed->items[0].outcome.session_id) << "no session, not an empty one";
  ASSERT_TRUE(db_->WriteSync([&](store::Tx& tx) -> Status {
                   DSH_RETURN_IF_ERROR(agent::testing::Deliver(tx, loop, "ses_a", "msg_1", std::string("loop:l:1"), 20));
                   return Superseded(tx, "loop:l:1");
                 }).ok());
  auto all = db_->ReadValue<Page>([](store::Tx& tx) { return List(tx, Filter::kAll, 10, std::nullopt); });
  ASSERT_EQ(all->items.size(), 1u);
  EXPECT_EQ(all->items[0].outcome.status, "pending");
  EXPECT_EQ(all->items[0].outcome.session_id, std::optional<std::string>("ses_a"));
  auto unread = db_->ReadValue<Unread>([](store::Tx& tx) { return CountUnread(tx); });
  EXPECT_EQ(unread->total, 1);
  EXPECT_EQ(unread->sessions, (std::map<std::string, int64_t>{{"ses_a", 1}}));
}

TEST_P(ActivityStoreTest, UnreadCountsFollowEveryChangeOfReadState) {
  // What CountUnread must agree with: a count over the items themselves.
  auto counted = [&] {
    auto r = db_->ReadValue<std::map<std::string, int64_t>>([](store::Tx& tx) -> Result<std::map<std::string, int64_t>> {
      std::map<std::string, int64_t> out;
      DSH_RETURN_IF_ERROR(tx.Query("SELECT session_id, COUNT(*) FROM inbox WHERE read = 0 AND session_id <> ''"
                                   " GROUP BY session_id",
                                   {}, [&](const store::Row& row) {
                                     out[row.String(0)] = row.Int(1);
                                     return Status::Ok();
                                   }));
      return out;
    });
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : std::map<std::string, int64_t>{};
  };
  auto kept = [&] {
    auto r = db_->ReadValue<Unread>([](store::Tx& tx) { return CountUnread(tx); });
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->sessions : std::map<std::string, int64_t>{};
  };
  Source loop{"loop_run", "l", 1, std::nullopt};
  ASSERT_TRUE(db_->WriteSync([&](store::Tx& tx) -> Status {
                   for (int i = 0; i < 6; ++i) {
                     DSH_RETURN_IF_ERROR(agent::testing::Deliver(tx, Source{"agent_message", {}, {}, {}}, i % 2 ? "a" : "b",
                                                   "m" + std::to_string(i), std::nullopt, 100 + i));
                   }
                   DSH_RETURN_IF_ERROR(DeliveryFailed(tx, loop, "a", "loop:l:1", "down", 200));
                   DSH_RETURN_IF_ERROR(DeliveryFailed(tx, loop, "a", "loop:l:1", "still down", 210));
                   DSH_RETURN_IF_ERROR(DeliveryFailed(tx, loop, std::nullopt, "loop:l:2", "no session", 220));
                   return agent::testing::Deliver(tx, loop, "a", "m_retry", std::string("loop:l:1"), 230);  // the retry got through
                 }).ok());
  EXPECT_EQ(kept(), counted());
  EXPECT_EQ(kept(), (std::map<std::string, int64_t>{{"a", 4}, {"b", 3}}));
  EXPECT_EQ(*db_->ReadValue<int64_t>([](store::Tx& tx) { return CountUnreadTotal(tx); }), 8) << "one item has no session";
  auto page = db_->ReadValue<Page>([](store::Tx& tx) { return List(tx, Filter::kAll, 3, std::nullopt); });
  std::vector<int64_t> ids;
  for (const auto& item : page->items) ids.push_back(item.id);
  EXPECT_EQ(*db_->WriteValue<int64_t>([&](store::Tx& tx) { return MarkRead(tx, ids); }), 3);
  EXPECT_EQ(*db_->WriteValue<int64_t>([&](store::Tx& tx) { return MarkRead(tx, ids); }), 0) << "already read";
  EXPECT_EQ(kept(), counted());
  EXPECT_EQ(*db_->WriteValue<int64_t>([](store::Tx& tx) { return MarkSessionRead(tx, "b"); }), 3);
  EXPECT_EQ(kept(), counted());
  // Retention takes unread items out of the counts too.
  ASSERT_TRUE(db_->WriteSync([](store::Tx& tx) {
                   return TurnEnded(tx, agent::testing::Refs(tx, {"m1", "m3", "m5"}), 0, TurnEnd{"completed", {}, {}, 150, {}, {}, "ok"}).status();
                 }).ok());
  store::PruneTask task = PruneTask(1000);
  ASSERT_TRUE(db_->WriteValue<store::PruneSlice>([&](store::Tx& tx) { return task.slice(tx, 1104, 100); }).ok());
  EXPECT_EQ(kept(), counted());
  EXPECT_TRUE(kept().empty()) << "a's last two unread items were pruned";
  ASSERT_TRUE(db_->WriteSync([](store::Tx& tx) {
                   return agent::testing::Deliver(tx, Source{"reminder", {}, {}, "schedule-1"}, "c", "m_c", std::nullopt, 300);
                 }).ok());
  int64_t total = *db_->ReadValue<int64_t>([](store::Tx& tx) { return CountUnreadTotal(tx); });
  EXPECT_EQ(total, 1);
  EXPECT_EQ(*db_->WriteValue<int64_t>([](store::Tx& tx) { return MarkAllRead(tx); }), total);
  EXPECT_TRUE(kept().empty());
  EXPECT_EQ(*db_->ReadValue<int64_t>([](store::Tx& tx) { return CountUnreadTotal(tx); }), 0);
}

TEST_P(ActivityStoreTest, RetentionDeletesOldFinishedItemsOnly) {
  ASSERT_TRUE(db_->WriteSync([&](store::Tx& tx) -> Status {
                   DSH_RETURN_IF_ERROR(agent::testing::Deliver(tx, Source{"agent_message", {}, {}, {}}, "s", "m_old", std::nullopt, 100));
                   DSH_RETURN_IF_ERROR(agent::testing::Deliver(tx, Source{"agent_message", {}, {}, {}}, "s", "m_pending", std::nullopt, 100));
                   DSH_RETURN_IF_ERROR(agent::testing::Deliver(tx, Source{"agent_message", {}, {}, {}}, "s", "m_new", std::nullopt, 5000));
                   TurnEnd end{"completed", {}, {}, 200, {}, {}, "ok"};
                   DSH_RETURN_IF_ERROR(TurnEnded(tx, agent::testing::Refs(tx, {"m_old", "m_new"}), 0, end).status());
                   return Status::Ok();
                 }).ok());
  store::PruneTask task = PruneTask(1000);
  auto slice = db_->WriteValue<store::PruneSlice>([&](store::Tx& tx) { return task.slice(tx, 2000, 100); });
  ASSERT_TRUE(slice.ok()) << slice.status().ToString();
  EXPECT_EQ(slice->deleted, 1);
  auto all = db_->ReadValue<Page>([](store::Tx& tx) { return List(tx, Filter::kAll, 10, std::nullopt); });
  EXPECT_EQ(all->items.size(), 2u);
}

}  // namespace
}  // namespace dsh::agent::activity
