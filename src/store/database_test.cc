#include "store/database.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <latch>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "store/pg_connection.h"
#include "store/sqlite_connection.h"
#include "store/testing/faulty_connection.h"
#include "store/testing/pg_test_server.h"
#include "store/testing/test_backend.h"
#include "base/clock.h"
#include "base/testing/log_capture.h"
#include "base/testing/temp_dir.h"

namespace dsh::store {
namespace {

std::vector<Migration> Notes(int versions = 1) {
  std::vector<Migration> m = {
      {"notes", 1, {"CREATE TABLE notes (id BIGINT PRIMARY KEY, body TEXT NOT NULL)"}},
      {"notes", 2, {"ALTER TABLE notes ADD COLUMN tag TEXT"}},
  };
  m.resize(versions);
  return m;
}

Status Insert(Tx& tx, int64_t id, std::string_view body) {
  auto r = tx.Exec("INSERT INTO notes (id, body) VALUES (?, ?)", {id, body});
  return r.status();
}

int64_t Count(Database& db) {
  auto r = db.ReadValue<int64_t>([](Tx& tx) -> Result<int64_t> {
    int64_t n = -1;
    DSH_RETURN_IF_ERROR(tx.Query("SELECT COUNT(*) FROM notes", {}, [&](const Row& row) {
      n = row.Int(0);
      return Status::Ok();
    }));
    return n;
  });
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : -1;
}

// Every Database test runs on both backends: SQLite in a temp dir and a
// fresh PostgreSQL database (store/testing/pg_test_server.h).
class DatabaseTest : public ::testing::TestWithParam<std::string> {
 protected:
  bool postgres() const { return backend_.postgres(); }
  std::unique_ptr<ConnectionFactory> Backend() { return backend_.Factory(); }

  testing::TestBackend backend_{GetParam()};
};

INSTANTIATE_TEST_SUITE_P(Backends, DatabaseTest, testing::BackendNames(), testing::BackendTestName);

// Holds the writer inside a job until released, so the jobs queued meanwhile
// all land in its transaction, after it.
struct WriterGate {
  std::latch entered{1};
  std::latch release{1};
  std::atomic<bool> ran{false};
  void Block(Database& db, JobRerun rerun = JobRerun::kOnlyAfterFailure) {
    db.Write(
        [this](Tx&) {
          if (ran.exchange(true)) return Status::Ok();  // a run again (JobRerun::kAlsoAfterSuccess)
          entered.count_down();
          release.wait();
          return Status::Ok();
        },
        nullptr, JobIsolation::kSavepoint, rerun);
    entered.wait();
  }
};

TEST_P(DatabaseTest, AppliesMigrationsOnceAndRecordsTheVersion) {
  {
    auto db = Database::Open(Backend(), Notes(2));
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    ASSERT_TRUE((*db)->WriteSync([](Tx& tx) {
      return tx.Exec("INSERT INTO notes (id, body, tag) VALUES (1, 'x', 't')").status();
    }).ok());
  }
  auto db = Database::Open(Backend(), Notes(2));
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  EXPECT_EQ(Count(**db), 1);
}

TEST_P(DatabaseTest, UpgradesAnOlderSchemaInPlace) {
  ASSERT_TRUE(Database::Open(Backend(), Notes(1)).ok());
  auto db = Database::Open(Backend(), Notes(2));
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  EXPECT_TRUE((*db)->WriteSync([](Tx& tx) {
    return tx.Exec("INSERT INTO notes (id, body, tag) VALUES (1, 'x', 't')").status();
  }).ok());
}

TEST_P(DatabaseTest, RefusesADatabaseFromANewerVersion) {
  ASSERT_TRUE(Database::Open(Backend(), Notes(2)).ok());
  auto db = Database::Open(Backend(), Notes(1));
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), "schema_too_new");
  EXPECT_NE(db.status().message().find("'notes' is at version 2"), std::string::npos) << db.status().message();
}

TEST_P(DatabaseTest, RefusesADatabaseWithAModuleItDoesNotKnow) {
  auto with_extra = Notes(1);
  with_extra.push_back({"future", 1, {"CREATE TABLE future (x BIGINT)"}});
  ASSERT_TRUE(Database::Open(Backend(), with_extra).ok());
  auto db = Database::Open(Backend(), Notes(1));
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), "schema_too_new");
}

// Queues `jobs` behind a gate so they share one batch, releases it, and
// returns each job's outcome and how many commits the batch took.
struct BatchOutcome {
  std::vector<Status> statuses;
  uint64_t commits = 0;
};
struct Queued {
  Database::Job job;
  JobIsolation isolation = JobIsolation::kSavepoint;
  JobRerun rerun = JobRerun::kOnlyAfterFailure;
};
BatchOutcome RunInOneBatch(Database& db, std::vector<Queued> jobs, JobRerun gate_rerun = JobRerun::kOnlyAfterFailure) {
  WriterGate gate;
  gate.Block(db, gate_rerun);
  std::latch acked(static_cast<std::ptrdiff_t>(jobs.size()));
  BatchOutcome out;
  out.statuses.resize(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    db.Write(
        std::move(jobs[i].job),
        [&, i](Status st) {
          out.statuses[i] = std::move(st);
          acked.count_down();
        },
        jobs[i].isolation, jobs[i].rerun);
  }
  auto before = db.stats();
  gate.release.count_down();
  acked.wait();
  out.commits = db.stats().commits - before.commits;
  return out;
}

TEST_P(DatabaseTest, ConcurrentWritesShareOneCommit) {
  auto db = std::move(Database::Open(Backend(), Notes()).value());
  WriterGate gate;
  gate.Block(*db);
  constexpr int kJobs = 20;
  std::latch acked(kJobs);
  std::atomic<int> ok{0};
  for (int i = 0; i < kJobs; ++i) {
    db->Write([i](Tx& tx) { return Insert(tx, i, "x"); },
              [&](Status st) {
                if (st.ok()) ok++;
                acked.count_down();
              });
  }
  auto before = db->stats();
  gate.release.count_down();
  acked.wait();
  EXPECT_EQ(ok.load(), kJobs);
  auto after = db->stats();
  EXPECT_EQ(after.commits - before.commits, 1u);  // the gate's job and the 20 queued while it ran
  EXPECT_EQ(Count(*db), kJobs);
}

