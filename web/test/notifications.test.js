// node --test web/test/ — outbound notifications in words: the Settings
// page's endpoints, Send test's outcome, the endpoint form and the receipts
// of loop runs and activity items (docs/NOTIFICATIONS.md).
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  ALL_MESSAGES,
  EMPTY_FORM,
  MESSAGE_STATE_CHOICES,
  attemptWords,
  checkEndpointForm,
  endpointBody,
  endpointFormOf,
  endpointStateWords,
  eventsWords,
  messageStateWords,
  messagesQuery,
  noMessagesText,
  pendingWords,
  receiptWords,
  receiptsWords,
  secretBytes,
  secretOf,
  testResultText,
  toggleEvent,
} from "../src/lib/notifications.js";

const form = (over = {}) => ({ ...EMPTY_FORM, name: "ops", url: "https://hooks.example.net/dsh", secret: secretOf(new Uint8Array(32)), ...over });
const NOW = 1_800_000_000_000;

test("an endpoint's state in words, failing in red", () => {
  assert.deepEqual(endpointStateWords("ok"), { text: "Delivering", tone: "ok" });
  assert.deepEqual(endpointStateWords("retrying"), { text: "Retrying", tone: "busy" });
  assert.deepEqual(endpointStateWords("failing"), { text: "Failing", tone: "bad" });
  assert.deepEqual(endpointStateWords("idle"), { text: "No messages yet", tone: "quiet" });
  assert.equal(pendingWords(0), "Nothing waiting");
  assert.equal(pendingWords(1), "1 message waiting");
  assert.equal(pendingWords(4), "4 messages waiting");
  assert.equal(eventsWords(["*"]), "every event");
  assert.equal(eventsWords(["loop.run.failed", "approval.requested"]), "loop.run.failed, approval.requested");
});

test("an attempt in words: the status and how long it took, or the error", () => {
  assert.equal(attemptWords({ at: NOW, status: 200, duration_ms: 35 }), "200 in 35 ms");
  assert.equal(attemptWords({ at: NOW, status: 500, duration_ms: 1234, error: "Internal Server Error" }), "500 in 1.2 s: Internal Server Error");
  assert.equal(attemptWords({ at: NOW, error: "connection refused", duration_ms: 3 }), "connection refused after 3 ms");
  assert.equal(attemptWords(undefined), "");
});

test("Send test's outcome: delivered, will retry, or will not", () => {
  const msg = (over) => ({ id: "msg_1", endpoint: "ops", event: "webhook.test", created_at: NOW, attempts: 1, ...over });
  assert.deepEqual(testResultText(msg({ state: "delivered", last_attempt: { at: NOW, status: 200, duration_ms: 35 } }), NOW),
    { ok: true, text: "Delivered (200) in 35 ms" });
  assert.deepEqual(
    testResultText(msg({ state: "retrying", next_attempt_at: NOW + 2000, last_attempt: { at: NOW, status: 500, duration_ms: 12 } }), NOW),
    { ok: false, text: "Failed: 500 in 12 ms — will retry in 2 s" });
  assert.deepEqual(testResultText(msg({ state: "failed", last_attempt: { at: NOW, status: 404, duration_ms: 5 } }), NOW),
    { ok: false, text: "Failed: 404 in 5 ms — will not retry" });
  assert.deepEqual(testResultText(msg({ state: "failed", last_attempt: { at: NOW, error: "address 127.0.0.1 is private", duration_ms: 0 } }), NOW),
    { ok: false, text: "Failed: address 127.0.0.1 is private after 0 ms — will not retry" });
  // The log's last attempt when the message has no last_attempt.
  assert.equal(testResultText(msg({ state: "delivered", attempts_log: [{ at: NOW, status: 204, duration_ms: 9 }] }), NOW).text,
    "Delivered (204) in 9 ms");
  // ISO times work too.
  assert.equal(testResultText(msg({ state: "pending", next_attempt_at: new Date(NOW + 180_000).toISOString() }), NOW).text,
    "Not sent yet — will try in 3 min");
});

test("a receipt says where a notification went and how it fared, to the eye and to a screen reader", () => {
  assert.deepEqual(receiptWords({ id: "m", endpoint: "ops", event: "loop.run.completed", state: "delivered", attempts: 1 }),
    { text: "ops: delivered", label: "Notification to ops delivered", tone: "ok" });
  assert.deepEqual(receiptWords({ id: "m", endpoint: "team-slack", event: "loop.run.failed", state: "retrying", attempts: 3 }),
    { text: "team-slack: retrying (3 attempts)", label: "Notification to team-slack retrying, 3 attempts", tone: "busy" });
  assert.deepEqual(receiptWords({ id: "m", endpoint: "phone", event: "loop.run.failed", state: "failed", attempts: 1 }),
    { text: "phone: failed", label: "Notification to phone failed", tone: "bad" });
  assert.deepEqual(receiptWords({ id: "m", endpoint: "ops", event: "activity.created", state: "pending", attempts: 0 }),
    { text: "ops: waiting", label: "Notification to ops waiting to be sent", tone: "busy" });
  assert.equal(messageStateWords("delivered").tone, "ok");
});

test("two receipts to one endpoint say which event each is about; one alone does not", () => {
  const words = receiptsWords([
    { id: "a", endpoint: "ops", event: "activity.created", state: "delivered", attempts: 1 },
    { id: "b", endpoint: "ops", event: "loop.run.completed", state: "retrying", attempts: 2 },
    { id: "c", endpoint: "phone", event: "loop.run.completed", state: "failed", attempts: 1 },
  ]);
  assert.deepEqual(words.map((w) => w.text), ["ops (new activity): delivered", "ops (run completed): retrying (2 attempts)", "phone: failed"]);
  assert.deepEqual(words.map((w) => w.label), [
    "Notification to ops (new activity) delivered",
    "Notification to ops (run completed) retrying, 2 attempts",
    "Notification to phone failed",
  ]);
});

