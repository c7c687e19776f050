// The conversation of one session as the browser holds it: a window of the
// session's durable events (older pages prepended on scroll-up, live events
// appended from the WebSocket) and the blocks derived from them. Pure
// functions, tested with node --test (web/test/).

import { parseLoopFrame, parseReminderFrame } from "./deliveries.js";

export interface StoredEvent {
  seq: number;
  type: string;
  at: number;
  // The event's payload as the host wrote it (docs/STORAGE.md); read field by field.
  data: any;
}

export interface Conversation {
  /** The seq before the first event held (0 = the log's start). */
  firstSeq: number;
  /** The seq of the last event held. */
  lastSeq: number;
  events: StoredEvent[];
  /** An event arrived past a missing seq: reload the window. */
  gap: boolean;
}

export interface Receipt {
  kind: "receipt";
  key: string;
  seq: number;
  /** When it was delivered (Unix ms): its first event held. */
  at: number;
  scheduleId: string;
  /** null: its create lies in an older page not loaded yet. */
  prompt: string | null;
  /** The create's scheduled_at (UTC RFC 3339), null likewise. */
  occurrenceAt: string | null;
  deliveryMode: "session-local";
  /** Its dispatch event is held (else only its follow-up is). */
  dispatched: boolean;
  /** The seq of the follow-up message it queued, once held. */
  followUpSeq: number | null;
}

export interface LoopRun {
  kind: "loop";
  key: string;
  seq: number;
  at: number;
  loopId: string;
  /** The loop's prompt, unescaped (the frame's text if it is no frame). */
  prompt: string;
  /** The occurrence it delivered (Unix ms). */
  nominalAt: number | null;
}

export type Block =
  | { kind: "user"; key: string; seq: number; at: number; text: string; meta: any; mode?: string }
  | AnswerBlock
  | ToolBlock
  | TurnError
  | Receipt
  | LoopRun
  | { kind: "running"; key: string; seq: number; waiting: boolean };

/**
 * An answer or its reasoning. `partial`: the turn was stopped while it was
 * being written, and this is what had been streamed (docs/AGENTS.md).
 */
export interface AnswerBlock {
  kind: "assistant" | "reasoning";
  key: string;
  seq: number;
  at: number;
  text: string;
  partial: boolean;
}

/** A tool call and, once it arrived, its result or error. */
export interface ToolBlock {
  kind: "tool";
  key: string;
  seq: number;
  at: number;
  callId: string;
  name: string;
  /** The call's arguments as stored (a JSON object; a JSON string from older hosts); undefined when the call is not held. */
  args: unknown;
  result?: unknown;
  error?: { code?: string; message?: string };
  /** A tool/result is held (with a result or an error). */
  done: boolean;
  /** The preset asked a person before the call runs (docs/TOOLS.md). */
  approval?: Approval;
}

/** A tool call's approval request and, once given, its decision. */
export interface Approval {
  summary: string;
  /** More to decide by: a diff for write and edit. */
  detail: string | null;
  requestedAt: number;
  timeoutSeconds: number;
  /** "allow_once" | "allow_session" | "deny" | "timeout"; absent while it waits. */
  decision?: string;
}

/** True while the call waits for a person's decision. */
export function awaitsApproval(b: ToolBlock): boolean {
  return !!b.approval && b.approval.decision === undefined && !b.done;
}

/**
 * A turn that ended in an error or was stopped (`code` "cancelled").
 * `retryText`: the text of the person's message that started the turn, to
 * send again; null when the turn was not started by one held in the window
 * (a loop or a reminder, or an older page).
 */
export interface TurnError {
  kind: "error";
  key: string;
  seq: number;
  at: number;
  code: string;
  message: string;
  retryText: string | null;
}

/** `firstSeq`: the seq before the window's first event. */
export function emptyConversation(firstSeq = 0): Conversation {
  return { firstSeq, lastSeq: firstSeq, events: [], gap: false };
}

