import { useEffect, useLayoutEffect, useMemo, useRef, useState } from "preact/hooks";
import { api, streamUrl, type LoopView, type StoredEvent } from "./api";
import { useCronDescription } from "./automation";
import { useLoopIndex } from "./loop_index";
import { scheduleWords } from "./lib/loops";
import {
  addDelta,
  appendEvents,
  awaitsApproval,
  blockOfSeq,
  blocksOf,
  emptyConversation,
  endsPending,
  noPending,
  prependEvents,
  prettyJson,
  type Block,
  type ToolBlock,
} from "./lib/stream";
import { copyText, onMarkdownClick, renderMarkdown, useHighlighter, wantsHighlighter } from "./markdown";
import { TimeAgo } from "./time_ago";
import { userMessagesOf, type UserMessage } from "./lib/fork";

const WINDOW = 200;  // events read when a session opens, and per older page

export interface CommandResult {
  key: string;
  text: string;
  output: string;
  error?: boolean;
  afterSeq: number;  // shown after the block of this seq
}

interface Props {
  sessionId: string;
  // The session's own zone (its header's `time_zone`), when the caller knows
  // it: reminder receipts then show their time in it as well as the viewer's.
  sessionTimeZone?: string | null;
  // The event to show (the address #/s/ID/SEQ): its page is loaded, it is
  // scrolled to and highlighted.
  focusSeq?: number | null;
  // Bumped when the loops changed: the loop cards re-read their schedules.
  loopsVersion?: number;
  commandResults: CommandResult[];
  onFork: (seq: number, text: string) => void;
  // Sends `text` again as a new message (Retry on a failed or stopped turn).
  onRetry: (text: string) => void;
  onOpenSession: (id: string) => void;
  onRunning: (running: boolean) => void;
  onLastSeq: (seq: number) => void;
  // The user messages held, whenever they change (before the browser paints,
  // so that the page's queued copy of a message goes in the frame it shows).
  onUserMessages?: (messages: UserMessage[]) => void;
}

type Conn = "connecting" | "live" | "reconnecting";

