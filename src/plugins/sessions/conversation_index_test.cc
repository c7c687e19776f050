#include "plugins/sessions/conversation_index.h"

#include <gtest/gtest.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <atomic>
#include <future>
#include <random>
#include <thread>

#include "agent/agent_manager.h"
#include "agent/testing/scripted_model.h"
#include "base/clock.h"
#include "base/testing/temp_dir.h"
#include "plugins/sessions/session_service.h"
#include "session/conversation.h"
#include "store/sqlite_connection.h"
#include "store/testing/forwarding_connection.h"
#include "store/testing/test_backend.h"

namespace dsh::plugins::sessions {
namespace {

using namespace std::chrono_literals;
namespace et = session::event_types;

// Counts the event rows the database hands back (SELECTs of `events` and
// `events_recent`), to see how much of a log a read touches.
class CountingConnection final : public store::testing::ForwardingConnection {
 public:
  CountingConnection(std::unique_ptr<store::Connection> inner, std::shared_ptr<std::atomic<int64_t>> rows)
      : ForwardingConnection(std::move(inner)), rows_(std::move(rows)) {}
  Status Query(std::string_view sql, std::span<const store::Value> params, const store::RowFn& on_row) override {
    if (!sql.starts_with("SELECT") || sql.find("FROM events") == std::string_view::npos) {
      return ForwardingConnection::Query(sql, params, on_row);
    }
    return ForwardingConnection::Query(sql, params, [&](const store::Row& row) {
      ++*rows_;
      return on_row(row);
    });
  }

 private:
  std::shared_ptr<std::atomic<int64_t>> rows_;
};

std::unique_ptr<store::ConnectionFactory> CountingFactory(std::unique_ptr<store::ConnectionFactory> inner,
                                                          std::shared_ptr<std::atomic<int64_t>> rows) {
  return std::make_unique<store::testing::WrappingFactory>(
      std::move(inner), [rows](std::unique_ptr<store::Connection> conn) {
        return std::unique_ptr<store::Connection>(std::make_unique<CountingConnection>(std::move(conn), rows));
      });
}

// SessionService::Read over a real store on each backend, compared with
// projecting the whole log (what session_read did before the index).
class ConversationIndexTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::vector<store::Migration> migrations = session::SessionStore::Migrations();
    for (auto& m : agent::AgentManager::Migrations()) migrations.push_back(m);
    auto db = store::Database::Open(CountingFactory(backend_.Factory(), rows_), migrations);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(db).value();
    store_ = std::make_unique<session::SessionStore>(*db_, clock_);
    agents_ = std::make_unique<agent::AgentManager>(ioc_, *db_, *store_, router_, tools_, clock_,
                                                    agent::AgentEnvironment{}, agent::AgentManagerOptions{});
    service_ = std::make_unique<SessionService>(*store_, *agents_);
  }
  void TearDown() override {
    service_.reset();
    agents_.reset();
    db_->Close();
    store_.reset();
    db_.reset();
  }

  std::string NewSession() {
    session::NewSession s;
    s.route = {"scripted", "m1", std::nullopt};
    auto h = store_->Create(s);
    EXPECT_TRUE(h.ok()) << h.status().ToString();
    return h.ok() ? h->id : "";
  }
  void Append(const std::string& id, std::vector<session::EventDraft> events) {
    auto r = store_->Append(id, std::move(events));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }

