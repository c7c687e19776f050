#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "session/event.h"
#include "session/event_hub.h"
#include "session/session_header.h"
#include "session/titles.h"
#include "store/database.h"

namespace dsh::session {

// Durable sessions: headers and append-only event logs in the profile
// database (tables `sessions` and `events`, docs/STORAGE.md).
//
// Every operation exists in two forms: a blocking one (for worker threads,
// tests and the CLI; it blocks the caller, so never call it on an I/O thread)
// and an `...Async` one whose callback runs on a database thread after the
// outcome is known (post to your own strand from it; don't block in it).
//
// Writes are acknowledged only after COMMIT returned; concurrent appends
// share commits (store::Database group commit). Errors: `not_found` for an
// unknown session, `already_exists` for a duplicate id, `invalid_arguments`
// for bad input, `corrupt_event` naming session and seq when a stored event
// does not decode, `commit_failed`/`storage_error` from the store.
//
// Thread-safe.
// The notice channel (store::Tx::Notify) of appends: the payload is the
// session id, sent with every append so other hosts' streams read on.
inline constexpr std::string_view kEventsChannel = "events";

class SessionStore {
 public:
  template <typename T>
  using Callback = std::function<void(Result<T>)>;

  // The migrations of the "session" schema module.
  static std::vector<store::Migration> Migrations();

  // `hub`, when given, receives every append after it committed.
  // With a hub, other hosts' appends on a shared database (their notices)
  // are announced on it with EventHub::PublishRemote.
  SessionStore(store::Database& db, const Clock& clock, EventHub* hub = nullptr);
  // Waits for a background compaction in flight, if any.
  ~SessionStore();

  // Creates an empty session (updated_at = created_at = now).
  Result<SessionHeader> Create(const NewSession& s);
  void CreateAsync(NewSession s, Callback<SessionHeader> done);
  // Like CreateAsync, and runs `also` in the same transaction after the
  // header was inserted: both commit or neither does. Used to accept a new
  // session's first message together with the session.
  using CreateAlsoFn = std::function<Status(store::Tx&, const SessionHeader&)>;
  void CreateWithAsync(NewSession s, CreateAlsoFn also, Callback<SessionHeader> done);

  // Appends `events` atomically (all or none) with consecutive seqs after the
  // session's last one; returns them as stored. Title events also update the
  // session's title snapshot in the same transaction.
  Result<std::vector<Event>> Append(const std::string& session_id, std::vector<EventDraft> events);
  void AppendAsync(std::string session_id, std::vector<EventDraft> events, Callback<std::vector<Event>> done);

  // Like AppendAsync, and runs `also` in the same transaction after the
  // events were inserted: both commit or neither does (an error from `also`
  // fails the append). Used to consume inbox messages exactly once.
  //
  // `fence`, when given, runs first, once the session's row is locked and
  // before anything is written; its error fails the append without writing.
  // The agent checks there that it still holds the session's lease.
  //
  // The append may run more than once, also after it succeeded
  // (store::JobRerun::kAlsoAfterSuccess): `also` and `fence` fill what they
  // capture by assignment.
  using AlsoFn = std::function<Status(store::Tx&, const std::vector<Event>&)>;
  using FenceFn = std::function<Status(store::Tx&)>;
  void AppendWithAsync(std::string session_id, std::vector<EventDraft> events, AlsoFn also,
                       Callback<std::vector<Event>> done, FenceFn fence = nullptr);

  // The hub this store publishes to (nullptr when none): the agents publish
  // their model deltas there too.
  EventHub* hub() const { return hub_; }

  // ReadEvents inside a transaction of the caller's (an AlsoFn or a job).
  static Result<std::vector<Event>> ReadEventsIn(store::Tx& tx, const std::string& session_id, int64_t after_seq,
                                                 int64_t limit);

  Result<SessionHeader> Get(const std::string& session_id);
  void GetAsync(std::string session_id, Callback<SessionHeader> done);

  // Events with seq > after_seq, oldest first, at most `limit` (> 0).
  Result<std::vector<Event>> ReadEvents(const std::string& session_id, int64_t after_seq, int64_t limit);
  void ReadEventsAsync(std::string session_id, int64_t after_seq, int64_t limit, Callback<std::vector<Event>> done);

  // The `limit` most recently updated sessions: updated_at descending, ties
  // by id ascending.
  Result<std::vector<SessionHeader>> ListRecent(int64_t limit);
  void ListRecentAsync(int64_t limit, Callback<std::vector<SessionHeader>> done);

