import { useEffect, useState } from "preact/hooks";
import { api, type LoopView } from "./api";
import { countdown, loopSummary } from "./lib/loops.js";
import { useNow } from "./use_now";

// The composer's compact status of the open session's automation (spec 000
// §8.1, spec 004): its own loops from loop_list({}) called as this session —
// never other sessions' — and its active session-local reminders from
// schedule_list when the schedule plugin is on. Countdowns come from next_at
// and the clock; nothing is fetched per tick.

interface Reminder {
  id: string;
  prompt: string;
  scheduled_at: string;
  state: string;
}

export function LoopStatus({ sessionId, version }: { sessionId: string; version: number }) {
  const [loops, setLoops] = useState<LoopView[] | null>(null);
  const [reminders, setReminders] = useState<Reminder[]>([]);
  const now = useNow(1000);

  useEffect(() => {
    let live = true;
    api.sessionLoops(sessionId).then((l) => live && setLoops(l)).catch(() => live && setLoops(null));
    api
      .tool<{ schedules: Reminder[] }>("schedule_list", {}, sessionId)
      .then((r) => live && setReminders(r.schedules))
      .catch(() => live && setReminders([]));  // the schedule plugin is off, or a delegated session
    return () => {
      live = false;
    };
  }, [sessionId, version]);

  const summary = loopSummary(loops ?? []);
  const nextReminder = reminders.reduce<number | null>((m, r) => {
    const at = Date.parse(r.scheduled_at);
    return m === null || at < m ? at : m;
  }, null);
  return (
    <div class="loop-status" role="status" aria-label="Loops" aria-live="off">
      <span>
        {summary.count === 0 ? "No loops" : summary.count === 1 ? "1 loop" : `${summary.count} loops`}
        {summary.nextAt !== null && (
          <>
            {" · next "}
            <time dateTime={new Date(summary.nextAt).toISOString()} title={new Date(summary.nextAt).toLocaleString()}>
              {countdown(summary.nextAt, now)}
            </time>
          </>
        )}
      </span>
      {summary.overdue > 0 && <span class="badge overdue">{summary.overdue} overdue</span>}
      {summary.failed > 0 && <span class="badge failed">{summary.failed} failed</span>}
      {reminders.length > 0 && (
        <span class="reminders" title={reminders.map((r) => `${r.prompt} — ${new Date(r.scheduled_at).toLocaleString()}`).join("\n")}>
          {reminders.length === 1 ? "1 reminder" : `${reminders.length} reminders`} <span class="tag">session-local</span>
          {nextReminder !== null && <> · next {countdown(nextReminder, now)}</>}
        </span>
      )}
      <a href={`#/automation?session=${encodeURIComponent(sessionId)}`}>Manage loops</a>
    </div>
  );
}
