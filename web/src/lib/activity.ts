// The words of run outcomes and of the activity inbox (issue 29): what a
// loop run or a reminder dispatch started and how that turn ended, the
// unread counts, and which new items the browser announces. Pure functions,
// tested with node --test (web/test/).

import type { Receipt } from "./notifications.js";

export interface OutcomeError {
  code: string;
  message: string;
}

export interface Outcome {
  status: "none" | "pending" | "running" | "completed" | "error" | "cancelled";
  error?: OutcomeError;
  session_id?: string;
  seq?: number;
}

export interface Tokens {
  input_tokens?: number;
  output_tokens?: number;
}

export interface ActivityItem {
  id: number;
  at: number;
  kind: "loop_run" | "reminder" | "agent_message";
  loop_id?: string;
  schedule_id?: string;
  session_id?: string;
  seq?: number;
  title?: string;
  summary?: string;
  outcome: Outcome;
  started_at?: number;
  ended_at?: number;
  duration_ms?: number;
  tokens?: Tokens;
  read: boolean;
  // The outbound notifications written for it (docs/NOTIFICATIONS.md).
  notifications?: Receipt[];
}

export type Tone = "ok" | "bad" | "busy" | "quiet";

/** True when the delivery failed or the turn it started ended in an error. */
export function isFailed(o: Outcome | undefined): boolean {
  return !!o && (o.status === "error" || (o.status === "none" && !!o.error));
}

/**
 * An outcome in words and the tone its colour comes from (style.css
 * `.outcome.TONE`): `ok`, `bad`, `busy` or `quiet`.
 */
export function outcomeWords(o: Outcome | undefined): { text: string; tone: Tone } {
  switch (o?.status) {
    case "completed":
      return { text: "completed", tone: "ok" };
    case "error":
      return { text: "failed", tone: "bad" };
    case "running":
      return { text: "running", tone: "busy" };
    case "pending":
      return { text: "waiting for its turn", tone: "busy" };
    case "cancelled":
      return { text: "cancelled", tone: "quiet" };
    case "none":
      return o.error ? { text: "not delivered", tone: "bad" } : { text: "not started", tone: "quiet" };
    default:
      return { text: "unknown", tone: "quiet" };
  }
}

/** The error of a failed outcome as one line: "model_unavailable: the model …". */
export function outcomeError(o: Outcome | undefined): string {
  if (!o?.error) return "";
  return o.error.message ? `${o.error.code}: ${o.error.message}` : o.error.code;
}

/** "1.2 s", "45 s", "3 min 4 s", "2 h 5 min"; "" when unknown. */
export function durationMs(ms: number | undefined): string {
  if (typeof ms !== "number" || !Number.isFinite(ms) || ms < 0) return "";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 10_000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

/** "1,200 in · 35 out tokens"; "" when the provider reported none. */
export function tokenWords(t: Tokens | undefined): string {
  if (!t || (typeof t.input_tokens !== "number" && typeof t.output_tokens !== "number")) return "";
  const n = (x: number | undefined) => (typeof x === "number" ? x.toLocaleString("en-US") : "?");
  return `${n(t.input_tokens)} in · ${n(t.output_tokens)} out tokens`;
}

export function kindWords(kind: ActivityItem["kind"]): string {
  return kind === "loop_run" ? "Loop run" : kind === "reminder" ? "Reminder" : "Message from an agent";
}

/** "just now", "5 min ago", "3 h ago", "2 days ago"; `at` and `now` in Unix ms. */
export function ago(at: number, now: number): string {
  const s = Math.round((now - at) / 1000);
  if (s < 45) return "just now";
  if (s < 3600) return `${Math.max(1, Math.round(s / 60))} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  const d = Math.round(s / 86400);
  return d === 1 ? "1 day ago" : `${d} days ago`;
}

/** The page's title: `(N) dsh` while anything is unread, with the open session's title first. */
export function pageTitle(unread: number, session?: string): string {
  const page = session ? `${session} — dsh` : "dsh";
  return unread > 0 ? `(${unread}) ${page}` : page;
}

/**
 * Where an item opens: its session scrolled to the event (`#/s/ID/SEQ`),
 * or the session alone; null without a session.
 */
export function itemHref(item: { session_id?: string; seq?: number }): string | null {
  if (!item.session_id) return null;
  const s = `#/s/${encodeURIComponent(item.session_id)}`;
  return typeof item.seq === "number" && item.seq > 0 ? `${s}/${item.seq}` : s;
}

/**
 * The list after a re-read of its newest page: that page's items replace
 * those with the same id, older items already loaded stay (newest first,
 * each id once). `page` is complete down to its own oldest id, so a loaded
 * item newer than that and missing from it no longer matches the filter.
 * `page` is newest first; `pageIsAll`: the page holds every item (there is
 * no `next`).
 */
export function mergeNewest(held: ActivityItem[], page: ActivityItem[], pageIsAll: boolean): ActivityItem[] {
  if (pageIsAll || page.length === 0) return page;
  const oldest = page[page.length - 1].id;
  const older = held.filter((i) => i.id < oldest);
  return page.concat(older);
}

/** Appends an older page (after "Show older"), each id once. */
export function appendOlder(held: ActivityItem[], older: ActivityItem[]): ActivityItem[] {
  const ids = new Set(held.map((i) => i.id));
  return held.concat(older.filter((i) => !ids.has(i.id)));
}

export interface AnnounceState {
  newestId: number;
  announced: Set<number>;
}

/**
 * Which items the browser announces (the "Notify me in this browser"
 * choice): nothing that was there when announcing was turned on or the page
 * opened; then, with `every`, each new item once; with `failed`, each item
 * once when it is seen failed (a run first seen waiting, then failing, is
 * announced when it fails). Returns the items to announce and the state to
 * keep; re-reading the same items (a reconnect) announces nothing again.
 * `state` is null to start; `items` are the newest items, newest first.
 */
export function toAnnounce(
  state: AnnounceState | null,
  items: ActivityItem[],
  mode: "failed" | "every",
): { announce: ActivityItem[]; state: AnnounceState } {
  const newest = items.reduce((m, i) => Math.max(m, i.id), 0);
  if (!state) {
    const announced = new Set(items.filter((i) => isFailed(i.outcome)).map((i) => i.id));
    return { announce: [], state: { newestId: newest, announced } };
  }
  const announced = new Set(state.announced);
  const announce: ActivityItem[] = [];
  for (const i of [...items].reverse()) {  // oldest first
    if (announced.has(i.id)) continue;
    if (mode === "every" ? i.id > state.newestId : isFailed(i.outcome)) {
      announce.push(i);
      announced.add(i.id);
    }
  }
  return { announce, state: { newestId: Math.max(state.newestId, newest), announced } };
}

/** The title and body of an announcement. */
export function announcement(item: ActivityItem): { title: string; body: string } {
  const what = outcomeWords(item.outcome).text;
  const where = item.title ? ` — ${item.title}` : "";
  const body = isFailed(item.outcome) ? outcomeError(item.outcome) || item.summary || "" : item.summary || "";
  return { title: `${kindWords(item.kind)} ${what}${where}`, body };
}