// One session's conversation: the last WINDOW events, older pages on
// demand, and live events over the WebSocket (reconnecting with the last
// seq held, so nothing is lost or repeated). Opening a session only reads
// it: a cold session stays cold.
export function Conversation({
  sessionId,
  sessionTimeZone,
  focusSeq = null,
  loopsVersion = 0,
  commandResults,
  onFork,
  onRetry,
  onOpenSession,
  onRunning,
  onLastSeq,
  onUserMessages,
}: Props) {
  const [conv, setConv] = useState(() => emptyConversation());
  const [loading, setLoading] = useState(true);
  const [error, setError] = useState<string | null>(null);
  const [conn, setConn] = useState<Conn>("connecting");
  const [pending, setPending] = useState(noPending);
  const convRef = useRef(conv);
  convRef.current = conv;
  const scroller = useRef<HTMLDivElement>(null);
  const stick = useRef(true);  // follow the tail while the view is at the bottom

  useEffect(() => {
    let closed = false;
    let socket: WebSocket | null = null;
    let retry: ReturnType<typeof setTimeout> | null = null;
    let attempt = 0;
    setConv(emptyConversation());
    setPending(noPending());
    setLoading(true);
    setError(null);
    setConn("connecting");

    const connect = () => {
      if (closed) return;
      const after = convRef.current.lastSeq;
      socket = new WebSocket(streamUrl(sessionId, after));
      socket.onmessage = (m) => {
        const msg = JSON.parse(String(m.data));
        if (msg.type === "event") {
          setConv((c) => appendEvents(c, [msg.event as StoredEvent]));
          if (endsPending(msg.event)) setPending(noPending());
        } else if (msg.type === "delta") {
          setPending((p) => addDelta(p, msg));
        } else if (msg.type === "ready") {
          attempt = 0;
          setConn("live");
        }
      };
      socket.onclose = () => {
        if (closed) return;
        // The answer being written stays: after the reconnect the host sends
        // what was streamed so far again, placed by its offset (addDelta),
        // or the committed answer ends it.
        setConn("reconnecting");
        attempt += 1;
        retry = setTimeout(connect, Math.min(5000, 250 * 2 ** Math.min(attempt, 5)));
      };
    };

    (async () => {
      try {
        const head = await api.events(sessionId, 0, 1);
        const first = Math.max(0, head.last_seq - WINDOW);
        const page = await api.events(sessionId, first, WINDOW);
        if (closed) return;
        setConv(appendEvents(emptyConversation(first), page.events));
        convRef.current = appendEvents(emptyConversation(first), page.events);
        setLoading(false);
        connect();
      } catch (e: any) {
        if (!closed) {
          setError(e?.message ?? String(e));
          setLoading(false);
        }
      }
    })();
    return () => {
      closed = true;
      if (retry) clearTimeout(retry);
      socket?.close();
    };
  }, [sessionId]);

  // A gap (cannot happen with the server's ordering, but never show one):
  // read the window again.
  useEffect(() => {
    if (!conv.gap) return;
    api.events(sessionId, conv.lastSeq, 1000).then((p) => setConv((c) => appendEvents({ ...c, gap: false }, p.events)));
  }, [conv.gap, sessionId]);

  const blocks = useMemo(() => blocksOf(conv.events), [conv.events]);
  const loops = useLoopIndex(blocks.some((b) => b.kind === "loop"), loopsVersion);
  const running = blocks.length > 0 && blocks[blocks.length - 1].kind === "running";
  // Before the browser paints: the composer's Stop must go in the same frame
  // as the block that ends the turn, never a frame later.
  useLayoutEffect(() => onRunning(running), [running]);
  useEffect(() => onLastSeq(conv.lastSeq), [conv.lastSeq]);
  useLayoutEffect(() => onUserMessages?.(userMessagesOf(conv.events)), [conv.events]);

  // Where following the tail last put the view: a scroll event that did not
  // move above it is ours (or the layout's), not the person leaving the tail.
  const followedTo = useRef(0);
  const follow = (el: HTMLDivElement) => {
    el.scrollTop = el.scrollHeight;
    followedTo.current = el.scrollTop;
  };
  useEffect(() => {
    const el = scroller.current;
    if (el && stick.current) follow(el);
  }, [blocks, commandResults, pending]);
  // The view shrinks when the composer grows (its Stop row on a phone), and
  // its content grows as code is highlighted: the tail stays in view.
  useEffect(() => {
    const el = scroller.current;
    if (!el || typeof ResizeObserver === "undefined") return;
    const observer = new ResizeObserver(() => {
      if (stick.current) follow(el);
    });
    observer.observe(el);
    for (const child of Array.from(el.children)) observer.observe(child);
    return () => observer.disconnect();
  }, [loading]);

  // #/s/ID/SEQ: read back to the event when it is older than the window,
  // then scroll to its block (once per address) and highlight it.
  const focusBlock = focusSeq === null || loading ? null : blockOfSeq(blocks, focusSeq);
  const scrolledTo = useRef<string | null>(null);
  const reading = useRef(false);
  useEffect(() => {
    if (focusSeq === null || loading || error) return;
    const c = convRef.current;
    if (focusSeq <= c.firstSeq && !reading.current) {
      reading.current = true;
      void readBackTo(Math.max(0, focusSeq - 10)).finally(() => (reading.current = false));
      return;
    }
    const key = `${sessionId}/${focusSeq}`;
    if (!focusBlock || scrolledTo.current === key) return;
    const el = scroller.current?.querySelector<HTMLElement>(`[data-key="${focusBlock.key}"]`);
    if (!el) return;
    scrolledTo.current = key;
    stick.current = false;
    el.scrollIntoView({ block: "center" });
    el.focus({ preventScroll: true });
  }, [focusSeq, loading, error, focusBlock?.key, conv.firstSeq]);
  useEffect(() => {
    scrolledTo.current = null;
  }, [sessionId, focusSeq]);

  // Prepends every event after `from` that the window does not hold yet.
  const readBackTo = async (from: number) => {
    let first = convRef.current.firstSeq;
    while (first > from) {
      const start = Math.max(from, first - 1000);
      const page = await api.events(sessionId, start, first - start);
      setConv((cur) => prependEvents(cur, page.events, start));
      convRef.current = prependEvents(convRef.current, page.events, start);
      first = start;
    }
  };

  const loadOlder = async () => {
    const c = convRef.current;
    if (c.firstSeq <= 0) return;
    const from = Math.max(0, c.firstSeq - WINDOW);
    const page = await api.events(sessionId, from, c.firstSeq - from);
    const el = scroller.current;
    const before = el ? el.scrollHeight - el.scrollTop : 0;
    setConv((cur) => prependEvents(cur, page.events, from));
    requestAnimationFrame(() => {
      if (el) el.scrollTop = el.scrollHeight - before;
    });
  };

  const onScroll = () => {
    const el = scroller.current;
    if (!el) return;
    const left = stick.current && el.scrollTop < followedTo.current - 2;
    if (!stick.current || left) stick.current = el.scrollHeight - el.scrollTop - el.clientHeight < 40;
    if (el.scrollTop < 40 && convRef.current.firstSeq > 0) void loadOlder();
  };

  const results = [...commandResults];
  const items: preact.JSX.Element[] = [];
  const flushResults = (upTo: number) => {
    while (results.length > 0 && results[0].afterSeq <= upTo) {
      const r = results.shift()!;
      items.push(<CommandCard key={r.key} result={r} onOpenSession={onOpenSession} />);
    }
  };
  for (const b of blocks) {
    flushResults(b.seq - 1);
    items.push(
      <BlockView key={b.key} block={b} sessionId={sessionId} onFork={onFork} onRetry={onRetry} sessionTimeZone={sessionTimeZone ?? null} loops={loops}
                 focused={focusBlock?.key === b.key} />,
    );
  }
  flushResults(Number.MAX_SAFE_INTEGER);
  if (running && (pending.reasoning || pending.text)) {
    // The answer being written, replaced by the committed one: its reasoning
    // and its text apart, each saying what it is.
    const at = items.findIndex((i) => i.key === "running");
    const nodes = [];
    if (pending.reasoning) {
      nodes.push(
        <li key="pending-reasoning" class="block reasoning streaming" data-testid="streaming-reasoning">
          <div class="who">{pending.text ? "Reasoning" : "Reasoning (thinking…)"}</div>
          <div class="text plain muted">{pending.reasoning}</div>
        </li>,
      );
    }
    if (pending.text) {
      nodes.push(
        <li key="pending" class="block assistant streaming" aria-live="polite" data-testid="streaming">
          <div class="who">Assistant (writing…)</div>
          <Markdown text={pending.text} />
        </li>,
      );
    }
    if (at >= 0) items.splice(at, 0, ...nodes);
    else items.push(...nodes);
  }

  return (
    <section class="conversation" aria-label="Conversation">
      <div class="conn" role="status" aria-live="polite">
        {conn === "reconnecting" ? "Reconnecting…" : conn === "connecting" && !loading ? "Connecting…" : ""}
      </div>
      <div class="scroller" ref={scroller} onScroll={onScroll} data-testid="conversation">
        {conv.firstSeq > 0 && (
          <button class="older" type="button" onClick={() => void loadOlder()}>
            Load earlier messages
          </button>
        )}
        {loading && <p class="muted">Loading…</p>}
        {error && <p class="error-text">Could not read this session: {error}</p>}
        {!loading && !error && items.length === 0 && <p class="muted">No messages yet.</p>}
        <ol class="blocks">{items}</ol>
      </div>
    </section>
  );
}

