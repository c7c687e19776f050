#include "session/search_index.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "session/event_hub.h"
#include "session/session_store.h"
#include "store/testing/test_backend.h"

namespace dsh::session {
namespace {

using namespace std::chrono_literals;
namespace et = event_types;

std::vector<store::Migration> AllMigrations() {
  auto all = SessionStore::Migrations();
  for (auto& m : SearchIndex::Migrations()) all.push_back(std::move(m));
  return all;
}

class SearchIndexTest : public ::testing::TestWithParam<std::string> {
 protected:
  SearchIndexTest() { Open(AllMigrations()); }
  void Open(std::vector<store::Migration> migrations) {
    index_.reset();
    store_.reset();
    db_.reset();
    auto db = store::Database::Open(backend_.Factory(), std::move(migrations));
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(db).value();
    store_ = std::make_unique<SessionStore>(*db_, clock_, &hub_);
  }
  void MakeIndex(SearchIndexOptions options = {}) {
    index_ = std::make_unique<SearchIndex>(*db_, clock_, &hub_, options);
  }
  std::string NewSession() {
    auto h = store_->Create(NewSessionOf());
    EXPECT_TRUE(h.ok()) << h.status().ToString();
    return h->id;
  }
  static session::NewSession NewSessionOf() {
    session::NewSession s;
    s.route = {"echo", "echo", std::nullopt};
    return s;
  }
  void Say(const std::string& id, std::string_view type, const std::string& text) {
    auto r = store_->Append(id, {{std::string(type), {{"text", text}}}});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    clock_.Advance(1s);
  }
  SearchPage Find(const std::string& q, int64_t limit = 20, std::optional<std::string> before = std::nullopt) {
    auto page = index_->Search({q, limit, std::move(before)});
    EXPECT_TRUE(page.ok()) << q << ": " << page.status().ToString();
    return page.ok() ? *page : SearchPage{};
  }
  std::vector<std::string> Sessions(const SearchPage& page) {
    std::vector<std::string> ids;
    for (const auto& r : page.results) ids.push_back(r.session_id);
    return ids;
  }
  void CatchUp() {
    auto r = index_->CatchUp();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }

