#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "agent/activity_store.h"
#include "base/json.h"
#include "base/status.h"
#include "store/connection.h"
#include "store/database.h"
#include "store/pruner.h"

namespace dsh::agent {

// How a delivered message meets a live agent (docs/AGENTS.md).
enum class DeliveryMode {
  kSteer,     // idle: starts a turn now; running: joins at the next step boundary
  kFollowup,  // queued as the next turn of its own
};
std::string_view DeliveryModeName(DeliveryMode mode);
std::optional<DeliveryMode> ParseDeliveryMode(std::string_view name);

// A durable inbox row. `num` orders messages of a session (and of the
// profile) by acceptance.
struct InboxMessage {
  int64_t num = 0;
  std::string message_id;
  std::string session_id;
  DeliveryMode mode = DeliveryMode::kSteer;
  bool wakeup = true;
  std::string text;
  Json meta = Json::object();  // who sent it ({"origin": "loop", ...}); copied into the user event
  int64_t created_at = 0;
  // Set by the producer of a delivery the person did not make: its row is
  // then also an item of the activity list (activity_store.h).
  std::optional<activity::Source> activity;
};

// The SQL of the agent layer's tables (module "agent"): the durable inbox and
// the session ownership leases. Functions taking a Tx run inside a job of
// store::Database; none blocks on anything but the database.
//
//   inbox(num, message_id, session_id, key, mode, wakeup, text, meta,
//         created_at, consumed_at, <the activity item's columns>)
//                                    -- pending while consumed_at IS NULL;
//                                       (session_id, key) unique; consumed
//                                       rows pruned after retention.inbox_days
//                                       once they are not items
//   session_leases(session_id, holder, expires_at)
namespace agent_store {

std::vector<store::Migration> Migrations();

struct Inserted {
  std::string message_id;
  bool duplicate = false;  // the key was used before: message_id is the first one's
  int64_t num = 0;
};

// Accepts a message for `session_id`: `not_found` when the session does not
// exist; with a `key` already used for this session, returns the first
// message's id and inserts nothing, unless that key's row is a failed
// delivery's item, which becomes this message. A message with `activity`
// is also an item (activity::Delivered); `started`: its user event was
// appended in this transaction (so the session is not looked up again).
Result<Inserted> Insert(store::Tx& tx, InboxMessage& message, const std::optional<std::string>& key,
                        std::optional<activity::Started> started = std::nullopt,
                        outbox::SubscriptionSource* webhooks = nullptr);

// The session's pending messages, oldest first.
Result<std::vector<InboxMessage>> Pending(store::Tx& tx, const std::string& session_id);

// Marks messages consumed; `conflict` when one of them was consumed already
// (another host ran the session: the caller's transaction must fail).
Status Consume(store::Tx& tx, const std::vector<MessageRef>& messages, int64_t now);

// Retention (docs/AGENTS.md, "How long a key holds"): deletes up to
// `max_rows` inbox rows consumed before `consumed_before` (Unix ms), oldest
// consumption first, except rows whose key is in `keep_keys` (keys that may
// still be delivered again) and activity items (activity::PruneTask). Never touches a pending row. Idempotent: rows
// another host deleted first are simply not counted. Returns the rows
// deleted by this call.
Result<int64_t> PruneConsumed(store::Tx& tx, int64_t consumed_before, int64_t max_rows,
                              const std::unordered_set<std::string>& keep_keys);

// Inbox keys that a producer may still deliver again however old their
// consumed row is (a loop occurrence claimed and not yet recorded, or
// waiting for its retry): the inbox keeps their rows. Read inside the
// pruning slice's transaction, so it sees what that transaction deletes
// against. Should be small (what is in flight).
using RetainedKeys = std::function<Result<std::vector<std::string>>(store::Tx&)>;

// The retention task of the inbox: consumed rows older than `days` days
// (> 0), keeping the keys `retained` lists. For store::Pruner.
store::PruneTask InboxPruneTask(int64_t days, std::vector<RetainedKeys> retained);

// Sessions with pending wakeup messages that this holder may run: unowned,
// owned by an expired lease or by `holder`. With the newest pending num.
struct PendingSession {
  std::string session_id;
  int64_t newest_num = 0;
};
Result<std::vector<PendingSession>> PendingSessions(store::Tx& tx, const std::string& holder, int64_t now);

// Takes or renews the lease of `session_id` for `holder` until `expires_at`.
// False when another holder's lease is still valid (or its holder is a
// process of this machine that is still alive — see LeaseHolderIsDead).
Result<bool> AcquireLease(store::Tx& tx, const std::string& session_id, const std::string& holder, int64_t now,
                          int64_t expires_at);
// Extends every lease of `holder`; returns the sessions it still holds.
Result<std::vector<std::string>> RenewLeases(store::Tx& tx, const std::string& holder, int64_t expires_at);
Status ReleaseLease(store::Tx& tx, const std::string& session_id, const std::string& holder);
// The fence of a live session's writes: fails with kLeaseLost unless
// `holder` holds the lease of `session_id` (expired or not: nobody else took
// it). On PostgreSQL the lease row stays share-locked until the transaction
// ends, so a host taking the lease over waits for this write to commit and
// then reads the log with it.
inline constexpr const char* kLeaseLost = "lease_lost";
Status CheckLease(store::Tx& tx, const std::string& session_id, const std::string& holder);
// Who holds the lease of a session, if anyone holds a valid one.
Result<std::optional<std::string>> LeaseHolder(store::Tx& tx, const std::string& session_id, int64_t now);

// A lease holder name for this process: "HOSTNAME/PID/RANDOM". A holder on
// this machine whose process is gone is dead, so a restarted host takes over
// its sessions at once instead of waiting for the leases to expire.
std::string NewLeaseHolder();
bool LeaseHolderIsDead(const std::string& holder);

}  // namespace agent_store
}  // namespace dsh::agent
