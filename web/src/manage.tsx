import type { Ref } from "preact";
import { useId, useLayoutEffect, useRef, useState } from "preact/hooks";

// Issue 31, rename and archive: a session's menu (the sidebar row's and the
// header's) and its inline rename. Both change the session through
// PATCH /api/sessions/{id} (the caller's `onSave` / actions); the list and the
// header show the result from the answer and again from the change feed.

export interface MenuActions {
  onRename: () => void;
  // Only when the page knows the session has a title a person gave it.
  onAutomaticTitle?: () => void;
  // Absent for the Global interface: it is never offered Archive.
  onArchive?: (archived: boolean) => void;
}

// A menu button ("Actions for NAME") with Rename, Use the automatic title,
// Archive / Unarchive. Enter or Space opens it with the first item focused,
// the arrow keys move, Esc (or Tab, or a click elsewhere) closes it and Esc
// returns focus to the button.
export function SessionMenu({ name, archived, actions, buttonRef }: {
  name: string; archived: boolean; actions: MenuActions; buttonRef: Ref<HTMLButtonElement>;
}) {
  const [open, setOpen] = useState(false);
  const button = useRef<HTMLButtonElement | null>(null);
  const menu = useRef<HTMLDivElement>(null);
  const menuId = useId();

  // Before the browser takes the next key: a key pressed as soon as the menu
  // shows goes to its first item, not to the button under it.
  useLayoutEffect(() => {
    if (!open) return;
    menu.current?.querySelector<HTMLElement>('[role="menuitem"]')?.focus();
    const away = (e: PointerEvent) => {
      const t = e.target as Node;
      if (!menu.current?.contains(t) && !button.current?.contains(t)) setOpen(false);
    };
    document.addEventListener("pointerdown", away);
    return () => document.removeEventListener("pointerdown", away);
  }, [open]);

  const close = () => {
    setOpen(false);
    button.current?.focus();
  };
  const choose = (action: () => void) => () => {
    close();
    action();
  };
  const onKeyDown = (e: KeyboardEvent) => {
    const items = [...(menu.current?.querySelectorAll<HTMLElement>('[role="menuitem"]') ?? [])];
    const at = items.indexOf(document.activeElement as HTMLElement);
    const focus = (i: number) => items[(i + items.length) % items.length]?.focus();
    if (e.key === "Escape") {
      e.preventDefault();
      e.stopPropagation();
      close();
    } else if (e.key === "ArrowDown") {
      e.preventDefault();
      focus(at + 1);
    } else if (e.key === "ArrowUp") {
      e.preventDefault();
      focus(at - 1);
    } else if (e.key === "Home") {
      e.preventDefault();
      focus(0);
    } else if (e.key === "End") {
      e.preventDefault();
      focus(items.length - 1);
    } else if (e.key === "Tab") {
      setOpen(false);
    }
  };
  const setButton = (el: HTMLButtonElement | null) => {
    button.current = el;
    if (typeof buttonRef === "function") buttonRef(el);
    else if (buttonRef) buttonRef.current = el;
  };

  return (
    <span class="session-menu">
      <button ref={setButton} type="button" class="menu-button" aria-haspopup="menu" aria-expanded={open}
              aria-controls={open ? menuId : undefined} aria-label={`Actions for ${name}`} title="Rename or archive"
              onClick={() => setOpen(!open)}>
        <span aria-hidden="true">⋯</span>
      </button>
      {open && (
        <div ref={menu} id={menuId} role="menu" aria-label={`Actions for ${name}`} class="menu" onKeyDown={onKeyDown}>
          <button type="button" role="menuitem" tabIndex={-1} onClick={choose(actions.onRename)}>Rename</button>
          {actions.onAutomaticTitle && (
            <button type="button" role="menuitem" tabIndex={-1} onClick={choose(actions.onAutomaticTitle)}>
              Use the automatic title
            </button>
          )}
          {actions.onArchive && (
            <button type="button" role="menuitem" tabIndex={-1} onClick={choose(() => actions.onArchive!(!archived))}>
              {archived ? "Unarchive" : "Archive"}
            </button>
          )}
        </div>
      )}
    </span>
  );
}

// The inline rename: the current title selected in a text box; Enter saves,
// Esc cancels, an empty title is refused in words (the host refuses it too).
// `onSave` rejects with the host's error, which is shown; the form stays.
export function RenameForm({ name, initial, onSave, onDone }: {
  name: string; initial: string; onSave: (title: string) => Promise<void>; onDone: () => void;
}) {
  const [value, setValue] = useState(initial);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const input = useRef<HTMLInputElement>(null);
  const hintId = useId();
  const errorId = useId();

  useLayoutEffect(() => {
    input.current?.focus();
    input.current?.select();
  }, []);

  const submit = async (e: Event) => {
    e.preventDefault();
    const title = value.trim();
    if (!title) {
      setError("A title cannot be empty: write one, or press Esc to keep the current title.");
      return;
    }
    setBusy(true);
    setError(null);
    try {
      await onSave(title);
      onDone();
    } catch (err: any) {
      setError(`Not renamed: ${err?.message ?? String(err)}`);
      setBusy(false);
      input.current?.focus();
    }
  };

  return (
    <form class="rename" onSubmit={submit} onKeyDown={(e) => {
      if (e.key !== "Escape") return;
      e.preventDefault();
      e.stopPropagation();
      onDone();
    }}>
      <input ref={input} type="text" value={value} readOnly={busy} aria-label={`New title for ${name}`}
             aria-invalid={error !== null} aria-describedby={error ? `${errorId} ${hintId}` : hintId}
             onInput={(e) => {
               setValue((e.target as HTMLInputElement).value);
               setError(null);
             }} />
      <span id={hintId} class="hint muted">Enter saves · Esc cancels</span>
      {error && <span id={errorId} class="error-text" role="alert">{error}</span>}
    </form>
  );
}
