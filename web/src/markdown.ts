// Markdown in the page: the highlighter loaded on demand (a dynamic
// import(), so Vite puts it in a chunk of its own that the first render
// never waits for), and the code blocks' Copy buttons.
import { useEffect, useState } from "preact/hooks";
import { hasHighlighter, setHighlighter } from "./lib/markdown";

export { renderMarkdown, wantsHighlighter } from "./lib/markdown";

let loading: Promise<void> | null = null;
const waiting = new Set<() => void>();

/**
 * Loads the highlighter chunk once; the views that showed code plain are
 * told to render again. A failed load leaves code plain (and is retried by
 * the next call).
 */
export function loadHighlighter(): Promise<void> {
  loading ??= import("./highlight")
    .then((m) => {
      setHighlighter(m.highlight);
      for (const f of waiting) f();
    })
    .catch(() => {
      loading = null;
    });
  return loading;
}

/**
 * For views that render Markdown: a number that changes when the
 * highlighter arrives; `wanted` asks for it (only Markdown with a fenced
 * block of a named language needs it).
 */
export function useHighlighter(wanted: boolean): number {
  const [version, setVersion] = useState(0);
  useEffect(() => {
    if (!wanted || hasHighlighter()) return;
    const arrived = () => setVersion((v) => v + 1);
    waiting.add(arrived);
    void loadHighlighter();
    return () => void waiting.delete(arrived);
  }, [wanted]);
  return version;
}

/**
 * Handles a click in rendered Markdown: a code block's Copy button copies
 * that block's text and says "Copied" for a moment. True when it was one.
 */
export function onMarkdownClick(event: MouseEvent): boolean {
  const button = (event.target as Element | null)?.closest?.("button.copy-code");
  if (!(button instanceof HTMLButtonElement)) return false;
  const code = button.closest(".code-block")?.querySelector("pre")?.textContent ?? "";
  void copyText(code).then((ok) => {
    button.textContent = ok ? "Copied" : "Copy failed";
    setTimeout(() => (button.textContent = "Copy"), 1500);
  });
  return true;
}

/** Puts `text` on the clipboard; false when the browser refused. */
export async function copyText(text: string): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    return false;
  }
}