  // session_read's result (or error) through the service.
  Result<Json> Read(const std::string& id, int64_t offset, int64_t limit) {
    std::promise<Result<ReadWindow>> p;
    service_->Read(id, offset, limit, [&](Result<ReadWindow> w) { p.set_value(std::move(w)); });
    auto w = p.get_future().get();
    if (!w.ok()) return w.status();
    return Json{{"session_id", w->session_id},
                {"offset", w->offset},
                {"messages", w->messages},
                {"total_messages", w->total_messages},
                {"footer", ReadFooter(*w)}};
  }
  // The same, computed the way session_read did before: every event read
  // and projected, then the window sliced out.
  Result<Json> WholeLogRead(const std::string& id, int64_t offset, int64_t limit) {
    auto events = store_->ReadEvents(id, 0, int64_t{1} << 40);
    if (!events.ok()) return events.status();
    auto blocks = session::ProjectConversation(id, *events);
    if (!blocks.ok()) return blocks.status();
    auto total = static_cast<int64_t>(blocks->size());
    if (total > 0 && offset > total) {
      return Status(codes::kInvalidArguments, "`offset` " + std::to_string(offset) + " is beyond the end of session " +
                                                  id + ", which has " + std::to_string(total) + " messages");
    }
    ReadWindow w{id, offset, {}, total};
    if (offset <= total) {
      w.messages.assign(blocks->begin() + (offset - 1), blocks->begin() + std::min(total, offset - 1 + limit));
    }
    return Json{{"session_id", w.session_id},
                {"offset", w.offset},
                {"messages", w.messages},
                {"total_messages", w.total_messages},
                {"footer", ReadFooter(w)}};
  }
  static std::string Show(const Result<Json>& r) { return r.ok() ? r->dump() : r.status().ToString(); }

  // One turn: a prompt, a reasoning step, two tool calls with results and
  // an answer, between trace events (6 blocks, 10 events).
  static std::vector<session::EventDraft> Turn(int i) {
    std::string n = std::to_string(i);
    return {{"turn/start", {}},
            {std::string(et::kUserMessage), {{"text", "question " + n}}},
            {std::string(et::kReasoning), {{"text", "thinking " + n}}},
            {std::string(et::kToolCall), {{"call_id", "a" + n}, {"name", "read"}, {"arguments", {{"path", n}}}}},
            {std::string(et::kToolResult), {{"call_id", "a" + n}, {"name", "read"}, {"result", "contents " + n}}},
            {std::string(et::kToolCall), {{"call_id", "b" + n}, {"name", "grep"}, {"arguments", Json::object()}}},
            {std::string(et::kToolResult), {{"call_id", "b" + n}, {"name", "grep"}, {"error", {{"code", "x"}}}}},
            {std::string(et::kAssistantMessage), {{"text", "answer " + n}}},
            {"turn/end", {{"status", "completed"}}},
            {"request/meta", {{"tokens", i}}}};
  }

  store::testing::TestBackend backend_{GetParam(), /*fast=*/true};
  std::shared_ptr<std::atomic<int64_t>> rows_ = std::make_shared<std::atomic<int64_t>>(0);
  FakeClock clock_;
  std::unique_ptr<store::Database> db_;
  std::unique_ptr<session::SessionStore> store_;
  boost::asio::io_context ioc_;
  agent::testing::ScriptedModel model_;
  agent::testing::SingleModelRouter router_{model_};
  agent::ToolRegistry tools_;
  std::unique_ptr<agent::AgentManager> agents_;
  std::unique_ptr<SessionService> service_;
};

INSTANTIATE_TEST_SUITE_P(Backends, ConversationIndexTest, store::testing::BackendNames(),
                         store::testing::BackendTestName);

TEST_P(ConversationIndexTest, AReadOfASmallWindowReadsOnlyThatWindowsEventsOfALongSession) {
  std::string id = NewSession();
  constexpr int kTurns = 600;  // 6,000 events, 3,600 blocks
  std::vector<session::EventDraft> all;
  for (int i = 0; i < kTurns; ++i) {
    for (auto& e : Turn(i)) all.push_back(std::move(e));
  }
  Append(id, std::move(all));
  ASSERT_TRUE(Read(id, 1, 1).ok());  // the first read of the session in this process

  // A 20-block window in the middle: 20 blocks span at most 45 events here.
  *rows_ = 0;
  auto middle = Read(id, 2001, 20);
  ASSERT_TRUE(middle.ok()) << middle.status().ToString();
  EXPECT_EQ(Show(middle), Show(WholeLogRead(id, 2001, 20)));
  *rows_ = 0;
  ASSERT_TRUE(Read(id, 2001, 20).ok());
  EXPECT_LE(rows_->load(), 45) << "events read for a 20-block window of a 6,000-event session";

  // The newest 200 blocks: at most 350 events.
  *rows_ = 0;
  auto newest = Read(id, 3401, 200);
  ASSERT_TRUE(newest.ok()) << newest.status().ToString();
  EXPECT_EQ((*newest)["total_messages"], 3600);
  EXPECT_EQ((*newest)["messages"].size(), 200u);
  EXPECT_LE(rows_->load(), 350);

  // After an append, the new events and the window.
  Append(id, Turn(kTurns));
  *rows_ = 0;
  auto after = Read(id, 3587, 20);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ((*after)["total_messages"], 3606);
  EXPECT_LE(rows_->load(), 10 + 45);
  EXPECT_EQ(Show(after), Show(WholeLogRead(id, 3587, 20)));
}

