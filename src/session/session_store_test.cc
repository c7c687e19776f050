#include "session/session_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <mutex>
#include <thread>

#include "base/testing/temp_dir.h"
#include "store/testing/test_backend.h"

namespace dsh::session {
namespace {

using namespace std::chrono_literals;

class SessionStoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  SessionStoreTest() {
    Reopen();
  }
  void Reopen() {
    store_.reset();
    db_.reset();
    auto db = store::Database::Open(backend_.Factory(), SessionStore::Migrations());
    EXPECT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(db).value();
    store_ = std::make_unique<SessionStore>(*db_, clock_);
  }
  // Rows moved from events_recent into events so far.
  int64_t CompactedRows() {
    int64_t n = -1;
    EXPECT_TRUE(db_->ReadSync([&](store::Tx& tx) {
      return tx.Query("SELECT COUNT(*) FROM events", {}, [&](const store::Row& row) {
        n = row.Int(0);
        return Status::Ok();
      });
    }).ok());
    return n;
  }
  // Runs `statement` (an UPDATE or DELETE with a WHERE clause) on the rows
  // of session `id` only, as a damaged disk would.
  void Tamper(const std::string& statement, const std::string& id) {
    ASSERT_TRUE(db_->WriteSync([&](store::Tx& tx) {
      return tx.Exec(statement + " AND session_num = (SELECT num FROM sessions WHERE id = ?)", {std::string_view(id)})
          .status();
    }).ok());
  }
  SessionHeader NewOne(NewSession s = {}) {
    if (s.route.provider.empty()) s.route = {"echo", "echo", std::nullopt};
    auto h = store_->Create(s);
    EXPECT_TRUE(h.ok()) << h.status().ToString();
    return *h;
  }

  store::testing::TestBackend backend_{GetParam()};  // outlives the database
  FakeClock clock_;
  std::unique_ptr<store::Database> db_;
  std::unique_ptr<SessionStore> store_;
};

INSTANTIATE_TEST_SUITE_P(Backends, SessionStoreTest, store::testing::BackendNames(), store::testing::BackendTestName);

// PostgreSQL, where several hosts (each its own database handle) write at
// once.
class MultiHostSessionTest : public SessionStoreTest {};
INSTANTIATE_TEST_SUITE_P(Postgres, MultiHostSessionTest, ::testing::Values(std::string("postgres")),
                         store::testing::BackendTestName);

// Another host's store announces this host's appends on its hub, and never
// its own.
TEST_P(MultiHostSessionTest, AnotherHostsStoreAnnouncesAppendsOnItsHub) {
  auto other_db = store::Database::Open(backend_.Factory(), SessionStore::Migrations());
  ASSERT_TRUE(other_db.ok()) << other_db.status().ToString();
  EventHub here_hub, other_hub;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> heard_there, heard_here;
  auto listen = [&](EventHub& hub, std::vector<std::string>& heard) {
    return hub.SubscribeChanges([&](const EventHub::Change& c) {
      std::lock_guard lock(mu);
      heard.push_back(c.topic + " " + c.id);
      cv.notify_all();
    });
  };
  auto there_sub = listen(other_hub, heard_there);
  auto here_sub = listen(here_hub, heard_here);
  SessionStore here(*db_, clock_, &here_hub);
  SessionStore there(**other_db, clock_, &other_hub);
  std::string id = NewOne().id;
  ASSERT_TRUE(here.Append(id, {{"message/user", Json{{"text", "hi"}}}}).ok());
  ASSERT_TRUE(there.Append(id, {{"message/user", Json{{"text", "back"}}}}).ok());
  std::unique_lock lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, 10s, [&] { return !heard_there.empty() && !heard_here.empty(); }));
  // In commit order: had "here" heard its own append, it would be first.
  EXPECT_EQ(heard_there, std::vector<std::string>{"session " + id});
  EXPECT_EQ(heard_here, std::vector<std::string>{"session " + id});
}

// PostgreSQL: a host frozen in the middle of a write to one session (here a
// transaction that locked its row and says nothing more) holds that session
// only: appends to other sessions go on at once, and the append to the held
// one waits (run again by the store) until the row is free, then lands
// with the next seq.
TEST_P(MultiHostSessionTest, AWriterHoldingOneSessionHoldsUpNoOtherSession) {
  const std::string held = NewOne().id, other = NewOne().id;
  ASSERT_TRUE(store_->Append(held, {{"x/y", {}}}).ok());
  auto frozen = backend_.Factory()->Open();
  ASSERT_TRUE(frozen.ok()) << frozen.status().ToString();
  ASSERT_TRUE((*frozen)->BeginWrite().ok());
  ASSERT_TRUE((*frozen)->Exec("SELECT num FROM sessions WHERE id = ? FOR UPDATE", {std::string_view(held)}).ok());

  std::promise<Result<std::vector<Event>>> waiting;
  auto waited = waiting.get_future();
  store_->AppendAsync(held, {{"x/y", Json{{"n", 2}}}},
                      [&](Result<std::vector<Event>> r) { waiting.set_value(std::move(r)); });
  for (int i = 0; i < 5; ++i) {
    auto started = std::chrono::steady_clock::now();
    auto r = store_->Append(other, {{"x/y", Json{{"i", i}}}});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->front().seq, i + 1);
    // At most one lock wait (200 ms) of the held session's append shares a
    // transaction with it; never the whole time the row is held.
    EXPECT_LT(std::chrono::steady_clock::now() - started, 1500ms);
  }
  EXPECT_EQ(waited.wait_for(100ms), std::future_status::timeout);  // still held
  ASSERT_TRUE((*frozen)->Commit().ok());
  ASSERT_EQ(waited.wait_for(20s), std::future_status::ready);
  auto landed = waited.get();
  ASSERT_TRUE(landed.ok()) << landed.status().ToString();
  EXPECT_EQ(landed->front().seq, 2);
  EXPECT_EQ(landed->front().data, (Json{{"n", 2}}));
  EXPECT_GE(db_->stats().contended, 1u);
}