TEST_P(DatabaseTest, CountsCommitsTheirJobsAndTheirTimeInItsMetrics) {
  metrics::Registry registry;
  auto db = std::move(Database::Open(Backend(), Notes(), DatabaseOptions{.metrics = &registry}).value());
  ASSERT_TRUE(db->WriteSync([](Tx& tx) { return Insert(tx, 1000, "x"); }).ok());
  WriterGate gate;
  gate.Block(*db);
  constexpr int kJobs = 20;
  std::latch acked(kJobs);
  for (int i = 0; i < kJobs; ++i) db->Write([i](Tx& tx) { return Insert(tx, i, "x"); }, [&](Status) { acked.count_down(); });
  gate.release.count_down();
  acked.wait();
  std::string text = registry.Render();
  EXPECT_NE(text.find("dsh_store_commits_total{result=\"committed\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("dsh_store_commits_total{result=\"failed\"} 0\n"), std::string::npos) << text;
  // One transaction of 1 job, one of 21 (the gate's and the 20 queued behind it).
  EXPECT_NE(text.find("dsh_store_commit_jobs_bucket{le=\"1\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("dsh_store_commit_jobs_bucket{le=\"16\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("dsh_store_commit_jobs_bucket{le=\"32\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("dsh_store_commit_jobs_sum 22\n"), std::string::npos) << text;
  EXPECT_NE(text.find("dsh_store_commit_seconds_count 2\n"), std::string::npos) << text;
}

TEST_P(DatabaseTest, WriteLoadIsTheQueueOrTheLastBatchWhicheverIsLarger) {
  // One batch however slow the machine: PostgreSQL's transactions are
  // otherwise cut after max_hold (20 ms), which a loaded machine reached.
  DatabaseOptions options;
  options.max_hold = std::chrono::seconds(30);
  auto db = std::move(Database::Open(Backend(), Notes(), options).value());
  ASSERT_TRUE(db->WriteSync([](Tx& tx) { return Insert(tx, 1000, "x"); }).ok());
  EXPECT_EQ(db->write_load(), 1u);
  WriterGate gate;
  gate.Block(*db);
  constexpr int kJobs = 40;
  std::latch acked(kJobs);
  for (int i = 0; i < kJobs; ++i) db->Write([i](Tx& tx) { return Insert(tx, i, "x"); }, [&](Status) { acked.count_down(); });
  EXPECT_EQ(db->write_load(), static_cast<size_t>(kJobs)) << "queued behind the gate";
  gate.release.count_down();
  acked.wait();
  EXPECT_EQ(db->write_load(), static_cast<size_t>(kJobs + 1)) << "the gate's job and the 40 queued while it ran";
  ASSERT_TRUE(db->WriteSync([](Tx& tx) { return Insert(tx, 1001, "x"); }).ok());
  EXPECT_EQ(db->write_load(), 1u) << "the writer keeps up again";
}

TEST_P(DatabaseTest, AFailingJobRollsBackAloneWithinItsBatch) {
  auto db = std::move(Database::Open(Backend(), Notes()).value());
  constexpr auto kSavepoint = JobIsolation::kSavepoint;
  auto r = RunInOneBatch(*db, {{[](Tx& tx) { return Insert(tx, 1, "a"); }, kSavepoint},
                               {[](Tx& tx) {
                                  DSH_RETURN_IF_ERROR(Insert(tx, 2, "b"));
                                  return Insert(tx, 1, "duplicate");  // violates the primary key
                                },
                                kSavepoint},
                               {[](Tx& tx) { return Insert(tx, 3, "c"); }, kSavepoint}});
  EXPECT_TRUE(r.statuses[0].ok());
  EXPECT_EQ(r.statuses[1].code(), "conflict");
  EXPECT_TRUE(r.statuses[2].ok());
  EXPECT_EQ(Count(*db), 2);  // row 2 of the failed job is not there
}

// Tx::ExecLater: on PostgreSQL the writes wait for the next round trip (a
// later job's statement, the COMMIT). They keep their order and their job:
// a later statement of the transaction sees them, one of a job that rolls
// back to its savepoint goes with it, and the last job's reach the COMMIT.
TEST_P(DatabaseTest, WritesSentLaterKeepTheirOrderAndTheirJob) {
  auto db = std::move(Database::Open(Backend(), Notes()).value());
  constexpr auto kSavepoint = JobIsolation::kSavepoint;
  auto later = [](Tx& tx, int64_t id) { return tx.ExecLater("INSERT INTO notes (id, body) VALUES (?, 'later')", {id}); };
  int64_t seen = -1;
  auto r = RunInOneBatch(*db, {{[&](Tx& tx) { return later(tx, 1); }, kSavepoint},
                               {[&](Tx& tx) {
                                  DSH_RETURN_IF_ERROR(later(tx, 2));
                                  return InvalidArguments("changed its mind");
                                },
                                kSavepoint},
                               {[&](Tx& tx) {
                                  return tx.Query("SELECT COUNT(*) FROM notes", {}, [&](const Row& row) {
                                    seen = row.Int(0);
                                    return Status::Ok();
                                  });
                                },
                                kSavepoint},
                               {[&](Tx& tx) { return later(tx, 3); }, kSavepoint}});
  ASSERT_EQ(r.commits, 1u);
  EXPECT_TRUE(r.statuses[0].ok()) << r.statuses[0].ToString();
  EXPECT_EQ(r.statuses[1].code(), codes::kInvalidArguments);
  EXPECT_TRUE(r.statuses[2].ok()) << r.statuses[2].ToString();
  EXPECT_TRUE(r.statuses[3].ok()) << r.statuses[3].ToString();
  EXPECT_EQ(seen, 1) << "the third job sees the first one's row, not the second's";
  EXPECT_EQ(Count(*db), 2);  // 1 and 3
}

// A write sent later that fails there fails its whole transaction on
// PostgreSQL — every job in it, the ones after it too, with nothing saved:
// its own job has ended, so no savepoint can take it back alone. (Callers
// send later only what cannot fail but with the storage; a duplicate key
// stands in for that here.) SQLite runs it at once: its job fails alone.
// Runs three jobs in one batch, the middle one `later` (a write sent later
// that fails), on a database holding one note: on PostgreSQL every job fails
// and nothing is saved, each status naming `why`; SQLite ran the write at
// once, so its job alone fails (kConflict).
void ExpectALaterWriteThatFailsFailsItsBatch(Database& db, bool postgres, Database::Job later, std::string_view why) {
  constexpr auto kSavepoint = JobIsolation::kSavepoint;
  auto r = RunInOneBatch(db, {{[](Tx& tx) { return Insert(tx, 2, "b"); }, kSavepoint},
                              {std::move(later), kSavepoint},
                              {[](Tx& tx) { return Insert(tx, 3, "c"); }, kSavepoint}});
  if (postgres) {
    for (const Status& st : r.statuses) EXPECT_EQ(st.code(), codes::kCommitFailed) << st.ToString();
    EXPECT_NE(r.statuses[2].message().find(why), std::string::npos) << r.statuses[2].ToString();
    EXPECT_EQ(Count(db), 1);
  } else {
    EXPECT_TRUE(r.statuses[0].ok());
    EXPECT_EQ(r.statuses[1].code(), codes::kConflict) << r.statuses[1].ToString();
    EXPECT_TRUE(r.statuses[2].ok());
    EXPECT_EQ(Count(db), 3);
  }
}

TEST_P(DatabaseTest, AWriteSentLaterThatFailsFailsItsWholeTransactionOnPostgres) {
  auto db = std::move(Database::Open(Backend(), Notes()).value());
  ASSERT_TRUE(db->WriteSync([](Tx& tx) { return Insert(tx, 1, "a"); }).ok());
  ExpectALaterWriteThatFailsFailsItsBatch(
      *db, postgres(), [](Tx& tx) { return tx.ExecLater("INSERT INTO notes (id, body) VALUES (1, 'dup')"); },
      "an earlier write of this transaction failed");
  // The writer goes on.
  ASSERT_TRUE(db->WriteSync([](Tx& tx) { return Insert(tx, 4, "d"); }).ok());
  EXPECT_EQ(Count(*db), postgres() ? 2 : 4);
}

// A write sent later that must change one row (a compare-and-set on a row
// the transaction locked) and changes none fails like a failed write: a
// broken lock is an error, never a write that silently did nothing.
TEST_P(DatabaseTest, AWriteSentLaterThatChangesOtherRowsThanItMustFails) {
  auto db = std::move(Database::Open(Backend(), Notes()).value());
  ASSERT_TRUE(db->WriteSync([](Tx& tx) { return Insert(tx, 1, "a"); }).ok());
  // The right count: saved.
  ASSERT_TRUE(db->WriteSync([](Tx& tx) {
                  return tx.ExecLater("UPDATE notes SET body = 'b' WHERE id = ?", {int64_t{1}}, 1);
                }).ok());
  ExpectALaterWriteThatFailsFailsItsBatch(
      *db, postgres(),
      [](Tx& tx) { return tx.ExecLater("UPDATE notes SET body = 'x' WHERE id = ?", {int64_t{7}}, 1); },
      "a write changed 0 rows, not 1");
  std::string body;
  ASSERT_TRUE(db->ReadSync([&](Tx& tx) {
                  return tx.Query("SELECT body FROM notes WHERE id = 1", {}, [&](const Row& row) {
                    body = row.String(0);
                    return Status::Ok();
                  });
                }).ok());
  EXPECT_EQ(body, "b");
}

// The first job of a transaction runs without a savepoint: when it fails
// after writing, the transaction rolls back (nothing else is in it yet) and
// the jobs queued meanwhile run in a new one.
TEST_P(DatabaseTest, TheFirstJobOfATransactionFailingAfterWritingRollsBackAlone) {
  auto db = std::move(Database::Open(Backend(), Notes()).value());
  std::latch entered(1), release(1);
  Status first;
  std::latch acked(3);
  db->Write(
      [&](Tx& tx) {
        DSH_RETURN_IF_ERROR(Insert(tx, 1, "a"));
        entered.count_down();
        release.wait();
        return InvalidArguments("failed after writing");
      },
      [&](Status st) {
        first = st;
        acked.count_down();
      });
  entered.wait();
  std::vector<Status> rest(2);
  for (int i = 0; i < 2; ++i) {
    db->Write([i](Tx& tx) { return Insert(tx, 2 + i, "b"); }, [&, i](Status st) {
      rest[i] = st;
      acked.count_down();
    });
  }
  release.count_down();
  acked.wait();
  EXPECT_EQ(first.code(), "invalid_arguments");
  EXPECT_TRUE(rest[0].ok() && rest[1].ok());
  EXPECT_EQ(Count(*db), 2);  // rows 2 and 3; not the failed job's row 1
}

TEST_P(DatabaseTest, AJobWithoutSavepointThatFailsBeforeWritingSparesItsBatch) {
  auto db = std::move(Database::Open(Backend(), Notes()).value());
  constexpr auto kNoSavepoint = JobIsolation::kFailsBeforeWriting;
  auto r = RunInOneBatch(*db, {{[](Tx& tx) { return Insert(tx, 1, "a"); }, kNoSavepoint},
                               {[](Tx&) { return InvalidArguments("checked before writing"); }, kNoSavepoint},
                               {[](Tx& tx) { return Insert(tx, 3, "c"); }, kNoSavepoint}});
  EXPECT_TRUE(r.statuses[0].ok()) << r.statuses[0].ToString();
  EXPECT_EQ(r.statuses[1].code(), "invalid_arguments");
  EXPECT_TRUE(r.statuses[2].ok()) << r.statuses[2].ToString();
  EXPECT_EQ(Count(*db), 2);
  EXPECT_EQ(r.commits, 1u);  // the gate's job and the three queued while it ran
}

TEST_P(DatabaseTest, AJobWithoutSavepointThatFailsAfterWritingSavesNothingBeforeItAndRunsTheRestAnew) {
  auto db = std::move(Database::Open(Backend(), Notes()).value());
  auto r = RunInOneBatch(*db, {{[](Tx& tx) { return Insert(tx, 1, "a"); }, JobIsolation::kSavepoint},
                               {[](Tx& tx) {
                                  DSH_RETURN_IF_ERROR(Insert(tx, 2, "b"));
                                  return Insert(tx, 1, "duplicate");  // breaks the promise: fails after a change
                                },
                                JobIsolation::kFailsBeforeWriting},
                               {[](Tx& tx) { return Insert(tx, 3, "c"); }, JobIsolation::kSavepoint}});
  EXPECT_EQ(r.statuses[1].code(), "conflict");
  EXPECT_TRUE(r.statuses[2].ok()) << r.statuses[2].ToString();
  auto ids = db->ReadValue<std::vector<int64_t>>([](Tx& tx) -> Result<std::vector<int64_t>> {
    std::vector<int64_t> out;
    DSH_RETURN_IF_ERROR(tx.Query("SELECT id FROM notes ORDER BY id", {}, [&](const Row& row) {
      out.push_back(row.Int(0));
      return Status::Ok();
    }));
    return out;
  });
  ASSERT_TRUE(ids.ok());
  if (GetParam() == "postgres") {
    // Every job has a savepoint on PostgreSQL (so that a contended one
    // rolls back alone): the failed one takes nothing else down.
    EXPECT_TRUE(r.statuses[0].ok()) << r.statuses[0].ToString();
    EXPECT_EQ(*ids, (std::vector<int64_t>{1, 3}));
    return;
  }
  // A failed statement after a change takes the transaction down.
  EXPECT_EQ(r.statuses[0].code(), "commit_failed");
  EXPECT_NE(r.statuses[0].message().find("nothing of this write was saved"), std::string::npos);
  // The failed job's row 2 was not saved, nor row 1; row 3 was, in a
  // transaction of its own.
  EXPECT_EQ(*ids, std::vector<int64_t>{3});
}

std::vector<int64_t> Ids(Database& db) {
  auto ids = db.ReadValue<std::vector<int64_t>>([](Tx& tx) -> Result<std::vector<int64_t>> {
    std::vector<int64_t> out;
    DSH_RETURN_IF_ERROR(tx.Query("SELECT id FROM notes ORDER BY id", {}, [&](const Row& row) {
      out.push_back(row.Int(0));
      return Status::Ok();
    }));
    return out;
  });
  EXPECT_TRUE(ids.ok()) << ids.status().ToString();
  return ids.ok() ? *ids : std::vector<int64_t>{};
}

// Inserts row 1, counting its runs.
Queued CountedInsert(std::atomic<int>& runs, JobRerun rerun) {
  return {[&runs](Tx& tx) {
            ++runs;
            return Insert(tx, 1, "a");
          },
          JobIsolation::kSavepoint, rerun};
}
// Inserts row 2, then fails: row 1 is there.
Queued FailsAfterWriting() {
  return {[](Tx& tx) {
            DSH_RETURN_IF_ERROR(Insert(tx, 2, "b"));
            return Insert(tx, 1, "duplicate");  // violates the primary key
          },
          JobIsolation::kSavepoint, JobRerun::kAlsoAfterSuccess};
}

// PostgreSQL: jobs that may run again after they succeeded share their
// transaction without savepoints; when one of them fails after writing,
// the transaction rolls back and they run again, each in its own, so the
// failed one still takes nothing else down. SQLite keeps its savepoints.
TEST_P(DatabaseTest, JobsThatMayRunAgainRunAgainWhenOneAfterThemFails) {
  auto db = std::move(Database::Open(Backend(), Notes()).value());
  std::atomic<int> runs{0};
  const auto before = db->stats();
  auto r = RunInOneBatch(*db,
                         {CountedInsert(runs, JobRerun::kAlsoAfterSuccess), FailsAfterWriting(),
                          {[](Tx& tx) { return Insert(tx, 3, "c"); }}},
                         JobRerun::kAlsoAfterSuccess);
  EXPECT_TRUE(r.statuses[0].ok()) << r.statuses[0].ToString();
  EXPECT_EQ(r.statuses[1].code(), "conflict");
  EXPECT_TRUE(r.statuses[2].ok()) << r.statuses[2].ToString();
  EXPECT_EQ(Ids(*db), (std::vector<int64_t>{1, 3}));  // not the failed job's row 2
  EXPECT_EQ(r.commits, 1u);
  EXPECT_EQ(runs.load(), postgres() ? 2 : 1);
  EXPECT_EQ(db->stats().rolled_back_to_isolate - before.rolled_back_to_isolate, postgres() ? 1u : 0u);
}

// A job that may not run again after it succeeded never does: the jobs after
// it in its transaction keep their savepoints.
TEST_P(DatabaseTest, AJobThatMayNotRunAgainAfterSuccessRunsOnceWhenOneAfterItFails) {
  auto db = std::move(Database::Open(Backend(), Notes()).value());
  std::atomic<int> runs{0};
  const auto before = db->stats();
  auto r = RunInOneBatch(*db, {CountedInsert(runs, JobRerun::kOnlyAfterFailure), FailsAfterWriting()},
                         JobRerun::kAlsoAfterSuccess);
  EXPECT_TRUE(r.statuses[0].ok()) << r.statuses[0].ToString();
  EXPECT_EQ(r.statuses[1].code(), "conflict");
  EXPECT_EQ(Ids(*db), std::vector<int64_t>{1});
  EXPECT_EQ(runs.load(), 1);
  EXPECT_EQ(db->stats().rolled_back_to_isolate, before.rolled_back_to_isolate);
}

TEST_P(DatabaseTest, InjectedCommitFailureFailsTheWholeBatchAndLeavesNoTrace) {
  auto faults = std::make_shared<testing::Faults>();
  auto factory = testing::MakeFaultyFactory(Backend(), faults);
  auto db = std::move(Database::Open(std::move(factory), Notes()).value());
  ASSERT_TRUE(db->WriteSync([](Tx& tx) { return Insert(tx, 100, "before"); }).ok());

  WriterGate gate;
  gate.Block(*db);
  faults->fail_commits = 1;  // the gate's job and the 10 below, queued while it runs
  constexpr int kJobs = 10;
  std::latch acked(kJobs);
  std::vector<Status> results(kJobs);
  for (int i = 0; i < kJobs; ++i) {
    db->Write([i](Tx& tx) { return Insert(tx, i, "lost"); }, [&, i](Status st) {
      results[i] = st;
      acked.count_down();
    });
  }
  gate.release.count_down();
  acked.wait();
  for (const auto& st : results) {
    EXPECT_EQ(st.code(), "commit_failed");
    EXPECT_NE(st.message().find("nothing of this write was saved"), std::string::npos);
  }
  EXPECT_EQ(Count(*db), 1);  // only the row from before
  EXPECT_EQ(db->stats().failed_commits, 1u);

  // The next batch succeeds.
  ASSERT_TRUE(db->WriteSync([](Tx& tx) { return Insert(tx, 5, "after"); }).ok());
  EXPECT_EQ(Count(*db), 2);
}

TEST_P(DatabaseTest, ManyThreadsWritingConcurrentlyAllCommit) {
  auto db = std::move(Database::Open(Backend(), Notes()).value());
  constexpr int kThreads = 16, kPerThread = 50;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        if (!db->WriteSync([=](Tx& tx) { return Insert(tx, t * 1000 + i, "x"); }).ok()) failures++;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(Count(*db), kThreads * kPerThread);
  EXPECT_LT(db->stats().commits, static_cast<uint64_t>(kThreads * kPerThread));
}

// Busy, not asleep: the time passes on the writer thread, as real work would.
void Spin(std::chrono::milliseconds d) {
  for (auto until = std::chrono::steady_clock::now() + d; std::chrono::steady_clock::now() < until;) {
  }
}

TEST_P(DatabaseTest, StatsSplitTheWritersTimeBetweenJobsCommitAndCallbacks) {
  auto db = std::move(Database::Open(Backend(), Notes()).value());
  const std::string body(4 << 20, 'x');  // about 1,000 WAL frames for the COMMIT to write
  uint64_t job_us = 0;  // what the job itself took: on a busy machine the insert alone may take long
  db->Write(
      [&](Tx& tx) {
        const auto began = std::chrono::steady_clock::now();
        Spin(std::chrono::milliseconds(20));
        Status st = Insert(tx, 1, body);
        job_us = static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - began).count());
        return st;
      },
      [](Status) { Spin(std::chrono::milliseconds(200)); });
  db->Close();  // the callback ran and was counted
  auto stats = db->stats();
  EXPECT_EQ(stats.commits, 1u);
  EXPECT_GE(stats.run_us, job_us);
  EXPECT_LT(stats.run_us, job_us + 200'000u);  // the callback's time is not the job's
  EXPECT_GT(stats.commit_us, 0u);
  EXPECT_GE(stats.callbacks_us, 200'000u);
}

TEST_P(DatabaseTest, CloseDrainsQueuedWritesAndRefusesNewOnes) {
  auto db = std::move(Database::Open(Backend(), Notes()).value());
  WriterGate gate;
  gate.Block(*db);
  std::atomic<int> ok{0};
  for (int i = 0; i < 5; ++i) {
    db->Write([i](Tx& tx) { return Insert(tx, i, "x"); }, [&](Status st) { ok += st.ok(); });
  }
  std::thread closer([&] { db->Close(); });
  gate.release.count_down();
  closer.join();
  EXPECT_EQ(ok.load(), 5);
  Status late;
  db->Write([](Tx& tx) { return Insert(tx, 9, "x"); }, [&](Status st) { late = st; });
  EXPECT_EQ(late.code(), "shutting_down");
  db.reset();
  auto reopened = std::move(Database::Open(Backend(), Notes()).value());
  EXPECT_EQ(Count(*reopened), 5);
}

TEST_P(DatabaseTest, AJobThatThrowsBecomesAnInternalError) {
  auto db = std::move(Database::Open(Backend(), Notes()).value());
  Status st = db->WriteSync([](Tx&) -> Status { throw std::runtime_error("boom"); });
  EXPECT_EQ(st.code(), "internal");
  EXPECT_TRUE(db->WriteSync([](Tx& tx) { return Insert(tx, 1, "x"); }).ok());
}

// Commits a batch of `n` jobs (queued behind a gate), so that the writer
// expects about that many to come back.
void CommitABatchOf(Database& db, int n, int first_id) {
  WriterGate gate;
  gate.Block(db);
  std::latch acked(n);
  for (int i = 0; i < n; ++i) {
    db.Write([id = first_id + i](Tx& tx) { return Insert(tx, id, "x"); }, [&](Status) { acked.count_down(); });
  }
  gate.release.count_down();
  acked.wait();
}

// After a commit of many jobs the writer waits for their callers' next
// writes only while they arrive in a burst: a lone write is not held for
// max_gather (a minute here; the test would time out).
TEST_P(DatabaseTest, ALoneWriteAfterABigBatchIsNotHeldForTheGatherWindow) {
  auto db = std::move(
      Database::Open(Backend(), Notes(), DatabaseOptions{.max_gather = std::chrono::minutes(1)}).value());
  CommitABatchOf(*db, 16, 0);
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(db->WriteSync([](Tx& tx) { return Insert(tx, 100, "x"); }).ok());
  ASSERT_TRUE(db->WriteSync([](Tx& tx) { return Insert(tx, 101, "x"); }).ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_EQ(Count(*db), 18);
}

TEST_P(DatabaseTest, CloseEndsAGatherAndCommitsWhatIsQueued) {
  auto db = std::move(
      Database::Open(Backend(), Notes(), DatabaseOptions{.max_gather = std::chrono::minutes(1)}).value());
  CommitABatchOf(*db, 16, 0);
  std::atomic<bool> committed{false};
  db->Write([](Tx& tx) { return Insert(tx, 100, "x"); }, [&](Status st) { committed = st.ok(); });
  auto start = std::chrono::steady_clock::now();
  db->Close();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_TRUE(committed.load());
}

// The writer's connection (OpenWriter) checkpoints its WAL in the
// background and finishes each checkpoint itself, so that the WAL restarts
// from its beginning instead of growing.
uintmax_t LargestWalOverManyCommits(const SqliteOptions& options, int commits) {
  SqliteConnectionFactory factory(options);
  auto writer = std::move(factory.OpenWriter().value());
  EXPECT_TRUE(writer->Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)", {}).ok());
  const std::string body(1500, 'b');
  uintmax_t largest = 0;
  for (int64_t id = 0; id < commits; ++id) {
    EXPECT_TRUE(writer->BeginWrite().ok());
    EXPECT_TRUE(writer->Exec("INSERT INTO t (id, body) VALUES (?, ?)", {id, std::string_view(body)}).ok());
    EXPECT_TRUE(writer->Commit().ok());
    largest = std::max(largest, std::filesystem::file_size(options.path + "-wal"));
  }
  auto reader = std::move(factory.Open().value());
  int64_t rows = -1;
  EXPECT_TRUE(reader->Query("SELECT COUNT(*) FROM t", {}, [&](const Row& row) {
                      rows = row.Int(0);
                      return Status::Ok();
                    }).ok());
  EXPECT_EQ(rows, commits);
  std::string check;
  EXPECT_TRUE(reader->Query("PRAGMA integrity_check", {}, [&](const Row& row) {
                      check += std::string(row.Text(0));
                      return Status::Ok();
                    }).ok());
  EXPECT_EQ(check, "ok");
  return largest;
}

TEST(SqliteCheckpoints, TheWritersWalIsCheckpointedInTheBackgroundAndRestarts) {
  dsh::testing::TempDir dir;
  // 3,000 commits write about 6,000 frames (24 MB); checkpoints start at
  // 1,000 frames and the WAL restarts soon after each.
  EXPECT_LT(LargestWalOverManyCommits(SqliteOptions{.path = dir.File("a.db")}, 3000), uintmax_t{8} << 20);
}

TEST(SqliteCheckpoints, PastMaxFramesTheWriterCheckpointsItself) {
  dsh::testing::TempDir dir;
  SqliteOptions options{.path = dir.File("a.db")};
  options.checkpoints.start_frames = 1'000'000;  // the background is never asked
  options.checkpoints.max_frames = 500;
  EXPECT_LT(LargestWalOverManyCommits(options, 3000), uintmax_t{4} << 20);
}

// Holds SQLite's WAL checkpoint lock (byte 121 of the `-shm` file, see
// SQLite's "WAL-mode file format") as another host's checkpoint would, with
// an open-file-description lock so that it conflicts with this process's own
// SQLite connections.
class CheckpointLockHolder {
 public:
  explicit CheckpointLockHolder(const std::string& db_path) : fd_(::open((db_path + "-shm").c_str(), O_RDWR)) {
    struct flock lock {};
    lock.l_type = F_WRLCK;
    lock.l_whence = SEEK_SET;
    lock.l_start = 121;
    lock.l_len = 1;
    held_ = fd_ >= 0 && ::fcntl(fd_, F_OFD_SETLK, &lock) == 0;
  }
  ~CheckpointLockHolder() { Release(); }
  bool held() const { return held_; }
  void Release() {
    if (fd_ >= 0) ::close(fd_);  // drops the lock
    fd_ = -1;
  }

 private:
  int fd_;
  bool held_ = false;
};

// Another host on the same profile checkpointing is routine: the writer's
// checkpoints are deferred without a warning, until the WAL passes
// max_frames because of it; once the lock is free, the next commits
// checkpoint and the WAL restarts instead of growing.
TEST(SqliteCheckpoints, ACheckpointLockHeldElsewhereDefersCheckpointsAndWarnsOnlyPastMaxFrames) {
  dsh::testing::TempDir dir;
  SqliteOptions options{.path = dir.File("a.db")};
  options.checkpoints.start_frames = 20;
  options.checkpoints.max_frames = 300;
  const uintmax_t frame_bytes = 4096 + 24, max_bytes = 32 + frame_bytes * 300;
  dsh::testing::LogCapture log;
  {
    SqliteConnectionFactory factory(options);
    auto writer = std::move(factory.OpenWriter().value());
    ASSERT_TRUE(writer->Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)", {}).ok());
    const std::string body(1500, 'b');
    int64_t id = 0;
    auto commit = [&] {
      ASSERT_TRUE(writer->BeginWrite().ok());
      ASSERT_TRUE(writer->Exec("INSERT INTO t (id, body) VALUES (?, ?)", {id++, std::string_view(body)}).ok());
      ASSERT_TRUE(writer->Commit().ok());
    };
    auto wal_bytes = [&] { return std::filesystem::file_size(options.path + "-wal"); };
    CheckpointLockHolder other(options.path);
    ASSERT_TRUE(other.held());
    while (wal_bytes() < max_bytes) {
      ASSERT_TRUE(log.Messages(spdlog::level::warn).empty()) << log.Messages(spdlog::level::warn)[0];
      commit();
    }
    // The COMMIT that took the WAL past max_frames checkpointed inline, and
    // could not; the background passes before it could not either.
    auto warnings = log.Messages(spdlog::level::warn);
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find("cannot be checkpointed: another connection holds the checkpoint lock"),
              std::string::npos)
        << warnings[0];
    auto all = log.Messages(spdlog::level::debug);
    EXPECT_NE(std::find_if(all.begin(), all.end(),
                           [](const std::string& m) { return m.find("checkpoint") != std::string::npos &&
                                                             m.find("deferred") != std::string::npos; }),
              all.end());
    for (int i = 0; i < 20; ++i) commit();
    EXPECT_EQ(log.Messages(spdlog::level::warn).size(), 1u);  // once, not per commit

    other.Release();
    const uintmax_t at_release = wal_bytes();
    for (int i = 0; i < 600; ++i) commit();
    EXPECT_LE(wal_bytes(), at_release + 4 * frame_bytes);  // restarted, not grown by 600+ frames
    auto infos = log.Messages(spdlog::level::info);
    EXPECT_NE(std::find(infos.begin(), infos.end(), "WAL checkpoints of " + options.path + " succeed again"),
              infos.end());
  }
}

TEST(SqliteConnection, ExpandsSqliteOnlyComments) {
  EXPECT_EQ(ExpandSqliteComments("CREATE TABLE t (x BIGINT) /*sqlite: WITHOUT ROWID*/;"),
            "CREATE TABLE t (x BIGINT)  WITHOUT ROWID;");
  EXPECT_EQ(ExpandSqliteComments("SELECT 1 /* plain */"), "SELECT 1 /* plain */");
}

TEST(PgConnection, TranslatesPlaceholdersAndPostgresOnlyComments) {
  EXPECT_EQ(TranslateForPostgres("SELECT a FROM t WHERE b = ? AND c > ?"), "SELECT a FROM t WHERE b = $1 AND c > $2");
  EXPECT_EQ(TranslateForPostgres("INSERT INTO t VALUES ('a?''b', \"q?\", ?) -- why?\n"),
            "INSERT INTO t VALUES ('a?''b', \"q?\", $1) -- why?\n");
  EXPECT_EQ(TranslateForPostgres("x /*sqlite: INTEGER PRIMARY KEY*/ /*postgres: BIGSERIAL PRIMARY KEY*/, y /* ? */ ?"),
            "x /*sqlite: INTEGER PRIMARY KEY*/  BIGSERIAL PRIMARY KEY, y /* ? */ $1");
}

TEST(PgConnection, PlansOnceOnlyStatementsWhosePlanCannotDependOnTheirParameters) {
  // Inserts of values and equality lookups: one plan, prepared.
  EXPECT_TRUE(HasOnePlan("INSERT INTO inbox (a, b) VALUES ($1, $2) ON CONFLICT (a) DO NOTHING RETURNING num"));
  EXPECT_TRUE(HasOnePlan("UPDATE loops SET due_at = $1, state = $2 WHERE loop_id = $3 AND version = $4"));
  EXPECT_TRUE(HasOnePlan("SELECT num, last_seq FROM sessions WHERE id = $1 FOR NO KEY UPDATE"));
  EXPECT_TRUE(HasOnePlan("delete from t where k = $1"));
  EXPECT_TRUE(HasOnePlan("INSERT INTO t (a, prev) SELECT $1, currval('t_id_seq')"));
  // Values inserted only where a key finds its row (a delivery's session).
  EXPECT_TRUE(HasOnePlan("INSERT INTO inbox (a, b) SELECT $1, $2 FROM sessions WHERE id = $3"
                         " ON CONFLICT (b, k) DO NOTHING RETURNING num"));
  // A SET may compare; only the conditions decide.
  EXPECT_TRUE(HasOnePlan("UPDATE s SET at = CASE WHEN at > $1 THEN at ELSE $2 END WHERE num = $3"));
  // Whether a column is null, and an order, are the same for every call's
  // values (the table's growth is another matter: the connection prepares
  // such statements again as it runs them).
  EXPECT_TRUE(HasOnePlan("UPDATE inbox SET consumed_at = $1 WHERE message_id = $2 AND consumed_at IS NULL"));
  EXPECT_TRUE(HasOnePlan("SELECT * FROM inbox WHERE session_id = $1 AND consumed_at IS NULL ORDER BY num"));
  EXPECT_TRUE(HasOnePlan("SELECT * FROM t WHERE a = $1 AND b IS NOT NULL"));
  EXPECT_TRUE(HasOnePlan("select * from t where a = $1 order by b"));
  // Without parameters, every call is the same.
  EXPECT_TRUE(HasOnePlan("SELECT (SELECT MIN(a) FROM t), (SELECT MAX(b) FROM u WHERE c > 0)"));
  EXPECT_TRUE(HasOnePlan("SELECT 1"));
  EXPECT_TRUE(HasOnePlan("INSERT INTO t SELECT * FROM u"));
  // Anything whose best plan depends on the values:
  // planned for each call.
  for (const char* sql : {
           "SELECT * FROM loops WHERE next_at <= $1",
           "SELECT * FROM loops l LEFT JOIN loop_runs r ON r.loop_id = l.loop_id WHERE l.loop_id = $1",
           "SELECT * FROM t WHERE a = $1 LIMIT 1",
           "SELECT * FROM t WHERE a = $1 ORDER BY b LIMIT $2",
           "SELECT * FROM t WHERE a IS NOT NULL AND NOT b = $1",
           "SELECT a, count(*) FROM t WHERE b = $1 GROUP BY a",
           "SELECT * FROM t WHERE a = (SELECT max(a) FROM t WHERE b = $1)",
           "SELECT * FROM t WHERE a IN ($1, $2)",
           "SELECT * FROM t WHERE a = $1 OR b = $2",
           "SELECT * FROM t WHERE a <> $1",
           "SELECT * FROM t WHERE a != $1",
           "SELECT * FROM t WHERE a BETWEEN $1 AND $2",
           "SELECT * FROM t WHERE a LIKE $1",
           "SELECT * FROM t WHERE a = ANY($1)",
           "SELECT * FROM t WHERE doc @@ to_tsquery($1)",
           "INSERT INTO t SELECT * FROM u WHERE a > $1",
           "INSERT INTO t SELECT (SELECT max(a) FROM u WHERE b = $1)",
       }) {
    EXPECT_FALSE(HasOnePlan(sql)) << sql;
  }
}

// A connection to a new database of its own, dropped at the end.
struct ScratchPg {
  std::string conninfo;
  std::unique_ptr<PgConnectionFactory> factory;
  std::unique_ptr<Connection> conn;
  ~ScratchPg() {
    conn.reset();
    if (!conninfo.empty()) testing::PgTestServer::DropDatabase(conninfo);
  }
};
void OpenScratchPg(ScratchPg& out) {
  auto conninfo = testing::PgTestServer::NewDatabase();
  ASSERT_TRUE(conninfo.ok()) << conninfo.status().ToString();
  out.conninfo = *conninfo;
  out.factory = std::make_unique<PgConnectionFactory>(PgOptions{.url = *conninfo});
  auto c = out.factory->Open();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  out.conn = std::move(c).value();
}

// A statement not planned once is planned for the values it runs with. Seen
// from outside: the planner folds an expression of constants, so with the
// values known it divides by the zero given for `?` while planning, in a
// CASE arm no row reaches (PostgreSQL documents this folding), and fails; a
// generic plan keeps the parameter and never divides. Such generic plans were
// what every statement got under plan_cache_mode = force_generic_plan: the
// claim of due loops then scanned every loop and sorted them, 2.5 ms a call
// at 7,000 loops, a fifth of the server's time per occurrence.
TEST(PgConnection, StatementsNotPlannedOnceArePlannedForTheirValues) {
  ScratchPg pg;
  ASSERT_NO_FATAL_FAILURE(OpenScratchPg(pg));
  Connection& conn = *pg.conn;
  ASSERT_TRUE(conn.Exec("CREATE TABLE t (a BIGINT)").ok());
  ASSERT_TRUE(conn.Exec("INSERT INTO t SELECT generate_series(1, 100)").ok());
  constexpr const char* kSql = "SELECT a FROM t WHERE a = ? AND CASE WHEN a < 0 THEN 1 / ? ELSE 1 END = 1 ORDER BY a";
  ASSERT_FALSE(HasOnePlan(TranslateForPostgres(kSql)));
  std::vector<int64_t> found;
  auto collect = [&](const Row& row) {
    found.push_back(row.Int(0));
    return Status::Ok();
  };
  for (int i = 0; i < 3; ++i) {  // every time, not only the first
    Status st = conn.Query(kSql, {int64_t{5}, int64_t{0}}, collect);
    EXPECT_NE(st.message().find("division by zero"), std::string::npos) << st.ToString();
  }
  EXPECT_TRUE(conn.Query(kSql, {int64_t{5}, int64_t{1}}, collect).ok());
  EXPECT_EQ(found, std::vector<int64_t>{5});

  // One that is planned once runs its generic plan, after a few custom
  // ones at most (PostgreSQL's `auto` compares them first).
  constexpr const char* kLookup = "SELECT a FROM t WHERE a = ?";
  ASSERT_TRUE(HasOnePlan(TranslateForPostgres(kLookup)));
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(conn.Query(kLookup, {int64_t{i}}, collect).ok());
  int64_t generic = -1, custom = -1;
  ASSERT_TRUE(conn.Query("SELECT generic_plans, custom_plans FROM pg_prepared_statements"
                         " WHERE statement = 'SELECT a FROM t WHERE a = $1'",
                         {}, [&](const Row& row) {
                           generic = row.Int(0);
                           custom = row.Int(1);
                           return Status::Ok();
                         })
                  .ok());
  EXPECT_GE(generic, 5);
  EXPECT_LE(custom, 5);
}

// A generic plan is made for the table as it is then. Made while a table
// was empty, a key lookup scans the whole table, and PostgreSQL keeps that
// plan until the table's statistics change (autovacuum, ANALYZE), which on
// a young database can be minutes of a table growing by hundreds of rows a
// second. The connection prepares its statements again as they keep
// running, so the plan follows the table.
TEST(PgConnection, AGenericPlanIsMadeAgainAsItsTableGrows) {
  ScratchPg pg;
  ASSERT_NO_FATAL_FAILURE(OpenScratchPg(pg));
  Connection& conn = *pg.conn;
  ASSERT_TRUE(conn.Exec("CREATE TABLE t (a BIGINT PRIMARY KEY, b TEXT) WITH (autovacuum_enabled = false)").ok());
  ASSERT_TRUE(conn.Exec("VACUUM t").ok());  // known to be empty
  constexpr const char* kLookup = "SELECT b FROM t WHERE a = ?";
  ASSERT_TRUE(HasOnePlan(TranslateForPostgres(kLookup)));
  auto lookups = [&](int n) {
    for (int i = 0; i < n; ++i) ASSERT_TRUE(conn.Query(kLookup, {int64_t{i}}, [](const Row&) { return Status::Ok(); }).ok());
  };
  auto plan = [&] {
    std::string name;
    EXPECT_TRUE(conn.Query("SELECT name FROM pg_prepared_statements WHERE statement = 'SELECT b FROM t WHERE a = $1'",
                           {}, [&](const Row& row) {
                             name = row.String(0);
                             return Status::Ok();
                           })
                    .ok());
    std::string out;
    EXPECT_TRUE(conn.Query("EXPLAIN (COSTS OFF) EXECUTE " + name + "(7)", {}, [&](const Row& row) {
      out += row.String(0) + "\n";
      return Status::Ok();
    }).ok());
    return out;
  };
  lookups(10);
  EXPECT_NE(plan().find("Seq Scan"), std::string::npos) << plan();  // right for an empty table
  ASSERT_TRUE(conn.Exec("INSERT INTO t SELECT i, 'x' FROM generate_series(1, 100000) i").ok());
  lookups(100);
  const std::string grown = plan();
  EXPECT_NE(grown.find("Index Scan using t_pkey"), std::string::npos) << grown;
}

TEST(PgConnection, DescribesTheServerWithoutThePassword) {
  PgConnectionFactory f(PgOptions{.url = "postgresql://dsh:s3cret@db.example:5433/prod"});
  EXPECT_EQ(f.Describe(), "postgres db.example:5433/prod as dsh");
  EXPECT_EQ(f.Describe().find("s3cret"), std::string::npos);
  PgConnectionFactory kv(PgOptions{.url = "host=/run/pg user=postgres dbname=x password=hunter2"});
  EXPECT_EQ(kv.Describe(), "postgres /run/pg/x as postgres");
}

TEST(PgConnection, AServerThatIsNotThereIsUnavailableAndNamesIt) {
  dsh::testing::TempDir dir;
  PgConnectionFactory f(PgOptions{.url = "host=" + dir.path().string() + " user=nobody password=hunter2 dbname=x"});
  auto c = f.Open();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), "unavailable");
  EXPECT_NE(c.status().message().find("postgres " + dir.path().string() + "/x"), std::string::npos) << c.status().ToString();
  EXPECT_EQ(c.status().message().find("hunter2"), std::string::npos);
}

// A host that stops mid-transaction (frozen, cut off) releases what it
// holds: the server rolls the transaction back after the idle limit, so
// another host's write of the same row goes on instead of waiting for it;
// the stopped connection learns it was ended. And every connection sets the
// limit itself, and how long it waits for a row.
TEST(PgConnection, ATransactionLeftIdleIsEndedByTheServerAndReleasesItsRows) {
  auto conninfo = testing::PgTestServer::NewDatabase();
  ASSERT_TRUE(conninfo.ok()) << conninfo.status().ToString();
  {
    PgConnectionFactory defaults(PgOptions{.url = *conninfo});
    auto c = defaults.Open();
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    std::string limit;
    ASSERT_TRUE((*c)->Query("SHOW idle_in_transaction_session_timeout", {}, [&](const Row& row) {
      limit = row.String(0);
      return Status::Ok();
    }).ok());
    EXPECT_EQ(limit, "15s");
    ASSERT_TRUE((*c)->Query("SHOW lock_timeout", {}, [&](const Row& row) {
      limit = row.String(0);
      return Status::Ok();
    }).ok());
    EXPECT_EQ(limit, "200ms");
    ASSERT_TRUE((*c)->Exec("CREATE TABLE counter (id BIGINT PRIMARY KEY, n BIGINT NOT NULL)").ok());
    ASSERT_TRUE((*c)->Exec("INSERT INTO counter VALUES (1, 0)").ok());
  }
  PgConnectionFactory factory(PgOptions{.url = *conninfo,
                                        .idle_in_transaction_timeout = std::chrono::milliseconds(500),
                                        .lock_timeout = std::chrono::milliseconds(0)});  // waits as long as it takes
  auto frozen = factory.Open();
  auto other = factory.Open();
  ASSERT_TRUE(frozen.ok() && other.ok());
  ASSERT_TRUE((*frozen)->BeginWrite().ok());
  ASSERT_TRUE((*frozen)->Exec("UPDATE counter SET n = n + 1 WHERE id = 1").ok());
  // `frozen` now says nothing; `other` wants to write the same row.
  auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE((*other)->BeginWrite().ok());
  auto changed = (*other)->Exec("UPDATE counter SET n = n + 10 WHERE id = 1");
  ASSERT_TRUE(changed.ok()) << changed.status().ToString();
  auto waited = std::chrono::steady_clock::now() - started;
  EXPECT_GE(waited, std::chrono::milliseconds(400));  // it did wait for the row
  EXPECT_LT(waited, std::chrono::seconds(10));         // the limit (0.5 s), not forever
  ASSERT_TRUE((*other)->Commit().ok());
  auto late = (*frozen)->Exec("SELECT 1");
  EXPECT_FALSE(late.ok());
  int64_t n = -1;
  ASSERT_TRUE((*other)->Query("SELECT n FROM counter", {}, [&](const Row& row) {
    n = row.Int(0);
    return Status::Ok();
  }).ok());
  EXPECT_EQ(n, 10);  // the frozen transaction's change was rolled back
  testing::PgTestServer::DropDatabase(*conninfo);
}

// BEGIN, each job's SAVEPOINT and the previous job's RELEASE go with the
// next statement, in one round trip: transactions, savepoints and read
// snapshots keep their meaning, and a failure in that round trip is the
// statement's.
TEST(PgConnection, CommandsSentWithTheNextStatementKeepTheirMeaning) {
  auto conninfo = testing::PgTestServer::NewDatabase();
  ASSERT_TRUE(conninfo.ok()) << conninfo.status().ToString();
  PgConnectionFactory factory(PgOptions{.url = *conninfo});
  auto c = factory.Open();
  auto other = factory.Open();
  ASSERT_TRUE(c.ok() && other.ok());
  Connection& conn = **c;
  ASSERT_TRUE(conn.Exec("CREATE TABLE t (id BIGINT PRIMARY KEY)").ok());
  auto ids = [&](Connection& on) {
    std::vector<int64_t> out;
    EXPECT_TRUE(on.Query("SELECT id FROM t ORDER BY id", {}, [&](const Row& row) {
      out.push_back(row.Int(0));
      return Status::Ok();
    }).ok());
    return out;
  };

  // Jobs: one writes, one fails on a duplicate and rolls back alone, one
  // writes nothing at all, one writes after them.
  ASSERT_TRUE(conn.BeginWrite().ok());
  EXPECT_FALSE(conn.InTransaction());  // nothing sent yet
  ASSERT_TRUE(conn.Savepoint("job").ok());
  ASSERT_TRUE(conn.Exec("INSERT INTO t VALUES (?)", {int64_t{1}}).ok());
  EXPECT_TRUE(conn.InTransaction());
  ASSERT_TRUE(conn.ReleaseSavepoint("job").ok());
  ASSERT_TRUE(conn.Savepoint("job").ok());
  auto dup = conn.Exec("INSERT INTO t VALUES (?)", {int64_t{1}});
  EXPECT_EQ(dup.status().code(), codes::kConflict) << dup.status().ToString();
  ASSERT_TRUE(conn.RollbackToSavepoint("job").ok());
  ASSERT_TRUE(conn.ReleaseSavepoint("job").ok());
  ASSERT_TRUE(conn.Savepoint("job").ok());
  ASSERT_TRUE(conn.RollbackToSavepoint("job").ok());  // failed before any statement
  ASSERT_TRUE(conn.ReleaseSavepoint("job").ok());
  ASSERT_TRUE(conn.Savepoint("job").ok());
  ASSERT_TRUE(conn.ReleaseSavepoint("job").ok());
  ASSERT_TRUE(conn.Savepoint("job").ok());
  ASSERT_TRUE(conn.Exec("INSERT INTO t VALUES (?)", {int64_t{2}}).ok());
  ASSERT_TRUE(conn.ReleaseSavepoint("job").ok());
  EXPECT_EQ(ids(**other), std::vector<int64_t>{});  // not committed yet
  ASSERT_TRUE(conn.Commit().ok());
  EXPECT_EQ(ids(**other), (std::vector<int64_t>{1, 2}));

  // A write transaction with no statement commits nothing, and fails
  // nothing.
  ASSERT_TRUE(conn.BeginWrite().ok());
  ASSERT_TRUE(conn.Savepoint("job").ok());
  ASSERT_TRUE(conn.ReleaseSavepoint("job").ok());
  ASSERT_TRUE(conn.Commit().ok());
  EXPECT_FALSE(conn.InTransaction());

  // A read is one snapshot from its first statement on.
  ASSERT_TRUE(conn.BeginRead().ok());
  EXPECT_EQ(ids(conn), (std::vector<int64_t>{1, 2}));
  ASSERT_TRUE((*other)->Exec("INSERT INTO t VALUES (3)").ok());
  EXPECT_EQ(ids(conn), (std::vector<int64_t>{1, 2}));
  auto write = conn.Exec("INSERT INTO t VALUES (?)", {int64_t{4}});
  EXPECT_FALSE(write.ok());  // READ ONLY
  ASSERT_TRUE(conn.Rollback().ok());
  EXPECT_EQ(ids(conn), (std::vector<int64_t>{1, 2, 3}));

  // A failure of a command sent ahead fails the statement: a savepoint
  // released twice does not exist the second time.
  ASSERT_TRUE(conn.BeginWrite().ok());
  ASSERT_TRUE(conn.Savepoint("job").ok());
  ASSERT_TRUE(conn.Exec("INSERT INTO t VALUES (?)", {int64_t{5}}).ok());
  ASSERT_TRUE(conn.ReleaseSavepoint("job").ok());
  ASSERT_TRUE(conn.ReleaseSavepoint("job").ok());
  auto after = conn.Exec("INSERT INTO t VALUES (?)", {int64_t{6}});
  EXPECT_FALSE(after.ok());
  EXPECT_NE(after.status().message().find("RELEASE SAVEPOINT job"), std::string::npos) << after.status().ToString();
  EXPECT_FALSE(conn.Commit().ok());
  ASSERT_TRUE(conn.Rollback().ok());
  EXPECT_EQ(ids(**other), (std::vector<int64_t>{1, 2, 3}));
  // The connection goes on.
  ASSERT_TRUE(conn.BeginWrite().ok());
  ASSERT_TRUE(conn.Exec("INSERT INTO t VALUES (?)", {int64_t{7}}).ok());
  ASSERT_TRUE(conn.Commit().ok());
  EXPECT_EQ(ids(**other), (std::vector<int64_t>{1, 2, 3, 7}));
  c->reset();
  other->reset();
  testing::PgTestServer::DropDatabase(*conninfo);
}

// A write sent later that never ran — the server skipped it after a failed
// command ahead of it — loses the transaction, as one that failed would: its
// job ended as done, so no savepoint may take the transaction back past it.
TEST(PgConnection, AWriteSentLaterThatTheServerSkippedLosesTheTransaction) {
  auto conninfo = testing::PgTestServer::NewDatabase();
  ASSERT_TRUE(conninfo.ok()) << conninfo.status().ToString();
  PgConnectionFactory factory(PgOptions{.url = *conninfo});
  auto c = factory.Open();
  ASSERT_TRUE(c.ok());
  Connection& conn = **c;
  ASSERT_TRUE(conn.Exec("CREATE TABLE t (id BIGINT PRIMARY KEY)").ok());
  ASSERT_TRUE(conn.BeginWrite().ok());
  ASSERT_TRUE(conn.Savepoint("before").ok());
  ASSERT_TRUE(conn.Exec("INSERT INTO t VALUES (?)", {int64_t{1}}).ok());
  ASSERT_TRUE(conn.Savepoint("job").ok());
  ASSERT_TRUE(conn.Exec("INSERT INTO t VALUES (?)", {int64_t{2}}).ok());
  ASSERT_TRUE(conn.ReleaseSavepoint("job").ok());
  ASSERT_TRUE(conn.ReleaseSavepoint("job").ok());  // fails on the server: released already
  ASSERT_TRUE(conn.ExecLater("INSERT INTO t VALUES (?)", {int64_t{3}}).ok());
  auto next = conn.Exec("INSERT INTO t VALUES (?)", {int64_t{4}});
  ASSERT_FALSE(next.ok());
  EXPECT_NE(next.status().message().find("an earlier write of this transaction failed"), std::string::npos)
      << next.status().ToString();
  EXPECT_FALSE(conn.RollbackToSavepoint("before").ok()) << "rolling back to an earlier savepoint would drop the skipped write silently";
  EXPECT_FALSE(conn.Commit().ok());
  ASSERT_TRUE(conn.Rollback().ok());
  int64_t rows = -1;
  ASSERT_TRUE(conn.Query("SELECT COUNT(*) FROM t", {}, [&](const Row& row) {
    rows = row.Int(0);
    return Status::Ok();
  }).ok());
  EXPECT_EQ(rows, 0);
  c->reset();
  testing::PgTestServer::DropDatabase(*conninfo);
}

// A job that waits for a row another connection never lets go is run again
// (contended) and fails with `unavailable` after DatabaseOptions::
// contended_for, saving nothing; jobs on other rows commit all the while.
// Two counters, rows 1 and 2, at 0.
std::vector<Migration> Counters() {
  return {{"counter", 1, {"CREATE TABLE counter (id BIGINT PRIMARY KEY, n BIGINT NOT NULL)",
                          "INSERT INTO counter VALUES (1, 0), (2, 0)"}}};
}
Result<std::pair<int64_t, int64_t>> CounterValues(Database& db) {
  return db.ReadValue<std::pair<int64_t, int64_t>>([](Tx& tx) -> Result<std::pair<int64_t, int64_t>> {
    std::pair<int64_t, int64_t> out;
    DSH_RETURN_IF_ERROR(tx.Query("SELECT id, n FROM counter ORDER BY id", {}, [&](const Row& row) {
      (row.Int(0) == 1 ? out.first : out.second) = row.Int(1);
      return Status::Ok();
    }));
    return out;
  });
}

TEST(PgDatabase, AJobWhoseRowStaysHeldGivesUpWhileOthersCommit) {
  auto conninfo = testing::PgTestServer::NewDatabase();
  ASSERT_TRUE(conninfo.ok()) << conninfo.status().ToString();
  DatabaseOptions options;
  options.contended_for = std::chrono::seconds(1);
  auto db = Database::Open(testing::PgTestServer::Factory(*conninfo), Counters(), options);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  auto frozen = testing::PgTestServer::Factory(*conninfo)->Open();
  ASSERT_TRUE(frozen.ok());
  ASSERT_TRUE((*frozen)->BeginWrite().ok());
  ASSERT_TRUE((*frozen)->Exec("UPDATE counter SET n = n + 1 WHERE id = 1").ok());

  auto add = [](int64_t id) {
    return [id](Tx& tx) { return tx.Exec("UPDATE counter SET n = n + 1 WHERE id = ?", {id}).status(); };
  };
  std::promise<Status> gave_up;
  auto outcome = gave_up.get_future();
  const auto started = std::chrono::steady_clock::now();
  (*db)->Write(add(1), [&](Status st) { gave_up.set_value(std::move(st)); });
  for (int i = 0; i < 5; ++i) {
    auto one = std::chrono::steady_clock::now();
    ASSERT_TRUE((*db)->WriteSync(add(2)).ok());
    EXPECT_LT(std::chrono::steady_clock::now() - one, std::chrono::milliseconds(1500));
  }
  ASSERT_EQ(outcome.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  Status st = outcome.get();
  EXPECT_EQ(st.code(), "unavailable");
  EXPECT_NE(st.message().find("rows another writer holds"), std::string::npos) << st.ToString();
  EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::seconds(1));
  Database::Stats stats = (*db)->stats();
  EXPECT_GE(stats.contended, 2u);  // run again at least once before giving up
  EXPECT_EQ(stats.contended_failed, 1u);
  ASSERT_TRUE((*frozen)->Commit().ok());
  auto n = CounterValues(**db);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->first, 1);   // the frozen transaction's; the job that gave up saved nothing
  EXPECT_EQ(n->second, 5);
  db->reset();
  testing::PgTestServer::DropDatabase(*conninfo);
}

// A contended job among jobs without savepoints: the jobs before it run
// again and commit once, and it runs later, once the row is free.
TEST(PgDatabase, AContendedJobWithoutSavepointRunsLaterWhileItsBatchCommitsOnce) {
  auto conninfo = testing::PgTestServer::NewDatabase();
  ASSERT_TRUE(conninfo.ok()) << conninfo.status().ToString();
  auto db = Database::Open(testing::PgTestServer::Factory(*conninfo), Counters());
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  auto frozen = testing::PgTestServer::Factory(*conninfo)->Open();
  ASSERT_TRUE(frozen.ok());
  ASSERT_TRUE((*frozen)->BeginWrite().ok());
  ASSERT_TRUE((*frozen)->Exec("UPDATE counter SET n = n + 1 WHERE id = 1").ok());

  std::atomic<int> runs_before{0}, runs_contended{0};
  auto add = [](Tx& tx, int64_t id) { return tx.Exec("UPDATE counter SET n = n + 1 WHERE id = ?", {id}).status(); };
  constexpr auto kAgain = JobRerun::kAlsoAfterSuccess;
  const auto before = (*db)->stats();
  WriterGate gate;
  gate.Block(**db, kAgain);
  std::latch batch_acked(2);
  std::promise<Status> contended_outcome;
  Status first, last;
  (*db)->Write(
      [&](Tx& tx) {
        ++runs_before;
        return add(tx, 2);
      },
      [&](Status st) {
        first = st;
        batch_acked.count_down();
      },
      JobIsolation::kSavepoint, kAgain);
  (*db)->Write(
      [&](Tx& tx) {
        ++runs_contended;
        return add(tx, 1);
      },
      [&](Status st) { contended_outcome.set_value(st); }, JobIsolation::kSavepoint, kAgain);
  (*db)->Write([&](Tx& tx) { return add(tx, 2); },
               [&](Status st) {
                 last = st;
                 batch_acked.count_down();
               });
  gate.release.count_down();
  batch_acked.wait();
  EXPECT_TRUE(first.ok()) << first.ToString();
  EXPECT_TRUE(last.ok()) << last.ToString();
  EXPECT_EQ(runs_before.load(), 2);     // without a savepoint, then again in one
  EXPECT_EQ(runs_contended.load(), 1);  // not at once again: it waits for a later transaction
  ASSERT_TRUE((*frozen)->Commit().ok());
  auto outcome = contended_outcome.get_future();
  ASSERT_EQ(outcome.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  EXPECT_TRUE(outcome.get().ok());
  EXPECT_GE(runs_contended.load(), 2);
  Database::Stats stats = (*db)->stats();
  EXPECT_EQ(stats.rolled_back_to_isolate - before.rolled_back_to_isolate, 1u);
  EXPECT_GE(stats.contended - before.contended, 1u);
  auto n = CounterValues(**db);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->first, 2);   // the frozen transaction's and the contended job's, once
  EXPECT_EQ(n->second, 2);  // the batch's two jobs, once each
  db->reset();
  testing::PgTestServer::DropDatabase(*conninfo);
}

// Writers commit jobs of five rows each while the server is SIGKILLed and
// started again: every acknowledged job is there whole, no job is there in
// part, and writes work again once the server is back. The writers go on until
// the kill has failed some of their writes and writes succeed again after the
// restart, so the kill always lands among writes however fast the machine.
TEST(PgConnection, AServerKilledMidBatchKeepsEveryAcknowledgedWriteAndNoHalfOne) {
  auto server = testing::PgPrivateServer::Start();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  std::vector<Migration> rows = {{"rows", 1, {"CREATE TABLE rows (job BIGINT NOT NULL, part BIGINT NOT NULL)"}}};
  auto db = Database::Open(testing::PgTestServer::Factory((*server)->conninfo()), rows);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  constexpr int kThreads = 8;
  constexpr int64_t kJobsPerThread = 1'000'000;  // job ids: thread * this + i
  constexpr int kFailuresWanted = 50;           // then writers wait for the restart
  struct Outcome {
    int64_t job;
    Status status;
  };
  std::vector<std::vector<Outcome>> outcomes(kThreads);
  std::mutex mu;
  std::condition_variable progressed;
  int done = 0, failed = 0, ok_after_resume = 0;  // GUARDED_BY(mu)
  bool resumed = false, stop = false;              // GUARDED_BY(mu)
  auto wait_until = [&](auto pred) {
    std::unique_lock lock(mu);
    return progressed.wait_for(lock, std::chrono::seconds(120), pred);
  };
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      for (int64_t i = 0;; ++i) {
        {
          std::unique_lock lock(mu);
          progressed.wait(lock, [&] { return stop || resumed || failed < kFailuresWanted; });
          if (stop) return;
        }
        const int64_t job = t * kJobsPerThread + i;
        Status st = (*db)->WriteSync([job](Tx& tx) -> Status {
          for (int64_t part = 0; part < 5; ++part) {
            DSH_RETURN_IF_ERROR(tx.Exec("INSERT INTO rows (job, part) VALUES (?, ?)", {job, part}).status());
          }
          return Status::Ok();
        });
        std::lock_guard lock(mu);
        ++done;
        if (!st.ok()) ++failed;
        if (st.ok() && resumed) ++ok_after_resume;
        outcomes[t].push_back({job, std::move(st)});
        progressed.notify_all();
      }
    });
  }
  auto stop_writers = [&] {
    {
      std::lock_guard lock(mu);
      stop = true;
    }
    progressed.notify_all();
    for (auto& w : writers) w.join();
  };
  bool ok = wait_until([&] { return done >= 200; });
  if (ok) ok = (*server)->Kill().ok();
  if (ok) ok = wait_until([&] { return failed >= kFailuresWanted; });  // writes fail while it is down
  if (ok) ok = (*server)->Resume().ok();
  if (ok) {
    {
      std::lock_guard lock(mu);
      resumed = true;
    }
    progressed.notify_all();
    ok = wait_until([&] { return ok_after_resume >= 100; });  // and the host writes again
  }
  stop_writers();
  ASSERT_TRUE(ok) << "done " << done << ", failed " << failed << ", written after the restart " << ok_after_resume;

  std::map<int64_t, int64_t> parts;  // job -> rows
  Status read = Status::Ok();
  for (int attempt = 0; attempt < 50; ++attempt) {  // the reader reconnects on its next transaction
    parts.clear();
    read = (*db)->ReadSync([&](Tx& tx) {
      return tx.Query("SELECT job, COUNT(*) FROM rows GROUP BY job", {}, [&](const Row& row) {
        parts[row.Int(0)] = row.Int(1);
        return Status::Ok();
      });
    });
    if (read.ok()) break;
  }
  ASSERT_TRUE(read.ok()) << read.ToString();
  int acknowledged = 0;
  std::set<std::string> codes_seen;
  for (const auto& thread : outcomes) {
    for (const auto& [job, st] : thread) {
      if (st.ok()) {
        ++acknowledged;
        EXPECT_EQ(parts[job], 5) << "acknowledged job " << job << " is not all there";
      } else {
        codes_seen.insert(st.code());
        EXPECT_TRUE(parts[job] == 0 || parts[job] == 5) << "job " << job << " half there: " << parts[job];
        // Nothing but "not saved" or "not known" may be said of a write the server lost.
        EXPECT_TRUE(st.code() == "unavailable" || st.code() == "commit_failed" || st.code() == "persistence_uncertain")
            << st.ToString();
      }
    }
  }
  std::string seen;
  for (const auto& c : codes_seen) seen += c + " ";
  RecordProperty("acknowledged", acknowledged);
  RecordProperty("failed", failed);
  RecordProperty("codes", seen);
}

