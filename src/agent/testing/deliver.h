#pragma once

#include <optional>
#include <string>
#include <vector>

#include "agent/activity_store.h"
#include "agent/agent_manager.h"
#include "agent/agent_store.h"

namespace dsh::agent::testing {

// Tests of the activity list without a SessionStore: the agent layer's
// tables plus a stand-in `sessions` table (ids only), since a delivery's
// target must exist.
inline std::vector<store::Migration> MigrationsWithBareSessions() {
  std::vector<store::Migration> all = {{"test_sessions", 1, {"CREATE TABLE sessions (id TEXT PRIMARY KEY)"}}};
  for (auto& m : AgentManager::Migrations()) all.push_back(std::move(m));
  return all;
}

// A delivery of `source` into `session_id` as its producer makes it
// (agent_store::Insert), the session's row made when missing (which only
// MigrationsWithBareSessions allows).
inline Status Deliver(store::Tx& tx, const activity::Source& source, const std::string& session_id,
                      const std::string& message_id, const std::optional<std::string>& key, int64_t at,
                      std::optional<activity::Started> started = std::nullopt,
                      outbox::SubscriptionSource* webhooks = nullptr) {
  DSH_RETURN_IF_ERROR(
      tx.Exec("INSERT INTO sessions (id) SELECT ? WHERE NOT EXISTS (SELECT 1 FROM sessions WHERE id = ?)",
              {std::string_view(session_id), std::string_view(session_id)})
          .status());
  InboxMessage m;
  m.message_id = message_id;
  m.session_id = session_id;
  m.text = "a delivery";
  m.created_at = at;
  m.activity = source;
  return agent_store::Insert(tx, m, key, started, webhooks).status();
}

// The inbox rows of `message_ids` as a turn that took them holds them (num
// 0 for an id with no row, which no statement finds).
inline std::vector<MessageRef> Refs(store::Tx& tx, const std::vector<std::string>& message_ids) {
  std::vector<MessageRef> refs;
  for (const std::string& id : message_ids) {
    MessageRef ref{0, id};
    (void)tx.Query("SELECT num FROM inbox WHERE message_id = ?", {std::string_view(id)}, [&](const store::Row& row) {
      ref.num = row.Int(0);
      return Status::Ok();
    });
    refs.push_back(std::move(ref));
  }
  return refs;
}

}  // namespace dsh::agent::testing