// An append whose extra work in the same transaction waits too long for a
// row (here: another session's, held by a frozen writer) is run again whole:
// the events land once, with their types and data, when the row is free.
TEST_P(MultiHostSessionTest, AnAppendWhoseExtraWorkWaitsRunsAgainWhole) {
  const std::string id = NewOne().id, held = NewOne().id;
  auto frozen = backend_.Factory()->Open();
  ASSERT_TRUE(frozen.ok()) << frozen.status().ToString();
  ASSERT_TRUE((*frozen)->BeginWrite().ok());
  ASSERT_TRUE((*frozen)->Exec("SELECT num FROM sessions WHERE id = ? FOR UPDATE", {std::string_view(held)}).ok());
  std::atomic<int> runs{0};
  std::promise<Result<std::vector<Event>>> landed;
  auto result = landed.get_future();
  store_->AppendWithAsync(
      id, {{"turn/start", Json{{"n", 1}}}, {"message/user", Json{{"text", "hi"}}}},
      [&](store::Tx& tx, const std::vector<Event>& stored) -> Status {
        ++runs;
        EXPECT_EQ(stored.size(), 2u);
        if (stored.size() == 2) {
          EXPECT_EQ(stored[1].type, "message/user");
        }
        return tx.Exec("UPDATE sessions SET archived = archived WHERE id = ?", {std::string_view(held)}).status();
      },
      [&](Result<std::vector<Event>> r) { landed.set_value(std::move(r)); });
  EXPECT_EQ(result.wait_for(700ms), std::future_status::timeout);
  ASSERT_TRUE((*frozen)->Commit().ok());
  ASSERT_EQ(result.wait_for(20s), std::future_status::ready);
  ASSERT_TRUE(result.get().ok());
  EXPECT_GE(runs.load(), 2);
  auto events = store_->ReadEvents(id, 0, 10);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[0].type, "turn/start");
  EXPECT_EQ((*events)[0].data, (Json{{"n", 1}}));
  EXPECT_EQ((*events)[1].type, "message/user");
  EXPECT_EQ((*events)[1].data, (Json{{"text", "hi"}}));
}

// PostgreSQL: three hosts (each its own database handle and store) append
// to the same sessions at once while one of them compacts: every append
// succeeds, every session's seqs are 1..N without a gap, and every host
// reads the same log.
TEST_P(MultiHostSessionTest, ThreeHostsAppendingToTheSameSessionsAtOnceKeepEverySeq) {
  constexpr int kHosts = 3, kThreadsPerHost = 2, kAppends = 40, kSessions = 3;
  std::vector<std::unique_ptr<store::Database>> dbs;
  std::vector<std::unique_ptr<SessionStore>> stores;
  for (int h = 0; h < kHosts; ++h) {
    auto db = store::Database::Open(backend_.Factory(), SessionStore::Migrations());
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    dbs.push_back(std::move(db).value());
    stores.push_back(std::make_unique<SessionStore>(*dbs.back(), clock_));
  }
  std::vector<std::string> ids;
  for (int i = 0; i < kSessions; ++i) ids.push_back(NewOne().id);
  std::atomic<int> writing{kHosts * kThreadsPerHost};
  std::vector<std::thread> threads;
  for (int h = 0; h < kHosts; ++h) {
    for (int t = 0; t < kThreadsPerHost; ++t) {
      threads.emplace_back([&, h, t] {
        for (int i = 0; i < kAppends; ++i) {
          // Two events per append, to sessions in an order of this thread's.
          const std::string& id = ids[(i + h + t) % kSessions];
          auto r = stores[h]->Append(id, {{"x/y", Json{{"h", h}, {"t", t}, {"i", i}}}, {"x/z", {}}});
          EXPECT_TRUE(r.ok()) << r.status().ToString();
        }
        --writing;
      });
    }
  }
  threads.emplace_back([&] {
    while (writing > 0) {
      auto moved = stores[0]->Compact(16);
      EXPECT_TRUE(moved.ok()) << moved.status().ToString();
    }
  });
  for (auto& t : threads) t.join();
  size_t total = 0;
  for (const std::string& id : ids) {
    auto here = stores[0]->ReadEvents(id, 0, 100000);
    ASSERT_TRUE(here.ok()) << here.status().ToString();
    for (size_t i = 0; i < here->size(); ++i) ASSERT_EQ((*here)[i].seq, static_cast<int64_t>(i + 1)) << id;
    for (size_t i = 0; i + 1 < here->size(); i += 2) {
      EXPECT_EQ((*here)[i].type, "x/y");  // an append's events stay together
      EXPECT_EQ((*here)[i + 1].type, "x/z");
    }
    for (int h = 1; h < kHosts; ++h) {
      auto there = stores[h]->ReadEvents(id, 0, 100000);
      ASSERT_TRUE(there.ok());
      ASSERT_EQ(there->size(), here->size());
      for (size_t i = 0; i < here->size(); ++i) EXPECT_EQ((*there)[i].data, (*here)[i].data);
    }
    total += here->size();
  }
  EXPECT_EQ(total, static_cast<size_t>(2 * kHosts * kThreadsPerHost * kAppends));
}

