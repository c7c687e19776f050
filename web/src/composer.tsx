import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import type { HostInfo, SessionRow } from "./api";
import { LoopStatus } from "./loop_status";
import { applyCompletion, commandMenu, completeSessionsRead, isCommand } from "./lib/commands";

interface Props {
  host: HostInfo | null;
  sessionId: string;
  sessionStatus?: SessionRow["status"];
  sessions: SessionRow[];
  running: boolean;
  seedDraft: string | null;  // a draft to start with (a fork's message)
  // Sends a message: it leaves the box at once (the page lists it as queued
  // until it shows in the conversation, and says there if it was not sent).
  onSend: (text: string, mode: "steer" | "followup") => void;
  // Up in an empty box: edit the last message again (a fork before it).
  onEditLast: () => void;
  // What the page must say about the connection under the box, or null.
  notice: string | null;
  onCommand: (text: string) => Promise<void>;
  onStop: () => void;
  loopsVersion: number;  // changes when the loops or this session may have changed
}

const draftKey = (id: string) => `dsh.draft.${id}`;

interface Popup {
  label: string;
  options: { label: string; detail?: string; apply: (draft: string) => string }[];
}

// The message box: Enter sends as steer, Shift+Enter is a new line, a button
// sends as follow-up, Stop (or Esc) cancels a running turn, Up in an empty
// box edits the last message. Text starting with "/" is a slash command (run
// locally through POST /api/commands). The draft is kept per session across
// reloads; the box has the focus when a session opens.
export function Composer({
  host, sessionId, sessionStatus, sessions, running, seedDraft, onSend, onEditLast, notice, onCommand, onStop, loopsVersion,
}: Props) {
  const [draft, setDraft] = useState(() => localStorage.getItem(draftKey(sessionId)) ?? "");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [active, setActive] = useState(0);
  const [dismissed, setDismissed] = useState<string | null>(null);
  const box = useRef<HTMLTextAreaElement>(null);

  // Kept as it is typed, not after the next render: a reload right after
  // a keystroke keeps it.
  const edit = (text: string, session = sessionId) => {
    setDraft(text);
    if (text) localStorage.setItem(draftKey(session), text);
    else localStorage.removeItem(draftKey(session));
  };
  useEffect(() => {
    if (seedDraft !== null) edit(seedDraft);
    else setDraft(localStorage.getItem(draftKey(sessionId)) ?? "");
    setError(null);
  }, [sessionId, seedDraft]);
  useEffect(() => box.current?.focus(), [sessionId]);

  const popupFor = (text: string): Popup | null => {
    const read = completeSessionsRead(text, sessions);
    if (read) {
      return {
        label: read.kind === "flags" ? "Flags of /sessions read" : "Sessions",
        options: read.options.map((o) => ({ label: o.label, detail: o.detail, apply: (d) => applyCompletion(d, read, o) })),
      };
    }
    const menu = commandMenu(text);
    if (menu) {
      return {
        label: "Commands",
        options: menu.map((c) => ({ label: c.name, detail: c.usage, apply: () => c.insert })),
      };
    }
    return null;
  };
  const popup = dismissed === draft ? null : popupFor(draft);
  useEffect(() => setActive(0), [popup?.label, popup?.options.length]);

  // The caret goes after a chosen completion when that text is rendered, in
  // the same task (a layout effect), not a frame later: by then the person
  // (or a test) may have typed or selected, and the caret would move under
  // them.
  const caret = useRef<number | null>(null);
  const placeCaret = () => {
    const el = box.current;
    if (el && caret.current !== null) {
      el.focus();
      el.setSelectionRange(caret.current, caret.current);
    }
    caret.current = null;
  };
  useLayoutEffect(placeCaret, [draft]);

  const choose = (i: number) => {
    if (!popup) return;
    // The text as it is now, which an input not yet rendered may have
    // changed since this popup was drawn: the choice applies to it.
    const text = box.current?.value ?? draft;
    const live = text === draft ? popup : popupFor(text);
    const option = live?.options.find((o) => o.label === popup.options[i].label);
    if (!option) return;
    const next = option.apply(text);
    caret.current = next.length;
    if (next === draft) placeCaret();
    else edit(next);
  };

  const submit = async (mode: "steer" | "followup") => {
    const text = draft.trim();
    if (!text || busy) return;
    setBusy(true);
    setError(null);
    try {
      if (isCommand(text)) {
        await onCommand(text);
      } else {
        onSend(text, mode);
      }
      edit("");
    } catch (e: any) {
      setError(e?.message ?? String(e));
    } finally {
      setBusy(false);
      box.current?.focus();
    }
  };

  const onKeyDown = (e: KeyboardEvent) => {
    if (popup && popup.options.length > 0) {
      if (e.key === "ArrowDown" || e.key === "ArrowUp") {
        e.preventDefault();
        const n = popup.options.length;
        setActive((a) => (a + (e.key === "ArrowDown" ? 1 : n - 1)) % n);
        return;
      }
      if (e.key === "Tab" || (e.key === "Enter" && !e.shiftKey)) {
        e.preventDefault();
        choose(Math.min(active, popup.options.length - 1));
        return;
      }
      if (e.key === "Escape") {
        e.preventDefault();
        setDismissed(draft);
        return;
      }
    }
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      void submit("steer");
      return;
    }
    if (e.key === "Escape" && running) {
      e.preventDefault();
      onStop();
      return;
    }
    if (e.key === "ArrowUp" && draft === "" && !e.shiftKey && !e.altKey && !e.ctrlKey && !e.metaKey) {
      e.preventDefault();
      onEditLast();
    }
  };

  const listId = `completion-${sessionId}`;
  return (
    <form class="composer" onSubmit={(e) => { e.preventDefault(); void submit("steer"); }}>
      {popup && popup.options.length > 0 && (
        <ul class="popup" role="listbox" id={listId} aria-label={popup.label}>
          {popup.options.map((o, i) => (
            <li
              key={o.label}
              id={`${listId}-${i}`}
              role="option"
              aria-selected={i === active}
              class={i === active ? "active" : ""}
              onMouseDown={(e) => { e.preventDefault(); choose(i); }}
            >
              <span class="mono">{o.label}</span>
              {o.detail && <span class="muted"> {o.detail}</span>}
            </li>
          ))}
        </ul>
      )}
      <textarea
        ref={box}
        aria-label="Message"
        aria-autocomplete="list"
        aria-controls={popup ? listId : undefined}
        aria-activedescendant={popup ? `${listId}-${active}` : undefined}
        placeholder="Message, or / for commands (Enter sends, Shift+Enter for a new line)"
        rows={3}
        value={draft}
        onInput={(e) => { edit((e.target as HTMLTextAreaElement).value); setDismissed(null); }}
        onKeyDown={onKeyDown}
      />
      <div class="composer-actions">
        <LoopStatus host={host} sessionId={sessionId} sessionStatus={sessionStatus} version={loopsVersion} />
        {(notice || error) && <span class="error-text" role="alert">{notice ?? error}</span>}
        {running && (
          <button type="button" class="secondary" onClick={onStop}>
            Stop
          </button>
        )}
        <button type="button" class="secondary" disabled={busy || !draft.trim() || isCommand(draft)}
                onClick={() => void submit("followup")}>
          Send as follow-up
        </button>
        <button type="submit" disabled={busy || !draft.trim()}>
          Send
        </button>
      </div>
    </form>
  );
}
