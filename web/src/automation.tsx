import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { api, clientTimeZone, type HostInfo, type LoopRun, type LoopView, type McpServerView, type Reminder, type SessionRow } from "./api";
import { durationMs, itemHref, outcomeError, outcomeWords, tokenWords } from "./lib/activity";
import { fieldOfError } from "./lib/fields";
import { appendOlderRuns, countdown, isFailing, mergeNewestRuns, scheduleWords, targetWords, toSeconds, UNITS } from "./lib/loops";
import { mcpError, mcpSummary } from "./lib/mcp";
import { Receipts } from "./notifications";
import { isOverdue, OverdueNotice, useReminders } from "./reminders";
import { useNow } from "./use_now";

// The global automation panel (spec 000 §8.2, docs/UI.md): every loop of the
// profile (or those targeting one session), their run history, and the form
// that creates one. A view over loop_list / loop_create / loop_delete and
// list_sessions; it never schedules anything itself. Above them, the MCP
// servers the host runs for its agents and whether they work (GET /api/host).

const PAGE = 100;  // rows rendered per "Show more", so a profile with 10,000 loops stays quick

// English descriptions of cron rules, by "expr\ntz", shared by every row.
const cronWords = new Map<string, string | Promise<void>>();

export function useCronDescription(expr: string | null, tz: string | undefined): string | undefined {
  const key = expr === null ? "" : `${expr}\n${tz ?? ""}`;
  const known = cronWords.get(key);
  const [, setLoaded] = useState(0);
  useEffect(() => {
    if (expr === null) return;
    let cached = cronWords.get(key);
    if (cached === undefined) {
      cached = api
        .cronPreview(expr, tz, 1)
        .then((p) => void cronWords.set(key, p.description))
        .catch(() => void cronWords.set(key, `cron ${expr}`));
      cronWords.set(key, cached);
    }
    if (typeof cached !== "string") cached.then(() => setLoaded((n) => n + 1));
  }, [key]);
  return typeof known === "string" ? known : undefined;
}

function localTime(ms: number): string {
  return new Date(ms).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium" });
}


interface Props {
  host: HostInfo;
  // Loops targeting this session only, and "This session" as a target; null = every loop.
  session: string | null;
  // The loop to show (a loop card's link): scrolled to and highlighted.
  loop?: string | null;
  // The status of `session`, for its overdue reminders.
  sessionStatus?: SessionRow["status"];
  // Bumped when the change feed says the loops (or the sessions, or the MCP servers) changed.
  loopsVersion: number;
  sessionsVersion: number;
  mcpVersion: number;
  // Bumped when the outbound notifications changed: the run histories' receipts.
  notificationsVersion: number;
  onOpenSession: (id: string) => void;
}