TEST_P(SessionStoreTest, CreatesAHeaderWithEverythingTheCallerChose) {
  SessionHeader h = NewOne({.id = "s1",
                            .cwd = "/tmp",
                            .preset = "coder",
                            .route = {"openai", "gpt-x", "high"},
                            .time_zone = "Asia/Shanghai",
                            .delegation_depth = 2,
                            .origin = "session_create"});
  auto got = store_->Get("s1");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, h);
  EXPECT_EQ(got->cwd, "/tmp");
  EXPECT_EQ(got->route.reasoning_effort, "high");
  EXPECT_EQ(got->time_zone, "Asia/Shanghai");
  EXPECT_EQ(got->created_at, ToUnixMillis(clock_.Now()));
  EXPECT_EQ(got->updated_at, got->created_at);
  EXPECT_EQ(got->last_seq, 0);
  EXPECT_FALSE(got->parent_id.has_value());
}

TEST_P(SessionStoreTest, GeneratesIdsAndRefusesDuplicates) {
  SessionHeader a = NewOne();
  EXPECT_EQ(a.id.rfind("ses_", 0), 0u);
  auto dup = store_->Create(NewSession{.id = a.id, .route = {"echo", "echo"}});
  EXPECT_EQ(dup.status().code(), "already_exists");
}

TEST_P(SessionStoreTest, StoresTheCanonicalTimeZoneAndRejectsUnknownOnes) {
  EXPECT_EQ(NewOne({.time_zone = "US/Eastern"}).time_zone, "America/New_York");
  auto bad = store_->Create(NewSession{.route = {"echo", "echo"}, .time_zone = "CST"});
  EXPECT_EQ(bad.status().code(), "invalid_time_zone");
  EXPECT_EQ(store_->ListRecent(10)->size(), 1u);
}

TEST_P(SessionStoreTest, RejectsAHeaderWithoutModelRoute) {
  auto r = store_->Create(NewSession{});
  EXPECT_EQ(r.status().code(), "invalid_arguments");
}

TEST_P(SessionStoreTest, AppendAssignsConsecutiveSeqsAndUpdatesUpdatedAt) {
  SessionHeader h = NewOne();
  clock_.Advance(5s);
  auto first = store_->Append(h.id, {{"message/user", {{"text", "hi"}}}});
  ASSERT_TRUE(first.ok());
  clock_.Advance(5s);
  auto more = store_->Append(h.id, {{"message/assistant", {{"text", "a"}}}, {"x/y", {{"k", 1}}}});
  ASSERT_TRUE(more.ok());
  EXPECT_EQ((*first)[0].seq, 1);
  EXPECT_EQ((*more)[0].seq, 2);
  EXPECT_EQ((*more)[1].seq, 3);
  auto got = store_->Get(h.id);
  EXPECT_EQ(got->last_seq, 3);
  EXPECT_EQ(got->updated_at, ToUnixMillis(clock_.Now()));
  EXPECT_EQ(got->updated_at, (*more)[1].at);
}

TEST_P(SessionStoreTest, UpdatedAtNeverMovesBackWhenTheWallClockDoes) {
  SessionHeader h = NewOne();
  ASSERT_TRUE(store_->Append(h.id, {{"x/y", {}}}).ok());
  int64_t before = store_->Get(h.id)->updated_at;
  clock_.StepWall(-1h);
  ASSERT_TRUE(store_->Append(h.id, {{"x/y", {}}}).ok());
  EXPECT_EQ(store_->Get(h.id)->updated_at, before);
}

TEST_P(SessionStoreTest, AppendToAnUnknownSessionIsNotFoundAndWritesNothing) {
  auto r = store_->Append("nope", {{"x/y", {}}});
  EXPECT_EQ(r.status().code(), "not_found");
  EXPECT_NE(r.status().message().find("nope"), std::string::npos);
}

TEST_P(SessionStoreTest, RejectsBadEventsWithoutWritingAny) {
  SessionHeader h = NewOne();
  EXPECT_EQ(store_->Append(h.id, {}).status().code(), "invalid_arguments");
  EXPECT_EQ(store_->Append(h.id, {{"", {}}}).status().code(), "invalid_arguments");
  EXPECT_EQ(store_->Append(h.id, {{"x/y", Json::object()}, {"x/y", Json::array()}}).status().code(), "invalid_arguments");
  EXPECT_EQ(store_->Append(h.id, {{"title/user", {{"title", ""}}}}).status().code(), "invalid_arguments");
  EXPECT_EQ(store_->Get(h.id)->last_seq, 0);
}