  // A new session whose events 1..seed_length are copies of the parent's;
  // records parent_id and seed_length. 0 <= seed_length <= parent's last_seq,
  // and seed_length is a turn boundary (event.h): a child that began inside
  // a turn would have its agent continue that turn, a model call nobody
  // asked for. invalid_arguments names the nearest boundaries. Without a
  // seed_length: the parent's whole log up to its last boundary (a turn
  // still running is left out).
  Result<SessionHeader> Fork(const std::string& parent_id, std::optional<int64_t> seed_length,
                             const NewSession& child);
  void ForkAsync(std::string parent_id, std::optional<int64_t> seed_length, NewSession child,
                 Callback<SessionHeader> done);

  // Moves the oldest events of the append-ordered `events_recent` table into
  // the session-clustered `events` table: at most `max_rows`, and no more
  // than fit an estimate of `max_pages` pages of `events` written (one per
  // session in the slice plus the events' bytes / 4096; the first event
  // always moves); returns how many moved. Runs by itself as ordinary write
  // jobs, sized by how busy the writer is: while it keeps up, a slice of
  // kCompactSlice rows whenever that many are waiting (an append waits
  // behind ~1 ms of compaction at most); while it is saturated, up to
  // kCompactEvery rows at a time (far fewer pages written per event when few
  // sessions are busy), within kCompactPages either way (with a thousand
  // busy sessions, 4,096 rows would write a page each for most of them and
  // hold every append for 5–17 ms). Tests and tools may call it. Reads see
  // the same events before and after.
  Result<int64_t> Compact(int64_t max_rows, int64_t max_pages = std::numeric_limits<int64_t>::max());
  static constexpr size_t kCompactEvery = 4096;
  static constexpr size_t kCompactSlice = 256;
  static constexpr int64_t kCompactPages = 256;

  // Ids of the sessions with at least one event of `type`, in id order. A
  // scan of every event: for one-time migrations, not for serving requests.
  Result<std::vector<std::string>> SessionsWithEventType(const std::string& type);

  // The conversation block index of plugins/sessions' ConversationIndex, a
  // cache derived from the log (table `conversation_blocks`): opaque chunk
  // texts per session, numbered from 0, each written under a `rules`
  // version of the code that derived it. Read returns the chunks of
  // `rules` from chunk 0 up to the first one missing; Save writes chunks
  // first_chunk.. (replacing rows of other rules; the same content from
  // two hosts at once is harmless); Drop removes all of a session's.
  void ReadBlockChunksAsync(std::string session_id, int64_t rules, Callback<std::vector<std::string>> done);
  void SaveBlockChunksAsync(std::string session_id, int64_t rules, int64_t first_chunk,
                            std::vector<std::string> chunks, std::function<void(Status)> done);
  void DropBlockChunksAsync(std::string session_id, std::function<void(Status)> done);

  // Title snapshots of many sessions in one read; unknown ids are absent
  // from the result. Touches no agent and generates nothing.
  Result<std::map<std::string, Titles>> ReadTitles(const std::vector<std::string>& session_ids);
  void ReadTitlesAsync(std::vector<std::string> session_ids, Callback<std::map<std::string, Titles>> done);

 private:
  void NoteAppended(size_t n);
  void CompactionStep();  // one slice of a compaction; chains the next

  template <typename T>
  void RunAsync(const std::function<void(store::Database::Job, store::Database::Done)>& submit,
                std::function<Result<T>(store::Tx&)> job, Callback<T> done);
  template <typename T>
  void WriteAsync(std::function<Result<T>(store::Tx&)> job, Callback<T> done,
                  store::JobIsolation isolation = store::JobIsolation::kSavepoint,
                  store::JobRerun rerun = store::JobRerun::kOnlyAfterFailure);
  template <typename T>
  void ReadAsync(std::function<Result<T>(store::Tx&)> job, Callback<T> done);

  // Wraps `done` so committed events reach the hub first.
  Callback<std::vector<Event>> Published(const std::string& session_id, Callback<std::vector<Event>> done);

  store::Database& db_;
  const Clock& clock_;
  EventHub* hub_;
  store::Subscription remote_appends_;  // last: ends before the rest goes
  // Events appended and not yet compacted, as far as this store knows.
  std::atomic<int64_t> backlog_{0};
  std::mutex compaction_mu_;
  std::condition_variable compaction_cv_;
  bool compacting_ = false;  // GUARDED_BY(compaction_mu_)
};

}  // namespace dsh::session