TEST_P(ConversationIndexTest, EveryWindowEqualsTheWholeLogProjectionWhileTheLogGrows) {
  std::mt19937 rng(GetParam() == "sqlite" ? 20261202 : 7);
  std::string id = NewSession();
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  // Mixed events, in orders turns never write too: reasoning after text,
  // text after tool calls, empty texts, calls without results, trace events
  // in between, a result without a call.
  auto random_event = [&](int i) -> session::EventDraft {
    std::string n = std::to_string(i);
    switch (pick(11)) {
      case 0: return {std::string(et::kUserMessage), {{"text", "user " + n}}};
      case 1: return {std::string(et::kReasoning), {{"text", pick(3) == 0 ? "" : "reason " + n}}};
      case 2:
      case 3: return {std::string(et::kAssistantMessage), {{"text", pick(3) == 0 ? "" : "text " + n}}};
      case 4: return {std::string(et::kToolCall), {{"call_id", "c" + n}, {"name", "t"}, {"arguments", {{"i", i}}}}};
      case 5:
        return {std::string(et::kToolResult),
                pick(2) == 0 ? Json{{"call_id", "c" + n}, {"name", "t"}, {"result", {{"ok", i}}}}
                             : Json{{"call_id", "c" + n}, {"name", "t"}, {"error", "failed " + n}}};
      case 6: return {std::string(et::kTitleFallback), {{"title", "title " + n}}};
      case 7: return {"turn/start", {}};
      case 8: return {"turn/end", {{"status", "completed"}}};
      default: return {"model/chunk", {{"delta", n}}};
    }
  };
  // Reads before any event, then after every chunk (a chunk may end in the
  // middle of an assistant block that the next one continues).
  int next = 0;
  for (int round = 0; round < 12; ++round) {
    if (round > 0) {
      std::vector<session::EventDraft> chunk;
      for (int k = 1 + pick(round < 6 ? 3 : 14); k > 0; --k) chunk.push_back(random_event(next++));
      Append(id, std::move(chunk));
    }
    auto whole = WholeLogRead(id, 1, 1);
    ASSERT_TRUE(whole.ok()) << whole.status().ToString();
    int64_t total = (*whole)["total_messages"];
    for (int64_t limit : {1, 2, 3, 7, 200}) {
      // Offsets from the start, in a random order (each read may find the
      // index caught up already or not), plus two beyond the end.
      std::vector<int64_t> offsets;
      for (int64_t o = 1; o <= total + 2; ++o) offsets.push_back(o);
      std::shuffle(offsets.begin(), offsets.end(), rng);
      for (int64_t offset : offsets) {
        ASSERT_EQ(Show(Read(id, offset, limit)), Show(WholeLogRead(id, offset, limit)))
            << "round " << round << ", offset " << offset << ", limit " << limit;
      }
    }
  }
}

// A window read straight from an index (not through the service).
Result<ConversationIndex::Window> IndexRead(ConversationIndex& index, const std::string& id, int64_t offset,
                                            int64_t limit) {
  std::promise<Result<ConversationIndex::Window>> p;
  index.Read(id, offset, limit, [&](Result<ConversationIndex::Window> w) { p.set_value(std::move(w)); });
  return p.get_future().get();
}

