import { memo } from "preact/compat";
import { useCallback, useEffect, useLayoutEffect, useMemo, useRef, useState } from "preact/hooks";
import { api, exportUrl, isUnreachable, SESSIONS_PAGE, takeEarly, type HostInfo, type SessionHeader as StoredHeader, type SessionRow, type StoredEvent } from "./api";
import { followChanges, throttle } from "./changes";
import { fieldOfError } from "./lib/fields";
import { rereads } from "./lib/mcp";
import { pageTitle } from "./lib/activity";
import { useAnnouncer, useNotifyChoice } from "./notify";
import { Activity } from "./activity";
import { Automation } from "./automation";
import { Settings } from "./settings";
import { unavailableReason } from "./lib/settings";
import { Composer } from "./composer";
import { Conversation, type CommandResult } from "./conversation";
import { planFork, type UserMessage } from "./lib/fork";
import { Queued, type QueuedMessage } from "./queued";
import { displayTitle } from "./lib/deliveries";
import { RenameForm, SessionMenu, type MenuActions } from "./manage";
import { SessionSearch } from "./search";
import { rowLabel, rowsToRead, statusWords, titledByPerson } from "./lib/sidebar";
import { Landing } from "./landing";

// The address names what is shown: #/s/SESSION_ID, #/s/SESSION_ID/SEQ (the
// session scrolled to that event, highlighted), #/automation (every loop),
// #/automation?session=SESSION_ID (the loops and reminders of one session),
// #/automation?loop=LOOP_ID (every loop, that one shown), #/activity,
// #/settings, or nothing.
function sessionFromHash(): string | null {
  const m = /^#\/s\/([^/?#]+)/.exec(location.hash);
  return m ? decodeURIComponent(m[1]) : null;
}
function seqFromHash(): number | null {
  const m = /^#\/s\/[^/?#]+\/(\d+)$/.exec(location.hash);
  return m ? Number(m[1]) : null;
}
function automationFromHash(): { session: string | null; loop: string | null } | null {
  const m = /^#\/automation(?:\?(.*))?$/.exec(location.hash);
  if (!m) return null;
  const q = new URLSearchParams(m[1] ?? "");
  return { session: q.get("session") || null, loop: q.get("loop") || null };
}
const activityFromHash = () => /^#\/activity$/.test(location.hash);
const settingsFromHash = () => /^#\/settings$/.test(location.hash);

function relative(iso?: string): string {
  if (!iso) return "";
  const s = Math.round((Date.now() - Date.parse(iso)) / 1000);
  if (s < 45) return "just now";
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return new Date(iso).toLocaleDateString();
}

// The conversation renders again when its own props or state change, not
// with every change of the page around it (the Sessions list follows the
// host live, the unread counts, the header): rendering its blocks' Markdown
// and times again is the most expensive thing the page does.
const ConversationView = memo(Conversation);
const NO_RESULTS: CommandResult[] = [];

// The sidebar re-reads session_status at most this often while the change
// feed reports changes, and lists this many more sessions per "Show more".
const REFRESH_MS = 300;
const PAGE = SESSIONS_PAGE;

