import { useEffect, useState } from "preact/hooks";
import { api, type HostInfo, type LoopView, type SessionRow } from "./api";
import { automationSummary, countdown } from "./lib/loops";
import { isOverdue, OverdueNotice, useReminders } from "./reminders";
import { useNow } from "./use_now";

// The composer's compact status of the open session's automation (spec 000
// §8.1, spec 004, issue 29): its own loops from loop_list({}) called as this
// session — never other sessions' — and, on a host with the schedule
// plugin, its active session-local reminders: "2 loops · 1 reminder · next
// in 4 min", and "failing" when a loop's last run failed. Countdowns come
// from next_at / scheduled_at and the clock; nothing is fetched per tick.

export function LoopStatus({ host, sessionId, sessionStatus, version }: {
  host: HostInfo | null;
  sessionId: string;
  sessionStatus?: SessionRow["status"];
  version: number;
}) {
  const [loops, setLoops] = useState<LoopView[] | null>(null);
  const reminders = useReminders(host, sessionId, version);
  const now = useNow(1000);

  useEffect(() => {
    let live = true;
    api.sessionLoops(sessionId).then((l) => live && setLoops(l)).catch(() => live && setLoops(null));
    return () => {
      live = false;
    };
  }, [sessionId, version]);

  const summary = automationSummary(loops ?? [], reminders);
  const overdueReminders = (reminders ?? []).filter((r) => isOverdue(r, now)).length;
  return (
    <div class="loop-status" role="status" aria-label="Loops" aria-live="off">
      <span>
        {summary.words}
        {summary.nextAt !== null && summary.nextAt > now - 1000 && (
          <>
            {" · next "}
            <time dateTime={new Date(summary.nextAt).toISOString()} title={new Date(summary.nextAt).toLocaleString()}>
              {countdown(summary.nextAt, now)}
            </time>
          </>
        )}
      </span>
      {summary.failing > 0 && (
        <span class="badge failed" title="The last run of a loop failed: its delivery, or the turn it started">
          {summary.failing === 1 ? "1 loop failing" : `${summary.failing} loops failing`}
        </span>
      )}
      {summary.overdue > 0 && <span class="badge overdue">{summary.overdue} overdue</span>}
      {reminders && reminders.length > 0 && (
        <span class="tag" title={reminders.map((r) => `${r.prompt} — ${new Date(r.scheduled_at).toLocaleString()}`).join("\n")}>
          session-local
        </span>
      )}
      {overdueReminders > 0 && <OverdueNotice sessionId={sessionId} status={sessionStatus} count={overdueReminders} />}
      <a href={`#/automation?session=${encodeURIComponent(sessionId)}`}>
        {reminders ? "Manage loops and reminders" : "Manage loops"}
      </a>
    </div>
  );
}
