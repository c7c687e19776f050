// The words and checks of outbound notifications (webhooks,
// docs/NOTIFICATIONS.md): the Settings page's endpoints, their Send test and
// recent messages, the endpoint form, and the receipts that loop runs and
// activity items carry. Pure: settings_notifications.tsx and the receipts
// call these; web/test/notifications.test.js tests them.

export type Format = "standard" | "slack" | "discord" | "ntfy";
export type EndpointState = "idle" | "ok" | "retrying" | "failing";
export type MessageState = "pending" | "retrying" | "delivered" | "failed";
export type Tone = "ok" | "bad" | "busy" | "quiet";

/** A time as the API gives it: Unix ms (or, defensively, an ISO string). */
export type Time = number | string;

export interface EndpointView {
  name: string;
  format: Format;
  url: string;  // path and query cut to `/…`
  events: string[];
  allow_private: boolean;
  has_secret: boolean;
  source: "config" | "saved";
  state: EndpointState;
  pending: number;
  last_delivered_at?: Time;
  last_failure?: { at: Time; error: string };
}

export interface Attempt {
  at: Time;
  status?: number;
  error?: string;
  duration_ms?: number;
}

export interface NotificationMessage {
  id: string;
  endpoint: string;
  event: string;
  created_at: Time;
  state: MessageState;
  attempts: number;
  next_attempt_at?: Time;
  delivered_at?: Time;
  last_attempt?: Attempt;
  activity_id?: number;
  loop_id?: string;
  session_id?: string;
  // GET /api/notifications/messages/{id} only.
  attempts_log?: Attempt[];
  payload?: unknown;
}

/** What a loop run or an activity item says of the messages written for it. */
export interface Receipt {
  id: string;
  endpoint: string;
  event: string;
  state: MessageState;
  attempts: number;
}

/** The events an endpoint can ask for, in the form's order, each in words. */
export const EVENTS: { id: string; words: string }[] = [
  { id: "loop.run.completed", words: "a loop run completed" },
  { id: "loop.run.failed", words: "a loop run failed" },
  { id: "reminder.dispatched", words: "a reminder fired" },
  { id: "activity.created", words: "anything entered the activity list" },
  { id: "approval.requested", words: "a tool call waits for approval" },
];
export const EVERY_EVENT = "*";

export const FORMATS: { id: Format; words: string }[] = [
  { id: "standard", words: "Standard Webhooks (signed JSON)" },
  { id: "slack", words: "Slack incoming webhook" },
  { id: "discord", words: "Discord channel webhook" },
  { id: "ntfy", words: "ntfy topic" },
];

export function toMs(t: Time | undefined): number | undefined {
  if (t === undefined || t === null) return undefined;
  const ms = typeof t === "number" ? t : Date.parse(t);
  return Number.isFinite(ms) ? ms : undefined;
}

export function formatWords(format: Format | string): string {
  return FORMATS.find((f) => f.id === format)?.words ?? format;
}

/** "every event", or the events joined: "loop.run.failed, approval.requested". */
export function eventsWords(events: string[]): string {
  if (events.includes(EVERY_EVENT)) return "every event";
  return events.length ? events.join(", ") : "no events";
}

/** An endpoint's state in words and the tone its colour comes from. */
export function endpointStateWords(state: EndpointState | string): { text: string; tone: Tone } {
  switch (state) {
    case "ok":
      return { text: "Delivering", tone: "ok" };
    case "retrying":
      return { text: "Retrying", tone: "busy" };
    case "failing":
      return { text: "Failing", tone: "bad" };
    case "idle":
      return { text: "No messages yet", tone: "quiet" };
    default:
      return { text: String(state), tone: "quiet" };
  }
}

/** "Nothing waiting", "1 message waiting", "3 messages waiting". */
export function pendingWords(n: number): string {
  if (!n) return "Nothing waiting";
  return n === 1 ? "1 message waiting" : `${n} messages waiting`;
}

