#include "plugins/sessions/conversation_index.h"

#include <algorithm>
#include <charconv>
#include <utility>

#include "base/log.h"
#include "session/conversation.h"

namespace dsh::plugins::sessions {
namespace {

namespace et = session::event_types;

// Events read per query while catching up with a session's log.
constexpr int64_t kEventPage = 4096;

bool HasString(const Json& data, const char* field) {
  auto it = data.find(field);
  return it != data.end() && it->is_string();
}

// The projection's own error for an event it rejects (it checks fields
// before it looks at earlier events, so the event alone reproduces it).
Status ProjectionError(const std::string& session_id, const session::Event& e) {
  auto r = session::ProjectConversation(session_id, {e});
  if (!r.ok()) return r.status();
  return Status(codes::kCorruptEvent, "session " + session_id + " seq " + std::to_string(e.seq) + ": a '" + e.type +
                                          "' event lacks a field the conversation needs");
}

// A chunk's text: its first start, then the differences to the one before,
// comma-separated ("17,3,5,...").
std::string EncodeChunk(const int64_t* starts, size_t n) {
  std::string text;
  text.reserve(n * 4);
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) text += ',';
    text += std::to_string(i == 0 ? starts[0] : starts[i] - starts[i - 1]);
  }
  return text;
}

// The starts of `chunks`, each of exactly `chunk_blocks` starts, ascending,
// within 1..last_seq; false when any of that does not hold.
bool DecodeChunks(const std::vector<std::string>& chunks, size_t chunk_blocks, int64_t last_seq,
                  std::vector<int64_t>* starts) {
  starts->reserve(chunks.size() * chunk_blocks);
  for (const std::string& text : chunks) {
    const char* p = text.data();
    const char* end = p + text.size();
    for (size_t i = 0; i < chunk_blocks; ++i) {
      if (i > 0 && (p == end || *p++ != ',')) return false;
      int64_t v = 0;
      auto [next, ec] = std::from_chars(p, end, v);
      if (ec != std::errc() || v <= 0) return false;
      p = next;
      int64_t seq = i == 0 ? v : starts->back() + v;
      if ((i == 0 && !starts->empty() && seq <= starts->back()) || seq > last_seq) return false;
      starts->push_back(seq);
    }
    if (p != end) return false;
  }
  return true;
}

}  // namespace

Result<bool> BlockTracker::Feed(const std::string& session_id, const session::Event& e) {
  const std::string& t = e.type;
  // Mirrors session::ProjectConversation (conversation.cc): which assistant
  // block an event "fits" into; the property test compares the two.
  auto open_new = [this](bool fits) {
    if (fits) return false;
    open_ = true;
    reasoning_ = false;
    content_empty_ = true;
    tool_calls_ = false;
    return true;
  };
  if (t == et::kUserMessage) {
    if (!HasString(e.data, "text")) return ProjectionError(session_id, e);
    open_ = false;
    return true;
  }
  if (t == et::kReasoning) {
    if (!HasString(e.data, "text")) return ProjectionError(session_id, e);
    bool started = open_new(open_ && !reasoning_ && content_empty_ && !tool_calls_);
    reasoning_ = true;
    return started;
  }
  if (t == et::kAssistantMessage) {
    if (!HasString(e.data, "text")) return ProjectionError(session_id, e);
    bool started = open_new(open_ && content_empty_ && !tool_calls_);
    content_empty_ = e.data["text"].get_ref<const std::string&>().empty();
    return started;
  }
  if (t == et::kToolCall) {
    if (!HasString(e.data, "call_id") || !HasString(e.data, "name")) return ProjectionError(session_id, e);
    bool started = open_new(open_);
    tool_calls_ = true;
    return started;
  }
  if (t == et::kToolResult) {
    if (!HasString(e.data, "call_id") || !HasString(e.data, "name") ||
        (!e.data.contains("error") && !e.data.contains("result"))) {
      return ProjectionError(session_id, e);
    }
    open_ = false;
    return true;
  }
  return false;  // trace-only
}

struct ConversationIndex::Scan {
  std::string session_id;
  int64_t from = 0;      // the entry's `scanned` when the scan began
  int64_t last_seq = 0;  // read up to here
  int64_t after = 0;     // events up to here have been read
  BlockTracker tracker;
  std::vector<int64_t> starts;       // block starts in (from, after]
  Status projection = Status::Ok();  // the first event the projection rejects
};

std::shared_ptr<ConversationIndex> ConversationIndex::Create(session::SessionStore& store, size_t max_blocks,
                                                             size_t chunk_blocks) {
  return std::shared_ptr<ConversationIndex>(new ConversationIndex(store, max_blocks, std::max<size_t>(chunk_blocks, 1)));
}

size_t ConversationIndex::indexed_sessions() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

void ConversationIndex::Read(std::string session_id, int64_t offset, int64_t limit, Callback done) {
  Start(std::move(session_id), offset, limit, /*retry=*/true, std::move(done));
}