// Markdown of the model (markdown.ts): highlighted once the highlighter's
// chunk has arrived; code blocks' Copy buttons work by delegation.
function Markdown({ text }: { text: string }) {
  const version = useHighlighter(wantsHighlighter(text));
  const html = useMemo(() => renderMarkdown(text), [text, version]);
  return <div class="text markdown" onClick={(e) => onMarkdownClick(e)} dangerouslySetInnerHTML={{ __html: html }} />;
}

// Copies a message's text (its Markdown source), and says so for a moment.
function CopyButton({ text, label }: { text: string; label: string }) {
  const [state, setState] = useState<"idle" | "copied" | "failed">("idle");
  useEffect(() => {
    if (state === "idle") return;
    const t = setTimeout(() => setState("idle"), 1500);
    return () => clearTimeout(t);
  }, [state]);
  return (
    <button type="button" class="link copy" aria-label={label}
            onClick={async () => setState((await copyText(text)) ? "copied" : "failed")}>
      {state === "copied" ? "Copied" : state === "failed" ? "Copy failed" : "Copy"}
    </button>
  );
}

// A message's time and its copy button, at the right of its header.
function Meta({ at, copy }: { at: number; copy?: string }) {
  return (
    <span class="meta">
      <TimeAgo at={at} />
      {copy !== undefined && <CopyButton text={copy} label="Copy message" />}
    </span>
  );
}