export function App() {
  const [host, setHost] = useState<HostInfo | null>(null);
  const [sessions, setSessions] = useState<SessionRow[]>([]);
  const [listError, setListError] = useState<string | null>(null);
  const [current, setCurrent] = useState<string | null>(sessionFromHash);
  const [focusSeq, setFocusSeq] = useState<number | null>(seqFromHash);
  const [activityOpen, setActivityOpen] = useState(activityFromHash);
  const [settingsOpen, setSettingsOpen] = useState(settingsFromHash);
  const [results, setResults] = useState<Record<string, CommandResult[]>>({});
  const [running, setRunning] = useState(false);
  const [lastSeq, setLastSeq] = useState(0);
  const [seedDraft, setSeedDraft] = useState<{ id: string; text: string } | null>(null);
  const [creating, setCreating] = useState(false);
  const [navOpen, setNavOpen] = useState(false);
  const [limit, setLimit] = useState(PAGE);
  const [automation, setAutomation] = useState(automationFromHash);
  const [headers, setHeaders] = useState<Record<string, StoredHeader>>({});  // session -> its stored header
  // Messages sent from this page whose event has not arrived yet (defect 4).
  const [queued, setQueued] = useState<QueuedMessage[]>([]);
  const arrived = useRef(new Set<string>());  // message ids the conversation holds
  const lastOwn = useRef<{ sessionId: string; message: UserMessage | null }>({ sessionId: "", message: null });
  // False while the host cannot be reached: from a request that could not
  // reach it or the change feed's closing, until the feed is back (`ready`).
  const [online, setOnline] = useState(true);
  // Bumped when the change feed reports loops, sessions, MCP servers, the
  // activity or the outbound notifications changed.
  const [loopsVersion, setLoopsVersion] = useState(0);
  const [sessionsVersion, setSessionsVersion] = useState(0);
  const [mcpVersion, setMcpVersion] = useState(0);
  const [activityVersion, setActivityVersion] = useState(0);
  const [notificationsVersion, setNotificationsVersion] = useState(0);
  // Unread activity (issue 29): the total and per session.
  const [unread, setUnread] = useState<{ total: number; sessions: Record<string, number> }>({ total: 0, sessions: {} });
  const [notify, setNotify] = useNotifyChoice();
  const [visible, setVisible] = useState(() => document.visibilityState === "visible");
  const [, setTick] = useState(0);  // re-renders the relative times
  const results_counter = useRef(0);
  const limitRef = useRef(limit);
  limitRef.current = limit;
  // Rename and archive (issue 31): which list the sidebar shows, the title
  // being edited (and where), and the last change the host refused.
  const [showArchived, setShowArchived] = useState(false);
  const [renaming, setRenaming] = useState<{ id: string; where: "sidebar" | "header" } | null>(null);
  const [manageError, setManageError] = useState<string | null>(null);
  // Rows read one by one because the loaded page does not hold them: the
  // Global interface, a session opened by link, the parents of forks; null
  // for one that could not be read.
  const [exactRows, setExactRows] = useState<Record<string, SessionRow | null>>({});
  const [listLoaded, setListLoaded] = useState(false);  // the list was read once: exactRows knows what it lacks
  const menuButtons = useRef(new Map<string, HTMLButtonElement | null>());

  const refresh = useCallback(async () => {
    try {
      // The first read was sent before the page's code was all evaluated (api.ts).
      const early = limitRef.current === PAGE ? takeEarly("sessions") : undefined;
      setSessions(await (early ?? api.sessions(limitRef.current)));
      setListLoaded(true);
      setListError(null);
    } catch (e: any) {
      setListError(e?.message ?? String(e));
    }
  }, []);

  useEffect(() => {
    (takeEarly("host") ?? api.host()).then(setHost).catch(() => {});
    // Live: the change feed says when to re-read; its `ready` (also after a
    // reconnect) re-reads everything.
    const later = throttle(() => {
      void refresh();
      setSessionsVersion((v) => v + 1);
    }, REFRESH_MS);
    const loopsLater = throttle(() => setLoopsVersion((v) => v + 1), REFRESH_MS);
    const mcpLater = throttle(() => setMcpVersion((v) => v + 1), REFRESH_MS);
    const activityLater = throttle(() => setActivityVersion((v) => v + 1), REFRESH_MS);
    const notificationsLater = throttle(() => setNotificationsVersion((v) => v + 1), REFRESH_MS);
    const stop = followChanges((m) => {
      const again = rereads(m);
      if (m.type === "ready") {  // everything, at once
        setOnline(true);
        if (again.sessions) {
          void refresh();
          setSessionsVersion((v) => v + 1);
        }
        if (again.loops) setLoopsVersion((v) => v + 1);
        if (again.mcp) setMcpVersion((v) => v + 1);
        if (again.activity) setActivityVersion((v) => v + 1);
        if (again.notifications) setNotificationsVersion((v) => v + 1);
        return;
      }
      if (again.sessions) later();
      if (again.loops) loopsLater();
      if (again.mcp) mcpLater();
      if (again.activity) activityLater();
      if (again.notifications) notificationsLater();
    }, () => setOnline(false));
    const ticker = setInterval(() => setTick((t) => t + 1), 30_000);
    const onHash = () => {
      setCurrent(sessionFromHash());
      setFocusSeq(seqFromHash());
      setAutomation(automationFromHash());
      setActivityOpen(activityFromHash());
      setSettingsOpen(settingsFromHash());
    };
    const onVisibility = () => setVisible(document.visibilityState === "visible");
    addEventListener("hashchange", onHash);
    document.addEventListener("visibilitychange", onVisibility);
    onHash();  // the address may have changed before this effect ran
    return () => {
      stop();
      clearInterval(ticker);
      removeEventListener("hashchange", onHash);
      document.removeEventListener("visibilitychange", onVisibility);
    };
  }, []);
  useEffect(() => {
    let live = true;
    api.unread().then((u) => live && setUnread(u)).catch(() => {});  // a host without the inbox: nothing unread
    return () => {
      live = false;
    };
  }, [activityVersion]);
  const byId = useMemo(() => new Map(sessions.map((s) => [s.session_id, s])), [sessions]);
  const rowOf = (id: string | null | undefined): SessionRow | undefined =>
    id ? byId.get(id) ?? exactRows[id] ?? undefined : undefined;
  const globalId = host?.global_session_id ?? null;
  const sessionOpen = current && !activityOpen && !automation ? current : null;
  // Read again with the list (the change feed's re-reads), so their titles
  // and statuses stay as current as the list's.
  const openRow = sessionOpen && !byId.has(sessionOpen) ? exactRows[sessionOpen] ?? undefined : undefined;
  const toRead = rowsToRead(new Set(byId.keys()), {
    global: globalId, current: sessionOpen, rows: openRow ? [...sessions, openRow] : sessions,
  });
  const toReadKey = toRead.join(" ");
  useEffect(() => {
    if (!listLoaded || toRead.length === 0) return;
    let live = true;
    void Promise.all(toRead.map((id) => api.sessionRow(id).catch(() => null))).then((rows) => {
      if (!live) return;
      setExactRows((all) => {
        const next = { ...all };
        rows.forEach((r, i) => (next[toRead[i]] = r ?? all[toRead[i]] ?? null));
        return next;
      });
    });
    return () => {
      live = false;
    };
  }, [listLoaded, toReadKey, sessionsVersion]);
  const shownTitle = sessionOpen ? rowOf(sessionOpen)?.title || sessionOpen : undefined;
  useEffect(() => {
    document.title = pageTitle(unread.total, shownTitle);
  }, [unread.total, shownTitle]);
  // Opening a session (and looking at it) marks its activity read.
  const unreadHere = current ? unread.sessions[current] ?? 0 : 0;
  useEffect(() => {
    if (!current || unreadHere === 0 || !visible) return;
    setUnread((u) => {
      const { [current]: n = 0, ...rest } = u.sessions;
      return { total: Math.max(0, u.total - n), sessions: rest };
    });
    api.markRead({ session_id: current }).catch(() => setActivityVersion((v) => v + 1));
  }, [current, unreadHere, visible]);
  useAnnouncer(notify, activityVersion);
  // Before the first paint: the list's first read is usually back already (api.ts).
  useLayoutEffect(() => void refresh(), [limit]);
  useEffect(() => {
    if (!current || headers[current]) return;
    api.header(current).then((h) => setHeaders((all) => ({ ...all, [h.id]: h }))).catch(() => {});
  }, [current]);

  const open = (id: string) => {
    location.hash = `#/s/${encodeURIComponent(id)}`;
    setNavOpen(false);
  };

  const titles = new Map(sessions.map((s) => [s.session_id, s.title]));
  const globalRow = rowOf(globalId);
  const others = sessions.filter((s) => s.session_id !== globalId && !!s.archived === showArchived);

  // PATCH /api/sessions/{id}; the answer updates the row and the header at
  // once (the change feed's re-read follows, here and on other pages).
  const change = async (id: string, what: { title?: string | null; archived?: boolean }) => {
    const r = await api.updateSession(id, what);
    setManageError(null);
    setHeaders((all) => ({ ...all, [id]: r.session }));
    const changed = (s: SessionRow): SessionRow => ({
      ...s,
      title: r.title === null ? undefined : displayTitle(r.title),
      // An older host does not say: a rename is the person's, its undoing is not.
      title_source: r.title_source !== undefined ? r.title_source : "title" in what && what.title !== null ? "user" : null,
      archived: r.session.archived,
    });
    setSessions((all) => all.map((s) => (s.session_id !== id ? s : changed(s))));
    setExactRows((all) => {
      const known = all[id];
      return known ? { ...all, [id]: changed(known) } : all;
    });
  };
  const refocusMenu = (key: string) => requestAnimationFrame(() => menuButtons.current.get(key)?.focus());
  const actionsFor = (id: string, where: "sidebar" | "header"): MenuActions => {
    const failed = (what: string) => (e: any) => setManageError(`${what}: ${e?.message ?? String(e)}`);
    return {
      onRename: () => setRenaming({ id, where }),
      onAutomaticTitle: titledByPerson(rowOf(id))
        ? () => void change(id, { title: null }).catch(failed("Could not return to the automatic title"))
        : undefined,
      onArchive: id === globalId ? undefined
        : (archived) => void change(id, { archived }).catch(failed(archived ? "Could not archive" : "Could not unarchive")),
    };
  };
  const renameProps = (id: string, name: string, where: "sidebar" | "header") => ({
    name,
    initial: name,
    onSave: (title: string) => change(id, { title }),
    onDone: () => {
      setRenaming(null);
      refocusMenu(`${where}:${id}`);
    },
  });
  const itemProps = (row: SessionRow) => {
    const name = row.title || row.session_id;
    const parent = row.parent_id ? rowOf(row.parent_id) : undefined;
    return {
      row,
      parentName: row.parent_id ? parent?.title || row.parent_id : null,
      current,
      unread: unread.sessions[row.session_id] ?? 0,
      onOpen: open,
      actions: actionsFor(row.session_id, "sidebar"),
      rename: renaming?.id === row.session_id && renaming.where === "sidebar" ? renameProps(row.session_id, name, "sidebar") : null,
      buttonRef: (el: HTMLButtonElement | null) => void menuButtons.current.set(`sidebar:${row.session_id}`, el),
    };
  };

  // Sends a queued message (again, on a retry: with the same idempotency
  // key, so the host delivers it once however many tries reach it).
  const deliver = async (q: QueuedMessage) => {
    const update = (change: Partial<QueuedMessage>) =>
      setQueued((all) => all.map((x) => (x.key === q.key ? { ...x, ...change } : x)));
    update({ failure: null });
    try {
      const { message_id } = await api.send(q.sessionId, q.text, q.mode, q.idempotencyKey);
      // Its event may have come over the stream before the answer.
      if (arrived.current.has(message_id)) setQueued((all) => all.filter((x) => x.key !== q.key));
      else update({ messageId: message_id });
    } catch (e: any) {
      if (isUnreachable(e)) {
        update({ failure: "Not sent: lost the connection to dsh." });
      } else {
        update({ failure: `Not sent: ${e?.message ?? String(e)}${e?.code ? ` (${e.code})` : ""}` });
      }
    }
  };
  const send = (sessionId: string, text: string, mode: "steer" | "followup") => {
    const q: QueuedMessage = {
      key: `q${++results_counter.current}`,
      sessionId,
      text,
      mode,
      lands: !running ? "now" : mode === "steer" ? "next step" : "next turn",
      idempotencyKey: crypto.randomUUID?.() ?? `${Date.now()}-${Math.random()}`,
      messageId: null,
      failure: null,
    };
    setQueued((all) => [...all, q]);
    void deliver(q);
  };
  // The conversation's messages: each one that arrived takes its queued
  // copy's place, in the same frame.
  const onUserMessages = (sessionId: string, messages: UserMessage[]) => {
    for (const m of messages) if (m.messageId) arrived.current.add(m.messageId);
    setQueued((all) => {
      const left = all.filter((q) => !q.messageId || !arrived.current.has(q.messageId));
      return left.length === all.length ? all : left;
    });
    let own: UserMessage | null = null;
    for (const m of messages) if (m.own) own = m;
    lastOwn.current = { sessionId, message: own };
  };

  // Forks `sessionId` before the message at `seq`, at the boundary of the
  // turn it belongs to (never inside a turn: the child would run that turn
  // again), and opens the child with the message as its draft.
  const forkBefore = async (sessionId: string, seq: number) => {
    try {
      let events: StoredEvent[] = [];
      let from = seq;  // events (from, seq] are held
      for (;;) {
        const start = Math.max(0, from - 500);
        if (from > start) events = [...(await api.events(sessionId, start, from - start)).events.filter((e) => e.seq <= from), ...events];
        from = start;
        const plan = planFork(events, seq);
        if (plan.kind === "older" && from > 0) continue;
        if (plan.kind !== "fork") throw new Error(`message ${seq} of this session was not found`);
        const child = await api.fork(sessionId, plan.seedLength);
        setSeedDraft({ id: child.session.id, text: plan.draft });
        await refresh();
        open(child.session.id);
        return;
      }
    } catch (e: any) {
      addResult(sessionId, { text: "fork", output: e?.message ?? String(e), error: true });
    }
  };
  // Stable callbacks for the conversation (it is memoized), calling the
  // newest closures.
  const latest = useRef({ current, open, send, forkBefore, onUserMessages });
  latest.current = { current, open, send, forkBefore, onUserMessages };
  const conversationCalls = useMemo(() => ({
    onOpenSession: (id: string) => latest.current.open(id),
    onRetry: (text: string) => {
      const { current: id, send: sendTo } = latest.current;
      if (id) sendTo(id, text, "followup");
    },
    onFork: (seq: number) => {
      const { current: id, forkBefore: fork } = latest.current;
      if (id) void fork(id, seq);
    },
    onUserMessages: (messages: UserMessage[]) => {
      const { current: id, onUserMessages: took } = latest.current;
      if (id) took(id, messages);
    },
  }), []);
  const here = current ? queued.filter((q) => q.sessionId === current) : [];
  const unsent = here.some((q) => q.failure);

  const addResult = (sessionId: string, r: Omit<CommandResult, "key" | "afterSeq">) =>
    setResults((all) => ({
      ...all,
      [sessionId]: [...(all[sessionId] ?? []), { ...r, key: `c${++results_counter.current}`, afterSeq: lastSeq }],
    }));

  return (
    <div class={`layout${navOpen ? " nav-open" : ""}`}>
      <header class="topbar">
        <button type="button" class="secondary nav-toggle" aria-expanded={navOpen} aria-controls="sessions-nav"
                onClick={() => setNavOpen(!navOpen)}>
          Sessions
        </button>
        <span class="brand">dsh</span>
        <button type="button" class="new" onClick={() => setCreating(true)}>
          New session
        </button>
      </header>
      <nav id="sessions-nav" class="sidebar" aria-label="Sessions">
        <button type="button" class="new" onClick={() => setCreating(true)}>
          New session
        </button>
        {/* The search box stays in view with New session while the list scrolls. */}
        <div class="search-slot" data-slot="search">
          <SessionSearch onOpen={() => setNavOpen(false)} />
        </div>
        <div class="nav-links">
          <a class={`nav-link${activityOpen ? " current" : ""}`} href="#/activity" aria-current={activityOpen ? "page" : undefined}
             onClick={() => setNavOpen(false)}>
            Activity
            {unread.total > 0 && <> <span class="badge unread">{unread.total} unread</span></>}
          </a>
          <a class={`nav-link${automation ? " current" : ""}`} href="#/automation" aria-current={automation ? "page" : undefined}
             onClick={() => setNavOpen(false)}>
            Automation
          </a>
          <a class={`nav-link${settingsOpen ? " current" : ""}`} href="#/settings" aria-current={settingsOpen ? "page" : undefined}
             onClick={() => setNavOpen(false)}>
            Settings
          </a>
        </div>
        <div class="list-filter" role="group" aria-label="Which sessions to list">
          <button type="button" class="secondary" aria-pressed={!showArchived} onClick={() => setShowArchived(false)}>Active</button>
          <button type="button" class="secondary" aria-pressed={showArchived} onClick={() => setShowArchived(true)}>Archived</button>
        </div>
        {listError && <p class="error-text" role="alert">{listError}</p>}
        {manageError && <p class="error-text" role="alert">{manageError}</p>}
        {globalId && !showArchived && (
          <ul class="session-list pinned-list" aria-label="Pinned">
            {/* Its place is kept while its row is read, so the list below does not jump. */}
            <SessionItem {...itemProps(globalRow ?? { session_id: globalId, status: "" as SessionRow["status"] })} pinned />
          </ul>
        )}
        <div class="sidebar-scroll">
          <ul class="session-list" aria-label={showArchived ? "Archived sessions" : "Sessions"}>
            {others.map((s) => <SessionItem key={s.session_id} {...itemProps(s)} />)}
          </ul>
          {showArchived && others.length === 0 && (
            <p class="muted empty-list">No archived sessions{sessions.length >= limit ? " among those loaded" : ""}.</p>
          )}
          {sessions.length >= limit && (
            <button type="button" class="secondary more" onClick={() => setLimit(limit + PAGE)}>
              Show more sessions
            </button>
          )}
        </div>
      </nav>
      <main class="main">
        {!online && (
          <p class="reconnect-banner" role="status">
            Reconnecting to dsh… <span class="muted">the host stopped or the network went away; this page resumes when it is back.</span>
          </p>
        )}
        {settingsOpen ? (
          <Settings onChanged={() => void api.host().then(setHost).catch(() => {})} notificationsVersion={notificationsVersion} />
        ) : activityOpen ? (
          <Activity version={activityVersion + notificationsVersion} loopsVersion={loopsVersion} unread={unread.total} titles={titles} notify={notify} onNotify={setNotify} />
        ) : automation ? (
          host && (
            <Automation host={host} session={automation.session} loop={automation.loop} loopsVersion={loopsVersion}
                        sessionsVersion={sessionsVersion} mcpVersion={mcpVersion} notificationsVersion={notificationsVersion} onOpenSession={open}
                        sessionStatus={rowOf(automation.session)?.status} />
          )
        ) : current ? (
          <>
            <SessionHeader row={rowOf(current)} reading={!rowOf(current) && exactRows[current] !== null}
                           id={current} isGlobal={current === globalId}
                           header={headers[current]} parentName={(id) => rowOf(id)?.title || id}
                           actions={actionsFor(current, "header")}
                           rename={renaming?.id === current && renaming.where === "header"
                             ? renameProps(current, rowOf(current)?.title || current, "header") : null}
                           buttonRef={(el) => void menuButtons.current.set(`header:${current}`, el)} />
            <ConversationView
              sessionId={current}
              sessionTimeZone={headers[current]?.time_zone ?? null}
              focusSeq={focusSeq}
              loopsVersion={loopsVersion}
              commandResults={results[current] ?? NO_RESULTS}
              onRunning={setRunning}
              onLastSeq={setLastSeq}
              {...conversationCalls}
            />
            <Queued items={here} onRetry={(key) => {
                      const q = queued.find((x) => x.key === key);
                      if (q) void deliver(q);
                    }}
                    onDiscard={(key) => setQueued((all) => all.filter((x) => x.key !== key))} />
            <Composer
              host={host}
              sessionId={current}
              sessionStatus={rowOf(current)?.status}
              sessions={sessions}
              running={running}
              seedDraft={seedDraft && seedDraft.id === current ? seedDraft.text : null}
              onSend={(text, mode) => send(current, text, mode)}
              onEditLast={() => {
                const last = lastOwn.current;
                if (last.sessionId === current && last.message) void forkBefore(current, last.message.seq);
              }}
              notice={online ? null : unsent ? "Lost the connection to dsh — your message was not sent; reconnecting…"
                                             : "Lost the connection to dsh; reconnecting…"}
              onCommand={async (text) => {
                try {
                  const r = await api.command(text, current);
                  addResult(current, { text, output: r.text });
                } catch (e: any) {
                  addResult(current, { text, output: `${e?.code ?? "error"}: ${e?.message ?? e}`, error: true });
                }
              }}
              onStop={() => void api.cancel(current)}
              loopsVersion={loopsVersion + sessionsVersion}
            />
          </>
        ) : (
          <Landing host={host} globalId={globalId} globalTitle={globalRow?.title ?? null} />
        )}
      </main>
      {creating && host && (
        <NewSessionDialog
          host={host}
          onClose={() => setCreating(false)}
          onCreated={async (id) => {
            setCreating(false);
            await refresh();
            open(id);
          }}
        />
      )}
    </div>
  );
}