void ConversationIndex::Start(std::string session_id, int64_t offset, int64_t limit, bool retry, Callback done) {
  store_.GetAsync(session_id, [self = shared_from_this(), session_id, offset, limit, retry,
                               done = std::move(done)](Result<session::SessionHeader> header) mutable {
    if (!header.ok()) return done(header.status());
    const int64_t last_seq = header->last_seq;
    self->CatchUp(session_id, last_seq,
                  [self, session_id, last_seq, offset, limit, retry, done = std::move(done)](Status st) mutable {
                    if (!st.ok()) return done(st);
                    self->ReadWindow(std::move(session_id), last_seq, offset, limit, retry, std::move(done));
                  });
  });
}

void ConversationIndex::Load(std::string session_id, int64_t last_seq, std::function<void(Status)> done) {
  store_.ReadBlockChunksAsync(
      session_id, kRules,
      [self = shared_from_this(), session_id, last_seq,
       done = std::move(done)](Result<std::vector<std::string>> chunks) mutable {
        // The stored index is a cache: when it cannot be read or is not
        // usable, the log is read instead (and any storage error shows there).
        std::vector<int64_t> starts;
        bool usable = chunks.ok() && DecodeChunks(*chunks, self->chunk_blocks_, last_seq, &starts);
        if (!chunks.ok()) {
          spdlog::debug("session {}: cannot read its stored conversation block index: {}", session_id,
                        chunks.status().ToString());
        } else if (!usable) {
          spdlog::warn("session {}: its stored conversation block index does not fit the log; reading the log",
                       session_id);
        }
        {
          std::lock_guard lock(self->mu_);
          Entry& entry = self->entries_[session_id];
          entry.used = ++self->tick_;
          if (!entry.loaded) {
            entry.loaded = true;
            if (usable && entry.scanned == 0 && !starts.empty()) {
              // Blocks start at events that depend only on the events up to
              // them, and a tracker in any state starts a block at such an
              // event and leaves the same state after it: the scan goes on
              // from the last stored start with a new tracker.
              const int64_t last = starts.back();
              starts.pop_back();
              entry.saved_chunks = chunks->size();
              self->blocks_ += starts.size();
              entry.starts = std::move(starts);
              entry.scanned = last - 1;
              entry.tracker = BlockTracker{};
              self->EvictLocked(session_id);
            }
          }
        }
        done(Status::Ok());
      });
}

std::function<void()> ConversationIndex::SaveLocked(const std::string& session_id, Entry& entry) {
  const size_t full = entry.starts.size() / chunk_blocks_;
  if (entry.saving || full <= entry.saved_chunks) return nullptr;
  std::vector<std::string> chunks;
  for (size_t c = entry.saved_chunks; c < full; ++c) {
    chunks.push_back(EncodeChunk(&entry.starts[c * chunk_blocks_], chunk_blocks_));
  }
  entry.saving = true;
  const auto first = static_cast<int64_t>(entry.saved_chunks);
  return [self = shared_from_this(), session_id, first, full, chunks = std::move(chunks)]() mutable {
    self->store_.SaveBlockChunksAsync(
        session_id, kRules, first, std::move(chunks), [self, session_id, full](Status st) {
          if (!st.ok()) {
            spdlog::debug("session {}: cannot store its conversation block index (a later read tries again): {}",
                          session_id, st.ToString());
          }
          std::lock_guard lock(self->mu_);
          auto it = self->entries_.find(session_id);
          if (it == self->entries_.end()) return;
          it->second.saving = false;
          if (st.ok()) it->second.saved_chunks = std::max(it->second.saved_chunks, full);
        });
  };
}

void ConversationIndex::Drop(std::string session_id, std::function<void()> done) {
  {
    std::lock_guard lock(mu_);
    auto it = entries_.find(session_id);
    if (it != entries_.end()) {
      blocks_ -= it->second.starts.size();
      entries_.erase(it);
    }
  }
  store_.DropBlockChunksAsync(session_id, [session_id, done = std::move(done)](Status st) {
    if (!st.ok()) spdlog::warn("session {}: cannot drop its conversation block index: {}", session_id, st.ToString());
    done();
  });
}

void ConversationIndex::CatchUp(std::string session_id, int64_t last_seq, std::function<void(Status)> done) {
  auto scan = std::make_shared<Scan>();
  bool behind = false, load = false;
  {
    std::lock_guard lock(mu_);
    Entry& entry = entries_[session_id];
    entry.used = ++tick_;
    load = !entry.loaded;
    behind = entry.scanned < last_seq;
    scan->from = entry.scanned;
    scan->after = entry.scanned;
    scan->tracker = entry.tracker;
  }
  if (load) {
    return Load(session_id, last_seq,
                [self = shared_from_this(), session_id, last_seq, done = std::move(done)](Status st) mutable {
                  if (!st.ok()) return done(st);
                  self->CatchUp(std::move(session_id), last_seq, std::move(done));
                });
  }
  if (!behind) return done(Status::Ok());
  scan->session_id = std::move(session_id);
  scan->last_seq = last_seq;
  ScanPage(std::move(scan), std::move(done));
}

