import { useEffect, useState } from "preact/hooks";
import { api, ApiError, type HostInfo, type Reminder, type SessionRow } from "./api";

// Session-local reminders (docs/REMINDERS.md) in the composer's status and
// the Manage view. They exist only on a host with the schedule plugin: the
// host's `tools` says whether `schedule_list` is there, and then nothing is
// asked of a host without it. An older host that does not list its tools is
// asked once per page, and never again once it answers `unknown_tool`.

let probe: Promise<boolean> | null = null;

function remindersOn(host: HostInfo, sessionId: string): Promise<boolean> {
  if (host.tools) return Promise.resolve(host.tools.includes("schedule_list"));
  probe ??= api.reminders(sessionId).then(
    () => true,
    (e) => !(e instanceof ApiError && e.code === "unknown_tool"),
  );
  return probe;
}

// The session's active reminders, re-read when `version` changes; null while
// unknown and on a host without reminders (then nothing is shown).
export function useReminders(host: HostInfo | null, sessionId: string | null, version: number): Reminder[] | null {
  const [held, setHeld] = useState<{ sessionId: string; reminders: Reminder[] } | null>(null);
  useEffect(() => {
    let live = true;
    if (!host || !sessionId) return;
    remindersOn(host, sessionId).then((on) => {
      if (!on || !live) return;
      api
        .reminders(sessionId)
        .then((reminders) => live && setHeld({ sessionId, reminders }))
        .catch(() => live && setHeld(null));  // a delegated session has no reminders
    });
    return () => {
      live = false;
    };
  }, [host, sessionId, version]);
  return held && held.sessionId === sessionId ? held.reminders : null;
}

// A reminder whose time has passed: one of a cold session fires only when
// the session is live again (docs/REMINDERS.md, "Only while live").
export function isOverdue(r: Reminder, now: number): boolean {
  return r.state === "overdue" || Date.parse(r.scheduled_at) <= now;
}

// "overdue — fires when this session is next opened", with the button that
// opens (resumes) the session so that it fires now.
export function OverdueNotice({ sessionId, status, count }: { sessionId: string; status?: SessionRow["status"]; count: number }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  if (status !== "cold") {
    return <span class="badge overdue">{count === 1 ? "1 reminder overdue" : `${count} reminders overdue`}</span>;
  }
  const open = async () => {
    setBusy(true);
    setError(null);
    try {
      await api.resume(sessionId);
    } catch (e: any) {
      setError(`Could not open the session: ${e?.message ?? e}`);
    } finally {
      setBusy(false);
    }
  };
  return (
    <span class="overdue-notice">
      <span class="error-text">
        {count === 1 ? "1 reminder" : `${count} reminders`} overdue — fires when this session is next opened
      </span>{" "}
      <button type="button" class="secondary" disabled={busy} onClick={() => void open()}
              aria-label="Open this session now, so that its overdue reminders fire">
        Open it now
      </button>
      {error && <span class="error-text" role="alert"> {error}</span>}
    </span>
  );
}