type RenameProps = { name: string; initial: string; onSave: (title: string) => Promise<void>; onDone: () => void };

// A row of the Sessions list. Its button's accessible name is a sentence
// ("Weekly report, idle, updated 2 minutes ago"); a title cut short shows
// whole on hover. A fork links to the session it came from.
function SessionItem({ row, parentName, current, pinned, unread, onOpen, actions, rename, buttonRef }: {
  row: SessionRow; parentName: string | null; current: string | null; pinned?: boolean; unread: number;
  onOpen: (id: string) => void; actions: MenuActions; rename: RenameProps | null;
  buttonRef: (el: HTMLButtonElement | null) => void;
}) {
  const name = row.title || row.session_id;
  return (
    <li class={`session${row.session_id === current ? " current" : ""}${pinned ? " pinned" : ""}`} data-session={row.session_id}>
      {rename ? <RenameForm {...rename} /> : <button type="button" class="open" onClick={() => onOpen(row.session_id)}
              aria-current={row.session_id === current ? "page" : undefined}
              aria-label={rowLabel(row, Date.now(), { pinned, unread, parentTitle: parentName })}>
        {/* The Global interface's id says nothing: untitled, its label is its name. */}
        <span class="name" title={pinned && !row.title ? "Global interface" : name}>
          {pinned && <span class="tag">Global interface</span>} {pinned && !row.title ? "" : name}
        </span>
        <span class="meta">
          {row.status && <span class={`dot ${row.status}`} aria-hidden="true" />}
          <span class="status">{statusWords(row)}</span>
          <span class="when">{relative(row.updated_at)}</span>
          {unread > 0 && <span class="badge unread">{unread} unread</span>}
        </span>
      </button>}
      <SessionMenu name={name} archived={!!row.archived} actions={actions} buttonRef={buttonRef} />
      {row.parent_id && !rename && (
        <a class="fork-of" href={`#/s/${encodeURIComponent(row.parent_id)}`} title={`Forked from ${parentName}`}>
          fork of {parentName}
        </a>
      )}
    </li>
  );
}

