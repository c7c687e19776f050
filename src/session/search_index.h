#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "session/event_hub.h"
#include "store/database.h"

namespace dsh::session {

// One session a search found: its newest matching message (seq > 0) or its
// title (seq 0).
struct SearchHit {
  std::string session_id;
  std::optional<std::string> title;  // the effective title (titles.h); none yet
  int64_t seq = 0;
  int64_t at = 0;  // Unix ms of the message (of the indexing, for a title)
  // Safe HTML: the matched text's neighbourhood with every `<`, `>`, `&` and
  // `"` escaped and each matched word inside `<mark>…</mark>`.
  std::string snippet;
  bool archived = false;
};

struct SearchPage {
  std::vector<SearchHit> results;
  // Where the next page starts (SearchQuery::before); none when no
  // indexed text older than this page matches.
  std::optional<std::string> next;
};

struct SearchQuery {
  std::string text;
  int64_t limit = 20;                 // 1..100 sessions
  std::optional<std::string> before;  // a previous page's `next`
};

// The words of a search's text: runs of letters and digits (any script:
// every byte of a multi-byte UTF-8 character counts as a letter), at most 16,
// each cut to 64 bytes. invalid_arguments when there is none.
Result<std::vector<std::string>> SearchTerms(std::string_view text);

// The text of an event that search finds: a user message (a loop delivery's
// prompt rather than its markup) or an assistant answer, cut at 64 KiB on a
// character boundary; empty for other events.
std::string SearchableText(const Event& event);

struct SearchIndexOptions {
  // Most events one indexing job (one write transaction's savepoint) takes,
  // and the pause after it when more are waiting.
  int64_t slice_events = 256;
  std::chrono::milliseconds pause{5};
  // How long appends are gathered before they are indexed together.
  std::chrono::milliseconds gather{100};
  // Every so often the whole profile is checked for sessions the index is
  // behind on (written by another host, or before a crash).
  std::chrono::milliseconds rescan{std::chrono::seconds(30)};
  // While appends are arriving (one in the last second), indexing takes at
  // most about this share of the time: after a slice that took d, it rests
  // d × (1 / share − 1) before the next. The writer is shared with the
  // appends (SQLite has one), so this bounds what indexing costs them
  // (docs/PERFORMANCE.md, "Search"); with no appends it indexes at full speed.
  double share_while_busy = 0.1;
  std::chrono::milliseconds progress_every{std::chrono::seconds(5)};
};

// Full-text search over session titles and the text of their user and
// assistant messages (docs/STORAGE.md, "Search"): SQLite FTS5 (unicode61
// tokenizer, diacritics folded, prefix indexes) or PostgreSQL full-text
// search (the `simple` configuration, a GIN index).
//
// The index follows the logs off the durable path: appends commit without
// it, and a thread of its own indexes what they added shortly after
// (SubscribeAll on the hub), in small write jobs that give way to a busy
// writer. Where the index is is kept per session (`search_state.indexed_seq`,
// advanced by compare-and-set, so two hosts indexing the same session do it
// once), which makes indexing resumable: at Start and every `rescan` the
// sessions whose log is ahead of the index are queued — on first start after
// an upgrade, every session written before the index existed, with progress
// in the log.
//
// Thread-safe. Destroy (or Stop) it before the Database and the hub.
class SearchIndex {
 public:
  struct Stats {
    int64_t events_indexed = 0;  // events read by committed jobs
    int64_t documents = 0;       // texts added by committed jobs
    int64_t jobs = 0;
    int64_t failures = 0;        // jobs that failed (their sessions are retried)
    int64_t queued = 0;          // sessions waiting now
  };

  static std::vector<store::Migration> Migrations();

  SearchIndex(store::Database& db, const Clock& clock, EventHub* hub, SearchIndexOptions options = {});
  ~SearchIndex();
  SearchIndex(const SearchIndex&) = delete;
  SearchIndex& operator=(const SearchIndex&) = delete;

  // Starts the indexing thread (which first queues every session the index
  // is behind on). Without Start, nothing is indexed unless CatchUp is called.
  void Start();
  // Idempotent; a job in progress finishes first.
  void Stop();

  // Indexes, on the calling thread, every session the index is behind on,
  // until none is; returns how many events it read. For tests, benchmarks
  // and tools (blocks: never on an I/O thread).
  Result<int64_t> CatchUp();

  // One page of sessions matching every term of `query.text` (as a word or
  // a word's prefix, case-insensitive), newest matching text first; one hit
  // per session on a page. invalid_arguments for a query without terms, a
  // limit out of range or a malformed cursor.
  Result<SearchPage> Search(const SearchQuery& query);
  void SearchAsync(SearchQuery query, std::function<void(Result<SearchPage>)> done);

  Stats stats() const;
  // Waits until `pred(stats())` holds or `timeout` passes; returns whether it held.
  bool WaitFor(const std::function<bool(const Stats&)>& pred, std::chrono::milliseconds timeout) const;

 private:
  void Run();
  // Takes mu_. `append`: an append's news (not a rescan's), which makes
  // indexing yield (share_while_busy).
  void Enqueue(const std::string& session_id, bool append);
  void EnqueueLocked(const std::string& session_id);  // mu_ held
  // Up to slice_events sessions off the queue; mu_ held.
  std::vector<std::string> TakeBatchLocked();
  Result<size_t> QueueBehind();  // queues every session the index is behind on; returns how many
  // Indexes the queued sessions in one write job, up to slice_events; the
  // sessions with more left are queued again.
  Status IndexSlice(std::vector<std::string> sessions);

  store::Database& db_;
  const Clock& clock_;
  SearchIndexOptions options_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::deque<std::string> queue_;     // GUARDED_BY(mu_)
  std::set<std::string> queued_;      // GUARDED_BY(mu_)
  Stats stats_;                       // GUARDED_BY(mu_)
  bool stop_ = false;                 // GUARDED_BY(mu_)
  std::chrono::steady_clock::time_point last_append_{};  // GUARDED_BY(mu_)
  std::thread thread_;
  std::unique_ptr<EventHub::Subscription> appends_;  // last: ends before the rest goes
};

}  // namespace dsh::session