/**
 * Appends events after lastSeq, in order. An event already held (seq <=
 * lastSeq, e.g. repeated after a reconnect) is ignored; one past a missing
 * seq marks a gap and is not taken.
 */
export function appendEvents(c: Conversation, events: StoredEvent[]): Conversation {
  let lastSeq = c.lastSeq;
  const taken: StoredEvent[] = [];
  let gap = c.gap;
  for (const e of events) {
    if (e.seq <= lastSeq) continue;
    if (e.seq !== lastSeq + 1) {
      gap = true;
      break;
    }
    taken.push(e);
    lastSeq = e.seq;
  }
  if (taken.length === 0 && gap === c.gap) return c;
  return { ...c, lastSeq, events: c.events.concat(taken), gap };
}

/**
 * Prepends an older page: the events with seq in (newFirst, firstSeq];
 * `newFirst` is the seq before the page's first event.
 */
export function prependEvents(c: Conversation, older: StoredEvent[], newFirst: number): Conversation {
  const page = older.filter((e) => e.seq > newFirst && e.seq <= c.firstSeq);
  return { ...c, firstSeq: Math.min(newFirst, c.firstSeq), events: page.concat(c.events) };
}

/**
 * The blocks a person sees, in log order: user and assistant messages,
 * reasoning, tool calls with their results, turn errors, and a "running"
 * marker while the last turn has not ended, and a receipt for each
 * delivered reminder. Bookkeeping events are not blocks.
 *
 * A reminder's receipt is its `schedule/change` dispatch event
 * (docs/STORAGE.md) with the prompt and target of the nearest preceding
 * create of the same id: ids restart at schedule-1 in a fork, so a fork's
 * history may hold its parent's schedule-1 and its own, and the nearest
 * create is the one the dispatch delivered. The events are a contiguous
 * window of the log, so when that create is not in it, it lies in an older
 * page: the receipt then has no prompt and no time until that page loads
 * and the blocks are derived again. Creates and deletes are not blocks.
 *
 * The follow-up message a reminder queued (`meta.origin: "schedule"`) is not
 * a block of its own: it joins its dispatch's receipt (the nearest one of
 * the same id still without a follow-up), so each reminder is one card. A
 * follow-up whose dispatch is not in the window (older, or recorded after
 * it by a host that crashed in between) makes the card itself, from its
 * frame, and a dispatch that follows joins it.
 *
 * A loop's delivery (`meta.origin: "loop"`) is a `loop` block with the
 * prompt taken out of its `<loop>` frame.
 *
 * A turn that ended in an error carries the text of the message of the
 * person that started it (the first `message/user` after its `turn/start`),
 * so the page can offer to send it again.
 */