// The open session: its title, id, model route, zone and status, and its
// export as a download.
function SessionHeader({ row, reading, id, isGlobal, header, parentName, actions, rename, buttonRef }: {
  row?: SessionRow; reading: boolean; id: string; isGlobal: boolean; header?: StoredHeader; parentName: (id: string) => string;
  actions: MenuActions; rename: RenameProps | null; buttonRef: (el: HTMLButtonElement | null) => void;
}) {
  const route = header?.route;
  const name = row?.title || id;
  const parent = row?.parent_id ?? header?.parent_id;
  const archived = row?.archived ?? header?.archived ?? false;
  return (
    <header class="session-header">
      <span class="title">
        {/* Hidden while its row is read: the title shows, not first the id it replaces. */}
        {rename ? <RenameForm {...rename} /> : <h1 title={name} class={reading ? "pending" : undefined}>{name}</h1>}
        <SessionMenu name={name} archived={archived} actions={actions} buttonRef={buttonRef} />
      </span>
      <span class="meta">
        {isGlobal && <span class="tag">Global interface</span>}
        {archived && <span class="tag">Archived</span>}
        <span class="mono muted">{id}</span>
        {parent && <a class="fork-of" href={`#/s/${encodeURIComponent(parent)}`}>fork of {parentName(parent)}</a>}
        {route && (
          <span class="route" title="The model route: provider/model" data-testid="session-route">
            {route.provider}/{route.model}
            {route.reasoning_effort ? ` · ${route.reasoning_effort}` : ""}
          </span>
        )}
        {header?.time_zone && <span class="muted" title="The session's time zone" data-testid="session-zone">{header.time_zone}</span>}
        {row && (
          <>
            <span class={`dot ${row.status}`} aria-hidden="true" /> <span class="status">{statusWords(row)}</span>
          </>
        )}
      </span>
      <span class="exports">
        <a class="button secondary" href={exportUrl(id, "markdown")} download>Export as Markdown</a>
        <a class="button secondary" href={exportUrl(id, "json")} download>Export as JSON</a>
      </span>
    </header>
  );
}

