#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/message_ref.h"
#include "agent/outbox.h"
#include "base/json.h"
#include "base/status.h"
#include "session/event.h"
#include "store/connection.h"
#include "store/database.h"
#include "store/pruner.h"

namespace dsh::agent::activity {

// The activity list (module "activity", docs/API.md "Activity"): what
// happened in the profile without the person — loop runs, reminder
// dispatches and messages from other agents — each with the outcome of the
// turn its delivery started. An item is its delivery's inbox row
// (agent_store.h) with the item's columns set:
//
//   inbox(..., kind, loop_id, nominal_at, schedule_id, status, error_code,
//         error_message, seq, started_at, ended_at, input_tokens,
//         output_tokens, summary, read)  -- kind NULL: a plain message;
//                       the item's id is the row's num, its time created_at,
//                       its key the row's key or "msg:" + message_id
//   activity_unread_shards(session_id, shard, n)  -- unread items per session
//                       ('' = none): the sum of its rows, changed with every
//                       change of inbox.read (each PostgreSQL writer connection its own row)
//
// The columns are written with the facts they record: the inbox insert of
// the delivery (status `pending`), the append of its `message/user` event
// (its seq and start: the item reads as `running` while the stored status
// is still `pending`) and the append of the `turn/end` that consumed
// it (`completed` | `error` | `cancelled`, with the turn's error, times,
// tokens and summary, in the statement that consumes it). A delivery that
// failed (no message) is a consumed row without text, `none` with its
// error. So the outcome is known on every host of the profile, after a
// restart and for a target that was cold. Unread state is per profile.
std::vector<store::Migration> Migrations();

// What a delivery is, for the activity list; set by its producer.
struct Source {
  std::string kind;  // "loop_run" | "reminder" | "agent_message"
  std::optional<std::string> loop_id;
  std::optional<int64_t> nominal_at;
  std::optional<std::string> schedule_id;
};

// Outcome statuses.
inline constexpr std::string_view kNone = "none";  // the delivery failed
inline constexpr std::string_view kPending = "pending";
inline constexpr std::string_view kRunning = "running";
inline constexpr std::string_view kCompleted = "completed";
inline constexpr std::string_view kError = "error";
inline constexpr std::string_view kCancelled = "cancelled";

// A delivery's message was accepted into `session_id`'s inbox as
// `message_id` (`key`: its inbox key, if any).
// `started`: the message's `message/user` event was appended in the same
// transaction (an idle agent took it at once): the item starts `running`.
struct Started {
  int64_t seq = 0;
  int64_t at = 0;
};
// The item's columns of the inbox row, and their values, for the insert
// (agent_store::Insert): a new unread item.
inline constexpr std::string_view kDeliveryColumns = "kind, loop_id, nominal_at, schedule_id, status, seq, started_at, read";
std::array<store::Value, 8> DeliveryValues(const Source& source, const std::optional<Started>& started);
// What follows the row (`num`): a `created` item counts as unread; a row of
// the same key that recorded a failed attempt and became this delivery
// stays read or not as it was.
// `webhooks` (nullable): where facts also go out (outbox.h). A new item
// sends `activity.created`, a reminder's delivery `reminder.dispatched`.
Status Delivered(store::Tx& tx, int64_t num, bool created, const Source& source, const std::string& session_id,
                 const std::string& message_id, const std::optional<std::string>& key, int64_t at,
                 std::optional<Started> started = std::nullopt, outbox::SubscriptionSource* webhooks = nullptr);

// A delivery failed and left no message. `key` identifies the occurrence
// (a retry that fails again updates the same row; one that succeeds turns
// it into a delivery). Sends `activity.created` for a new item, and
// `loop.run.failed` (a loop run) or `reminder.dispatched` (a reminder) once
// per occurrence.
Status DeliveryFailed(store::Tx& tx, const Source& source, const std::optional<std::string>& session_id,
                      const std::string& key, const std::string& error, int64_t at,
                      outbox::SubscriptionSource* webhooks = nullptr);
// An occurrence whose failed attempt had no known session was delivered:
// that attempt's item goes (the delivery has its own).
Status Superseded(store::Tx& tx, const std::string& key);

// The `message/user` events among `stored` started a turn (or joined one):
// their rows (those of `taken` with the event's message id) take the
// event's seq and time (and read as `running`). Returns the rows changed.
Result<int64_t> TurnStarted(store::Tx& tx, const std::vector<session::Event>& stored,
                            const std::vector<MessageRef>& taken);

// How a turn ended, for the rows of the messages it consumed.
struct TurnEnd {
  std::string status;  // kCompleted | kError | kCancelled
  std::optional<std::string> error_code;
  std::optional<std::string> error_message;
  int64_t ended_at = 0;
  std::optional<int64_t> input_tokens;
  std::optional<int64_t> output_tokens;
  std::string summary;  // at most kSummaryChars characters
};
inline constexpr size_t kSummaryChars = 200;
// The first line of `text`, whitespace-trimmed and cut to kSummaryChars
// (UTF-8 safe, "…" when cut).
std::string Summary(std::string_view text);

// Consumes the messages a turn took at `now` (as agent_store::Consume:
// `conflict` when one was consumed already) and gives the items among them
// the turn's outcome; returns how many were items. A loop run's item sends
// `loop.run.completed` (completed, cancelled) or `loop.run.failed` (error).
Result<int64_t> TurnEnded(store::Tx& tx, const std::vector<MessageRef>& messages, int64_t now,
                          const TurnEnd& end, outbox::SubscriptionSource* webhooks = nullptr);

// The outcome of one delivery as recorded.
struct Outcome {
  std::string status;
  std::optional<std::string> error_code;
  std::optional<std::string> error_message;
  std::optional<std::string> session_id;
  std::optional<int64_t> seq;
  std::optional<int64_t> started_at;
  std::optional<int64_t> ended_at;
  std::optional<int64_t> input_tokens;
  std::optional<int64_t> output_tokens;
};
// {status, error?: {code, message}, session_id?, seq?, started_at?,
//  ended_at?, duration_ms?, tokens?: {input_tokens, output_tokens}}
Json OutcomeJson(const Outcome& outcome);
// The columns an outcome is read from, prefixed with `alias.` (none when empty), in the order
// OutcomeFromRow reads them starting at `col` (9 columns).
std::string OutcomeColumns(std::string_view alias);
// nullopt when the status column is NULL (no row joined).
std::optional<Outcome> OutcomeFromRow(const store::Row& row, int col);

struct Item {
  int64_t id = 0;
  int64_t at = 0;
  std::string kind;
  std::optional<std::string> loop_id;
  std::optional<std::string> schedule_id;
  std::optional<int64_t> nominal_at;
  Outcome outcome;  // session_id and seq are the item's
  std::optional<std::string> summary;
  bool read = false;
  std::string key;  // the item's key (its inbox key, or "msg:" + message id)
};
// The item as the API shows it; `title` added when known.
Json ItemJson(const Item& item, const std::optional<std::string>& title);
// The item as a webhook's `data` (docs/NOTIFICATIONS.md): ItemJson with
// `activity_id` for `id`, without `read`.
Json WebhookData(const Item& item);

enum class Filter { kAll, kUnread, kFailed };
std::optional<Filter> ParseFilter(std::string_view name);

struct Page {
  std::vector<Item> items;
  std::optional<int64_t> next;  // `before` of the next page
};
// Newest first; with `before`, only items with id < before.
Result<Page> List(store::Tx& tx, Filter filter, int64_t limit, std::optional<int64_t> before);

struct Unread {
  int64_t total = 0;
  std::map<std::string, int64_t> sessions;
};
Result<Unread> CountUnread(store::Tx& tx);
Result<int64_t> CountUnreadTotal(store::Tx& tx);

// Marks items read; returns how many changed.
Result<int64_t> MarkRead(store::Tx& tx, const std::vector<int64_t>& ids);
Result<int64_t> MarkAllRead(store::Tx& tx);
Result<int64_t> MarkSessionRead(store::Tx& tx, const std::string& session_id);

// Retention: items older than `max_age_ms` whose turn is over (not pending
// or running), oldest first, stop being items: a failed delivery's row is
// deleted, a message's row becomes a plain message, left to the inbox's
// retention. 0 keeps everything. For store::Pruner.
store::PruneTask PruneTask(int64_t max_age_ms);

}  // namespace dsh::agent::activity