export function blocksOf(events: StoredEvent[]): Block[] {
  const blocks: Block[] = [];
  const calls = new Map<string, number>(); // call_id -> index in blocks
  const creates = new Map<string, any>(); // schedule id -> its latest create's record
  let open = false;
  let turnText: string | null = null;  // the person's message that started the open turn
  let turnHasMessage = false;
  for (const e of events) {
    const key = "e" + e.seq;
    const d = e.data ?? {};
    switch (e.type) {
      case "turn/start":
        open = true;
        turnText = null;
        turnHasMessage = false;
        break;
      case "turn/end":
        open = false;
        if (d.status === "error") {
          blocks.push({
            kind: "error",
            key,
            seq: e.seq,
            at: e.at,
            code: d.error?.code ?? "error",
            message: d.error?.message ?? "",
            retryText: turnText,
          });
        }
        break;
      case "message/user": {
        const text = String(d.text ?? "");
        const meta = d.meta ?? null;
        const first = open && !turnHasMessage;
        turnHasMessage = turnHasMessage || open;
        if (meta?.origin === "loop") {
          const frame = parseLoopFrame(text);
          blocks.push({
            kind: "loop",
            key,
            seq: e.seq,
            at: e.at,
            loopId: String(meta.loop_id ?? frame?.loopId ?? ""),
            prompt: frame ? frame.prompt : text,
            nominalAt: typeof meta.nominal_at === "number" ? meta.nominal_at : null,
          });
          break;
        }
        if (meta?.origin === "schedule" && typeof meta.schedule_id === "string") {
          const frame = parseReminderFrame(text);
          const id = meta.schedule_id;
          const at = findLast(blocks, (b) => b.kind === "receipt" && b.scheduleId === id && b.followUpSeq === null);
          const occurrence = typeof meta.occurrence_at === "string" ? meta.occurrence_at : frame?.occurrenceAt ?? null;
          if (at >= 0) {
            const r = blocks[at] as Receipt;
            blocks[at] = {
              ...r,
              followUpSeq: e.seq,
              prompt: r.prompt ?? frame?.prompt ?? null,
              occurrenceAt: r.occurrenceAt ?? occurrence,
            };
          } else {
            blocks.push({
              kind: "receipt",
              at: e.at,
              key,
              seq: e.seq,
              scheduleId: id,
              prompt: frame?.prompt ?? null,
              occurrenceAt: occurrence,
              deliveryMode: "session-local",
              dispatched: false,
              followUpSeq: e.seq,
            });
          }
          break;
        }
        if (first) turnText = text;
        blocks.push({ kind: "user", key, seq: e.seq, at: e.at, text, meta, mode: d.mode });
        break;
      }
      case "message/assistant":
      case "message/reasoning":
        blocks.push({
          kind: e.type === "message/assistant" ? "assistant" : "reasoning",
          key,
          seq: e.seq,
          at: e.at,
          text: String(d.text ?? ""),
          partial: d.partial === true,
        });
        break;
      case "tool/call":
        calls.set(String(d.call_id), blocks.length);
        blocks.push({
          kind: "tool", key, seq: e.seq, at: e.at, callId: String(d.call_id ?? ""), name: String(d.name ?? ""),
          args: d.arguments, done: false,
        });
        break;
      case "tool/result": {
        const at = calls.get(String(d.call_id));
        const block = at === undefined ? null : blocks[at];
        if (block && block.kind === "tool") {
          blocks[at ?? 0] = { ...block, result: d.result, error: d.error, done: true };
        } else {
          blocks.push({
            kind: "tool",
            key,
            seq: e.seq,
            at: e.at,
            callId: String(d.call_id ?? ""),
            name: String(d.name ?? ""),
            args: undefined,
            result: d.result,
            error: d.error,
            done: true,
          });
        }
        break;
      }
      case "tool/approval_requested":
      case "tool/approval": {
        const at = calls.get(String(d.call_id));
        const block = at === undefined ? null : blocks[at];
        if (!block || block.kind !== "tool") break;  // its call is before the window
        const approval: Approval = e.type === "tool/approval"
          ? { ...(block.approval ?? { summary: "", detail: null, requestedAt: e.at, timeoutSeconds: 0 }), decision: String(d.decision ?? "") }
          : {
              summary: String(d.summary ?? ""),
              detail: typeof d.detail === "string" ? d.detail : null,
              requestedAt: e.at,
              timeoutSeconds: typeof d.timeout_seconds === "number" ? d.timeout_seconds : 0,
            };
        blocks[at ?? 0] = { ...block, approval };
        break;
      }
      case "schedule/change": {
        const id = d.op === "create" ? d.schedule?.id : d.id;
        if (d.version !== 1 || typeof id !== "string") break;  // a format this page cannot read
        if (d.op === "create") {
          creates.set(id, d.schedule);
        } else if (d.op === "dispatch") {
          const made = creates.get(id);
          const early = findLast(blocks, (b) => b.kind === "receipt" && b.scheduleId === id && !b.dispatched);
          if (early >= 0) {  // its follow-up came first
            const r = blocks[early] as Receipt;
            blocks[early] = { ...r, dispatched: true, prompt: r.prompt ?? made?.prompt ?? null };
            break;
          }
          blocks.push({
            kind: "receipt",
            at: e.at,
            key,
            seq: e.seq,
            scheduleId: id,
            prompt: typeof made?.prompt === "string" ? made.prompt : null,
            occurrenceAt: typeof made?.scheduled_at === "string" ? made.scheduled_at : null,
            deliveryMode: "session-local",
            dispatched: true,
            followUpSeq: null,
          });
        }
        break;  // a delete is not a block
      }
      default:
        break;  // titles, loops: not conversation
    }
  }
  if (open) {
    const waiting = blocks.some((b) => b.kind === "tool" && awaitsApproval(b));
    blocks.push({ kind: "running", key: "running", seq: events.length ? events[events.length - 1].seq : 0, waiting });
  }
  return blocks;
}