/** "0 ms", "35 ms", "1.2 s", "12 s". */
export function msWords(ms: number | undefined): string {
  if (typeof ms !== "number" || !Number.isFinite(ms) || ms < 0) return "";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 10_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.round(ms / 1000)} s`;
}

/** "in 2 s", "in 3 min", "in 2 h", "now" — how long until `at`. */
export function untilWords(at: number, now: number): string {
  const s = Math.round((at - now) / 1000);
  if (s <= 0) return "now";
  if (s < 90) return `in ${s} s`;
  if (s < 5400) return `in ${Math.round(s / 60)} min`;
  return `in ${Math.round(s / 3600)} h`;
}

/**
 * One attempt in words: "200 in 35 ms", "500 in 12 ms: Internal Server
 * Error", "connection refused after 3 ms"; "" for nothing known.
 */
export function attemptWords(a: Attempt | undefined): string {
  if (!a) return "";
  const took = msWords(a.duration_ms);
  if (typeof a.status === "number") {
    return `${a.status}${took ? ` in ${took}` : ""}${a.error ? `: ${a.error}` : ""}`;
  }
  if (a.error) return `${a.error}${took ? ` after ${took}` : ""}`;
  return took ? `no answer after ${took}` : "";
}

/** A message's state in words ("delivered", "retrying", "waiting", "failed") and tone. */
export function messageStateWords(state: MessageState | string): { text: string; tone: Tone } {
  switch (state) {
    case "delivered":
      return { text: "delivered", tone: "ok" };
    case "retrying":
      return { text: "retrying", tone: "busy" };
    case "pending":
      return { text: "waiting", tone: "busy" };
    case "failed":
      return { text: "failed", tone: "bad" };
    default:
      return { text: String(state), tone: "quiet" };
  }
}

/**
 * The outcome of Send test — the message after its first attempt — in words:
 * "Delivered (200) in 35 ms", "Failed: 500 in 12 ms: … — will retry in 2 s",
 * "Failed: 404 in 5 ms — will not retry". `ok` colours it.
 */
export function testResultText(m: NotificationMessage, now: number): { ok: boolean; text: string } {
  const a = m.last_attempt ?? m.attempts_log?.[m.attempts_log.length - 1];
  if (m.state === "delivered") {
    const took = msWords(a?.duration_ms);
    const status = typeof a?.status === "number" ? ` (${a.status})` : "";
    return { ok: true, text: `Delivered${status}${took ? ` in ${took}` : ""}` };
  }
  const what = attemptWords(a) || "no attempt yet";
  if (m.state === "failed") return { ok: false, text: `Failed: ${what} — will not retry` };
  const next = toMs(m.next_attempt_at);
  const when = next !== undefined ? ` ${untilWords(next, now)}` : "";
  if (!a) return { ok: false, text: `Not sent yet — will try${when}` };
  return { ok: false, text: `Failed: ${what} — will retry${when}` };
}

const EVENT_SHORT: Record<string, string> = {
  "loop.run.completed": "run completed",
  "loop.run.failed": "run failed",
  "reminder.dispatched": "reminder",
  "activity.created": "new activity",
  "approval.requested": "approval",
  "webhook.test": "test",
};

/** An event in a few words, to tell two receipts to one endpoint apart: "run completed". */
export function eventShort(event: string): string {
  return EVENT_SHORT[event] ?? event;
}

/**
 * A receipt's words, "ops: delivered", "team-slack: retrying (3 attempts)",
 * and its accessible name, "Notification to ops delivered". `withEvent`
 * names the event too — "ops (run completed): delivered" — for an endpoint
 * that got more than one message about the same thing.
 */
export function receiptWords(r: Receipt, withEvent = false): { text: string; label: string; tone: Tone } {
  const { text, tone } = messageStateWords(r.state);
  const tries = r.attempts > 1 ? `${r.attempts} attempts` : "";
  const what = r.state === "pending" ? "waiting to be sent" : text;
  const to = withEvent ? `${r.endpoint} (${eventShort(r.event)})` : r.endpoint;
  return {
    text: `${to}: ${text}${tries ? ` (${tries})` : ""}`,
    label: `Notification to ${to} ${what}${tries ? `, ${tries}` : ""}`,
    tone,
  };
}

/** The words of a row's receipts, in order: an endpoint named twice says which event each is. */
export function receiptsWords(receipts: Receipt[]): { id: string; text: string; label: string; tone: Tone }[] {
  const count = new Map<string, number>();
  for (const r of receipts) count.set(r.endpoint, (count.get(r.endpoint) ?? 0) + 1);
  return receipts.map((r) => ({ id: r.id, ...receiptWords(r, (count.get(r.endpoint) ?? 0) > 1) }));
}

// ---- The endpoint form (PUT /api/notifications/endpoints/{name}).

export interface EndpointForm {
  name: string;
  url: string;
  format: Format;
  events: string[];  // ids of EVENTS, or ["*"]
  secret: string;    // "" keeps the saved one
  forgetSecret: boolean;
  allowPrivate: boolean;
}

export const EMPTY_FORM: EndpointForm = {
  name: "", url: "", format: "standard", events: ["loop.run.failed"], secret: "", forgetSecret: false, allowPrivate: false,
};

// What the host accepts (src/host/config.cc, as for providers and MCP servers).
export const ENDPOINT_NAME = /^[a-z0-9_-]{1,64}$/;

/** Whether a format takes a secret: standard signs with it, ntfy sends it as a token; Slack's and Discord's URL is the secret. */
export function takesSecret(format: Format): boolean {
  return format === "standard" || format === "ntfy";
}

/** The bytes of a `whsec_…` secret, or null when it is not one. */
export function secretBytes(secret: string): number | null {
  const m = /^whsec_([A-Za-z0-9+/]+={0,2})$/.exec(secret.trim());
  if (!m || m[1].length % 4 !== 0) return null;
  const b64 = m[1];
  const pad = b64.endsWith("==") ? 2 : b64.endsWith("=") ? 1 : 0;
  return (b64.length / 4) * 3 - pad;
}

/** `whsec_` followed by the base64 of `bytes` (the page gives 32 from crypto.getRandomValues). */
export function secretOf(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return "whsec_" + btoa(s);
}

/**
 * The first problem of a form, naming its field; null when it can be sent.
 * `editing`: the saved endpoint being changed (its secret may be kept).
 */
export function checkEndpointForm(
  form: EndpointForm,
  editing: Pick<EndpointView, "has_secret"> | null,
): { field: keyof EndpointForm; message: string } | null {
  const name = form.name.trim();
  if (!name) return { field: "name", message: "Give the endpoint a name." };
  if (!ENDPOINT_NAME.test(name)) return { field: "name", message: "Use lowercase letters, digits, - and _ in the name." };
  const url = form.url.trim();
  if ((url || !editing) && !/^https?:\/\/[^\s/?#]+\S*$/.test(url)) {
    return { field: "url", message: "The URL must start with http:// or https://, e.g. https://hooks.example.net/dsh." };
  }
  if (form.events.length === 0) return { field: "events", message: "Choose at least one event to send." };
  const secret = form.secret.trim();
  if (form.format === "standard") {
    const keeps = !!editing?.has_secret && !form.forgetSecret;
    if (!secret && !keeps) return { field: "secret", message: "A standard endpoint signs its requests: give a secret, or Generate one." };
    if (secret) {
      const n = secretBytes(secret);
      if (n === null) return { field: "secret", message: "The secret is whsec_ followed by base64; Generate makes one." };
      if (n < 24 || n > 64) return { field: "secret", message: `The secret holds ${n} bytes; it needs 24 to 64.` };
    }
  }
  return null;
}

/**
 * The PUT body of a checked form: a typed secret or URL replaces, an empty one keeps the saved one
 * (the page never sees either whole), forgetting the secret sends null.
 */
export function endpointBody(form: EndpointForm): Record<string, unknown> {
  const events = form.events.includes(EVERY_EVENT) ? [EVERY_EVENT] : form.events;
  const body: Record<string, unknown> = { format: form.format, events, allow_private: form.allowPrivate };
  if (form.url.trim()) body.url = form.url.trim();
  const secret = form.secret.trim();
  if (takesSecret(form.format) && secret) body.secret = secret;
  else if (form.forgetSecret) body.secret = null;
  return body;
}

/** The form for editing a saved endpoint (never its secret). */
export function endpointFormOf(e: EndpointView): EndpointForm {
  return {
    name: e.name, url: "", format: e.format, events: [...e.events], secret: "", forgetSecret: false, allowPrivate: e.allow_private,
  };
}

/** The form's events after a checkbox changed. Choosing "every event" stands for all of them. */
export function toggleEvent(events: string[], id: string, on: boolean): string[] {
  if (id === EVERY_EVENT) return on ? [EVERY_EVENT] : [];
  const rest = events.filter((e) => e !== id && e !== EVERY_EVENT);
  return on ? EVENTS.map((e) => e.id).filter((e) => e === id || rest.includes(e)) : rest;
}

/** What the recent-messages list shows: one endpoint or all, one state or all. */
export interface MessageFilter {
  endpoint: string;  // "" for every endpoint
  state: "" | "pending" | "delivered" | "failed";  // "pending" includes retrying
}

export const ALL_MESSAGES: MessageFilter = { endpoint: "", state: "" };

/** The state filter's choices, in words. */
export const MESSAGE_STATE_CHOICES: { value: MessageFilter["state"]; label: string }[] = [
  { value: "", label: "Any state" },
  { value: "pending", label: "Waiting or retrying" },
  { value: "delivered", label: "Delivered" },
  { value: "failed", label: "Failed" },
];

/** The query of GET /api/notifications/messages for the newest `limit` messages `filter` keeps. */
export function messagesQuery(limit: number, filter: MessageFilter): string {
  const q = new URLSearchParams({ limit: String(limit) });
  if (filter.endpoint) q.set("endpoint", filter.endpoint);
  if (filter.state) q.set("state", filter.state);
  return `/api/notifications/messages?${q.toString()}`;
}

/** What an empty list says: nothing sent yet, or nothing that matches. */
export function noMessagesText(filter: MessageFilter): string {
  if (!filter.endpoint && !filter.state) return "No message has been sent yet.";
  const what = {
    "": "No messages",
    pending: "No messages waiting or retrying",
    delivered: "No delivered messages",
    failed: "No failed messages",
  }[filter.state];
  return filter.endpoint ? `${what} for ${filter.endpoint}.` : `${what}.`;
}