TEST_P(SessionStoreTest, FailedAppendsInABatchLeaveTheOthersIntact) {
  SessionHeader a = NewOne();
  SessionHeader b = NewOne();
  // Hold the writer so the appends below share one transaction.
  std::promise<void> entered, release;
  db_->Write(
      [&](store::Tx&) {
        entered.set_value();
        release.get_future().wait();
        return Status::Ok();
      },
      nullptr);
  entered.get_future().wait();
  std::vector<std::promise<Result<std::vector<Event>>>> done(4);
  auto to = [&](int i) { return [&, i](Result<std::vector<Event>> r) { done[i].set_value(std::move(r)); }; };
  store_->AppendAsync(a.id, {{"x/y", {{"i", 1}}}}, to(0));
  store_->AppendAsync("no-such-session", {{"x/y", {}}}, to(1));
  store_->AppendAsync(b.id, {{"title/user", {{"title", 7}}}}, to(2));  // invalid: title must be a string
  store_->AppendAsync(b.id, {{"x/y", {{"i", 2}}}}, to(3));
  release.set_value();
  std::vector<Result<std::vector<Event>>> r;
  for (auto& d : done) r.push_back(d.get_future().get());
  ASSERT_TRUE(r[0].ok()) << r[0].status().ToString();
  EXPECT_EQ(r[1].status().code(), "not_found");
  EXPECT_EQ(r[2].status().code(), "invalid_arguments");
  ASSERT_TRUE(r[3].ok()) << r[3].status().ToString();
  EXPECT_EQ((*r[3])[0].seq, 1);
  EXPECT_EQ(store_->Get(a.id)->last_seq, 1);
  EXPECT_EQ(store_->Get(b.id)->last_seq, 1);
  auto events = store_->ReadEvents(b.id, 0, 10);
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].data["i"], 2);
  EXPECT_FALSE(store_->ReadTitles({b.id})->at(b.id).user.has_value());
}

TEST_P(SessionStoreTest, ReadsAWindowBySeq) {
  SessionHeader h = NewOne();
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(store_->Append(h.id, {{"x/y", {{"i", i}}}}).ok());
  auto w = store_->ReadEvents(h.id, 3, 4);
  ASSERT_TRUE(w.ok());
  ASSERT_EQ(w->size(), 4u);
  EXPECT_EQ((*w)[0].seq, 4);
  EXPECT_EQ((*w)[3].seq, 7);
  EXPECT_EQ((*w)[0].data["i"], 3);
  EXPECT_EQ(store_->ReadEvents(h.id, 10, 5)->size(), 0u);
  EXPECT_EQ(store_->ReadEvents("nope", 0, 5).status().code(), "not_found");
}

TEST_P(SessionStoreTest, EventsSurviveReopening) {
  SessionHeader h = NewOne();
  ASSERT_TRUE(store_->Append(h.id, {{"message/user", {{"text", "persist me"}}}}).ok());
  Reopen();
  auto w = store_->ReadEvents(h.id, 0, 10);
  ASSERT_TRUE(w.ok());
  ASSERT_EQ(w->size(), 1u);
  EXPECT_EQ((*w)[0].data["text"], "persist me");
}

TEST_P(SessionStoreTest, ListsByUpdatedAtDescendingWithTiesById) {
  SessionHeader a = NewOne({.id = "b"});
  SessionHeader b = NewOne({.id = "a"});  // same created_at as "b": tie broken by id
  clock_.Advance(1s);
  SessionHeader c = NewOne({.id = "c"});
  clock_.Advance(1s);
  ASSERT_TRUE(store_->Append("b", {{"x/y", {}}}).ok());  // "b" is now the most recent
  auto list = store_->ListRecent(10);
  ASSERT_TRUE(list.ok());
  std::vector<std::string> ids;
  for (const auto& h : *list) ids.push_back(h.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"b", "c", "a"}));
  EXPECT_EQ(store_->ListRecent(2)->size(), 2u);
  EXPECT_EQ(store_->ListRecent(0).status().code(), "invalid_arguments");
}

TEST_P(SessionStoreTest, ForkCopiesThePrefixAndRecordsTheSeed) {
  SessionHeader p = NewOne({.preset = "p"});
  ASSERT_TRUE(store_->Append(p.id, {{"message/user", {{"text", "one"}}}, {"title/fallback", {{"title", "one"}}},
                                    {"message/assistant", {{"text", "two"}}}})
                  .ok());
  auto child = store_->Fork(p.id, 2, NewSession{.route = p.route, .origin = "fork"});
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  EXPECT_EQ(child->parent_id, p.id);
  EXPECT_EQ(child->seed_length, 2);
  EXPECT_EQ(child->last_seq, 2);
  auto events = store_->ReadEvents(child->id, 0, 10);
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[0].data["text"], "one");
  auto appended = store_->Append(child->id, {{"message/user", {{"text", "mine"}}}});
  EXPECT_EQ((*appended)[0].seq, 3);
  EXPECT_EQ(store_->ReadEvents(p.id, 0, 10)->size(), 3u);  // the parent is untouched
  EXPECT_EQ(store_->ReadTitles({child->id})->at(child->id).Effective(), "one");
  EXPECT_EQ(store_->Fork(p.id, 4, NewSession{.route = p.route}).status().code(), "invalid_arguments");
  EXPECT_EQ(store_->Fork("nope", 0, NewSession{.route = p.route}).status().code(), "not_found");
}