TEST(PgConnection, ReadsBooleansAndNumericsAsSqliteWould) {
  auto conninfo = testing::PgTestServer::NewDatabase();
  ASSERT_TRUE(conninfo.ok()) << conninfo.status().ToString();
  auto db = Database::Open(testing::PgTestServer::Factory(*conninfo), Notes());
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  ASSERT_TRUE((*db)->WriteSync([](Tx& tx) { return Insert(tx, 7, "x"); }).ok());
  auto r = (*db)->ReadValue<std::vector<int64_t>>([](Tx& tx) -> Result<std::vector<int64_t>> {
    std::vector<int64_t> out;
    DSH_RETURN_IF_ERROR(tx.Query("SELECT id = ?, ? IS NULL, SUM(id), AVG(id) FROM notes GROUP BY id",
                                 {int64_t{7}, nullptr}, [&](const Row& row) {
                                   for (int c = 0; c < 4; ++c) out.push_back(row.Int(c));
                                   return Status::Ok();
                                 }));
    return out;
  });
  db->reset();
  testing::PgTestServer::DropDatabase(*conninfo);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, (std::vector<int64_t>{1, 1, 7, 7}));
}

// What a host's subscriber heard, for waiting on it.
struct Heard {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> payloads;

  std::function<void(std::string_view)> Fn() {
    return [this](std::string_view p) {
      std::lock_guard lock(mu);
      payloads.emplace_back(p);
      cv.notify_all();
    };
  }
  std::vector<std::string> WaitFor(size_t n) {
    std::unique_lock lock(mu);
    cv.wait_for(lock, std::chrono::seconds(10), [&] { return payloads.size() >= n; });
    return payloads;
  }
};