void ConversationIndex::ScanPage(std::shared_ptr<Scan> scan, std::function<void(Status)> done) {
  int64_t limit = std::min(kEventPage, scan->last_seq - scan->after);
  store_.ReadEventsAsync(
      scan->session_id, scan->after, limit,
      [self = shared_from_this(), scan, done = std::move(done)](Result<std::vector<session::Event>> page) mutable {
        if (!page.ok()) return done(page.status());
        if (page->empty()) {
          return done(Status(codes::kCorruptEvent, "session " + scan->session_id + " seq " +
                                                       std::to_string(scan->after + 1) +
                                                       ": the event is missing from the log"));
        }
        for (const auto& e : *page) {
          if (!scan->projection.ok()) break;  // the log is still read: a storage error comes first
          auto starts = scan->tracker.Feed(scan->session_id, e);
          if (!starts.ok()) {
            scan->projection = starts.status();
          } else if (*starts) {
            scan->starts.push_back(e.seq);
          }
        }
        scan->after = page->back().seq;
        if (scan->after < scan->last_seq) return self->ScanPage(std::move(scan), std::move(done));
        if (!scan->projection.ok()) return done(scan->projection);
        self->Merge(std::move(scan), std::move(done));
      });
}

void ConversationIndex::Merge(std::shared_ptr<Scan> scan, std::function<void(Status)> done) {
  bool again = false;
  std::function<void()> save;
  {
    std::lock_guard lock(mu_);
    Entry& entry = entries_[scan->session_id];
    entry.used = ++tick_;
    if (entry.scanned < scan->from) {
      again = true;  // evicted and begun anew meanwhile: this scan does not reach back far enough
    } else if (entry.scanned < scan->last_seq) {
      // Another read may have added a part of (from, last_seq] meanwhile.
      auto first = std::upper_bound(scan->starts.begin(), scan->starts.end(), entry.scanned);
      blocks_ += static_cast<size_t>(scan->starts.end() - first);
      entry.starts.insert(entry.starts.end(), first, scan->starts.end());
      entry.tracker = scan->tracker;
      entry.scanned = scan->last_seq;
      save = SaveLocked(scan->session_id, entry);
      EvictLocked(scan->session_id);
    }
  }
  if (again) return CatchUp(scan->session_id, scan->last_seq, std::move(done));
  if (save) save();  // off the lock: the store may answer at once
  done(Status::Ok());
}

void ConversationIndex::EvictLocked(const std::string& keep) {
  while (blocks_ > max_blocks_ && entries_.size() > 1) {
    auto victim = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->first != keep && (victim == entries_.end() || it->second.used < victim->second.used)) victim = it;
    }
    if (victim == entries_.end()) return;
    blocks_ -= victim->second.starts.size();
    entries_.erase(victim);
  }
}

void ConversationIndex::ReadWindow(std::string session_id, int64_t last_seq, int64_t offset, int64_t limit,
                                   bool retry, Callback done) {
  int64_t total = 0, first = 0, end = 0;
  bool again = false;
  {
    std::lock_guard lock(mu_);
    auto it = entries_.find(session_id);
    if (it == entries_.end() || it->second.scanned < last_seq) {
      again = true;  // evicted between the catch-up and now
    } else {
      const auto& starts = it->second.starts;
      total = std::upper_bound(starts.begin(), starts.end(), last_seq) - starts.begin();
      if (offset <= total) {
        first = starts[static_cast<size_t>(offset - 1)];
        end = offset - 1 + limit < total ? starts[static_cast<size_t>(offset - 1 + limit)] - 1 : last_seq;
      }
    }
  }
  if (again) {
    return CatchUp(session_id, last_seq,
                   [self = shared_from_this(), session_id, last_seq, offset, limit, retry, done = std::move(done)](
                       Status st) mutable {
                     if (!st.ok()) return done(st);
                     self->ReadWindow(std::move(session_id), last_seq, offset, limit, retry, std::move(done));
                   });
  }
  if (offset > total) return done(Window{total, {}});
  const int64_t want = std::min(limit, total - offset + 1);
  store_.ReadEventsAsync(
      session_id, first - 1, end - first + 1,
      [self = shared_from_this(), session_id, offset, limit, retry, total, want,
       done = std::move(done)](Result<std::vector<session::Event>> events) mutable {
        if (!events.ok()) return done(events.status());
        auto blocks = session::ProjectConversation(session_id, *events);
        if (!blocks.ok()) return done(blocks.status());
        if (static_cast<int64_t>(blocks->size()) != want && retry) {
          // A stored index from another build or a damaged row: begin anew.
          spdlog::warn("session {}: its conversation block index is wrong; rebuilding it from the log", session_id);
          return self->Drop(session_id, [self, session_id, offset, limit, done = std::move(done)]() mutable {
            self->Start(std::move(session_id), offset, limit, /*retry=*/false, std::move(done));
          });
        }
        if (static_cast<int64_t>(blocks->size()) != want) {
          return done(Internal("session " + session_id + ": the block index expected " + std::to_string(want) +
                               " blocks in its window and the log has " + std::to_string(blocks->size())));
        }
        done(Window{total, std::move(blocks).value()});
      });
}

}  // namespace dsh::plugins::sessions
