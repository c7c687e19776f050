// The Sessions list's words (issue 31, "the sidebar at any size"): what a
// row says to a screen reader, and which rows the list must read on their
// own because the loaded page does not hold them. Pure functions, tested
// with node --test (web/test/sidebar.test.js).

export interface RowFacts {
  session_id: string;
  title?: string;
  status: string;
  updated_at?: string;
  title_source?: "user" | "generated" | "fallback" | null;
  parent_id?: string | null;
  awaiting_approval?: boolean;
}

/** What a row says its state is: "waiting for approval" while a tool call waits for the person. */
export function statusWords(row: { status: string; awaiting_approval?: boolean }): string {
  return row.awaiting_approval && row.status === "running" ? "waiting for approval" : row.status;
}

/** "just now", "1 minute ago", "5 hours ago", "3 days ago": a relative time in whole words. */
export function agoInWords(at: number, now: number): string {
  const s = Math.round((now - at) / 1000);
  const unit = (n: number, one: string) => `${n} ${one}${n === 1 ? "" : "s"} ago`;
  if (s < 45) return "just now";
  if (s < 3600) return unit(Math.max(1, Math.round(s / 60)), "minute");
  if (s < 86400) return unit(Math.round(s / 3600), "hour");
  return unit(Math.round(s / 86400), "day");
}

/**
 * A row's accessible name, as a sentence: "Weekly report, idle, updated 2
 * minutes ago", with what else the row shows — "Global interface: " first
 * for the pinned row, ", 3 unread" and ", fork of Parent" after. A row
 * without a title is named by its id, except the Global interface, which is
 * named by what it is.
 */
export function rowLabel(
  row: RowFacts,
  now: number,
  extra: { pinned?: boolean; unread?: number; parentTitle?: string | null } = {},
): string {
  const name = extra.pinned ? (row.title ? `Global interface: ${row.title}` : "Global interface") : row.title || row.session_id;
  const parts = [name];
  if (row.status) parts.push(statusWords(row));
  const at = row.updated_at ? Date.parse(row.updated_at) : NaN;
  if (!Number.isNaN(at)) parts.push(`updated ${agoInWords(at, now)}`);
  if (extra.unread && extra.unread > 0) parts.push(`${extra.unread} unread`);
  if (row.parent_id) parts.push(`fork of ${extra.parentTitle || row.parent_id}`);
  return parts.join(", ");
}

/**
 * The sessions the page shows but the loaded list may not hold, each once:
 * the Global interface (pinned whatever the list's length), the open
 * session (a link to an older one), and the parents of the listed forks
 * (their "fork of …" names them). Those not in `loaded` must be read one by
 * one (session_status with session_id).
 */
export function rowsToRead(
  loaded: ReadonlySet<string>,
  wanted: { global: string | null; current: string | null; rows: readonly RowFacts[] },
): string[] {
  const out = new Set<string>();
  const want = (id: string | null | undefined) => {
    if (id && !loaded.has(id)) out.add(id);
  };
  want(wanted.global);
  want(wanted.current);
  for (const r of wanted.rows) want(r.parent_id);
  return [...out];
}

/** True when the person renamed the session: only then is "Use the automatic title" offered. */
export const titledByPerson = (row: RowFacts | undefined) => row?.title_source === "user";