// A restarted host (a new index on the same database) loads the chunks the
// first one stored and reads only the log after the last stored start.
TEST_P(ConversationIndexTest, ANewIndexLoadsTheStoredBlockStartsInsteadOfReadingTheWholeLog) {
  std::string id = NewSession();
  constexpr int kTurns = 600;  // 6,000 events, 3,600 blocks: 56 chunks of 64 and 16 blocks more
  std::vector<session::EventDraft> all;
  for (int i = 0; i < kTurns; ++i) {
    for (auto& e : Turn(i)) all.push_back(std::move(e));
  }
  Append(id, std::move(all));
  auto count_chunks = [&]() -> int64_t {
    auto n = db_->ReadValue<int64_t>([&](store::Tx& tx) -> Result<int64_t> {
      int64_t n = 0;
      DSH_RETURN_IF_ERROR(tx.Query("SELECT count(*) FROM conversation_blocks WHERE session_id = ?",
                                   {std::string_view(id)}, [&](const store::Row& row) {
                                     n = row.Int(0);
                                     return Status::Ok();
                                   }));
      return n;
    });
    return n.ok() ? *n : -1;
  };
  // The writer commits jobs in order: after this one, every save queued
  // before it is stored.
  auto saves_done = [&] { ASSERT_TRUE(db_->WriteSync([](store::Tx&) { return Status::Ok(); }).ok()); };

  auto first = ConversationIndex::Create(*store_, ConversationIndex::kDefaultMaxBlocks, /*chunk_blocks=*/64);
  *rows_ = 0;
  ASSERT_TRUE(IndexRead(*first, id, 1, 1).ok());
  EXPECT_GE(rows_->load(), 6000) << "nothing stored yet: the whole log";
  saves_done();
  EXPECT_EQ(count_chunks(), 56);

  auto restarted = ConversationIndex::Create(*store_, ConversationIndex::kDefaultMaxBlocks, 64);
  *rows_ = 0;
  auto newest = IndexRead(*restarted, id, 3401, 200);
  ASSERT_TRUE(newest.ok()) << newest.status().ToString();
  EXPECT_EQ(newest->total, 3600);
  // The 17 blocks from the last stored start on (at most 30 events), and
  // the window's at most 350.
  EXPECT_LE(rows_->load(), 30 + 350) << "events read by the first read of a restarted index";
  auto expected = WholeLogRead(id, 3401, 200);
  ASSERT_TRUE(expected.ok());
  EXPECT_EQ(Json(newest->blocks).dump(), (*expected)["messages"].dump());

  // It goes on from there as the log grows, and stores the chunks it fills.
  for (int i = kTurns; i < kTurns + 20; ++i) Append(id, Turn(i));
  auto middle = IndexRead(*restarted, id, 1001, 50);
  ASSERT_TRUE(middle.ok()) << middle.status().ToString();
  EXPECT_EQ(middle->total, 3720);
  EXPECT_EQ(Json(middle->blocks).dump(), (*WholeLogRead(id, 1001, 50))["messages"].dump());
  saves_done();
  EXPECT_EQ(count_chunks(), 58);
}

