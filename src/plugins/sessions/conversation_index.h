#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/json.h"
#include "base/status.h"
#include "session/event.h"
#include "session/session_store.h"

namespace dsh::plugins::sessions {

// Where a session's conversation blocks (session::ProjectConversation)
// begin, one event at a time: replays the projection's grouping rules
// (a user message or a tool result is a block of its own; reasoning, text
// and tool calls of one model step share one assistant block) without
// building the blocks. Thread-compatible.
class BlockTracker {
 public:
  // Whether `e` begins a new block. Errors: the `corrupt_event` that
  // ProjectConversation reports for `e` when it lacks a required field.
  Result<bool> Feed(const std::string& session_id, const session::Event& e);

 private:
  // The open assistant block (the one the next model-step event may fold
  // into), if any.
  bool open_ = false;
  bool reasoning_ = false;
  bool content_empty_ = true;
  bool tool_calls_ = false;
};

// Windows of sessions' conversation blocks that read only the events the
// window covers (plus the events appended since the index last saw the
// session), in place of projecting a session's whole log for every read.
//
// Keeps, per session, the seq of every block's first event up to the
// newest event it has read, in memory, and in the store in chunks of
// `chunk_blocks` block starts (session::SessionStore::SaveBlockChunksAsync,
// written once a chunk is full, off the read's path). The first read of a
// session in this process, or after it was evicted, loads the stored chunks
// and reads only the log after the last stored block start; a session never
// read before (or whose chunks are missing or of older rules) has its whole
// log read once. Sessions are evicted least recently read first once the
// lists hold more than `max_blocks` entries in all (the session just read
// stays). Stored chunks that prove wrong (a window's events do not make the
// blocks the index promised) are dropped and the read is answered from a
// new scan.
//
// Its output is what projecting the whole log as of the session's newest
// event and slicing it gives, block for block; a block starts at an event
// that depends only on the events up to it, so the list is never rebuilt.
//
// Thread-safe: Read may be called from any thread; callbacks run on
// database threads, once each. Callbacks hold a reference to the index
// (shared_from_this: reads finish after their caller may have gone).
class ConversationIndex : public std::enable_shared_from_this<ConversationIndex> {
 public:
  static constexpr size_t kDefaultMaxBlocks = size_t{8} << 20;  // 64 MiB of seqs
  // Block starts per stored chunk: a 1,000,000-event session of short turns
  // is a few hundred rows of ~7 KB, and a load reads at most this many
  // blocks' events after the last chunk.
  static constexpr size_t kDefaultChunkBlocks = 1024;
  // The version of BlockTracker's rules the stored chunks were derived
  // with; bump it with any change of the rules (and of ProjectConversation's
  // grouping): chunks of other rules are ignored and overwritten.
  static constexpr int64_t kRules = 1;

  struct Window {
    int64_t total = 0;          // blocks in the session as of its newest event read
    std::vector<Json> blocks;   // blocks offset..offset+limit-1 that exist; none when offset > total
  };
  using Callback = std::function<void(Result<Window>)>;

  // `store` must outlive the index and every read in flight.
  static std::shared_ptr<ConversationIndex> Create(session::SessionStore& store,
                                                   size_t max_blocks = kDefaultMaxBlocks,
                                                   size_t chunk_blocks = kDefaultChunkBlocks);

  // Blocks offset..offset+limit-1 (1-based; offset > 0, limit > 0) of the
  // session as of its newest event when the read starts. Errors: `not_found`
  // for an unknown session; `corrupt_event` when an event of the log does
  // not decode or lacks a field the projection needs; storage errors.
  void Read(std::string session_id, int64_t offset, int64_t limit, Callback done);

  // Sessions indexed now (for tests).
  size_t indexed_sessions() const;

 private:
  struct Entry {
    int64_t scanned = 0;          // events 1..scanned have been read into `starts`
    std::vector<int64_t> starts;  // seq of each block's first event, ascending
    BlockTracker tracker;         // state after event `scanned`
    uint64_t used = 0;            // tick of the last read, for eviction
    bool loaded = false;          // the stored chunks were read (or tried)
    size_t saved_chunks = 0;      // chunks 0..saved_chunks-1 are stored
    bool saving = false;          // a save is in flight
  };

  ConversationIndex(session::SessionStore& store, size_t max_blocks, size_t chunk_blocks)
      : store_(store), max_blocks_(max_blocks), chunk_blocks_(chunk_blocks) {}

  // One read; `retry`: whether a wrong stored index may still be dropped
  // and the read begun again.
  void Start(std::string session_id, int64_t offset, int64_t limit, bool retry, Callback done);
  // Reads the stored chunks into a new entry, then calls `done`.
  void Load(std::string session_id, int64_t last_seq, std::function<void(Status)> done);
  // The save of the entry's full chunks not stored yet (nullptr when
  // none), to run after mu_ is released; requires mu_.
  std::function<void()> SaveLocked(const std::string& session_id, Entry& entry);
  // Forgets the session here and in the store, then calls `done`.
  void Drop(std::string session_id, std::function<void()> done);

  struct Scan;  // one catch-up in flight

  // Reads the events after the entry's `scanned` up to `last_seq` and adds
  // their block starts to the session's entry, then calls `done`.
  void CatchUp(std::string session_id, int64_t last_seq, std::function<void(Status)> done);
  void ScanPage(std::shared_ptr<Scan> scan, std::function<void(Status)> done);
  void Merge(std::shared_ptr<Scan> scan, std::function<void(Status)> done);
  // With the entry caught up to `last_seq`: reads the window's events.
  void ReadWindow(std::string session_id, int64_t last_seq, int64_t offset, int64_t limit, bool retry,
                  Callback done);
  void EvictLocked(const std::string& keep);  // requires mu_

  session::SessionStore& store_;
  const size_t max_blocks_;
  const size_t chunk_blocks_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;  // GUARDED_BY(mu_)
  size_t blocks_ = 0;                               // GUARDED_BY(mu_): starts in all entries
  uint64_t tick_ = 0;                               // GUARDED_BY(mu_)
};

}  // namespace dsh::plugins::sessions