export function Automation({
  host, session, loop, sessionStatus, loopsVersion, sessionsVersion, mcpVersion, notificationsVersion, onOpenSession,
}: Props) {
  const [loops, setLoops] = useState<LoopView[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [shown, setShown] = useState(PAGE);
  const [sessions, setSessions] = useState<{ session_id: string; title?: string }[]>([]);
  const now = useNow(1000);
  const runsVersion = loopsVersion + notificationsVersion;

  const reload = async () => {
    try {
      setLoops(await api.loops(session ?? "global"));
      setError(null);
    } catch (e: any) {
      setError(e?.message ?? String(e));
    }
  };
  useEffect(() => void reload(), [session, loopsVersion]);
  useEffect(() => {
    api.listSessions(1000).then(setSessions).catch(() => {});
  }, [sessionsVersion]);

  const titles = useMemo(() => new Map(sessions.map((s) => [s.session_id, s.title])), [sessions]);

  // A loop card's link: show that loop's row once it is there.
  const body = useRef<HTMLDivElement>(null);
  const shownLoop = useRef<string | null>(null);
  const [finishedLoaded, setFinishedLoaded] = useState(0);
  useEffect(() => {
    if (!loop || shownLoop.current === loop) return;
    const el = body.current?.querySelector<HTMLElement>(`[data-loop="${CSS.escape(loop)}"]`);
    if (!el) return;
    shownLoop.current = loop;
    el.scrollIntoView({ block: "center" });
    el.focus({ preventScroll: true });
  }, [loop, loops, finishedLoaded]);

  const remove = async (loop: LoopView) => {
    if (!confirm(`Delete the loop "${preview(loop.prompt, 60)}"? It will not run again.`)) return;
    try {
      await api.tool("loop_delete", { loop_id: loop.loop_id });
      setNotice(`Deleted the loop "${preview(loop.prompt, 60)}".`);
    } catch (e: any) {
      setNotice(
        e?.code === "unknown_loop"
          ? `That loop no longer exists: it was deleted elsewhere or it finished.`
          : `Could not delete the loop: ${e?.message ?? e}`,
      );
    }
    await reload();
  };

  return (
    <section class="automation" aria-labelledby="automation-title">
      <header class="session-header">
        <h1 id="automation-title">Automation</h1>
        <span class="meta">
          {session ? (
            <>
              Loops that deliver to <span class="mono">{titles.get(session) || session}</span> ·{" "}
              <a href="#/automation">every loop</a>
            </>
          ) : (
            "Every loop of this profile"
          )}
        </span>
      </header>
      <div class="automation-body" ref={body}>
        <McpServers initial={host.mcp_servers ?? []} version={mcpVersion} />
        {session && <Reminders host={host} session={session} status={sessionStatus} version={loopsVersion + sessionsVersion} now={now} />}
        <LoopForm host={host} session={session} sessions={sessions} onCreated={(l) => {
          setNotice(`Created the loop "${preview(l.prompt, 60)}".`);
          void reload();
        }} />
        <div class="status-line" role="status" aria-live="polite">{notice}</div>
        {error && <p class="error-text" role="alert">{error}</p>}
        {loops === null ? (
          <p class="muted">Loading…</p>
        ) : loops.length === 0 ? (
          <p class="muted">No loops{session ? " deliver to this session" : " yet"}.</p>
        ) : (
          <>
            <h2 class="loops-count">{loops.length === 1 ? "1 loop" : `${loops.length} loops`}</h2>
            <ul class="loops" aria-label="Loops">
              {loops.slice(0, shown).map((l) => (
                <LoopRow key={l.loop_id} loop={l} now={now} titles={titles} globalId={host.global_session_id} runsVersion={runsVersion}
                         onDelete={remove} onOpenSession={onOpenSession} highlighted={l.loop_id === loop} />
              ))}
            </ul>
            {loops.length > shown && (
              <button type="button" class="secondary more" onClick={() => setShown(shown + PAGE)}>
                Show more loops ({loops.length - shown} more)
              </button>
            )}
          </>
        )}
        {!session && (
          <Finished version={loopsVersion} runsVersion={runsVersion} titles={titles} globalId={host.global_session_id} highlight={loop ?? null}
                    onLoaded={() => setFinishedLoaded((n) => n + 1)} onOpenSession={onOpenSession} />
        )}
      </div>
    </section>
  );
}

// The host's MCP servers (docs/MCP.md), re-read from GET /api/host whenever
// `version` changes (the change feed's `mcp`, and every `ready`). Nothing
// when the host has none.
function McpServers({ initial, version }: { initial: McpServerView[]; version: number }) {
  const [servers, setServers] = useState(initial);
  const [error, setError] = useState<string | null>(null);
  const asked = useRef(0);
  useEffect(() => {
    // Only the newest answer counts: re-reads may overlap.
    const mine = ++asked.current;
    api
      .host()
      .then((h) => {
        if (mine !== asked.current) return;
        setServers(h.mcp_servers ?? []);
        setError(null);
      })
      .catch((e: any) => mine === asked.current && setError(e?.message ?? String(e)));
  }, [version]);
  if (servers.length === 0) return null;
  return (
    <section class="mcp" aria-labelledby="mcp-title">
      <div class="mcp-title">
        <h2 id="mcp-title">MCP servers</h2>
        <span class="muted">{mcpSummary(servers)}</span>
      </div>
      {error && <p class="error-text" role="alert">Could not read the MCP servers: {error}</p>}
      {/* The roles are explicit: a narrow screen lays the rows out as grids
          (style.css), which must not take their table semantics away. */}
      <div class="mcp-table">
        <table role="table" aria-labelledby="mcp-title">
          <thead role="rowgroup">
            <tr role="row">
              <th scope="col" role="columnheader">Server</th>
              <th scope="col" role="columnheader">Transport</th>
              <th scope="col" role="columnheader">State</th>
              <th scope="col" role="columnheader">Tools</th>
              <th scope="col" role="columnheader">Protocol</th>
              <th scope="col" role="columnheader">Last error</th>
            </tr>
          </thead>
          <tbody role="rowgroup">
            {servers.map((s) => {
              const problem = mcpError(s);
              return (
                <tr key={s.name} role="row" data-server={s.name}>
                  <th scope="row" role="rowheader" class="mcp-name">{s.name}</th>
                  <td role="cell" class="mcp-transport">{s.transport}</td>
                  <td role="cell" class="mcp-state"><span class={`state mcp-${s.state}`}>{s.state}</span></td>
                  <td role="cell" class="mcp-tools">{s.tools}</td>
                  <td role="cell" class="mcp-protocol">{s.protocol_version || "—"}</td>
                  <td role="cell" class={problem ? "mcp-error" : "mcp-error none"}>
                    {problem ? (
                      <span class={problem.kind === "current" ? "error-text" : "muted"}>{problem.text}</span>
                    ) : "—"}
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      </div>
    </section>
  );
}

function preview(text: string, n: number): string {
  const one = text.replace(/\s+/g, " ").trim();
  return one.length > n ? one.slice(0, n - 1) + "…" : one;
}

function LoopRow({ loop, now, titles, globalId, runsVersion, onDelete, onOpenSession, highlighted, finished }: {
  loop: LoopView;
  now: number;
  runsVersion: number;  // the open run history re-reads when it changes
  titles: Map<string, string | undefined>;
  globalId: string | null;
  onDelete?: (l: LoopView) => void;
  onOpenSession: (id: string) => void;
  highlighted?: boolean;
  finished?: boolean;  // a completed `after` loop: its history, nothing to delete
}) {
  const s = loop.schedule;
  const description = useCronDescription(s.kind === "cron" ? s.expr : null, s.kind === "cron" ? s.tz : undefined);
  const [history, setHistory] = useState(false);
  const target = loop.session_id;
  const targetId = target === "self" ? globalId : target === "new" ? null : target;
  const failing = isFailing(loop);
  return (
    <li class={`loop state-${loop.state}${failing ? " failing" : ""}${highlighted ? " focused" : ""}`} data-loop={loop.loop_id}
        tabIndex={highlighted ? -1 : undefined}>
      <div class="loop-head">
        <span class="loop-prompt" title={loop.prompt}>{preview(loop.prompt, 120)}</span>
        <span class="loop-badges">
          {failing && (
            <span class="state failing" title="Its last run failed: the delivery, or the turn it started">failing</span>
          )}
          {/* Not a green "scheduled" next to "failing": the state stays, in grey. */}
          <span class={`state ${failing && loop.state === "scheduled" ? "" : loop.state}`}>{loop.state}</span>
        </span>
      </div>
      <dl class="loop-facts">
        <dt>Schedule</dt>
        <dd>{scheduleWords(s, description)}</dd>
        <dt>Target</dt>
        <dd>
          {targetId ? (
            <button type="button" class="link" onClick={() => onOpenSession(targetId)}>
              {targetWords(target, titles)}
            </button>
          ) : (
            targetWords(target, titles)
          )}
        </dd>
        {!finished && <dt>Next run</dt>}
        {!finished && <dd>
          {loop.next_at !== undefined ? (
            <>
              <time dateTime={new Date(loop.next_at).toISOString()}>{localTime(loop.next_at)}</time>{" "}
              <span class="countdown">({countdown(loop.next_at, now)})</span>
            </>
          ) : (
            "—"
          )}
        </dd>}
        <dt>Last run</dt>
        <dd>
          {loop.last_run_at !== undefined ? <LastRun loop={loop} /> : "never"}
        </dd>
      </dl>
      <div class="loop-actions">
        <button type="button" class="secondary" aria-expanded={history} onClick={() => setHistory(!history)}
                aria-label={`Run history of "${preview(loop.prompt, 40)}"`}>
          Run history
        </button>
        {onDelete && (
          <button type="button" class="secondary danger" onClick={() => onDelete(loop)}
                  aria-label={`Delete "${preview(loop.prompt, 40)}"`}>
            Delete
          </button>
        )}
      </div>
      {history && <RunHistory loopId={loop.loop_id} version={runsVersion} titles={titles} onOpenSession={onOpenSession} />}
    </li>
  );
}

const RUNS_PAGE = 20;

function RunHistory({ loopId, version, titles, onOpenSession }: {
  loopId: string;
  version: number;
  titles: Map<string, string | undefined>;
  onOpenSession: (id: string) => void;
}) {
  const [runs, setRuns] = useState<LoopRun[]>([]);
  const [next, setNext] = useState<number | undefined>(undefined);
  const [done, setDone] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const asked = useRef(0);
  // The newest page, merged into what is shown (older pages stay): on
  // opening, and whenever the loops or their notifications change.
  useEffect(() => {
    const mine = ++asked.current;
    api
      .runs(loopId, RUNS_PAGE)
      .then((page) => {
        if (mine !== asked.current) return;
        setRuns((old) => mergeNewestRuns(old, page.runs, page.next_before === undefined));
        setNext((n) => (n === undefined || page.next_before === undefined ? page.next_before : Math.min(n, page.next_before)));
        setDone(true);
        setError(null);
      })
      .catch((e: any) => mine === asked.current && setError(e?.message ?? String(e)));
  }, [loopId, version]);
  const older = async (before: number) => {
    try {
      const page = await api.runs(loopId, RUNS_PAGE, before);
      setRuns((old) => appendOlderRuns(old, page.runs));
      setNext(page.next_before);
    } catch (e: any) {
      setError(e?.message ?? String(e));
    }
  };
  if (error) return <p class="error-text">{error}</p>;
  if (!done) return <p class="muted">Loading runs…</p>;
  if (runs.length === 0) return <p class="muted">No runs yet.</p>;
  return (
    <div class="runs">
      {/* The roles are explicit: a narrow screen lays each run out as a block
          (style.css), which must not take its table semantics away. */}
      <table role="table">
        <caption class="visually-hidden">Runs, newest first</caption>
        <thead role="rowgroup">
          <tr role="row">
            <th scope="col" role="columnheader">Scheduled for</th>
            <th scope="col" role="columnheader">Delivered</th>
            <th scope="col" role="columnheader">Session</th>
            <th scope="col" role="columnheader">Delivery</th>
            <th scope="col" role="columnheader">Outcome</th>
            <th scope="col" role="columnheader">Duration</th>
            <th scope="col" role="columnheader">Tokens</th>
            <th scope="col" role="columnheader">Skipped</th>
          </tr>
        </thead>
        <tbody role="rowgroup">
          {runs.map((r) => {
            const session = r.outcome?.session_id ?? r.target_session_id;
            const href = session ? itemHref({ session_id: session, seq: r.outcome?.seq }) : null;
            const outcome = r.outcome ? outcomeWords(r.outcome) : null;
            return (
              <tr role="row" key={r.nominal_at} class={outcome?.tone === "bad" ? "failed" : undefined}>
                <td role="cell" data-label="Scheduled for" title={r.claimed_at ? `Claimed ${localTime(r.claimed_at)}` : undefined}>{localTime(r.nominal_at)}</td>
                <td role="cell" data-label="Delivered">{r.delivered_at ? localTime(r.delivered_at) : "—"}</td>
                <td role="cell" data-label="Session">
                  {session && href ? (
                    <a href={href} title="Open the session at this run">{titles.get(session) || session}</a>
                  ) : "—"}
                </td>
                <td role="cell" data-label="Delivery">
                  {r.result ?? "—"}
                  {r.error && <span class="error-text"> — {r.error}</span>}
                  {r.note && <span class="muted"> ({r.note})</span>}
                </td>
                <td role="cell" data-label="Outcome" class="run-outcome">
                  {outcome ? <span class={`outcome ${outcome.tone}`}>{outcome.text}</span> : "—"}
                  {r.outcome?.error && <span class="error-text"> — {outcomeError(r.outcome)}</span>}
                  {/* Who was told, beside what happened. */}
                  <Receipts receipts={r.notifications} />
                </td>
                <td role="cell" data-label="Duration">{durationMs(r.outcome?.duration_ms) || "—"}</td>
                <td role="cell" data-label="Tokens">{tokenWords(r.outcome?.tokens) || "—"}</td>
                <td role="cell" data-label="Skipped">{r.skipped ? `${r.skipped}${r.skipped_capped ? "+" : ""}` : "0"}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
      {next !== undefined && (
        <button type="button" class="secondary" onClick={() => void older(next)}>
          Older runs
        </button>
      )}
    </div>
  );
}

// The last run of a loop: when, and how it ended — the delivery and, on a
// host that records it, the turn it started (a failing loop says so in red).
function LastRun({ loop }: { loop: LoopView }) {
  const o = loop.last_outcome;
  const words = o ? outcomeWords(o) : null;
  const href = o?.session_id ? itemHref({ session_id: o.session_id, seq: o.seq }) : null;
  return (
    <>
      {localTime(loop.last_run_at!)}
      {", "}
      {words && o?.status !== "none" ? (
        <>
          <span class={loop.last_result === "failed" ? "error-text" : undefined}>{loop.last_result ?? ""}</span>
          {" · turn "}
          <span class={`outcome ${words.tone}`}>{words.text}</span>
        </>
      ) : (
        <span class={loop.last_result === "failed" ? "error-text" : undefined}>{words?.text ?? loop.last_result ?? ""}</span>
      )}
      {o?.error ? (
        <span class="error-text"> — {outcomeError(o)}</span>
      ) : (
        loop.last_error && <span class="error-text"> — {loop.last_error}</span>
      )}
      {href && (
        <>
          {" · "}
          <a href={href}>show in the session</a>
        </>
      )}
    </>
  );
}

// Completed `after` loops, newest first, a page at a time (issue 29): each
// with its run history. Nothing on a host that does not list them.
const FINISHED_PAGE = 20;

function Finished({ version, runsVersion, titles, globalId, highlight, onLoaded, onOpenSession }: {
  version: number;
  runsVersion: number;
  titles: Map<string, string | undefined>;
  globalId: string | null;
  highlight: string | null;
  onLoaded: () => void;
  onOpenSession: (id: string) => void;
}) {
  const [loops, setLoops] = useState<LoopView[] | null>(null);
  const [next, setNext] = useState<string | number | undefined>(undefined);
  const [unsupported, setUnsupported] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const asked = useRef(0);
  const now = useNow(60_000);
  // Re-read as many as are shown, so that older pages stay and nothing repeats.
  const shown = useRef(FINISHED_PAGE);
  shown.current = Math.max(FINISHED_PAGE, loops?.length ?? 0);
  useEffect(() => {
    const mine = ++asked.current;
    api
      .finishedLoops(Math.min(shown.current, 1000))
      .then((page) => {
        if (mine !== asked.current) return;
        setLoops(page.loops);
        setNext(page.next);
        setError(null);
        onLoaded();
      })
      .catch((e: any) => {
        if (mine !== asked.current) return;
        if (e?.code === "invalid_arguments") setUnsupported(true);  // an older host: no `finished`
        else setError(e?.message ?? String(e));
      });
  }, [version]);
  const older = async () => {
    if (next === undefined) return;
    try {
      const page = await api.finishedLoops(FINISHED_PAGE, next);
      setLoops((held) => {
        const ids = new Set((held ?? []).map((l) => l.loop_id));
        return (held ?? []).concat(page.loops.filter((l) => !ids.has(l.loop_id)));
      });
      setNext(page.next);
      onLoaded();
    } catch (e: any) {
      setError(e?.message ?? String(e));
    }
  };
  if (unsupported) return null;
  return (
    <section class="finished" aria-labelledby="finished-title">
      <h2 id="finished-title" class="section-title">Finished</h2>
      {error && <p class="error-text" role="alert">Could not read the finished loops: {error}</p>}
      {loops === null ? (
        !error && <p class="muted">Loading…</p>
      ) : loops.length === 0 ? (
        <p class="muted">No loop has finished yet: a loop that runs once (after a delay) is listed here when it has run.</p>
      ) : (
        <ul class="loops-list" aria-label="Finished loops">
          {loops.map((l) => (
            <LoopRow key={l.loop_id} loop={l} now={now} titles={titles} globalId={globalId} runsVersion={runsVersion} finished
                     highlighted={l.loop_id === highlight} onOpenSession={onOpenSession} />
          ))}
        </ul>
      )}
      {next !== undefined && loops && loops.length > 0 && (
        <button type="button" class="secondary more" onClick={() => void older()}>
          Older finished loops
        </button>
      )}
    </section>
  );
}

// The open session's session-local reminders (docs/REMINDERS.md) in its
// Manage view, each with Delete; nothing on a host without reminders.
function Reminders({ host, session, status, version, now }: {
  host: HostInfo;
  session: string;
  status?: SessionRow["status"];
  version: number;
  now: number;
}) {
  const [bump, setBump] = useState(0);
  const reminders = useReminders(host, session, version + bump);
  const [notice, setNotice] = useState<string | null>(null);
  if (reminders === null) return null;
  const remove = async (r: Reminder) => {
    if (!confirm(`Delete the reminder "${preview(r.prompt, 60)}"? It will not fire.`)) return;
    try {
      const done = await api.deleteReminder(session, r.id);
      setNotice(done.deleted ? `Deleted the reminder "${preview(r.prompt, 60)}".` : "That reminder had already fired or was deleted.");
    } catch (e: any) {
      setNotice(`Could not delete the reminder: ${e?.message ?? e}`);
    }
    setBump((n) => n + 1);
  };
  const overdue = reminders.filter((r) => isOverdue(r, now)).length;
  return (
    <section class="reminders" aria-labelledby="reminders-title">
      <h2 id="reminders-title" class="section-title">
        {reminders.length === 1 ? "1 reminder" : `${reminders.length} reminders`}{" "}
        <span class="tag" title="Delivered in this session only, while it is live in a host">session-local</span>
      </h2>
      <div class="status-line" role="status" aria-live="polite">{notice}</div>
      {overdue > 0 && <p><OverdueNotice sessionId={session} status={status} count={overdue} /></p>}
      {reminders.length === 0 ? (
        <p class="muted">No reminders in this session: ask its agent to remind you of something.</p>
      ) : (
        <ul class="loops-list" aria-label="Reminders">
          {reminders.map((r) => {
            const at = Date.parse(r.scheduled_at);
            const late = isOverdue(r, now);
            return (
              <li key={r.id} class={`loop reminder${late ? " state-overdue" : ""}`} data-reminder={r.id}>
                <div class="loop-head">
                  <span class="loop-prompt" title={r.prompt}>{preview(r.prompt, 120)}</span>
                  <span class={`state ${late ? "overdue" : "scheduled"}`}>{late ? "overdue" : "scheduled"}</span>
                </div>
                <dl class="loop-facts">
                  <dt>Due</dt>
                  <dd>
                    <time dateTime={r.scheduled_at}>{localTime(at)}</time>{" "}
                    <span class="countdown">({countdown(at, now)})</span>
                  </dd>
                  <dt>Id</dt>
                  <dd class="mono">{r.id}</dd>
                </dl>
                <div class="loop-actions">
                  <button type="button" class="secondary danger" onClick={() => void remove(r)}
                          aria-label={`Delete the reminder "${preview(r.prompt, 40)}"`}>
                    Delete
                  </button>
                </div>
              </li>
            );
          })}
        </ul>
      )}
    </section>
  );
}

type Kind = "every" | "after" | "cron";
type TargetKind = "current" | "self" | "new" | "existing";

// Read when the form first needs them, not when the page loads: the list
// costs the browser milliseconds the first render should not wait for.
let zones: string[] | null = null;
const ZONES = (): string[] => {
  if (zones) return zones;
  try {
    zones = (Intl as any).supportedValuesOf("timeZone") as string[];
  } catch {
    zones = [];
  }
  return zones;
};

function LoopForm({ host, session, sessions, onCreated }: {
  host: HostInfo;
  session: string | null;
  sessions: { session_id: string; title?: string }[];
  onCreated: (l: LoopView) => void;
}) {
  const [prompt, setPrompt] = useState("");
  const [kind, setKind] = useState<Kind>("every");
  const [amount, setAmount] = useState("5");
  const [unit, setUnit] = useState("minutes");
  const [expr, setExpr] = useState("0 9 * * 1-5");
  const [tz, setTz] = useState(clientTimeZone ?? "UTC");
  const [target, setTarget] = useState<TargetKind>(session ? "current" : "self");
  const [existing, setExisting] = useState("");
  const [search, setSearch] = useState("");
  const [preset, setPreset] = useState("");
  const [errors, setErrors] = useState<{ field?: string; message: string } | null>(null);
  const [busy, setBusy] = useState(false);
  const [cron, setCron] = useState<{ description?: string; next?: string[]; error?: { field: string; message: string } }>({});
  const asked = useRef(0);

  useEffect(() => setTarget(session ? "current" : "self"), [session]);

  // The cron rule's description and next five runs as you type.
  useEffect(() => {
    if (kind !== "cron") return;
    const mine = ++asked.current;
    const timer = setTimeout(async () => {
      try {
        const p = await api.cronPreview(expr.trim(), tz.trim() || undefined, 5);
        if (mine === asked.current) setCron({ description: p.description, next: p.next });
      } catch (e: any) {
        const field = e?.code === "invalid_time_zone" ? "schedule.tz" : "schedule.expr";
        if (mine === asked.current) setCron({ error: { field, message: e?.message ?? String(e) } });
      }
    }, 200);
    return () => clearTimeout(timer);
  }, [kind, expr, tz]);

  const matches = useMemo(() => {
    const q = search.trim().toLowerCase();
    const all = q ? sessions.filter((s) => s.session_id.toLowerCase().includes(q) || (s.title ?? "").toLowerCase().includes(q)) : sessions;
    return all.slice(0, 200);
  }, [search, sessions]);

  const submit = async (e: Event) => {
    e.preventDefault();
    setErrors(null);
    const args: Record<string, unknown> = { prompt };
    if (kind === "cron") {
      args.schedule = tz.trim() ? { kind, expr: expr.trim(), tz: tz.trim() } : { kind, expr: expr.trim() };
    } else {
      const seconds = toSeconds(amount, unit);
      if (!Number.isInteger(seconds) || seconds <= 0) {
        return setErrors({ field: "schedule.seconds", message: "Give a whole, positive number of seconds (or a unit that makes one)." });
      }
      args.schedule = kind === "every" ? { kind, every_seconds: seconds } : { kind, after_seconds: seconds };
    }
    if (target === "self" || target === "new") args.session_id = target;
    if (target === "existing") {
      if (!existing) return setErrors({ field: "session_id", message: "Choose the session the loop delivers to." });
      args.session_id = existing;
    }
    if (target === "new" && preset) args.preset = preset;
    setBusy(true);
    try {
      // "This session": loop_create as that session, which is its target.
      const created = await api.tool<LoopView>("loop_create", args, target === "current" ? session ?? undefined : undefined);
      setPrompt("");
      onCreated(created);
    } catch (err: any) {
      let field = fieldOfError(err, ["prompt", "schedule.expr", "schedule.tz", "schedule.every_seconds", "schedule.after_seconds", "session_id", "preset"],
                               { cron_never_fires: "schedule.expr", invalid_cron: "schedule.expr", invalid_time_zone: "schedule.tz" });
      if (field === "schedule.every_seconds" || field === "schedule.after_seconds") field = "schedule.seconds";
      setErrors({ field, message: err?.message ?? String(err) });
    } finally {
      setBusy(false);
    }
  };

  const fieldError = (f: string) => {
    const message = errors?.field === f ? errors.message : f === cron.error?.field && kind === "cron" ? cron.error.message : null;
    return message ? <span class="error-text" id={`err-${f.replace(".", "-")}`} role="alert">{message}</span> : null;
  };
  const invalid = (f: string) => errors?.field === f || (kind === "cron" && cron.error?.field === f);
  const describedBy = (f: string) => (invalid(f) ? `err-${f.replace(".", "-")}` : undefined);

  return (
    <form class="loop-form" onSubmit={submit} aria-labelledby="loop-form-title">
      <h2 id="loop-form-title">New loop</h2>
      <label>
        Prompt
        <textarea rows={2} value={prompt} aria-invalid={invalid("prompt")} aria-describedby={describedBy("prompt")}
                  onInput={(e) => setPrompt((e.target as HTMLTextAreaElement).value)} />
      </label>
      {fieldError("prompt")}
      <fieldset>
        <legend>Schedule</legend>
        <div class="choices" role="radiogroup" aria-label="Schedule kind">
          {([["every", "Every"], ["after", "Once, after"], ["cron", "Cron rule"]] as [Kind, string][]).map(([k, label]) => (
            <label key={k} class="choice">
              <input type="radio" name="kind" value={k} checked={kind === k} onChange={() => setKind(k)} /> {label}
            </label>
          ))}
        </div>
        {kind !== "cron" ? (
          <div class="row">
            <label>
              Amount
              <input type="number" min="1" step="any" value={amount} aria-invalid={invalid("schedule.seconds")}
                     aria-describedby={describedBy("schedule.seconds")}
                     onInput={(e) => setAmount((e.target as HTMLInputElement).value)} />
            </label>
            <label>
              Unit
              <select value={unit} onChange={(e) => setUnit((e.target as HTMLSelectElement).value)}>
                {UNITS.map((u) => <option key={u.name} value={u.name}>{u.name}</option>)}
              </select>
            </label>
          </div>
        ) : (
          <>
            <div class="row">
              <label>
                Cron expression
                <input type="text" class="mono" value={expr} aria-invalid={invalid("schedule.expr")}
                       aria-describedby={describedBy("schedule.expr")}
                       onInput={(e) => setExpr((e.target as HTMLInputElement).value)} />
              </label>
              <label>
                Time zone
                <input type="text" list="zones" value={tz} aria-invalid={invalid("schedule.tz")}
                       aria-describedby={describedBy("schedule.tz")}
                       onInput={(e) => setTz((e.target as HTMLInputElement).value)} />
                <datalist id="zones">{ZONES().map((z) => <option key={z} value={z} />)}</datalist>
              </label>
            </div>
            {fieldError("schedule.expr")}
            {fieldError("schedule.tz")}
            {!cron.error && cron.description && (
              <div class="cron-preview" aria-live="polite" data-testid="cron-preview">
                <p>{cron.description}</p>
                <p class="muted">Next runs:</p>
                <ol>{cron.next?.map((t) => <li key={t}><time dateTime={t}>{t.replace("T", " ")}</time></li>)}</ol>
              </div>
            )}
          </>
        )}
        {fieldError("schedule.seconds")}
      </fieldset>
      <fieldset>
        <legend>Deliver to</legend>
        <div class="choices">
          {session && (
            <label class="choice">
              <input type="radio" name="target" checked={target === "current"} onChange={() => setTarget("current")} /> This session
            </label>
          )}
          {host.global_session_id && (
            <label class="choice">
              <input type="radio" name="target" checked={target === "self"} onChange={() => setTarget("self")} /> Global interface
            </label>
          )}
          <label class="choice">
            <input type="radio" name="target" checked={target === "new"} onChange={() => setTarget("new")} /> Fresh session each run
          </label>
          <label class="choice">
            <input type="radio" name="target" checked={target === "existing"} onChange={() => setTarget("existing")} /> An existing session
          </label>
        </div>
        {target === "existing" && (
          <div class="row">
            <label>
              Find a session
              <input type="search" value={search} onInput={(e) => setSearch((e.target as HTMLInputElement).value)} />
            </label>
            <label>
              Session
              <select size={5} value={existing} aria-invalid={invalid("session_id")} aria-describedby={describedBy("session_id")}
                      onChange={(e) => setExisting((e.target as HTMLSelectElement).value)}>
                {matches.map((s) => <option key={s.session_id} value={s.session_id}>{s.title || s.session_id}</option>)}
              </select>
            </label>
          </div>
        )}
        {fieldError("session_id")}
        {target === "new" && (
          <label>
            Preset
            <select value={preset} aria-invalid={invalid("preset")} onChange={(e) => setPreset((e.target as HTMLSelectElement).value)}>
              <option value="">inherited (default)</option>
              {host.presets.map((p) => <option key={p} value={p}>{p}</option>)}
            </select>
          </label>
        )}
        {fieldError("preset")}
      </fieldset>
      {errors && !errors.field && <p class="error-text" role="alert">{errors.message}</p>}
      <div class="dialog-actions">
        <button type="submit" disabled={busy}>Create loop</button>
      </div>
    </form>
  );
}