TEST_P(ConversationIndexTest, StoredBlockStartsThatDoNotFitTheLogAreReplaced) {
  std::string id = NewSession();
  for (int i = 0; i < 100; ++i) Append(id, Turn(i));  // 600 blocks: 9 chunks of 64
  auto saves_done = [&] { ASSERT_TRUE(db_->WriteSync([](store::Tx&) { return Status::Ok(); }).ok()); };
  auto set_chunk = [&](int64_t chunk, const std::string& text) {
    ASSERT_TRUE(db_->WriteSync([&](store::Tx& tx) {
                     return tx.Exec("UPDATE conversation_blocks SET starts = ? WHERE session_id = ? AND chunk = ?",
                                    {std::string_view(text), std::string_view(id), chunk})
                         .status();
                   }).ok());
  };
  ASSERT_TRUE(IndexRead(*ConversationIndex::Create(*store_, ConversationIndex::kDefaultMaxBlocks, 64), id, 1, 1).ok());
  saves_done();
  auto expected = WholeLogRead(id, 201, 40);
  ASSERT_TRUE(expected.ok());

  // A chunk that does not decode (too short): the log is read instead.
  set_chunk(3, "1,2");
  *rows_ = 0;
  auto r = IndexRead(*ConversationIndex::Create(*store_, ConversationIndex::kDefaultMaxBlocks, 64), id, 201, 40);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Json(r->blocks).dump(), (*expected)["messages"].dump());
  EXPECT_GE(rows_->load(), 1000);
  saves_done();  // ... and the chunk stored again

  // Chunks that decode but are wrong (every event a block): the window's
  // events do not make the blocks promised; the index is dropped and built
  // again from the log.
  std::string wrong = "321";
  for (int i = 1; i < 64; ++i) wrong += ",1";
  set_chunk(3, wrong);
  r = IndexRead(*ConversationIndex::Create(*store_, ConversationIndex::kDefaultMaxBlocks, 64), id, 201, 40);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->total, 600);
  EXPECT_EQ(Json(r->blocks).dump(), (*expected)["messages"].dump());

  // Chunks of other rules are not used.
  saves_done();
  ASSERT_TRUE(db_->WriteSync([&](store::Tx& tx) {
                   return tx.Exec("UPDATE conversation_blocks SET rules = 0 WHERE session_id = ?", {std::string_view(id)})
                       .status();
                 }).ok());
  *rows_ = 0;
  r = IndexRead(*ConversationIndex::Create(*store_, ConversationIndex::kDefaultMaxBlocks, 64), id, 201, 40);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Json(r->blocks).dump(), (*expected)["messages"].dump());
  EXPECT_GE(rows_->load(), 1000);
}

TEST_P(ConversationIndexTest, ACorruptEventAndAnUnknownSessionFailAsBefore) {
  std::string id = NewSession();
  Append(id, Turn(0));
  Append(id, {{std::string(et::kToolResult), {{"call_id", "x"}, {"name", "t"}}}});  // neither result nor error
  for (int round = 0; round < 2; ++round) {
    auto r = Read(id, 1, 5);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(Show(r), Show(WholeLogRead(id, 1, 5)));
  }
  EXPECT_EQ(Show(Read("ses_nope", 1, 5)), Show(WholeLogRead("ses_nope", 1, 5)));
  std::string empty = NewSession();
  EXPECT_EQ(Show(Read(empty, 3, 5)), Show(WholeLogRead(empty, 3, 5)));
}

TEST(ConversationIndexEviction, KeepsAtMostItsBudgetAndStillAnswers) {
  dsh::testing::TempDir dir;
  auto db = store::Database::Open(
      std::make_unique<store::SqliteConnectionFactory>(store::SqliteOptions{.path = dir.File("dsh.db")}),
      session::SessionStore::Migrations());
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  FakeClock clock;
  session::SessionStore store(**db, clock);
  auto index = ConversationIndex::Create(store, /*max_blocks=*/10);
  std::vector<std::string> ids;
  for (int s = 0; s < 3; ++s) {
    session::NewSession n;
    n.route = {"scripted", "m1", std::nullopt};
    auto h = store.Create(n);
    ASSERT_TRUE(h.ok());
    ids.push_back(h->id);
    std::vector<session::EventDraft> events;
    for (int i = 0; i < 8; ++i) events.push_back({std::string(et::kUserMessage), {{"text", std::to_string(i)}}});
    ASSERT_TRUE(store.Append(h->id, std::move(events)).ok());
  }
  for (int round = 0; round < 2; ++round) {
    for (const auto& id : ids) {
      std::promise<Result<ConversationIndex::Window>> p;
      index->Read(id, 8, 5, [&](Result<ConversationIndex::Window> w) { p.set_value(std::move(w)); });
      auto w = p.get_future().get();
      ASSERT_TRUE(w.ok()) << w.status().ToString();
      EXPECT_EQ(w->total, 8);
      ASSERT_EQ(w->blocks.size(), 1u);
      EXPECT_EQ(w->blocks[0]["content"], "7");
      EXPECT_EQ(index->indexed_sessions(), 1u) << "8 blocks each, a budget of 10";
    }
  }
  (*db)->Close();
}

}  // namespace
}  // namespace dsh::plugins::sessions
