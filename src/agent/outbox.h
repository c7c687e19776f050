#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/json.h"
#include "base/status.h"
#include "store/connection.h"
#include "store/database.h"
#include "store/pruner.h"

namespace dsh::agent::outbox {

// The webhook outbox (module "outbox", docs/NOTIFICATIONS.md): messages for
// outbound endpoints, written in the same transaction as the fact each one
// reports, and every attempt to send them.
//
//   webhook_messages(num, id, endpoint, event, fact_key, once, data, created_at,
//       state, attempts, next_at, lease_owner, lease_until, last_at,
//       last_status, last_error, last_duration_ms, done_at, loop_id,
//       session_id)
//     id unique ("msg_…", the webhook-id); (once, endpoint) unique, so a
//     fact written twice (a retried claim) is one message; fact_key finds
//     the messages of an activity item;
//     state pending | delivered | failed; a pending message with attempts
//     is "retrying".
//   webhook_attempts(message_num, n, at, status, error, duration_ms)
std::vector<store::Migration> Migrations();

// Which endpoints take which events. Immutable once built; shared by every
// writer through a SubscriptionSource.
class Subscriptions {
 public:
  // `events`: event names, or "*" for every event.
  void Add(std::string endpoint, std::vector<std::string> events);
  bool empty() const { return endpoints_.empty(); }
  bool Wants(std::string_view event) const;
  // The endpoints that take `event`, in name order.
  std::vector<std::string> For(std::string_view event) const;

 private:
  std::map<std::string, std::vector<std::string>, std::less<>> endpoints_;
};

// The subscriptions in effect, swapped when an endpoint is saved.
// Thread-safe.
class SubscriptionSource {
 public:
  std::shared_ptr<const Subscriptions> Get() const;
  void Set(std::shared_ptr<const Subscriptions> subscriptions);

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const Subscriptions> current_;  // GUARDED_BY(mu_); null = none
};

// What a message is about, for receipts (the run history, the activity list).
struct Fact {
  std::string key;  // the activity item's key; "" for none
  // With `key` and the event, what makes the message unique per endpoint
  // (a failed attempt of an occurrence and its turn are two facts).
  std::string phase;
  std::optional<std::string> loop_id;
  std::optional<std::string> session_id;
};

// Writes one pending message of `event` with `data` for every endpoint
// `subscriptions` sends it to (none: nothing), in `tx`. A message of the
// same endpoint, event and fact key written before is left as it is.
Status Enqueue(store::Tx& tx, const Subscriptions& subscriptions, std::string_view event, const Fact& fact,
               const Json& data, int64_t at);
// One message to one endpoint, whatever its events (the Settings page's
// Send test). Returns its id.
Result<std::string> EnqueueTo(store::Tx& tx, const std::string& endpoint, std::string_view event, const Fact& fact,
                              const Json& data, int64_t at);

// ---- The sender's side ----

struct Claimed {
  int64_t num = 0;
  std::string id;
  std::string endpoint;
  std::string event;
  Json data;
  int64_t created_at = 0;
  int64_t attempts = 0;  // before this one
};
// Leases up to `limit` pending messages due at `now` (oldest due first) to
// `owner` until now + lease_ms: each is sent by one host at a time. On
// PostgreSQL rows another transaction holds are skipped, not waited for.
Result<std::vector<Claimed>> Claim(store::Tx& tx, const std::string& owner, int64_t now, int64_t lease_ms,
                                   int64_t limit);
// One leased message, by id, if it is pending and not leased by another
// host (for Send test, which sends at once).
Result<std::optional<Claimed>> ClaimOne(store::Tx& tx, const std::string& id, const std::string& owner, int64_t now,
                                        int64_t lease_ms);

struct Attempt {
  int64_t at = 0;
  std::optional<int64_t> status;  // the HTTP status, when there was an answer
  std::optional<std::string> error;
  int64_t duration_ms = 0;
};
// How an attempt leaves the message: delivered, failed for good, or due
// again at `next_at`.
struct After {
  std::string state;  // "delivered" | "failed" | "pending"
  int64_t next_at = 0;
};
// Records the attempt and the message's new state, and ends the lease.
Status Record(store::Tx& tx, int64_t num, const Attempt& attempt, const After& after);

// When the next pending message is due (nullopt: none).
Result<std::optional<int64_t>> NextDue(store::Tx& tx);
Result<int64_t> CountPending(store::Tx& tx);

// ---- Reading ----

struct Message {
  int64_t num = 0;
  std::string id;
  std::string endpoint;
  std::string event;
  int64_t created_at = 0;
  std::string state;  // pending | delivered | failed
  int64_t attempts = 0;
  int64_t next_at = 0;
  std::optional<Attempt> last;
  std::optional<int64_t> done_at;
  std::optional<std::string> loop_id;
  std::optional<std::string> session_id;
  std::string fact_key;
  Json data;
};
// {id, endpoint, event, created_at, state (pending with attempts is
// "retrying"), attempts, next_attempt_at?, delivered_at?, last_attempt?,
// loop_id?, session_id?}
Json MessageJson(const Message& message);
Json AttemptJson(const Attempt& attempt);

struct MessageFilter {
  std::optional<std::string> endpoint;
  std::optional<std::string> state;  // pending | delivered | failed
};
struct MessagePage {
  std::vector<Message> messages;
  std::optional<int64_t> next;  // `before` of the next page
};
// Newest first; with `before`, only messages with num < before.
Result<MessagePage> ListMessages(store::Tx& tx, const MessageFilter& filter, int64_t limit,
                                 std::optional<int64_t> before);
Result<std::optional<Message>> GetMessage(store::Tx& tx, const std::string& id);
Result<std::vector<Attempt>> Attempts(store::Tx& tx, int64_t num);

// The messages written for each of `fact_keys` (a fact key is an activity
// item's key, which for a loop run is its occurrence key), as receipts:
// [{id, endpoint, event, state, attempts}].
Result<std::map<std::string, Json>> Receipts(store::Tx& tx, const std::vector<std::string>& fact_keys);

// An endpoint's record, for its state on the Settings page.
struct EndpointStats {
  int64_t pending = 0;
  int64_t retrying = 0;
  std::optional<int64_t> oldest_retrying_at;  // created_at
  std::optional<int64_t> last_delivered_at;
  std::optional<int64_t> last_failed_at;
  std::optional<std::string> last_failure;  // its last attempt's error (or status)
  int64_t messages = 0;
};
Result<std::map<std::string, EndpointStats>> Stats(store::Tx& tx);
// "idle" (no message yet) | "ok" | "retrying" | "failing" (its latest
// finished message failed, or one has been retried for over an hour).
std::string EndpointState(const EndpointStats& stats, int64_t now);

// Retention: delivered and failed messages (and their attempts) finished
// before now - max_age_ms. 0 keeps everything.
store::PruneTask PruneTask(int64_t max_age_ms);

}  // namespace dsh::agent::outbox