TEST(PgConnection, NoticesReachTheOtherHostsOnceCommittedAndNeverTheSender) {
  auto conninfo = testing::PgTestServer::NewDatabase();
  ASSERT_TRUE(conninfo.ok()) << conninfo.status().ToString();
  auto a = Database::Open(testing::PgTestServer::Factory(*conninfo), Notes());
  auto b = Database::Open(testing::PgTestServer::Factory(*conninfo), Notes());
  ASSERT_TRUE(a.ok() && b.ok());
  Heard heard_a, heard_b, heard_other;
  Subscription sa = (*a)->Subscribe("notes", heard_a.Fn());
  Subscription sb = (*b)->Subscribe("notes", heard_b.Fn());
  Subscription so = (*b)->Subscribe("other", heard_other.Fn());
  auto notify = [](std::string payload, bool fail) {
    return [payload, fail](Tx& tx) -> Status {
      DSH_RETURN_IF_ERROR(tx.Notify("notes", payload));
      return fail ? Status("nope", "rolled back") : Status::Ok();
    };
  };
  EXPECT_EQ((*a)->WriteSync(notify("rolled back", true)).code(), "nope");
  EXPECT_TRUE((*a)->WriteSync(notify("one", false)).ok());
  EXPECT_EQ((*b)->WriteSync([](Tx& tx) { return tx.Notify("Bad-Name", "x"); }).code(), codes::kInvalidArguments);
  EXPECT_TRUE((*b)->WriteSync(notify("from b", false)).ok());
  // Each listener hears notices in commit order: once A heard B's, it would
  // have heard its own "one" too, had it been sent to it.
  EXPECT_EQ(heard_a.WaitFor(1), std::vector<std::string>{"from b"});
  EXPECT_EQ(heard_b.WaitFor(1), std::vector<std::string>{"one"});
  EXPECT_TRUE(heard_other.WaitFor(0).empty());
  sa.reset();
  sb.reset();
  so.reset();
  a->reset();
  b->reset();
  testing::PgTestServer::DropDatabase(*conninfo);
}

