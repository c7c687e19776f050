// The automation panel's and the composer's words for loops (spec 000 §4, §8):
// derived from a LoopView and the clock only, never from replaying events.

import type { Outcome } from "./activity.js";

export type LoopSchedule =
  | { kind: "every"; every_seconds: number }
  | { kind: "after"; after_seconds: number }
  | { kind: "cron"; expr: string; tz?: string };

export interface LoopView {
  loop_id: string;
  prompt: string;
  schedule: LoopSchedule;
  session_id: string;
  created_by_session_id?: string;
  created_at: number;
  next_at?: number;
  last_run_at?: number;
  last_result?: "delivered" | "failed";
  last_error?: string;
  state: "scheduled" | "running" | "overdue" | "completed" | "failed";
  health?: "ok" | "failing" | "unknown";
  last_outcome?: Outcome;
}

export interface Reminder {
  id: string;
  prompt: string;
  scheduled_at: string;
  state: "scheduled" | "overdue" | string;
}

export interface Unit {
  name: string;
  short: string;
  seconds: number;
}

export const UNITS: Unit[] = [
  { name: "seconds", short: "s", seconds: 1 },
  { name: "minutes", short: "min", seconds: 60 },
  { name: "hours", short: "h", seconds: 3600 },
  { name: "days", short: "d", seconds: 86400 },
];

/** "5 min", "2 h", "90 s": the largest unit that divides the duration. */
export function durationWords(seconds: number): string {
  for (const u of [...UNITS].reverse()) {
    if (seconds >= u.seconds && seconds % u.seconds === 0) {
      const n = seconds / u.seconds;
      return u.name === "days" ? `${n} ${n === 1 ? "day" : "days"}` : `${n} ${u.short}`;
    }
  }
  return `${seconds} s`;
}

/** The largest unit that divides `seconds`, for editing: {amount, unit}. */
export function splitDuration(seconds: number): { amount: number; unit: string } {
  for (const u of [...UNITS].reverse()) {
    if (seconds >= u.seconds && seconds % u.seconds === 0) return { amount: seconds / u.seconds, unit: u.name };
  }
  return { amount: seconds, unit: "seconds" };
}

/** Seconds from an amount in a unit; NaN when the amount is not a number. */
export function toSeconds(amount: string | number, unit: string): number {
  const u = UNITS.find((x) => x.name === unit) ?? UNITS[0];
  const n = Number(String(amount).trim());
  return String(amount).trim() === "" ? NaN : n * u.seconds;
}

/**
 * The schedule in words. A cron rule needs its English description from the
 * host (GET /api/cron/preview); without it the expression is shown.
 */
export function scheduleWords(s: LoopSchedule, cronDescription: string | undefined): string {
  switch (s.kind) {
    case "every":
      return `every ${durationWords(s.every_seconds)}`;
    case "after":
      return `once, after ${durationWords(s.after_seconds)}`;
    case "cron":
      return `${cronDescription ?? `cron ${s.expr}`} (${s.tz ?? "the host's zone"})`;
    default:
      return "unknown schedule";
  }
}

/**
 * "in 4 min 3 s", "in 2 h 5 min", "in 3 days 0 h", "now", "5 s ago";
 * `nextAt` and `now` in Unix ms.
 */
export function countdown(nextAt: number, now: number): string {
  const ms = nextAt - now;
  const s = Math.round(Math.abs(ms) / 1000);
  let text: string;
  if (s < 60) text = `${s} s`;
  else if (s < 3600) text = `${Math.floor(s / 60)} min ${s % 60} s`;
  else if (s < 86400) text = `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  else {
    const d = Math.floor(s / 86400);
    text = `${d} ${d === 1 ? "day" : "days"} ${Math.floor((s % 86400) / 3600)} h`;
  }
  if (s === 0) return "now";
  return ms > 0 ? `in ${text}` : `${text} ago`;
}

/**
 * Where a loop delivers, for people: the global interface, a fresh session
 * each run, or a session by its durable title (its id when it has none).
 * `target` is a LoopView.session_id; `titles` maps session id -> title.
 */
export function targetWords(target: string, titles: Map<string, string | undefined>): string {
  if (target === "self") return "Global interface";
  if (target === "new") return "Fresh session each run";
  return titles.get(target) || target;
}

/** The composer's compact status of one session's loops. */
export function loopSummary(loops: LoopView[]): { count: number; nextAt: number | null; overdue: number; failed: number } {
  let nextAt: number | null = null;
  let overdue = 0;
  let failed = 0;
  for (const l of loops) {
    if (l.next_at !== undefined && (nextAt === null || l.next_at < nextAt)) nextAt = l.next_at;
    if (l.state === "overdue") overdue++;
    if (l.state === "failed") failed++;
  }
  return { count: loops.length, nextAt, overdue, failed };
}

/**
 * True when a loop's last run went wrong: its delivery failed or the turn it
 * started ended in an error (issue 29's `health`; an older host without
 * `health` is judged by its delivery result).
 */
export function isFailing(l: LoopView): boolean {
  return l.health === "failing" || l.state === "failed";
}

/**
 * The composer's status of one session's automation, loops and reminders:
 * "2 loops · 1 reminder" (the words), the nearest next run of either, and
 * how many loops are failing or overdue and how many reminders overdue.
 * `reminders` is null on a host without reminders.
 */
export function automationSummary(
  loops: LoopView[],
  reminders: Reminder[] | null,
): { words: string; nextAt: number | null; failing: number; overdue: number; overdueReminders: number } {
  const counts: string[] = [];
  if (loops.length > 0) counts.push(loops.length === 1 ? "1 loop" : `${loops.length} loops`);
  const r = reminders ?? [];
  if (r.length > 0) counts.push(r.length === 1 ? "1 reminder" : `${r.length} reminders`);
  const words = counts.length ? counts.join(" · ") : reminders ? "No loops or reminders" : "No loops";
  const loop = loopSummary(loops);
  let nextAt = loop.nextAt;
  let overdueReminders = 0;
  for (const x of r) {
    const at = Date.parse(x.scheduled_at);
    if (x.state === "overdue") overdueReminders++;
    else if (Number.isFinite(at) && (nextAt === null || at < nextAt)) nextAt = at;
  }
  return { words, nextAt, failing: loops.filter(isFailing).length, overdue: loop.overdue, overdueReminders };
}

/**
 * A run history after a re-read of its newest page (the change feed said the
 * loops or their notifications changed): that page's runs replace those due
 * at the same time, older runs already loaded ("Older runs") stay, newest
 * first and each once. `pageIsAll`: the page holds every run (no
 * `next_before`).
 */
export function mergeNewestRuns<T extends { nominal_at: number }>(held: T[], page: T[], pageIsAll: boolean): T[] {
  if (pageIsAll || page.length === 0) return page;
  const oldest = page[page.length - 1].nominal_at;
  return page.concat(held.filter((r) => r.nominal_at < oldest));
}

/** Appends an older page of runs, each once. */
export function appendOlderRuns<T extends { nominal_at: number }>(held: T[], older: T[]): T[] {
  const seen = new Set(held.map((r) => r.nominal_at));
  return held.concat(older.filter((r) => !seen.has(r.nominal_at)));
}
