// The JSON API (docs/API.md) as the browser uses it: same origin, the
// HttpOnly `dsh_token` cookie set by the token URL, and the person's zone on
// every request that acts for them.

import type { ActivityItem, Outcome, Tokens } from "./lib/activity";
import { displayTitle } from "./lib/deliveries";
import type { LoopView } from "./lib/loops";
import type { Receipt } from "./lib/notifications";
import type { SearchResult } from "./lib/search";

export type { ActivityItem, Outcome, Tokens };

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

// The code of the error a request fails with when the host cannot be
// reached at all (it stopped, the network went away): the browser's own
// words for that ("Failed to fetch") mean nothing to a person.
export const UNREACHABLE = "unreachable";
export const isUnreachable = (e: unknown) => e instanceof ApiError && e.code === UNREACHABLE;

export async function request<T>(method: string, path: string, body?: unknown): Promise<T> {
  let response: Response;
  try {
    response = await fetch(path, {
      method,
      credentials: "same-origin",
      headers: body === undefined ? {} : { "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch {
    throw new ApiError(0, UNREACHABLE, "Lost the connection to dsh");
  }
  const text = await response.text();
  let json: any = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    throw new ApiError(response.status, "invalid_json", `${method} ${path}: ${response.status} ${text.slice(0, 200)}`);
  }
  if (!response.ok) {
    throw new ApiError(response.status, json?.error?.code ?? "error", json?.error?.message ?? `HTTP ${response.status}`);
  }
  return json as T;
}

// The page's first reads (the Sessions list and the host), sent while the
// rest of the page's code is still being evaluated: the browser's first use
// of Intl (just below) loads its time zone data, which costs tens of
// milliseconds, and the first render waits for the list (docs/PERFORMANCE.md,
// "Web UI"). `App` takes each once (`takeEarly`); a later read asks again.
export const SESSIONS_PAGE = 200;
const early: { sessions?: Promise<SessionRow[]>; host?: Promise<HostInfo> } =
  typeof window === "undefined" || typeof fetch === "undefined"
    ? {}
    : {
        sessions: request<{ result: { sessions: SessionRow[] } }>("POST", "/api/tools/session_status", {
          args: { recent_n: SESSIONS_PAGE },
        }).then((r) => readable(r.result.sessions)),
        host: request<HostInfo>("GET", "/api/host"),
      };
// A failure is reported to whoever takes the read, not as unhandled.
early.sessions?.catch(() => {});
early.host?.catch(() => {});
export function takeEarly<K extends keyof typeof early>(which: K): (typeof early)[K] {
  const read = early[which];
  delete early[which];
  return read;
}

export const clientTimeZone: string | undefined = (() => {
  try {
    return Intl.DateTimeFormat().resolvedOptions().timeZone || undefined;
  } catch {
    return undefined;
  }
})();

// The person's zone, on the routes that accept it.
const withZone = (body: Record<string, unknown>) =>
  clientTimeZone ? { ...body, client_time_zone: clientTimeZone } : body;

export interface SessionRow {
  session_id: string;
  title?: string;
  status: "running" | "idle" | "cold" | "missing";
  updated_at?: string;
  // Absent from an older host and from a `missing` row.
  archived?: boolean;
  // Where the title comes from ("user": a person renamed it) and the session
  // it was forked from; absent from an older host and from a `missing` row.
  title_source?: "user" | "generated" | "fallback" | null;
  parent_id?: string | null;
  // Running, with a tool call waiting for the person (docs/TOOLS.md).
  awaiting_approval?: boolean;
}

export interface HostInfo {
  version: string;
  default_model: { provider: string; model: string; description: string };
  presets: string[];
  default_preset: string;
  // `key_env`: the variable holding its key (absent from an older host).
  providers?: { name: string; models: { name: string; reasoning_efforts: string[] }[] | null; available: boolean; key_env?: string | null }[];
  global_session_id: string | null;
  // The MCP servers of `mcp.servers` (docs/MCP.md), by name; absent from an older host.
  mcp_servers?: McpServerView[];
  // The tools a root call may use, when the host says (issue 29): the
  // browser offers reminders only when `schedule_list` is among them.
  tools?: string[];
  // The registered workspaces (`workspaces.ID`), offered as working directories.
  workspaces?: { id: string; path: string }[];
  // How the bash tool runs (docs/TOOLS.md); absent without the workspace plugin.
  sandbox?: { state: "on" | "off" | "unavailable"; reason?: string };
}

// A session's stored header (GET /api/sessions/{id}; docs/STORAGE.md).
export interface SessionHeader {
  id: string;
  time_zone: string;
  route?: { provider: string; model: string; reasoning_effort?: string };
  preset?: string;
  parent_id?: string;
  archived?: boolean;
}

export interface McpServerView {
  name: string;
  transport: "stdio" | "http";
  state: "starting" | "ready" | "down" | "stopped";
  tools: number;
  protocol_version: string;  // "" before the first connection
  last_error: string;        // "" when it never failed
}

export interface StoredEvent {
  seq: number;
  type: string;
  at: number;
  data: any;
}

// What a loop tool answers (spec 000's LoopView, with issue 29's health and
// last outcome): one type, kept in lib/loops beside the code that reads it.
export type { LoopView };

// A run's turn (issue 29): `outcome` of a run row.
export interface RunOutcome extends Outcome {
  started_at?: number;
  ended_at?: number;
  duration_ms?: number;
  tokens?: Tokens;
}

// A session-local reminder as schedule_list shows it (docs/REMINDERS.md).
export interface Reminder {
  id: string;
  kind: "after" | "at";
  prompt: string;
  scheduled_at: string;
  state: "scheduled" | "overdue";
}

export interface LoopRun {
  nominal_at: number;
  claimed_at?: number;
  delivered_at?: number;
  target_session_id?: string;
  message_id?: string;
  result?: "delivered" | "failed" | "running";
  error?: string;
  attempts?: number;
  skipped?: number;
  skipped_capped?: boolean;
  note?: string;
  outcome?: RunOutcome;
  // The outbound notifications written for it (docs/NOTIFICATIONS.md).
  notifications?: Receipt[];
}

export interface CronPreview {
  description: string;
  tz: string;
  next: string[];
}

const query = (params: Record<string, string | number | undefined>) =>
  Object.entries(params)
    .filter(([, v]) => v !== undefined && v !== "")
    .map(([k, v]) => `${k}=${encodeURIComponent(String(v))}`)
    .join("&");

// Titles as a person reads them: never a delivery frame (lib/deliveries.ts).
function readable<T extends { title?: string }>(rows: T[]): T[] {
  return rows.map((r) => (r.title === undefined ? r : { ...r, title: displayTitle(r.title) }));
}

export const api = {
  host: () => request<HostInfo>("GET", "/api/host"),
  tool: <T>(name: string, args: Record<string, unknown>, sessionId?: string) =>
    request<{ result: T }>(
      "POST",
      `/api/tools/${encodeURIComponent(name)}`,
      withZone(sessionId ? { args, session_id: sessionId } : { args }),
    ).then((r) => r.result),
  sessions: (recent = 200) =>
    api.tool<{ sessions: SessionRow[] }>("session_status", { recent_n: recent }).then((r) => readable(r.sessions)),
  // Full-text search over titles and messages (GET /api/search), newest first.
  search: (q: string, limit: number, before?: string) =>
    request<{ results: SearchResult[]; next?: string }>("GET", `/api/search?${query({ q, limit, before })}`),
  // One session's row, whether or not it is among the recent ones.
  sessionRow: (sessionId: string) =>
    api.tool<{ sessions: SessionRow[] }>("session_status", { session_id: sessionId }).then((r) => readable(r.sessions)[0]),
  command: (text: string, sessionId?: string) =>
    request<{ result: { text: string; data: unknown } }>(
      "POST",
      "/api/commands",
      withZone(sessionId ? { text, session_id: sessionId } : { text }),
    ).then((r) => r.result),
  // `key` makes a retry safe: the host delivers a message once per key.
  send: (sessionId: string, message: string, mode: "steer" | "followup", key?: string) =>
    request<{ message_id: string; duplicate: boolean }>(
      "POST",
      `/api/sessions/${encodeURIComponent(sessionId)}/messages`,
      withZone(key ? { message, mode, key } : { message, mode }),
    ),
  approve: (sessionId: string, callId: string, decision: "allow_once" | "allow_session" | "deny") =>
    request<{ decision: string }>(
      "POST", `/api/sessions/${encodeURIComponent(sessionId)}/approvals/${encodeURIComponent(callId)}`, { decision }),
  cancel: (sessionId: string) =>
    request<{ cancelled: boolean }>("POST", `/api/sessions/${encodeURIComponent(sessionId)}/cancel`, {}),
  fork: (sessionId: string, seedLength: number) =>
    request<{ session: { id: string } }>("POST", `/api/sessions/${encodeURIComponent(sessionId)}/fork`, {
      seed_length: seedLength,
    }),
  // Loops (docs/LOOPS.md): every loop of the profile, or those targeting a session.
  loops: (selector: string) =>
    request<{ loops: LoopView[] }>("GET", `/api/loops?${query({ session_id: selector })}`).then((r) => r.loops),
  // Completed `after` loops, newest first, a page at a time (issue 29).
  finishedLoops: (limit: number, before?: string | number) =>
    request<{ loops: LoopView[]; next?: string | number }>(
      "GET",
      `/api/loops?${query({ session_id: "global", finished: "true", limit, before })}`,
    ),
  // The calling session's own loops (loop_list({}) as that session: spec 000 §8.1).
  sessionLoops: (sessionId: string) => api.tool<LoopView[]>("loop_list", {}, sessionId),
  runs: (loopId: string, limit: number, before?: number) =>
    request<{ runs: LoopRun[]; next_before?: number }>(
      "GET",
      `/api/loops/${encodeURIComponent(loopId)}/runs?${query({ limit, before })}`,
    ),
  cronPreview: (expr: string, tz: string | undefined, count: number) =>
    request<CronPreview>("GET", `/api/cron/preview?${query({ expr, tz, count })}`),
  listSessions: (limit: number) =>
    api.tool<{ sessions: { session_id: string; title?: string }[] }>("list_sessions", { limit }).then((r) => readable(r.sessions)),
  // The stored header (never resumes the session).
  header: (sessionId: string) =>
    request<{ session: SessionHeader }>(
      "GET",
      `/api/sessions/${encodeURIComponent(sessionId)}`,
    ).then((r) => r.session),
  // Renames (`title`: a string; null returns to the automatic title) and/or
  // archives a session (PATCH /api/sessions/{id}); answers the durable title.
  updateSession: (sessionId: string, change: { title?: string | null; archived?: boolean }) =>
    request<{ session: SessionHeader; title: string | null; title_source?: SessionRow["title_source"] }>(
      "PATCH",
      `/api/sessions/${encodeURIComponent(sessionId)}`,
      change,
    ),
  // A session's active reminders (docs/REMINDERS.md); only on a host with the schedule plugin.
  reminders: (sessionId: string) =>
    api.tool<{ schedules: Reminder[] }>("schedule_list", {}, sessionId).then((r) => r.schedules),
  deleteReminder: (sessionId: string, id: string) =>
    api.tool<{ id: string; deleted: boolean; code?: string }>("schedule_delete", { id }, sessionId),
  // Makes a cold session live (its overdue reminders then fire).
  resume: (sessionId: string) =>
    request<unknown>("POST", `/api/sessions/${encodeURIComponent(sessionId)}/resume`, {}),
  // The activity inbox (issue 29), newest first.
  activity: (filter: "all" | "unread" | "failed", limit: number, before?: number) =>
    request<{ items: ActivityItem[]; unread: number; next?: number }>(
      "GET",
      `/api/activity?${query({ filter, limit, before })}`,
    ).then((r) => ({ ...r, items: readable(r.items) })),
  unread: () => request<{ total: number; sessions: Record<string, number> }>("GET", "/api/activity/unread"),
  markRead: (which: { ids: number[] } | { all: true } | { session_id: string }) =>
    request<{ marked: number; unread: number }>("POST", "/api/activity/read", which),
  events: (sessionId: string, after: number, limit: number) =>
    request<{ events: StoredEvent[]; last_seq: number }>(
      "GET",
      `/api/sessions/${encodeURIComponent(sessionId)}/events?after=${after}&limit=${limit}`,
    ),
};

// A download of the session (GET /api/sessions/{id}/export): the cookie
// signs the request in, and the host names the file.
export function exportUrl(sessionId: string, format: "markdown" | "json"): string {
  return `/api/sessions/${encodeURIComponent(sessionId)}/export?format=${format}`;
}

export function streamUrl(sessionId: string, after: number): string {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${location.host}/api/sessions/${encodeURIComponent(sessionId)}/stream?after=${after}`;
}
