#pragma once

// The HTTP request each endpoint format receives for one notification
// (docs/NOTIFICATIONS.md): the Standard Webhooks payload and signature, and
// the Slack, Discord and ntfy shapes. Pure functions of their arguments —
// no clock, no I/O — so the sender renders each attempt anew (a fresh
// timestamp and signature) while the body stays the same. Thread-safe.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/json.h"
#include "base/status.h"

namespace dsh::webhooks {

// One configured endpoint, as far as rendering needs it.
struct Target {
  std::string name;
  std::string url;
  std::string format;      // standard | slack | discord | ntfy
  std::string secret;      // the raw secret string as configured, may be empty
  std::string public_url;  // server.public_url without trailing slash, may be empty
};

// One outbox message.
struct Message {
  std::string id;             // "msg_...", the same on every attempt
  std::string event;          // e.g. "loop.run.failed"
  int64_t created_at_ms = 0;  // when the fact it reports was written (Unix ms)
  Json data;                  // the event's data object, docs/NOTIFICATIONS.md
};

// What to POST to Target::url for one attempt.
struct Request {
  std::string content_type;
  // In the order they are to be sent; names as the receiver documents them
  // (Standard Webhooks' are lower case).
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

// The HMAC key of a Standard Webhooks secret: the bytes of the base64 after
// the `whsec_` prefix (padded or not). Errors: `invalid_config` when the
// prefix is missing, the rest is not base64 (standard alphabet), or the key
// is shorter than 24 or longer than 64 bytes. Messages never quote the
// secret, since a secret is never shown back.
Result<std::string> SecretKey(std::string_view secret);

// The value of a `webhook-signature` header: "v1," followed by the base64
// of HMAC-SHA256(key, "ID.TIMESTAMP.BODY"). `key` as SecretKey returns it.
std::string StandardSignature(std::string_view key, std::string_view id, int64_t timestamp_seconds,
                              std::string_view body);

// The page in dsh a notification points at: public_url + "/#/s/SESSION",
// with "/SEQ" when data.seq is an integer. "" when public_url or
// data.session_id is empty or missing, which leaves links out of every
// format.
std::string Link(const Target& target, const Json& data);

// The `standard` body: {"type": EVENT, "timestamp": created_at as RFC 3339
// UTC with milliseconds ("2026-12-05T16:00:00.123Z"), "data": the message's
// data plus "url" when Link is not empty}. A null data is sent as {}; one
// that is not an object (a producer's bug) goes out as it is, without a url.
Json StandardPayload(const Message& message, const Target& target);

// The first line of the human-readable formats, saying what happened:
// "Loop run completed" (or "cancelled"), "Loop run failed: CODE", "Reminder
// fired" (or "Reminder failed: CODE" when its delivery failed), "New
// activity: loop run" (reminder, message from another agent), "Approval
// needed: TOOL", "Test notification from dsh"; the event's name for an
// event it does not know.
std::string Headline(const Message& message);

// The HTTP request for one attempt at `now_ms` (Unix ms). The body and the
// headers other than webhook-timestamp and webhook-signature depend only on
// `target` and `message`, never on `now_ms`, so every retry sends the same
// body.
//
// - standard: application/json, StandardPayload dumped compactly; headers
//   webhook-id (the message id), webhook-timestamp (now_ms / 1000) and
//   webhook-signature (StandardSignature with SecretKey(target.secret)).
// - slack: {"text": headline, the summary line, and "<URL|Open in dsh>"},
//   one per line, headline and summary escaped per Slack (&, <, >).
// - discord: {"content": the same lines with the link as a plain URL,
//   "allowed_mentions": {"parse": []}} so nobody is pinged; content is at
//   most 2,000 characters (UTF-16 code units, so under any count), the
//   summary cut first, never inside a UTF-8 sequence.
// - ntfy: text/plain, the summary line (or, without one, the headline as a
//   sentence); headers Title (the headline), Tags (white_check_mark,
//   warning, alarm_clock, bell, lock or test_tube by event), Priority: high
//   for loop.run.failed and approval.requested (left out otherwise), Click
//   (the link, when there is one) and Authorization: Bearer SECRET (when the
//   target has a secret). Header values have control characters replaced
//   by spaces, and are RFC 2047-encoded ("=?UTF-8?B?...?=") when not ASCII.
//
// The summary line is data.summary, else data.outcome.error.message, else
// (webhook.test) data.message.
//
// Errors: `invalid_config` for a standard target whose secret SecretKey
// refuses (or that has none), and for an unknown format.
Result<Request> Render(const Target& target, const Message& message, int64_t now_ms);

}  // namespace dsh::webhooks