TEST_P(SessionStoreTest, ForkAsyncAnswersLikeFork) {
  SessionHeader p = NewOne({.preset = "p"});
  ASSERT_TRUE(
      store_->Append(p.id, {{"message/user", {{"text", "one"}}}, {"message/user", {{"text", "two"}}}}).ok());
  auto fork = [&](std::string parent, int64_t seed) {
    std::promise<Result<SessionHeader>> promise;
    store_->ForkAsync(std::move(parent), seed, NewSession{.route = p.route, .origin = "fork"},
                      [&](Result<SessionHeader> r) { promise.set_value(std::move(r)); });
    return promise.get_future().get();
  };
  auto child = fork(p.id, 1);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  EXPECT_EQ(child->parent_id, p.id);
  EXPECT_EQ(child->seed_length, 1);
  EXPECT_EQ(child->origin, "fork");
  ASSERT_EQ(store_->ReadEvents(child->id, 0, 10)->size(), 1u);
  EXPECT_EQ(fork(p.id, 3).status().code(), "invalid_arguments");
  EXPECT_EQ(fork("nope", 0).status().code(), "not_found");
}

TEST_P(SessionStoreTest, CreateWithCommitsTheExtraWorkWithTheSessionOrNeither) {
  auto create = [&](NewSession s, SessionStore::CreateAlsoFn also) {
    std::promise<Result<SessionHeader>> p;
    store_->CreateWithAsync(std::move(s), std::move(also), [&](Result<SessionHeader> r) { p.set_value(std::move(r)); });
    return p.get_future().get();
  };
  std::string seen;
  auto ok = create(NewSession{.id = "kept", .route = {"echo", "echo", std::nullopt}},
                   [&](store::Tx&, const SessionHeader& h) {
                     seen = h.id;
                     return Status::Ok();
                   });
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(seen, "kept");
  auto failed = create(NewSession{.id = "gone", .route = {"echo", "echo", std::nullopt}},
                       [](store::Tx&, const SessionHeader&) { return Status("boom", "the extra work failed"); });
  EXPECT_EQ(failed.status().code(), "boom");
  EXPECT_EQ(store_->Get("gone").status().code(), "not_found");
  EXPECT_TRUE(store_->Get("kept").ok());
}

TEST_P(SessionStoreTest, TitlePrecedenceIsUserThenGeneratedThenFallback) {
  SessionHeader h = NewOne();
  auto title = [&] { return store_->ReadTitles({h.id})->at(h.id).Effective(); };
  EXPECT_EQ(title(), std::nullopt);
  ASSERT_TRUE(store_->Append(h.id, {{"title/fallback", {{"title", "fallback"}}}}).ok());
  EXPECT_EQ(title(), "fallback");
  ASSERT_TRUE(store_->Append(h.id, {{"title/user", {{"title", "renamed"}}}}).ok());
  EXPECT_EQ(title(), "renamed");
  ASSERT_TRUE(store_->Append(h.id, {{"title/generated", {{"title", "generated"}}}}).ok());
  EXPECT_EQ(title(), "renamed");  // a later generated title does not beat the user's
  ASSERT_TRUE(store_->Append(h.id, {{"title/user", {{"title", "renamed again"}}}}).ok());
  EXPECT_EQ(title(), "renamed again");
}

TEST_P(SessionStoreTest, ReadsTitlesOfManySessionsInOneCall) {
  std::vector<std::string> ids;
  for (int i = 0; i < 600; ++i) {
    SessionHeader h = NewOne();
    ids.push_back(h.id);
    if (i % 2 == 0) {
      ASSERT_TRUE(store_->Append(h.id, {{"title/generated", {{"title", "t" + std::to_string(i)}}}}).ok());
    }
  }
  ids.push_back("unknown");
  auto titles = store_->ReadTitles(ids);
  ASSERT_TRUE(titles.ok());
  EXPECT_EQ(titles->size(), 600u);
  EXPECT_EQ(titles->at(ids[0]).Effective(), "t0");
  EXPECT_EQ(titles->at(ids[1]).Effective(), std::nullopt);
  EXPECT_EQ(titles->at(ids[598]).generated, "t598");
  EXPECT_EQ(titles->count("unknown"), 0u);
}

TEST_P(SessionStoreTest, ACorruptStoredEventIsAClearErrorNamingSessionAndSeq) {
  SessionHeader h = NewOne();
  ASSERT_TRUE(store_->Append(h.id, {{"x/y", {}}, {"x/y", {}}}).ok());
  Tamper("UPDATE events_recent SET data = '{broken' WHERE seq = 2", h.id);
  auto r = store_->ReadEvents(h.id, 0, 10);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), "corrupt_event");
  EXPECT_NE(r.status().message().find("session " + h.id + " seq 2"), std::string::npos) << r.status().message();
  EXPECT_TRUE(store_->ReadEvents(h.id, 0, 1).ok());  // the window before it still reads
}