  store::testing::TestBackend backend_{GetParam(), /*fast=*/true};
  FakeClock clock_;
  EventHub hub_;
  std::unique_ptr<store::Database> db_;
  std::unique_ptr<SessionStore> store_;
  std::unique_ptr<SearchIndex> index_;  // last: goes first
};

INSTANTIATE_TEST_SUITE_P(Backends, SearchIndexTest, store::testing::BackendNames(), store::testing::BackendTestName);

TEST(SearchTerms, AreWordsOfAnyScriptLowercasedAndAQueryWithoutOneIsRefused) {
  auto t = SearchTerms("  Weekly-REPORT, привет 2026!");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, (std::vector<std::string>{"weekly", "report", "привет", "2026"}));
  EXPECT_EQ(SearchTerms(" ,.!? ").status().code(), codes::kInvalidArguments);
  EXPECT_EQ(SearchTerms("").status().code(), codes::kInvalidArguments);
}

TEST(SearchableText, IsTheLoopPromptNotItsMarkupAndNothingForOtherEvents) {
  Event loop{1, std::string(et::kUserMessage), 0,
             {{"text", "<loop><loop_id>loop_01abc</loop_id><prompt>check the disk &amp; report</prompt></loop>"}}};
  EXPECT_EQ(SearchableText(loop), "check the disk & report");
  Event tool{2, "tool/call", 0, {{"name", "x"}}};
  EXPECT_EQ(SearchableText(tool), "");
}

TEST_P(SearchIndexTest, FindsMessagesByWordsAndPrefixesWhateverTheirCase) {
  MakeIndex();
  std::string a = NewSession(), b = NewSession();
  Say(a, et::kUserMessage, "Please draft the Quarterly budget");
  Say(a, et::kAssistantMessage, "Here is a draft of the budget for Q3");
  Say(b, et::kUserMessage, "What is the capital of Burkina Faso?");
  Say(b, et::kAssistantMessage, "Ouagadougou, and the word привет is Russian");
  CatchUp();

  EXPECT_EQ(Sessions(Find("QUARTERLY")), std::vector<std::string>{a});
  EXPECT_EQ(Sessions(Find("quart budg")), std::vector<std::string>{a});   // prefixes, every term
  EXPECT_EQ(Sessions(Find("ouaga")), std::vector<std::string>{b});         // an assistant's text
  EXPECT_EQ(Sessions(Find("привет")), std::vector<std::string>{b});        // any script
  EXPECT_TRUE(Find("quarterly faso").results.empty());                     // all terms must match
  EXPECT_TRUE(Find("zebra").results.empty());

  // The newest matching message of the session, with its seq and time.
  SearchPage page = Find("draft");
  ASSERT_EQ(page.results.size(), 1u);
  EXPECT_EQ(page.results[0].seq, 2);
  EXPECT_EQ(page.results[0].snippet, "Here is a <mark>draft</mark> of the budget for Q3");
  EXPECT_FALSE(page.next.has_value());
}

TEST_P(SearchIndexTest, SnippetsAreEscapedHtmlWithOnlyTheMatchesMarked) {
  MakeIndex();
  std::string a = NewSession();
  Say(a, et::kUserMessage, "render <b>bold</b> & \"quoted\" markup");
  CatchUp();
  SearchPage page = Find("bold");
  ASSERT_EQ(page.results.size(), 1u);
  const std::string& snippet = page.results[0].snippet;
  EXPECT_EQ(snippet, "render &lt;b&gt;<mark>bold</mark>&lt;/b&gt; &amp; &quot;quoted&quot; markup");
  EXPECT_EQ(snippet.find("<b>"), std::string::npos) << snippet;
}

TEST_P(SearchIndexTest, ALongTextsSnippetIsTheNeighbourhoodOfItsFirstMatch) {
  MakeIndex();
  std::string a = NewSession();
  std::string text;
  for (int i = 0; i < 40; ++i) text += "w" + std::to_string(i) + " ";
  text += "Needle, and then";
  for (int i = 40; i < 80; ++i) text += " w" + std::to_string(i);
  Say(a, et::kUserMessage, text);
  CatchUp();
  SearchPage page = Find("needle");
  ASSERT_EQ(page.results.size(), 1u);
  EXPECT_EQ(page.results[0].snippet,
            "…w34 w35 w36 w37 w38 w39 <mark>Needle</mark>, and then w40 w41 w42 w43 w44 w45 w46 w47 w48 w49 w50 w51 "
            "w52 w53 w54…");
}

TEST_P(SearchIndexTest, FindsTitlesAndFollowsARename) {
  MakeIndex();
  std::string a = NewSession();
  ASSERT_TRUE(store_->Append(a, {{std::string(et::kTitleUser), {{"title", "Weekly report"}}}}).ok());
  CatchUp();
  SearchPage page = Find("weekly");
  ASSERT_EQ(page.results.size(), 1u);
  EXPECT_EQ(page.results[0].session_id, a);
  EXPECT_EQ(page.results[0].seq, 0);
  EXPECT_EQ(page.results[0].title, "Weekly report");

  ASSERT_TRUE(store_->Append(a, {{std::string(et::kTitleUser), {{"title", "Monthly digest"}}}}).ok());
  CatchUp();
  EXPECT_TRUE(Find("weekly").results.empty());
  EXPECT_EQ(Sessions(Find("digest")), std::vector<std::string>{a});
}

TEST_P(SearchIndexTest, LoopDeliveriesAreFoundByTheirPromptNotTheirMarkup) {
  MakeIndex();
  std::string a = NewSession();
  Say(a, et::kUserMessage, "<loop><loop_id>loop_01xyz</loop_id><prompt>check the disk usage</prompt></loop>");
  CatchUp();
  EXPECT_EQ(Sessions(Find("disk usage")), std::vector<std::string>{a});
  EXPECT_TRUE(Find("loop_id").results.empty());
  EXPECT_TRUE(Find("loop_01xyz").results.empty());
}

TEST_P(SearchIndexTest, PagesGiveOneHitPerSessionNewestFirstAndEndWithoutACursor) {
  MakeIndex();
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    ids.push_back(NewSession());
    Say(ids.back(), et::kUserMessage, "alpha number " + std::to_string(i));
    Say(ids.back(), et::kAssistantMessage, "alpha again " + std::to_string(i));
  }
  CatchUp();
  SearchPage first = Find("alpha", 2);
  EXPECT_EQ(Sessions(first), (std::vector<std::string>{ids[4], ids[3]}));
  ASSERT_TRUE(first.next.has_value());
  SearchPage second = Find("alpha", 2, first.next);
  EXPECT_EQ(Sessions(second), (std::vector<std::string>{ids[2], ids[1]}));
  ASSERT_TRUE(second.next.has_value());
  SearchPage third = Find("alpha", 2, second.next);
  EXPECT_EQ(Sessions(third), (std::vector<std::string>{ids[0]}));
  EXPECT_FALSE(third.next.has_value());
}