function NewSessionDialog({ host, onClose, onCreated }: {
  host: HostInfo; onClose: () => void; onCreated: (id: string) => void;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [prompt, setPrompt] = useState("");
  const [preset, setPreset] = useState(host.default_preset);
  const [cwd, setCwd] = useState("");
  const [provider, setProvider] = useState(host.default_model.provider);
  const [model, setModel] = useState(host.default_model.model);
  const [effort, setEffort] = useState("");
  const choice = host.providers?.find((p) => p.name === provider);
  const efforts = choice?.models?.find((m) => m.name === model)?.reasoning_efforts ?? [];
  const unusable = (host.providers ?? []).filter((p) => !p.available);
  const [errors, setErrors] = useState<{ field?: string; message: string } | null>(null);
  const [busy, setBusy] = useState(false);
  // Esc with a message written asks first (keyboard: Esc again keeps it).
  const [askDiscard, setAskDiscard] = useState(false);
  const promptBox = useRef<HTMLTextAreaElement>(null);
  const keepButton = useRef<HTMLButtonElement>(null);

  useEffect(() => {
    dialog.current?.showModal();
  }, []);
  // Before the question is painted (a layout effect): a key pressed the
  // moment it appears goes to the safe answer, not to the message behind it.
  useLayoutEffect(() => {
    if (askDiscard) keepButton.current?.focus();
  }, [askDiscard]);
  const keepWriting = () => {
    setAskDiscard(false);
    promptBox.current?.focus();
  };
  // Esc is handled on keydown, before the browser turns it into the dialog's
  // cancel (which it may refuse to let a page prevent twice in a row).
  const onDialogKey = (e: KeyboardEvent) => {
    if (e.key !== "Escape" || e.defaultPrevented) return;
    e.preventDefault();
    if (askDiscard) keepWriting();
    else if (prompt.trim()) setAskDiscard(true);
    else dialog.current?.close();
  };

  const submit = async (e: Event) => {
    e.preventDefault();
    if (!prompt.trim()) return setErrors({ field: "prompt", message: "Write what the new session should start with." });
    setBusy(true);
    setErrors(null);
    try {
      const args: Record<string, unknown> = { prompt };
      if (preset) args.preset = preset;
      if (cwd.trim()) args.cwd = cwd.trim();
      const isDefault = provider === host.default_model.provider && model === host.default_model.model && !effort;
      if (!isDefault) {
        args.model = effort ? { provider, model: model.trim(), reasoningEffort: effort } : { provider, model: model.trim() };
      }
      const r = await api.tool<{ session_id: string }>("session_create", args);
      onCreated(r.session_id);
    } catch (err: any) {
      setErrors({ field: fieldOfError(err, ["prompt", "preset", "cwd", "model"]), message: err?.message ?? String(err) });
    } finally {
      setBusy(false);
    }
  };

  const fieldError = (f: string) =>
    errors && errors.field === f ? <span class="error-text" id={`err-${f}`} role="alert">{errors.message}</span> : null;

  return (
    <dialog ref={dialog} class="new-session" aria-labelledby="new-session-title" onClose={onClose} onKeyDown={onDialogKey}
            onCancel={(e) => {
              if (prompt.trim()) {
                e.preventDefault();
                setAskDiscard(true);
              }
            }}>
      <form method="dialog" onSubmit={submit}>
        <h2 id="new-session-title">New session</h2>
        <label>
          First message
          <textarea ref={promptBox} rows={4} value={prompt} aria-invalid={errors?.field === "prompt"}
                    aria-describedby={errors?.field === "prompt" ? "err-prompt new-session-keys" : "new-session-keys"}
                    onInput={(e) => setPrompt((e.target as HTMLTextAreaElement).value)}
                    onKeyDown={(e) => {
                      if (e.key !== "Enter" || e.shiftKey || e.isComposing) return;
                      e.preventDefault();
                      (e.currentTarget as HTMLTextAreaElement).form?.requestSubmit();
                    }} />
        </label>
        <span id="new-session-keys" class="hint muted">Enter starts the session · Shift+Enter for a new line</span>
        {fieldError("prompt")}
        <label>
          Preset
          <select value={preset} onChange={(e) => setPreset((e.target as HTMLSelectElement).value)}>
            {host.presets.map((p) => (
              <option key={p} value={p}>{p}</option>
            ))}
          </select>
        </label>
        {fieldError("preset")}
        <fieldset class="route">
          <legend>Model</legend>
          <label>
            Provider
            <select value={provider} aria-describedby={unusable.length ? "provider-hint" : undefined} onChange={(e) => {
              const name = (e.target as HTMLSelectElement).value;
              setProvider(name);
              const listed = host.providers?.find((p) => p.name === name)?.models;
              setModel(name === host.default_model.provider ? host.default_model.model : listed?.[0]?.name ?? "");
              setEffort("");
            }}>
              {(host.providers ?? [{ name: host.default_model.provider, models: null, available: true }]).map((p) => (
                <option key={p.name} value={p.name} disabled={!p.available}>
                  {p.name}{p.available ? "" : " (no API key)"}
                </option>
              ))}
            </select>
          </label>
          {unusable.length > 0 && (
            <p class="muted provider-hint" id="provider-hint">
              {unusable.map((p) => <span key={p.name}>{p.name} — {unavailableReason(p)}.</span>)}
              <a href="#/settings" onClick={() => dialog.current?.close()}>Open Settings</a>
            </p>
          )}
          <label>
            Model name
            {choice?.models ? (
              <select value={model} onChange={(e) => { setModel((e.target as HTMLSelectElement).value); setEffort(""); }}>
                {choice.models.map((m) => <option key={m.name} value={m.name}>{m.name}</option>)}
              </select>
            ) : (
              <input type="text" value={model} aria-invalid={errors?.field === "model"}
                     onInput={(e) => setModel((e.target as HTMLInputElement).value)} />
            )}
          </label>
          {efforts.length > 0 && (
            <label>
              Reasoning effort
              <select value={effort} onChange={(e) => setEffort((e.target as HTMLSelectElement).value)}>
                <option value="">the model's default</option>
                {efforts.map((x) => <option key={x} value={x}>{x}</option>)}
              </select>
            </label>
          )}
          {fieldError("model")}
          <p class="muted">Default: {host.default_model.description}</p>
        </fieldset>
        <label>
          Working directory (optional, absolute)
          <input type="text" value={cwd} aria-invalid={errors?.field === "cwd"} list="workspace-dirs"
                 aria-describedby="cwd-hint"
                 onInput={(e) => setCwd((e.target as HTMLInputElement).value)} />
        </label>
        <datalist id="workspace-dirs">
          {(host.workspaces ?? []).map((w) => <option key={w.id} value={w.path}>{w.id}</option>)}
        </datalist>
        <span id="cwd-hint" class="hint muted">
          The agent's read, write, edit, list, grep and bash tools work here; without one it can only fetch.
        </span>
        {fieldError("cwd")}
        {errors && !errors.field && <p class="error-text" role="alert">{errors.message}</p>}
        {askDiscard && (
          <div class="discard" role="alertdialog" aria-labelledby="discard-question" aria-modal="false">
            <p id="discard-question">Discard the message you wrote?</p>
            <button ref={keepButton} type="button" class="secondary" onClick={keepWriting}>Keep writing</button>
            <button type="button" class="secondary danger" onClick={() => dialog.current?.close()}>Discard</button>
          </div>
        )}
        <div class="dialog-actions">
          <button type="button" class="secondary" onClick={() => dialog.current?.close()}>
            Cancel
          </button>
          <button type="submit" disabled={busy}>
            Start
          </button>
        </div>
      </form>
    </dialog>
  );
}
