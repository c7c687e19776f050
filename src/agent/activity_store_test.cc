#include "agent/activity_store.h"

#include <gtest/gtest.h>

#include "agent/agent_manager.h"
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
    auto db = store::Database::Open(backend_.Factory(), AgentManager::Migrations());
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(db).value();
  }
  store::testing::TestBackend backend_{GetParam(), /*fast=*/true};
  std::unique_ptr<store::Database> db_;
};
INSTANTIATE_TEST_SUITE_P(Backends, ActivityStoreTest, store::testing::BackendNames(), store::testing::BackendTestName);

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
                   DSH_RETURN_IF_ERROR(Delivered(tx, loop, "ses_a", "msg_1", std::string("loop:loop_1:1000"), 30));
                   for (int i = 2; i <= 5; ++i) {
                     std::string id = "msg_" + std::to_string(i);
                     DSH_RETURN_IF_ERROR(Delivered(tx, Source{"agent_message", {}, {}, {}}, "ses_b", id, std::nullopt, 30 + i));
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

TEST_P(ActivityStoreTest, RetentionDeletesOldFinishedItemsOnly) {
  ASSERT_TRUE(db_->WriteSync([&](store::Tx& tx) -> Status {
                   DSH_RETURN_IF_ERROR(Delivered(tx, Source{"agent_message", {}, {}, {}}, "s", "m_old", std::nullopt, 100));
                   DSH_RETURN_IF_ERROR(Delivered(tx, Source{"agent_message", {}, {}, {}}, "s", "m_pending", std::nullopt, 100));
                   DSH_RETURN_IF_ERROR(Delivered(tx, Source{"agent_message", {}, {}, {}}, "s", "m_new", std::nullopt, 5000));
                   TurnEnd end{"completed", {}, {}, 200, {}, {}, "ok"};
                   DSH_RETURN_IF_ERROR(TurnEnded(tx, {"m_old", "m_new"}, end).status());
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