TEST_P(SearchIndexTest, BadQueriesAreRefused) {
  MakeIndex();
  EXPECT_EQ(index_->Search({"  ", 20, std::nullopt}).status().code(), codes::kInvalidArguments);
  EXPECT_EQ(index_->Search({"x", 0, std::nullopt}).status().code(), codes::kInvalidArguments);
  EXPECT_EQ(index_->Search({"x", 101, std::nullopt}).status().code(), codes::kInvalidArguments);
  EXPECT_EQ(index_->Search({"x", 20, "12abc"}).status().code(), codes::kInvalidArguments);
}

// Sessions written before the index existed are indexed by the background
// thread on start, and a restart in the middle goes on where it stopped.
TEST_P(SearchIndexTest, SessionsWrittenBeforeTheIndexAreIndexedInTheBackgroundAndResumably) {
  index_.reset();
  store_.reset();
  db_.reset();
  backend_.Recreate();
  Open(SessionStore::Migrations());  // a profile from before search
  std::vector<std::string> ids;
  for (int i = 0; i < 30; ++i) {
    ids.push_back(NewSession());
    for (int k = 0; k < 10; ++k) Say(ids.back(), et::kUserMessage, "legacy text " + std::to_string(i));
  }
  Open(AllMigrations());  // the upgrade adds the index, empty

  // A first host indexes a part and stops.
  MakeIndex({.slice_events = 25, .pause = 50ms});
  index_->Start();
  ASSERT_TRUE(index_->WaitFor([](const SearchIndex::Stats& s) { return s.jobs >= 2; }, 20s));
  index_->Stop();
  int64_t first_run = index_->stats().events_indexed;
  EXPECT_GT(first_run, 0);
  EXPECT_LT(first_run, 300);

  // The next one goes on from there and finishes.
  MakeIndex({.slice_events = 25});
  index_->Start();
  ASSERT_TRUE(index_->WaitFor(
      [](const SearchIndex::Stats& s) { return s.queued == 0 && s.jobs > 0 && s.events_indexed > 0; }, 30s));
  ASSERT_TRUE(index_->WaitFor([&](const SearchIndex::Stats& s) { return first_run + s.events_indexed >= 300; }, 30s))
      << "first run " << first_run << ", second " << index_->stats().events_indexed;
  EXPECT_EQ(first_run + index_->stats().events_indexed, 300);  // nothing indexed twice
  SearchPage page = Find("legacy", 100);
  EXPECT_EQ(page.results.size(), 30u);
  EXPECT_EQ(Sessions(Find("legacy 17")), std::vector<std::string>{ids[17]});
}

// Appends reach the index shortly after they commit, while searches go on.
TEST_P(SearchIndexTest, AppendsAreFoundSoonAfterWhileSearchesRun) {
  MakeIndex({.gather = 5ms});
  index_->Start();
  std::string a = NewSession();
  std::atomic<bool> done{false};
  std::atomic<int> searches{0}, failures{0};
  std::thread searcher([&] {
    while (!done) {
      auto page = index_->Search({"streaming", 20, std::nullopt});
      if (!page.ok()) ++failures;
      ++searches;
    }
  });
  for (int i = 0; i < 200; ++i) {
    auto r = store_->Append(a, {{std::string(et::kUserMessage), {{"text", "streaming word" + std::to_string(i)}}}});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  Say(a, et::kAssistantMessage, "the final answer is zanzibar");
  // Every one of the 201 events reaches the index without anyone asking.
  EXPECT_TRUE(index_->WaitFor([](const SearchIndex::Stats& s) { return s.events_indexed >= 201; }, 20s))
      << index_->stats().events_indexed;
  done = true;
  searcher.join();
  EXPECT_FALSE(Find("zanzibar").results.empty());
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GT(searches.load(), 0);
  EXPECT_EQ(Find("zanzibar").results.at(0).seq, 201);
}

}  // namespace
}  // namespace dsh::session
