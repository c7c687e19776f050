#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "agent/agent_manager.h"
#include "base/json.h"
#include "base/status.h"
#include "plugins/sessions/conversation_index.h"
#include "session/session_store.h"

namespace dsh::plugins::sessions {

// One row of `session_status` / `list_sessions` (spec 003 section 2).
struct SessionStatusRow {
  std::string session_id;
  std::optional<std::string> title;  // the durable title; absent when none or unreadable
  // Where `title` comes from (session::Titles::Source): "user", "generated"
  // or "fallback"; nullopt exactly when `title` is.
  std::optional<std::string> title_source;
  agent::AgentStatus status = agent::AgentStatus::kMissing;
  std::optional<int64_t> updated_at;  // Unix ms; absent only for kMissing
  bool archived = false;              // the header's `archived`; only shown with updated_at
  std::optional<std::string> parent_id;  // the header's: the session this one was forked from
  // Running, with a tool call waiting for a person's decision (docs/TOOLS.md).
  bool awaiting_approval = false;
};

// {session_id, title?, status, updated_at?, archived?, title_source?,
// parent_id?} with updated_at as RFC 3339 UTC. updated_at, archived,
// title_source and parent_id are present exactly when the header was read
// (the last two null when there is no title, or the session is no fork).
Json StatusRowToJson(const SessionStatusRow& row);

// A bounded window of a session's conversation blocks.
struct ReadWindow {
  std::string session_id;
  int64_t offset = 1;                // 1-based index of messages[0]
  std::vector<Json> messages;        // session::ProjectConversation blocks
  int64_t total_messages = 0;
};

// "(Showing messages A-B of N)"; "(Showing messages 0-0 of 0)" for an empty session.
std::string ReadFooter(const ReadWindow& window);

// Read-only session inspection over the built-in session store and the live
// agents: never resumes a session, never appends an event, never generates a
// title. Used by the sessions tools (and, later, `/sessions` and the CLI).
//
// Holds references only; `store` and `agents` must outlive it. Thread-safe:
// callbacks run on database threads, exactly once each, and must not block.
class SessionService {
 public:
  static constexpr int64_t kDefaultRecent = 50;
  static constexpr int64_t kMaxReadLimit = 200;

  // Copies share one ConversationIndex (the tools each hold a copy).
  SessionService(session::SessionStore& store, const agent::AgentManager& agents)
      : store_(store), agents_(agents), index_(ConversationIndex::Create(store)) {}

  template <typename T>
  using Callback = std::function<void(Result<T>)>;

  // The `n` (> 0) most recently updated sessions, updated_at descending (ties
  // by id), each once; a live agent's running/idle replaces `cold`. Every
  // live session has a persisted header (agents are created from one), so
  // the newest n of persisted ∪ live are the newest n persisted ones.
  // Errors: storage errors of the listing. A failed title read is not an
  // error: when the batch read of the titles fails, each id is read on its
  // own, and only the rows whose own read fails come back without a title.
  void Recent(int64_t n, Callback<std::vector<SessionStatusRow>> done) const;

  // Exactly one row: running/idle when live here, cold when only persisted,
  // missing (no updated_at) when neither. Errors: storage errors of the
  // header; a failed title read only leaves the row without its title.
  void Exact(std::string session_id, Callback<SessionStatusRow> done) const;

  // Conversation blocks offset..offset+limit-1 (1-based; offset > 0,
  // 0 < limit <= kMaxReadLimit). Errors: `not_found` for an unknown
  // session; `invalid_arguments` naming `offset` when offset is beyond the
  // last block of a non-empty session; `corrupt_event`, storage errors.
  // Reads the header, the events appended since the previous read of the
  // session and the window's events (ConversationIndex); the first read of
  // a session in this process loads its stored block index and reads the
  // log after it (the whole log for a session never read before).
  void Read(std::string session_id, int64_t offset, int64_t limit, Callback<ReadWindow> done) const;

 private:
  session::SessionStore& store_;
  const agent::AgentManager& agents_;
  std::shared_ptr<ConversationIndex> index_;  // never null
};

}  // namespace dsh::plugins::sessions