function short(text: string): string {
  const line = text.replace(/\s+/g, " ").trim();
  return line.length > 60 ? line.slice(0, 59) + "…" : line;
}

function BlockView({ block, sessionId, onFork, onRetry, sessionTimeZone, loops, focused }: {
  block: Block;
  sessionId: string;
  onFork: Props["onFork"];
  onRetry: Props["onRetry"];
  sessionTimeZone: string | null;
  loops: Map<string, LoopView>;
  focused: boolean;
}) {
  // The event the address names: highlighted, and focusable to move focus to.
  const f = focused ? " focused" : "";
  const mark = { "data-key": block.key, tabIndex: focused ? -1 : undefined };
  switch (block.kind) {
    case "user": {
      const origin = block.meta?.origin;
      return (
        <li class={`block user${f}`} data-seq={block.seq} {...mark}>
          <div class="who">
            You{origin && origin !== "api" ? <span class="tag">{origin}</span> : null}
            {block.mode === "followup" ? <span class="tag">follow-up</span> : null}
            <Meta at={block.at} copy={block.text} />
          </div>
          <div class="text plain">{block.text}</div>
          <button class="link" type="button" onClick={() => onFork(block.seq, block.text)}
                  aria-label={`Fork the session before this message`}>
            Fork from here
          </button>
        </li>
      );
    }
    case "assistant":
      // A partial answer is what had been written when the turn was stopped.
      return (
        <li class={`block assistant${block.partial ? " partial" : ""}${f}`} data-seq={block.seq} {...mark}>
          <div class="who">
            Assistant
            {block.partial && <span class="tag stopped">Stopped — partial answer</span>}
            <Meta at={block.at} copy={block.text} />
          </div>
          <Markdown text={block.text} />
        </li>
      );
    case "reasoning":
      return (
        <li class={`block reasoning${f}`} data-seq={block.seq} {...mark}>
          <details>
            <summary>
              {block.partial ? "Reasoning (stopped — partial)" : "Reasoning"}
              <Meta at={block.at} />
            </summary>
            <div class="text plain">{block.text}</div>
          </details>
        </li>
      );
    case "tool": {
      if (awaitsApproval(block)) return <ApprovalCard block={block} sessionId={sessionId} focused={focused} />;
      // Arguments and result as formatted JSON, collapsed; failed in words.
      const failed = !!block.error;
      const state = failed ? "failed" : block.done ? "done" : "running…";
      const decided = block.approval?.decision ? DECISIONS[block.approval.decision] ?? block.approval.decision : null;
      return (
        <li class={`block tool${failed ? " failed" : ""}${f}`} data-seq={block.seq} {...mark}>
          <details>
            <summary>
              Tool <code>{block.name}</code>{" "}
              <span class={`tag${failed ? " bad" : ""}`}>{state}</span>
              {decided && <span class="tag">{decided}</span>}
              <Meta at={block.at} />
            </summary>
            {block.args !== undefined && (
              <div class="tool-part">
                <div class="tool-label">Arguments</div>
                <pre aria-label="Arguments">{prettyJson(block.args)}</pre>
              </div>
            )}
            {block.result !== undefined && (
              <div class="tool-part">
                <div class="tool-label">Result</div>
                <pre aria-label="Result">{prettyJson(block.result)}</pre>
              </div>
            )}
            {block.error && (
              <div class="tool-part">
                <div class="tool-label">Error</div>
                <pre aria-label="Error" class="error-text">
                  {block.error.code}: {block.error.message}
                </pre>
              </div>
            )}
          </details>
        </li>
      );
    }
    case "error": {
      const text = block.retryText;
      const retry = text !== null && (
        <button type="button" class="link retry" onClick={() => onRetry(text)}
                aria-label={`Retry: send “${short(text)}” again`}>
          Retry
        </button>
      );
      if (block.code === "cancelled") {
        return (
          <li class={`block turn-note${f}`} data-seq={block.seq} {...mark}>
            You stopped this turn. {retry}
            <Meta at={block.at} />
          </li>
        );
      }
      return (
        <li class={`block turn-error${f}`} data-seq={block.seq} {...mark} role="alert">
          The turn ended with an error: {block.message || block.code} <code>{block.code}</code> {retry}
          <Meta at={block.at} />
        </li>
      );
    }
    case "receipt":
      return <ReceiptCard block={block} sessionTimeZone={sessionTimeZone} focused={focused} />;
    case "loop":
      return <LoopCard block={block} loop={loops.get(block.loopId)} focused={focused} />;
    case "running":
      return (
        <li class="block running" aria-live="polite">
          <span class="dot running" aria-hidden="true" /> {block.waiting ? "Waiting for approval…" : "Working…"}
        </li>
      );
  }
}

