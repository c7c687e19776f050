// Where "Fork from here" (and Up in an empty composer) forks a session, and
// what it puts in the new session's composer. Pure functions over a
// session's stored events, tested with node --test (web/test/fork.test.js).
//
// A fork must end at a turn boundary: a prefix that ends inside a turn
// (after its `turn/start`, before its `turn/end`) leaves the child with an
// unclosed turn, which the host runs again when the child next resumes (a
// paid call that repeats the parent's answer), and the host refuses it
// (`POST /api/sessions/{id}/fork`, docs/API.md). A turn is `turn/start`,
// then its user messages, then its steps, then `turn/end`; a steer taken at
// a step is a `message/user` inside the turn.

export interface ForkEvent {
  seq: number;
  type: string;
  data?: any;
}

// A message of the session as the composer and the queue see it.
export interface UserMessage {
  seq: number;
  messageId: string | null;  // absent from messages stored before message ids
  text: string;
  own: boolean;  // written by a person (not a loop's or a reminder's delivery)
}

export type ForkPlan =
  // Fork with this `seed_length` and start the child's composer with `draft`.
  | { kind: "fork"; seedLength: number; draft: string }
  // The events given do not reach back to the turn's start: read the ones
  // before `events[0]` and ask again.
  | { kind: "older" }
  // `seq` is not a message of the events given.
  | { kind: "unknown" };

const isOwn = (data: any) => {
  const origin = data?.meta?.origin;
  return origin !== "loop" && origin !== "schedule";
};

// The person's and the deliveries' messages among `events`, oldest first.
export function userMessagesOf(events: readonly ForkEvent[]): UserMessage[] {
  const out: UserMessage[] = [];
  for (const e of events) {
    if (e.type !== "message/user") continue;
    const id = e.data?.message_id;
    out.push({ seq: e.seq, messageId: typeof id === "string" ? id : null, text: String(e.data?.text ?? ""), own: isOwn(e.data) });
  }
  return out;
}

// The person's last message among `events`, or null.
export function lastOwnMessage(events: readonly ForkEvent[]): UserMessage | null {
  const all = userMessagesOf(events);
  for (let i = all.length - 1; i >= 0; i--) if (all[i].own) return all[i];
  return null;
}

// How to fork before the message at `seq` to edit and send it again.
// `events` are contiguous and oldest first, ending at or after `seq`;
// `events[0].seq === 1` means they start at the log's beginning.
//
// The child holds everything before the turn the message belongs to (its
// seed ends at the seq before that turn's `turn/start`). The draft is the
// message's text; when the message was a steer taken inside a turn that an
// earlier message of the person started, those earlier messages of the same
// turn come first (separated by a blank line), since the child no longer
// holds them. A message outside any turn (no open `turn/start` before it)
// forks right before it.
export function planFork(events: readonly ForkEvent[], seq: number): ForkPlan {
  const at = events.findIndex((e) => e.seq === seq);
  if (at < 0 || events[at].type !== "message/user") return { kind: "unknown" };
  const texts = [String(events[at].data?.text ?? "")];
  for (let i = at - 1; i >= 0; i--) {
    const e = events[i];
    if (e.type === "turn/start") return { kind: "fork", seedLength: e.seq - 1, draft: texts.reverse().join("\n\n") };
    if (e.type === "turn/end") return { kind: "fork", seedLength: seq - 1, draft: texts[0] };
    if (e.type === "message/user" && isOwn(e.data)) texts.push(String(e.data?.text ?? ""));
  }
  if (events[0].seq <= 1) return { kind: "fork", seedLength: seq - 1, draft: texts[0] };
  return { kind: "older" };
}
