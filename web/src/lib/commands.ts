// The composer's local command matching (spec 003, "Composer completion"):
// pure functions of the draft, tested with node --test (web/test/).

/** Flags of `/sessions read SESSION_ID`, in the order the popup offers them. */
export const READ_FLAGS = ["--offset", "--limit"];

/**
 * True when the draft is a slash command (sent to POST /api/commands, never
 * to the model): its first non-blank character is "/".
 */
export function isCommand(draft: string): boolean {
  return draft.trimStart().startsWith("/");
}

export interface Option {
  label: string;
  detail?: string;
  insert: string;
}

export interface Completion {
  kind: "flags" | "ids";
  options: Option[];
  /** Where in the draft the token being completed starts; choosing an option replaces draft[from..] with option.insert. */
  from: number;
}

export interface SessionChoice {
  session_id: string;
  title?: string;
}

// "/sessions read" with any whitespace (none included) between the words,
// after optional leading whitespace.
const READ_PREFIX = /^\s*\/sessions\s*read(?=\s|$)/;

/**
 * The completion popup for the draft, or null when none applies:
 * - while the session id is being typed: the known sessions whose id or
 *   title matches it;
 * - after the session id (and a space): the `--offset` / `--limit` flags not
 *   used yet, filtered by a partially typed `--…` token; nothing while a
 *   flag waits for its value.
 * Trailing whitespace of the draft is significant only as "the last token
 * is complete".
 */
export function completeSessionsRead(draft: string, sessions: SessionChoice[] = []): Completion | null {
  const prefix = READ_PREFIX.exec(draft);
  if (!prefix) return null;
  const rest = draft.slice(prefix[0].length);
  if (!/^\s/.test(rest)) return null;  // "/sessions read" itself: no id yet
  const tokens: { text: string; start: number }[] = [];
  for (const m of rest.matchAll(/\S+/g)) tokens.push({ text: m[0], start: prefix[0].length + (m.index ?? 0) });
  const endsWithSpace = /\s$/.test(draft);
  if (tokens.length === 0) {
    return idCompletion("", draft.length, sessions);
  }
  if (tokens.length === 1 && !endsWithSpace) {
    return idCompletion(tokens[0].text, tokens[0].start, sessions);
  }
  const after = tokens.slice(1);
  const last = after.length > 0 ? after[after.length - 1] : null;
  let partial = "";
  let from = draft.length;
  let settled = after;
  if (last && !endsWithSpace) {
    if (!last.text.startsWith("--")) return null;  // typing a value
    partial = last.text;
    from = last.start;
    settled = after.slice(0, -1);
  }
  // A flag whose value is still missing: the user types the value now.
  const previous = settled.length > 0 ? settled[settled.length - 1].text : null;
  if (previous && READ_FLAGS.includes(previous)) return null;
  const used = new Set(settled.map((t) => t.text));
  const options: Option[] = READ_FLAGS.filter((f) => !used.has(f) && f.startsWith(partial) && f !== partial).map((f) => ({
    label: f,
    detail: f === "--offset" ? "first block to read" : "how many blocks",
    insert: f + " ",
  }));
  if (partial && READ_FLAGS.includes(partial) && !used.has(partial)) {
    options.unshift({ label: partial, detail: "", insert: partial + " " });
  }
  return options.length > 0 ? { kind: "flags", options, from } : null;
}

function idCompletion(typed: string, from: number, sessions: SessionChoice[]): Completion | null {
  const needle = typed.toLowerCase();
  const options = sessions
    .filter((s) => s.session_id !== typed)
    .filter((s) => s.session_id.toLowerCase().startsWith(needle) || (s.title ?? "").toLowerCase().includes(needle))
    .slice(0, 8)
    .map((s) => ({ label: s.title || s.session_id, detail: s.title ? s.session_id : undefined, insert: s.session_id + " " }));
  return options.length > 0 ? { kind: "ids", options, from } : null;
}

/**
 * The draft after choosing `option` of `completion`: the token being
 * completed is replaced; a flag is followed by one space, for its value.
 */
export function applyCompletion(draft: string, completion: Completion, option: Option): string {
  let head = draft.slice(0, completion.from);
  if (head.length > 0 && !/\s$/.test(head)) head += " ";
  return head + option.insert;
}

export interface Command {
  name: string;
  usage: string;
  insert: string;
}

/** The slash commands the `/` menu offers. */
export const COMMANDS: Command[] = [
  { name: "/help", usage: "list the slash commands, one line each", insert: "/help" },
  { name: "/sessions status", usage: "/sessions status [SESSION_ID] [--recent N]", insert: "/sessions status " },
  { name: "/sessions read", usage: "/sessions read SESSION_ID [--offset N] [--limit N]", insert: "/sessions read " },
  { name: "/sessions create", usage: "/sessions create PROMPT [--preset ID] …", insert: "/sessions create " },
  { name: "/sessions send", usage: "/sessions send SESSION_ID MESSAGE [--mode steer|followup]", insert: "/sessions send " },
];

/**
 * The `/` menu: the commands matching a draft that is only a partial
 * command name ("/", "/se", "/sessions r"), else null.
 */
export function commandMenu(draft: string): Command[] | null {
  const typed = draft.trimStart().replace(/\s+/g, " ");
  if (!typed.startsWith("/")) return null;
  const matches = COMMANDS.filter((c) => c.name.startsWith(typed) && c.name !== typed.trimEnd());
  if (matches.length === 0 || /\s\S+\s/.test(typed.slice(1).replace(/^sessions /, ""))) return null;
  return matches;
}