// How a decided approval reads on its tool call.
const DECISIONS: Record<string, string> = {
  allow_once: "allowed once",
  allow_session: "allowed for this session",
  deny: "denied",
  timeout: "approval timed out",
};

// A tool call waiting for the person (docs/TOOLS.md): what it would do, and
// the three answers. The card stays until the decision is in the log (the
// stream brings it); a refused answer (answered elsewhere, timed out) says why.
function ApprovalCard({ block, sessionId, focused }: {
  block: ToolBlock;
  sessionId: string;
  focused: boolean;
}) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const approval = block.approval!;
  const answer = async (decision: "allow_once" | "allow_session" | "deny") => {
    setBusy(true);
    setError(null);
    try {
      await api.approve(sessionId, block.callId, decision);
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
      setBusy(false);
    }
  };
  const until = new Date(approval.requestedAt + approval.timeoutSeconds * 1000);
  const f = focused ? " focused" : "";
  return (
    <li class={`block approval${f}`} data-seq={block.seq} data-key={block.key} tabIndex={focused ? -1 : undefined}>
      <article aria-label={`Approval needed: ${block.name}`}>
        <div class="who">
          Approval needed <code>{block.name}</code>
          <Meta at={approval.requestedAt} />
        </div>
        <pre class="approval-summary" aria-label="What it would do">{approval.summary}</pre>
        {approval.detail && <pre class="approval-detail" aria-label="Changes">{approval.detail}</pre>}
        <div class="approval-actions">
          <button type="button" disabled={busy} onClick={() => answer("allow_once")}>Allow once</button>
          <button type="button" disabled={busy} onClick={() => answer("allow_session")}>Allow for this session</button>
          <button type="button" class="secondary danger" disabled={busy} onClick={() => answer("deny")}>Deny</button>
        </div>
        <p class="hint">
          Waits until {until.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })}; then the call is not run.
        </p>
        {error && <p class="error-text" role="alert">{error}</p>}
      </article>
    </li>
  );
}

// The receipt of a delivered reminder (docs/REMINDERS.md): its follow-up was
// queued for this session. It is history, not an active reminder, and stays
// whatever the turn that follows does. The follow-up message itself is part
// of this card (one card per reminder), not a message of the person.
function ReceiptCard({ block, sessionTimeZone, focused }: {
  block: Extract<Block, { kind: "receipt" }>;
  sessionTimeZone: string | null;
  focused: boolean;
}) {
  const titleId = `receipt-${block.key}`;
  return (
    <li class={`block receipt${focused ? " focused" : ""}`} data-seq={block.seq} data-key={block.key}
        data-follow-seq={block.followUpSeq ?? undefined} tabIndex={focused ? -1 : undefined} data-testid="reminder-receipt">
      <article aria-labelledby={titleId}>
      <div class="who" id={titleId}>
        Reminder{" "}
        <span class="tag" title="Delivered in this session only, while it is live in a host; no other notification">
          session-local
        </span>
        <Meta at={block.at} />
      </div>
      {block.prompt === null ? (
        <div class="text plain muted">Reminder {block.scheduleId} (its details are in older history)</div>
      ) : (
        <>
          <div class="text plain receipt-prompt">{block.prompt}</div>
          {block.occurrenceAt && (
            <div class="receipt-times">
              <span class="muted">Due </span>
              {occurrenceZones(sessionTimeZone).map((z, i) => (
                <span key={z.zone}>
                  {i > 0 && <span class="muted"> · </span>}
                  <time dateTime={block.occurrenceAt!}>{formatInZone(block.occurrenceAt!, z.zone)}</time>{" "}
                  <span class="muted">
                    {z.zone}
                    {z.note ? ` (${z.note})` : ""}
                  </span>
                </span>
              ))}
            </div>
          )}
          <div class="receipt-id muted">
            Delivered to this session as a follow-up · <code>{block.scheduleId}</code>
          </div>
        </>
      )}
      </article>
    </li>
  );
}