/** The index of the last element matching `pred`, or -1. */
function findLast<T>(xs: T[], pred: (x: T) => boolean): number {
  for (let i = xs.length - 1; i >= 0; i--) if (pred(xs[i])) return i;
  return -1;
}

/**
 * The block that shows the event `seq`: the one with that seq, or the
 * reminder card its follow-up joined; else the first block after it (an
 * event that is no block of its own, such as a turn's start).
 */
export function blockOfSeq(blocks: Block[], seq: number): Block | null {
  for (const b of blocks) {
    if (b.kind === "running") continue;
    if (b.seq === seq || (b.kind === "receipt" && b.followUpSeq === seq)) return b;
  }
  return blocks.find((b) => b.kind !== "running" && (b.seq > seq || (b.kind === "receipt" && (b.followUpSeq ?? 0) > seq))) ?? null;
}

/**
 * The answer being written: the deltas (docs/API.md, the stream's "delta"
 * messages) of one model call (`afterSeq`) joined by kind. Not part of the
 * record: the next committed answer event replaces it.
 */
export interface Pending {
  /** The model call the text belongs to (the deltas' `after_seq`); null before the first delta. */
  afterSeq: number | null;
  text: string;
  reasoning: string;
}

export interface Delta {
  after_seq?: number;
  kind: string;
  /** How many characters (UTF-16 code units) of this kind the call had streamed before this piece. */
  offset?: number;
  text: string;
}

export function noPending(): Pending {
  return { afterSeq: null, text: "", reasoning: "" };
}

/**
 * The pending answer with one more delta. A delta of another model call
 * (another `after_seq`) starts afresh. A delta with an `offset` is placed by
 * it, so a piece the page already holds (the server repeats what was
 * streamed when a page reconnects mid-answer) is not shown twice: one that
 * ends within the held text changes nothing, one that overlaps its end adds
 * only the unseen rest, and one past the end (pieces were lost) is appended
 * anyway. A delta without `offset` (an older host) is appended.
 */
export function addDelta(p: Pending, delta: Delta): Pending {
  const call = typeof delta.after_seq === "number" ? delta.after_seq : p.afterSeq;
  const base = call !== p.afterSeq && p.afterSeq !== null ? noPending() : p;
  const key = delta.kind === "reasoning" ? "reasoning" : "text";
  const held = base[key];
  let add = delta.text;
  if (typeof delta.offset === "number" && Number.isFinite(delta.offset) && delta.offset >= 0) {
    const end = delta.offset + delta.text.length;
    if (end <= held.length) return base === p && call === p.afterSeq ? p : { ...base, afterSeq: call };
    if (delta.offset < held.length) add = delta.text.slice(held.length - delta.offset);
  }
  return { ...base, afterSeq: call, [key]: held + add };
}

/** True for the events that stand for what the deltas were showing. */
export function endsPending(e: StoredEvent): boolean {
  return e.type === "message/assistant" || e.type === "message/reasoning" || e.type === "tool/call" || e.type === "turn/end";
}

/**
 * Pretty JSON for a tool's arguments (a JSON object, or a JSON string as
 * older hosts stored them) or result (a value); a string that is no JSON is
 * shown as it is.
 */
export function prettyJson(value: unknown): string {
  if (value === undefined) return "";
  if (typeof value === "string") {
    try {
      return JSON.stringify(JSON.parse(value), null, 2);
    } catch {
      return value;
    }
  }
  return JSON.stringify(value, null, 2);
}
