import MarkdownIt from "markdown-it";
import { useEffect, useLayoutEffect, useMemo, useRef, useState } from "preact/hooks";
import { api, streamUrl, type StoredEvent } from "./api";
import {
  addDelta,
  appendEvents,
  blocksOf,
  emptyConversation,
  endsPending,
  noPending,
  prependEvents,
  prettyJson,
} from "./lib/stream.js";

// Model text is Markdown; raw HTML in it is shown as text, never rendered.
const markdown = new MarkdownIt({ html: false, linkify: false, breaks: true });

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
  commandResults: CommandResult[];
  onFork: (seq: number, text: string) => void;
  onOpenSession: (id: string) => void;
  onRunning: (running: boolean) => void;
  onLastSeq: (seq: number) => void;
}

type Conn = "connecting" | "live" | "reconnecting";

// One session's conversation: the last WINDOW events, older pages on
// demand, and live events over the WebSocket (reconnecting with the last
// seq held, so nothing is lost or repeated). Opening a session only reads
// it: a cold session stays cold.
export function Conversation({
  sessionId,
  sessionTimeZone,
  commandResults,
  onFork,
  onOpenSession,
  onRunning,
  onLastSeq,
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
        setPending(noPending());
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
  const running = blocks.length > 0 && blocks[blocks.length - 1].kind === "running";
  // Before the browser paints: the composer's Stop must go in the same frame
  // as the block that ends the turn, never a frame later.
  useLayoutEffect(() => onRunning(running), [running]);
  useEffect(() => onLastSeq(conv.lastSeq), [conv.lastSeq]);

  useEffect(() => {
    const el = scroller.current;
    if (el && stick.current) el.scrollTop = el.scrollHeight;
  }, [blocks, commandResults]);

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
    stick.current = el.scrollHeight - el.scrollTop - el.clientHeight < 40;
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
    items.push(<BlockView key={b.key} block={b} onFork={onFork} sessionTimeZone={sessionTimeZone ?? null} />);
  }
  flushResults(Number.MAX_SAFE_INTEGER);
  if (pending.reasoning || pending.text) {
    // The answer being written, replaced by the committed one.
    const at = items.findIndex((i) => i.key === "running");
    const node = (
      <li key="pending" class="block assistant streaming" aria-live="polite" data-testid="streaming">
        <div class="who">Assistant (writing…)</div>
        {pending.reasoning && <div class="text plain muted">{pending.reasoning}</div>}
        {pending.text && <div class="text markdown" dangerouslySetInnerHTML={{ __html: markdown.render(pending.text) }} />}
      </li>
    );
    if (at >= 0) items.splice(at, 0, node);
    else items.push(node);
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

type Block = ReturnType<typeof blocksOf>[number];

function BlockView({ block, onFork, sessionTimeZone }: { block: Block; onFork: Props["onFork"]; sessionTimeZone: string | null }) {
  switch (block.kind) {
    case "user": {
      const origin = block.meta?.origin;
      return (
        <li class="block user" data-seq={block.seq}>
          <div class="who">
            You{origin && origin !== "api" ? <span class="tag">{origin}</span> : null}
            {block.mode === "followup" ? <span class="tag">follow-up</span> : null}
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
      return (
        <li class="block assistant" data-seq={block.seq}>
          <div class="who">Assistant</div>
          <div class="text markdown" dangerouslySetInnerHTML={{ __html: markdown.render(block.text) }} />
        </li>
      );
    case "reasoning":
      return (
        <li class="block reasoning" data-seq={block.seq}>
          <details>
            <summary>Reasoning</summary>
            <div class="text plain">{block.text}</div>
          </details>
        </li>
      );
    case "tool":
      return (
        <li class="block tool" data-seq={block.seq}>
          <details>
            <summary>
              Tool <code>{block.name}</code>
              {block.error ? <span class="tag bad">error</span> : block.result === undefined ? <span class="tag">…</span> : null}
            </summary>
            {block.args && <pre aria-label="Arguments">{prettyJson(block.args)}</pre>}
            {block.result !== undefined && <pre aria-label="Result">{prettyJson(block.result)}</pre>}
            {block.error && (
              <pre aria-label="Error" class="error-text">
                {block.error.code}: {block.error.message}
              </pre>
            )}
          </details>
        </li>
      );
    case "error":
      if (block.code === "cancelled") {
        return (
          <li class="block turn-note" data-seq={block.seq}>
            You stopped this turn.
          </li>
        );
      }
      return (
        <li class="block turn-error" data-seq={block.seq} role="alert">
          The turn ended with an error: {block.message || block.code} <code>{block.code}</code>
        </li>
      );
    case "receipt":
      return <ReceiptCard block={block} sessionTimeZone={sessionTimeZone} />;
    case "running":
      return (
        <li class="block running" aria-live="polite">
          <span class="dot running" aria-hidden="true" /> Working…
        </li>
      );
  }
}

// The receipt of a delivered reminder (docs/REMINDERS.md): its follow-up was
// queued for this session. It is history, not an active reminder, and stays
// whatever the turn that follows does.
function ReceiptCard({ block, sessionTimeZone }: { block: Extract<Block, { kind: "receipt" }>; sessionTimeZone: string | null }) {
  const titleId = `receipt-${block.key}`;
  return (
    <li class="block receipt" data-seq={block.seq} data-testid="reminder-receipt" aria-labelledby={titleId}>
      <div class="who" id={titleId}>
        Reminder{" "}
        <span class="tag" title="Delivered in this session only, while it is live in a host; no other notification">
          session-local
        </span>
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
