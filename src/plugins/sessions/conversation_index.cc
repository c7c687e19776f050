#include "plugins/sessions/conversation_index.h"

#include <algorithm>
#include <utility>

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

std::shared_ptr<ConversationIndex> ConversationIndex::Create(session::SessionStore& store, size_t max_blocks) {
  return std::shared_ptr<ConversationIndex>(new ConversationIndex(store, max_blocks));
}

size_t ConversationIndex::indexed_sessions() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

void ConversationIndex::Read(std::string session_id, int64_t offset, int64_t limit, Callback done) {
  store_.GetAsync(session_id, [self = shared_from_this(), session_id, offset, limit,
                               done = std::move(done)](Result<session::SessionHeader> header) mutable {
    if (!header.ok()) return done(header.status());
    const int64_t last_seq = header->last_seq;
    self->CatchUp(session_id, last_seq,
                  [self, session_id, last_seq, offset, limit, done = std::move(done)](Status st) mutable {
                    if (!st.ok()) return done(st);
                    self->ReadWindow(std::move(session_id), last_seq, offset, limit, std::move(done));
                  });
  });
}

void ConversationIndex::CatchUp(std::string session_id, int64_t last_seq, std::function<void(Status)> done) {
  auto scan = std::make_shared<Scan>();
  bool behind = false;
  {
    std::lock_guard lock(mu_);
    Entry& entry = entries_[session_id];
    entry.used = ++tick_;
    behind = entry.scanned < last_seq;
    scan->from = entry.scanned;
    scan->after = entry.scanned;
    scan->tracker = entry.tracker;
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
      EvictLocked(scan->session_id);
    }
  }
  if (again) return CatchUp(scan->session_id, scan->last_seq, std::move(done));
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
                                   Callback done) {
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
                   [self = shared_from_this(), session_id, last_seq, offset, limit, done = std::move(done)](
                       Status st) mutable {
                     if (!st.ok()) return done(st);
                     self->ReadWindow(std::move(session_id), last_seq, offset, limit, std::move(done));
                   });
  }
  if (offset > total) return done(Window{total, {}});
  const int64_t want = std::min(limit, total - offset + 1);
  store_.ReadEventsAsync(
      session_id, first - 1, end - first + 1,
      [session_id, total, want, done = std::move(done)](Result<std::vector<session::Event>> events) {
        if (!events.ok()) return done(events.status());
        auto blocks = session::ProjectConversation(session_id, *events);
        if (!blocks.ok()) return done(blocks.status());
        if (static_cast<int64_t>(blocks->size()) != want) {
          return done(Internal("session " + session_id + ": the block index expected " + std::to_string(want) +
                               " blocks in its window and the log has " + std::to_string(blocks->size())));
        }
        done(Window{total, std::move(blocks).value()});
      });
}

}  // namespace dsh::plugins::sessions
