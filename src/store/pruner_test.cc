#include "store/pruner.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "store/testing/test_backend.h"

namespace dsh::store {
namespace {

// A table of rows that expire at `expires_at`, and a task that deletes the
// expired ones, oldest first, at most max_rows per slice.
class PrunerTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto db = Database::Open(
        backend_.Factory(),
        {{"notes", 1, {"CREATE TABLE notes (id BIGINT PRIMARY KEY, expires_at BIGINT NOT NULL)"}}});
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(db).value();
  }

  void Fill(int64_t n, int64_t expires_at, int64_t first_id) {
    ASSERT_TRUE(db_->WriteSync([&](Tx& tx) -> Status {
                     for (int64_t i = 0; i < n; ++i) {
                       DSH_RETURN_IF_ERROR(tx.Exec("INSERT INTO notes (id, expires_at) VALUES (?, ?)",
                                                   {first_id + i, expires_at})
                                               .status());
                     }
                     return Status::Ok();
                   })
                    .ok());
  }
  int64_t Count() {
    auto r = db_->ReadValue<int64_t>([](Tx& tx) -> Result<int64_t> {
      int64_t n = -1;
      DSH_RETURN_IF_ERROR(tx.Query("SELECT COUNT(*) FROM notes", {}, [&](const Row& row) {
        n = row.Int(0);
        return Status::Ok();
      }));
      return n;
    });
    return r.ok() ? *r : -1;
  }
  PruneTask ExpiredNotes() {
    return {"notes", [this](Tx& tx, int64_t now, int64_t max_rows) -> Result<PruneSlice> {
              slice_limits_.push_back(max_rows);
              DSH_ASSIGN_OR_RETURN(int64_t n,
                                   tx.Exec("DELETE FROM notes WHERE id IN (SELECT id FROM notes WHERE"
                                           " expires_at < ? ORDER BY id LIMIT ?)",
                                           {now, max_rows}));
              return PruneSlice{n, n == max_rows};
            }};
  }

  testing::TestBackend backend_{GetParam(), /*fast=*/true};
  std::unique_ptr<Database> db_;
  FakeClock clock_;
  std::vector<int64_t> slice_limits_;
};

INSTANTIATE_TEST_SUITE_P(Backends, PrunerTest, testing::BackendNames(), testing::BackendTestName);

TEST_P(PrunerTest, ARoundDeletesWhatIsDueInBoundedSlices) {
  int64_t now = ToUnixMillis(clock_.Now());
  Fill(250, now - 1, 0);       // due
  Fill(40, now + 1000, 1000);  // not yet
  Pruner pruner(*db_, clock_, {ExpiredNotes()}, {.slice_rows = 100});
  auto round = pruner.RunRound();
  ASSERT_TRUE(round.ok()) << round.status().ToString();
  EXPECT_EQ(round->deleted, 250);
  EXPECT_EQ(round->slices, 3);  // 100 + 100 + 50
  EXPECT_EQ(round->max_slice, 100);
  EXPECT_EQ(Count(), 40);
  for (int64_t limit : slice_limits_) EXPECT_EQ(limit, 100);

  // Later, the rest is due as well; the clock decides, not the pruner.
  clock_.Advance(std::chrono::seconds(2));
  round = pruner.RunRound();
  ASSERT_TRUE(round.ok());
  EXPECT_EQ(round->deleted, 40);
  EXPECT_EQ(Count(), 0);
}

TEST_P(PrunerTest, AFailingSliceEndsTheRoundWithItsErrorAndChangesNothing) {
  int64_t now = ToUnixMillis(clock_.Now());
  Fill(10, now - 1, 0);
  PruneTask broken{"broken", [](Tx& tx, int64_t, int64_t) -> Result<PruneSlice> {
                     DSH_RETURN_IF_ERROR(tx.Exec("DELETE FROM notes").status());
                     return Status("storage_error", "disk on fire");
                   }};
  Pruner pruner(*db_, clock_, {std::move(broken)});
  auto round = pruner.RunRound();
  ASSERT_FALSE(round.ok());
  EXPECT_EQ(round.status().code(), "storage_error");
  EXPECT_EQ(Count(), 10);  // its savepoint rolled back
  EXPECT_EQ(pruner.stats().failures, 1);
}

// Two hosts on one database prune the same rows at once: deletes are
// idempotent, every due row goes, nothing fails.
TEST_P(PrunerTest, TwoPrunersOnOneDatabaseAtOnce) {
  int64_t now = ToUnixMillis(clock_.Now());
  Fill(2000, now - 1, 0);
  auto other_db = Database::Open(backend_.Factory(), {{"notes", 1, {"unused: applied already"}}});
  ASSERT_TRUE(other_db.ok()) << other_db.status().ToString();
  Pruner a(*db_, clock_, {ExpiredNotes()}, {.slice_rows = 50});
  Pruner b(**other_db, clock_, {ExpiredNotes()}, {.slice_rows = 50});
  Result<Pruner::Stats> ra = Status("not_run", "the round did not run"), rb = ra;
  std::thread ta([&] { ra = a.RunRound(); });
  std::thread tb([&] { rb = b.RunRound(); });
  ta.join();
  tb.join();
  ASSERT_TRUE(ra.ok()) << ra.status().ToString();
  ASSERT_TRUE(rb.ok()) << rb.status().ToString();
  EXPECT_EQ(ra->deleted + rb->deleted, 2000);
  EXPECT_EQ(Count(), 0);
}

TEST_P(PrunerTest, StartedItPrunesInTheBackgroundAndStopsPromptly) {
  int64_t now = ToUnixMillis(clock_.Now());
  Fill(300, now - 1, 0);
  Pruner pruner(
      *db_, clock_, {ExpiredNotes()},
      {.slice_rows = 100, .pause = std::chrono::milliseconds(1), .interval = std::chrono::hours(1)});
  pruner.Start();
  // Waits for the background round to finish.
  EXPECT_TRUE(pruner.WaitFor([](const Pruner::Stats& s) { return s.deleted >= 300; }, std::chrono::seconds(20)));
  auto started = std::chrono::steady_clock::now();
  pruner.Stop();  // it waits out its hour-long interval: Stop must not
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
  EXPECT_EQ(pruner.stats().deleted, 300);
  EXPECT_EQ(pruner.stats().max_slice, 100);
  EXPECT_EQ(Count(), 0);
}

}  // namespace
}  // namespace dsh::store