test("a generated secret is whsec_ and the base64 of its bytes, and passes the form's check", () => {
  const bytes = new Uint8Array(32).map((_, i) => i * 7);
  const s = secretOf(bytes);
  assert.match(s, /^whsec_[A-Za-z0-9+/]{43}=$/);
  assert.deepEqual([...Buffer.from(s.slice(6), "base64")], [...bytes]);
  assert.equal(secretBytes(s), 32);
  assert.equal(secretBytes("whsec_" + Buffer.alloc(24).toString("base64")), 24);
  assert.equal(secretBytes("whsec_not base64"), null);
  assert.equal(secretBytes("sk_abc"), null);
  assert.equal(checkEndpointForm(form({ secret: s }), null), null);
});

test("the form's first problem names its field", () => {
  assert.equal(checkEndpointForm(form(), null), null);
  assert.equal(checkEndpointForm(form({ name: "" }), null).field, "name");
  assert.equal(checkEndpointForm(form({ name: "my hook" }), null).field, "name");
  assert.equal(checkEndpointForm(form({ name: "team-slack_2" }), null), null);
  assert.equal(checkEndpointForm(form({ name: "Team" }), null).field, "name");  // the host takes lowercase only
  assert.equal(checkEndpointForm(form({ url: "ftp://x" }), null).field, "url");
  assert.equal(checkEndpointForm(form({ url: "" }), null).field, "url");
  assert.equal(checkEndpointForm(form({ events: [] }), null).field, "events");
  // A standard endpoint needs a secret of 24 to 64 bytes; Slack's does not.
  assert.equal(checkEndpointForm(form({ secret: "" }), null).field, "secret");
  assert.match(checkEndpointForm(form({ secret: "whsec_" + Buffer.alloc(8).toString("base64") }), null).message, /8 bytes; it needs 24 to 64/);
  assert.equal(checkEndpointForm(form({ secret: "", format: "slack" }), null), null);
  // Editing keeps the saved secret unless told to forget it.
  assert.equal(checkEndpointForm(form({ secret: "" }), { has_secret: true }), null);
  assert.equal(checkEndpointForm(form({ secret: "", forgetSecret: true }), { has_secret: true }).field, "secret");
  // ... and its URL when the field is left empty; a new endpoint needs one.
  assert.equal(checkEndpointForm(form({ url: "" }), { has_secret: true }), null);
  assert.equal(checkEndpointForm(form({ url: "hooks.example.net" }), { has_secret: true }).field, "url");
});

test("the PUT body: a typed secret replaces, an empty one keeps, forgetting sends null", () => {
  const secret = secretOf(new Uint8Array(32));
  assert.deepEqual(endpointBody(form({ secret, allowPrivate: true, events: ["loop.run.failed", "approval.requested"] })),
    { url: "https://hooks.example.net/dsh", format: "standard", events: ["loop.run.failed", "approval.requested"], allow_private: true, secret });
  assert.equal("secret" in endpointBody(form({ secret: "" })), false);
  assert.equal(endpointBody(form({ secret: "", format: "ntfy", forgetSecret: true })).secret, null);
  assert.equal("secret" in endpointBody(form({ format: "slack" })), false);  // Slack's URL is its secret
  assert.deepEqual(endpointBody(form({ events: ["*"] })).events, ["*"]);
  assert.equal("url" in endpointBody(form({ url: "  " })), false);  // the saved URL is kept
});

test("editing starts from the saved endpoint, without its URL's secret part or its secret", () => {
  const f = endpointFormOf({ name: "ops", format: "ntfy", url: "https://ntfy.sh/…", events: ["*"], allow_private: true, has_secret: true,
    source: "saved", state: "ok", pending: 0 });
  assert.deepEqual(f, { name: "ops", url: "", format: "ntfy", events: ["*"], secret: "", forgetSecret: false, allowPrivate: true });
});

test("the events' checkboxes: every event stands alone, the others keep their order", () => {
  assert.deepEqual(toggleEvent(["loop.run.failed"], "loop.run.completed", true), ["loop.run.completed", "loop.run.failed"]);
  assert.deepEqual(toggleEvent(["loop.run.failed", "loop.run.completed"], "loop.run.failed", false), ["loop.run.completed"]);
  assert.deepEqual(toggleEvent(["loop.run.failed"], "*", true), ["*"]);
  assert.deepEqual(toggleEvent(["*"], "*", false), []);
  assert.deepEqual(toggleEvent(["*"], "approval.requested", true), ["approval.requested"]);
});

test("the recent messages' filters make the route's query and say when nothing matches", () => {
  assert.equal(messagesQuery(20, ALL_MESSAGES), "/api/notifications/messages?limit=20");
  assert.equal(messagesQuery(40, { endpoint: "ops chat", state: "failed" }),
               "/api/notifications/messages?limit=40&endpoint=ops+chat&state=failed");
  assert.equal(messagesQuery(20, { endpoint: "", state: "pending" }), "/api/notifications/messages?limit=20&state=pending");
  assert.equal(noMessagesText(ALL_MESSAGES), "No message has been sent yet.");
  assert.equal(noMessagesText({ endpoint: "ops", state: "" }), "No messages for ops.");
  assert.equal(noMessagesText({ endpoint: "", state: "failed" }), "No failed messages.");
  assert.equal(noMessagesText({ endpoint: "ops", state: "pending" }), "No messages waiting or retrying for ops.");
  assert.deepEqual(MESSAGE_STATE_CHOICES.map((c) => c.value), ["", "pending", "delivered", "failed"]);
});