TEST_P(SessionStoreTest, ACorruptCompactedEventIsAlsoAClearError) {
  SessionHeader h = NewOne();
  ASSERT_TRUE(store_->Append(h.id, {{"x/y", {}}, {"x/y", {}}}).ok());
  ASSERT_EQ(*store_->Compact(100), 2);
  Tamper("UPDATE events SET data = 'null' WHERE seq = 1", h.id);
  auto r = store_->ReadEvents(h.id, 0, 10);
  EXPECT_EQ(r.status().code(), "corrupt_event");
  EXPECT_NE(r.status().message().find("seq 1"), std::string::npos);
}

TEST_P(SessionStoreTest, ReadsAreTheSameBeforeDuringAndAfterCompaction) {
  std::vector<std::string> ids = {NewOne().id, NewOne().id, NewOne().id};
  for (int i = 0; i < 30; ++i) {
    for (size_t s = 0; s < ids.size(); ++s) {
      ASSERT_TRUE(store_->Append(ids[s], {{"x/y", {{"i", i}, {"s", s}}}}).ok());
    }
  }
  auto snapshot = [&] {
    std::vector<std::vector<int64_t>> out;
    for (const auto& id : ids) {
      std::vector<int64_t> seqs;
      for (int64_t after : {0, 7, 29}) {
        auto window = store_->ReadEvents(id, after, 11);
        EXPECT_TRUE(window.ok());
        for (const auto& e : *window) seqs.push_back(e.seq * 1000 + e.data["i"].get<int64_t>());
      }
      out.push_back(seqs);
    }
    return out;
  };
  auto before = snapshot();
  ASSERT_EQ(*store_->Compact(40), 40);  // part of the log: windows now span both tables
  EXPECT_EQ(snapshot(), before);
  ASSERT_EQ(*store_->Compact(1000), 50);
  EXPECT_EQ(snapshot(), before);
  EXPECT_EQ(*store_->Compact(1000), 0);
  auto appended = store_->Append(ids[0], {{"x/y", {{"i", 30}}}});
  EXPECT_EQ((*appended)[0].seq, 31);
  EXPECT_EQ(store_->ReadEvents(ids[0], 29, 10)->size(), 2u);
}

TEST_P(SessionStoreTest, AnEventMissingFromTheLogIsAClearErrorNamingSessionAndSeq) {
  SessionHeader h = NewOne(), other = NewOne();
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(store_->Append(h.id, {{"x/y", {}}}).ok());
    ASSERT_TRUE(store_->Append(other.id, {{"x/y", {}}}).ok());
  }
  Tamper("DELETE FROM events_recent WHERE seq = 2", h.id);
  auto r = store_->ReadEvents(h.id, 0, 10);
  EXPECT_EQ(r.status().code(), "corrupt_event");
  EXPECT_NE(r.status().message().find("session " + h.id + " seq 2"), std::string::npos) << r.status().message();
  EXPECT_EQ(store_->ReadEvents(h.id, 2, 10)->size(), 2u) << "the windows after the gap still read";
  EXPECT_EQ(store_->ReadEvents(other.id, 0, 10)->size(), 4u);
}

TEST_P(SessionStoreTest, ReadsWindowsOfALongRunOfRecentEventsInterleavedWithOthers) {
  SessionHeader h = NewOne(), other = NewOne();
  for (int i = 0; i < 60; ++i) {
    ASSERT_TRUE(store_->Append(h.id, {{"x/y", {{"i", i}}}, {"x/y", {{"i", i}}}}).ok());
    ASSERT_TRUE(store_->Append(other.id, {{"x/y", {}}}).ok());
  }
  for (int64_t after : {0, 1, 57, 115, 119, 120}) {
    auto w = store_->ReadEvents(h.id, after, 5);
    ASSERT_TRUE(w.ok());
    ASSERT_EQ(w->size(), static_cast<size_t>(std::min<int64_t>(5, 120 - after))) << after;
    for (size_t k = 0; k < w->size(); ++k) {
      int64_t seq = after + 1 + static_cast<int64_t>(k);
      EXPECT_EQ((*w)[k].seq, seq);
      EXPECT_EQ((*w)[k].data["i"], (seq - 1) / 2);
    }
  }
}