// A loop's delivery (docs/LOOPS.md): the loop's prompt as text — never its
// `<loop>` frame, which is what the model reads — its schedule in words and
// a link to the loop in the automation panel.
function LoopCard({ block, loop, focused }: { block: Extract<Block, { kind: "loop" }>; loop?: LoopView; focused: boolean }) {
  const titleId = `loop-${block.key}`;
  const s = loop?.schedule;
  const cron = useCronDescription(s?.kind === "cron" ? s.expr : null, s?.kind === "cron" ? s.tz : undefined);
  const when = block.nominalAt ?? block.at;
  return (
    <li class={`block loop-run${focused ? " focused" : ""}`} data-seq={block.seq} data-key={block.key}
        tabIndex={focused ? -1 : undefined} data-testid="loop-card">
      <article aria-labelledby={titleId}>
        <div class="who" id={titleId}>
          Loop run{" "}
          <span class="tag">{s ? scheduleWords(s, cron) : <span class="mono">{block.loopId}</span>}</span>
          <Meta at={block.at} />
        </div>
        <div class="text plain loop-card-prompt">{block.prompt}</div>
        <div class="loop-card-meta muted">
          <time dateTime={new Date(when).toISOString()} title={new Date(when).toLocaleString()}>
            {new Date(when).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" })}
          </time>
          {" · "}
          <a href={`#/automation?loop=${encodeURIComponent(block.loopId)}`}>
            {loop ? "Open the loop in Automation" : "Find the loop in Automation"}
          </a>
        </div>
      </article>
    </li>
  );
}


const viewerTimeZone: string = (() => {
  try {
    return Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  } catch {
    return "UTC";
  }
})();

// The zones a receipt's time is shown in: the session's and the viewer's
// when the session's is known, else the viewer's and UTC; one when they agree.
function occurrenceZones(sessionTimeZone: string | null): { zone: string; note?: string }[] {
  const first = sessionTimeZone ? { zone: sessionTimeZone, note: "session" } : { zone: viewerTimeZone, note: "yours" };
  const second = sessionTimeZone ? { zone: viewerTimeZone, note: "yours" } : { zone: "UTC" };
  if (second.zone === first.zone) return [{ zone: first.zone, note: sessionTimeZone ? "session and yours" : "yours" }];
  return [first, second];
}

function formatInZone(instant: string, zone: string): string {
  const date = new Date(instant);
  if (Number.isNaN(date.getTime())) return instant;
  try {
    return new Intl.DateTimeFormat(undefined, { timeZone: zone, dateStyle: "medium", timeStyle: "medium" }).format(date);
  } catch {
    return instant;  // a zone this browser does not know
  }
}

// A slash command's answer: shown here only, never part of the session.
function CommandCard({ result, onOpenSession }: { result: CommandResult; onOpenSession: (id: string) => void }) {
  const parts = result.output.split(/(ses_[0-9a-z]+)/g);
  return (
    <li class={`block command${result.error ? " failed" : ""}`} data-testid="command-result">
      <div class="who">
        Command <code>{result.text}</code> <span class="tag">local, not sent to the model</span>
      </div>
      <pre class="command-output">
        {parts.map((p, i) =>
          /^ses_[0-9a-z]+$/.test(p) ? (
            <button key={i} type="button" class="link mono" onClick={() => onOpenSession(p)}>
              {p}
            </button>
          ) : (
            p
          ),
        )}
      </pre>
    </li>
  );
}