TEST(PgConnection, AHostKeepsTheServersTimeWhateverItsOwnClockSays) {
  auto conninfo = testing::PgTestServer::NewDatabase();
  ASSERT_TRUE(conninfo.ok()) << conninfo.status().ToString();
  FakeClock skewed;  // 2026-01-01, months away from the server's clock
  DatabaseOptions options;
  options.clock = &skewed;
  auto db = Database::Open(testing::PgTestServer::Factory(*conninfo), Notes(), options);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  DatabaseClock clock(skewed, **db);
  int64_t real = ToUnixMillis(std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::system_clock::now()));
  EXPECT_NEAR(static_cast<double>(ToUnixMillis(clock.Now())), static_cast<double>(real), 2000.0);
  EXPECT_EQ(clock.MonotonicNow(), skewed.MonotonicNow());
  db->reset();
  testing::PgTestServer::DropDatabase(*conninfo);
}

TEST(SqliteConnection, OnOneMachineTheClockIsTheHostsAndNoticesAreNoOps) {
  dsh::testing::TempDir dir;
  FakeClock skewed;
  DatabaseOptions options;
  options.clock = &skewed;
  auto db = Database::Open(std::make_unique<SqliteConnectionFactory>(SqliteOptions{.path = dir.File("dsh.db")}), Notes(),
                           options);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  EXPECT_EQ((*db)->clock_offset_ms(), 0);
  Subscription sub = (*db)->Subscribe("notes", [](std::string_view) { ADD_FAILURE() << "SQLite has no notices"; });
  EXPECT_TRUE((*db)->WriteSync([](Tx& tx) { return tx.Notify("notes", "x"); }).ok());
}

}  // namespace
}  // namespace dsh::store