TEST_P(SessionStoreTest, ASchemaVersion1DatabaseIsUpgradedWithItsEventsKept) {
  store_.reset();
  db_.reset();
  backend_.Recreate();
  {
    auto v1 = SessionStore::Migrations();
    v1.resize(1);
    auto db = store::Database::Open(backend_.Factory(), v1);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    ASSERT_TRUE((*db)->WriteSync([](store::Tx& tx) -> Status {
      DSH_RETURN_IF_ERROR(tx.Exec("INSERT INTO sessions (num, id, created_at, updated_at, provider, model, time_zone, "
                                  "seed_length, delegation_depth, origin, last_seq) "
                                  "VALUES (7, 'old', 1, 2, 'echo', 'echo', 'UTC', 0, 0, 'test', 3)")
                              .status());
      DSH_RETURN_IF_ERROR(tx.Exec("INSERT INTO events (session_num, seq, type, at, data) "
                                  "VALUES (7, 1, 'x/y', 1, '{\"i\":1}')")
                              .status());
      return tx.Exec("INSERT INTO events_recent (session_num, seq, type, at, data) "
                     "VALUES (7, 2, 'x/y', 2, '{\"i\":2}'), (7, 3, 'x/y', 2, '{\"i\":3}')")
          .status();
    }).ok());
  }
  Reopen();
  ASSERT_TRUE(store_->Append("old", {{"x/y", {{"i", 4}}}}).ok());
  auto events = store_->ReadEvents("old", 0, 10);
  ASSERT_TRUE(events.ok()) << events.status().ToString();
  ASSERT_EQ(events->size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ((*events)[i].seq, i + 1);
    EXPECT_EQ((*events)[i].data["i"], i + 1);
  }
}

TEST_P(SessionStoreTest, ForkCopiesEventsFromBothTables) {
  SessionHeader p = NewOne();
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(store_->Append(p.id, {{"x/y", {{"i", i}}}}).ok());
  ASSERT_EQ(*store_->Compact(3), 3);
  auto child = store_->Fork(p.id, 5, NewSession{.route = p.route});
  ASSERT_TRUE(child.ok());
  auto events = store_->ReadEvents(child->id, 0, 10);
  ASSERT_EQ(events->size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ((*events)[i].data["i"], i);
}

// Two turns, the second still running: 1 start, 2 user, 3 assistant, 4 end,
// 5 start, 6 user. The boundaries are 0, 4 (and nothing after 4 yet).
TEST_P(SessionStoreTest, ForkEndsAtATurnBoundaryNeverInsideATurn) {
  for (const int64_t compacted : {0, 3, 6}) {  // the turns in either table, or split across both
    ASSERT_TRUE(store_->Compact(1000).ok());     // the earlier rounds' events out of the way
    SessionHeader p = NewOne();
    ASSERT_TRUE(store_->Append(p.id, {{"turn/start", {}}, {"message/user", {{"text", "one"}}},
                                      {"message/assistant", {{"text", "two"}}}, {"turn/end", {{"status", "completed"}}},
                                      {"turn/start", {}}, {"message/user", {{"text", "three"}}}})
                    .ok());
    if (compacted > 0) {
      ASSERT_EQ(*store_->Compact(compacted), compacted);
    }
    for (const int64_t seed : {0, 4}) {
      auto child = store_->Fork(p.id, seed, NewSession{.route = p.route});
      ASSERT_TRUE(child.ok()) << seed << ": " << child.status().ToString();
      EXPECT_EQ(child->seed_length, seed);
    }
    for (const int64_t seed : {1, 2, 3}) {
      auto inside = store_->Fork(p.id, seed, NewSession{.route = p.route});
      EXPECT_EQ(inside.status().code(), "invalid_arguments") << seed;
      EXPECT_NE(inside.status().message().find("ends inside the turn of session " + p.id + " that starts at seq 1"),
                std::string::npos) << inside.status().message();
      EXPECT_NE(inside.status().message().find("the nearest turn boundaries are 0 and 4"), std::string::npos)
          << inside.status().message();
    }
    for (const int64_t seed : {5, 6}) {
      auto running = store_->Fork(p.id, seed, NewSession{.route = p.route});
      EXPECT_EQ(running.status().code(), "invalid_arguments") << seed;
      EXPECT_NE(running.status().message().find("the nearest turn boundaries are 4 (that turn has not ended yet)"),
                std::string::npos) << running.status().message();
    }
    // Without a seed: everything up to the last whole turn.
    auto all = store_->Fork(p.id, std::nullopt, NewSession{.route = p.route});
    ASSERT_TRUE(all.ok()) << all.status().ToString();
    EXPECT_EQ(all->seed_length, 4);
    ASSERT_TRUE(store_->Append(p.id, {{"turn/end", {{"status", "completed"}}}, {"x/y", {}}}).ok());
    EXPECT_EQ(store_->Fork(p.id, std::nullopt, NewSession{.route = p.route})->seed_length, 8);
    EXPECT_EQ(store_->Fork(p.id, 7, NewSession{.route = p.route})->seed_length, 7);
    EXPECT_NE(store_->Fork(p.id, 6, NewSession{.route = p.route}).status().message().find("boundaries are 4 and 7"),
              std::string::npos);
  }
}

TEST_P(SessionStoreTest, AUserTitleCanBeClearedAndArchivingIsKeptInTheHeader) {
  SessionHeader h = NewOne();
  EXPECT_FALSE(h.archived);
  ASSERT_TRUE(store_->Append(h.id, {{"title/fallback", {{"title", "first words"}}},
                                    {"title/user", {{"title", "Mine"}}},
                                    {"session/archived", {{"archived", true}}}})
                  .ok());
  EXPECT_EQ(store_->ReadTitles({h.id})->at(h.id).Effective(), "Mine");
  EXPECT_TRUE(store_->Get(h.id)->archived);
  // A fork inherits the titles of its prefix, not the archiving.
  auto child = store_->Fork(h.id, std::nullopt, NewSession{.route = h.route});
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  EXPECT_FALSE(child->archived);
  EXPECT_EQ(store_->ReadTitles({child->id})->at(child->id).Effective(), "Mine");

  ASSERT_TRUE(store_->Append(h.id, {{"title/user", {{"title", nullptr}}}, {"session/archived", {{"archived", false}}}})
                  .ok());
  EXPECT_EQ(store_->ReadTitles({h.id})->at(h.id).Effective(), "first words");
  EXPECT_FALSE(store_->Get(h.id)->archived);
  auto cleared_fork = store_->Fork(h.id, std::nullopt, NewSession{.route = h.route});
  EXPECT_EQ(store_->ReadTitles({cleared_fork->id})->at(cleared_fork->id).Effective(), "first words");

  // Only the user title may be cleared; archiving needs a boolean.
  EXPECT_EQ(store_->Append(h.id, {{"title/generated", {{"title", nullptr}}}}).status().code(), "invalid_arguments");
  EXPECT_EQ(store_->Append(h.id, {{"session/archived", {{"archived", 1}}}}).status().code(), "invalid_arguments");
  EXPECT_EQ(store_->Append(h.id, {{"session/archived", Json::object()}}).status().code(), "invalid_arguments");
}

TEST_P(SessionStoreTest, CompactsByItselfAfterEnoughAppends) {
  SessionHeader h = NewOne();
  const size_t n = SessionStore::kCompactEvery + 10;
  for (size_t i = 0; i < n; ++i) ASSERT_TRUE(store_->Append(h.id, {{"x/y", {}}}).ok());
  Reopen();  // waits for the compaction in flight and drains the writer
  EXPECT_GE(CompactedRows(), static_cast<int64_t>(SessionStore::kCompactEvery));
  EXPECT_EQ(store_->ReadEvents(h.id, 0, 100000)->size(), n);
}

TEST_P(SessionStoreTest, CompactsInSmallSlicesWhileTheWriterKeepsUp) {
  SessionHeader h = NewOne();
  const size_t n = SessionStore::kCompactSlice + 10;
  for (size_t i = 0; i < n; ++i) ASSERT_TRUE(store_->Append(h.id, {{"x/y", {}}}).ok());
  Reopen();
  EXPECT_EQ(CompactedRows(), static_cast<int64_t>(SessionStore::kCompactSlice)) << "one light-load slice, not a big batch";
  EXPECT_EQ(store_->ReadEvents(h.id, 0, 100000)->size(), n);
}

// A slice stops before the estimated pages of `events` it writes (one per
// session, plus bytes / 4096) exceed the budget; the first event always moves.
TEST_P(SessionStoreTest, CompactionSlicesStayWithinTheirPageBudget) {
  std::vector<std::string> ids;
  for (int s = 0; s < 30; ++s) {
    ids.push_back(NewOne().id);
    ASSERT_TRUE(store_->Append(ids.back(), {{"x/y", {{"s", s}}}}).ok());
  }
  EXPECT_EQ(*store_->Compact(1000, 10), 10) << "one page per session";
  EXPECT_EQ(*store_->Compact(1000, 0), 1) << "the first event moves whatever its size";
  EXPECT_EQ(*store_->Compact(1000), 19);
  SessionHeader big = NewOne();
  const std::string text(2000, 'x');  // about half a page per event
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(store_->Append(big.id, {{"x/y", {{"t", text}}}}).ok());
  EXPECT_EQ(*store_->Compact(1000, 2), 4) << "1 session + 8,000 bytes / 4096 fits 2 pages; a fifth event does not";
  EXPECT_EQ(*store_->Compact(1000), 6);
  for (int s = 0; s < 30; ++s) EXPECT_EQ((*store_->ReadEvents(ids[s], 0, 10))[0].data["s"], s);
  EXPECT_EQ(store_->ReadEvents(big.id, 0, 100)->size(), 10u);
}

TEST_P(SessionStoreTest, AsyncFormsCompleteAfterCommit) {
  SessionHeader h = NewOne();
  std::promise<Result<std::vector<Event>>> done;
  store_->AppendAsync(h.id, {{"x/y", {{"a", 1}}}}, [&](Result<std::vector<Event>> r) { done.set_value(std::move(r)); });
  auto r = done.get_future().get();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(store_->Get(h.id)->last_seq, 1);
}

TEST_P(SessionStoreTest, ConcurrentAppendersGetDistinctContiguousSeqs) {
  SessionHeader h = NewOne();
  constexpr int kThreads = 8, kEach = 50;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) ASSERT_TRUE(store_->Append(h.id, {{"x/y", {}}}).ok());
    });
  }
  for (auto& t : threads) t.join();
  auto all = store_->ReadEvents(h.id, 0, 10000);
  ASSERT_EQ(all->size(), static_cast<size_t>(kThreads * kEach));
  for (size_t i = 0; i < all->size(); ++i) EXPECT_EQ((*all)[i].seq, static_cast<int64_t>(i + 1));
}

}  // namespace
}  // namespace dsh::session
