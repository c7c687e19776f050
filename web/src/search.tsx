import { useEffect, useRef, useState } from "preact/hooks";
import { api } from "./api";
import { displayTitle } from "./lib/deliveries";
import { resultHref, searchable, snippetParts, type SearchResult } from "./lib/search";
import { TimeAgo } from "./time_ago";

// The sidebar's search box (issue 31; GET /api/search, docs/API.md): results
// as the person types (after a short pause), each the session's title, the
// matching text with the matched words marked, and its time; choosing one
// opens the session at that message (#/s/ID/SEQ, highlighted). ArrowDown
// moves from the box into the results and between them, Esc goes back to
// the box and then clears it.

const PAUSE_MS = 200;
const PAGE = 20;

interface Found {
  query: string;
  results: SearchResult[];
  next?: string;
}

export function SessionSearch({ onOpen }: { onOpen?: () => void }) {
  const [text, setText] = useState("");
  const [found, setFound] = useState<Found | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const asked = useRef(0);  // answers to an older question are dropped
  const box = useRef<HTMLInputElement>(null);
  const list = useRef<HTMLUListElement>(null);

  const ask = async (query: string, before?: string) => {
    const n = ++asked.current;
    setBusy(true);
    try {
      const page = await api.search(query, PAGE, before);
      if (n !== asked.current) return;
      setFound((old) => ({
        query,
        results: before && old?.query === query ? [...old.results, ...page.results] : page.results,
        next: page.next,
      }));
      setError(null);
    } catch (e) {
      if (n === asked.current) setError(e instanceof Error ? e.message : String(e));
    } finally {
      if (n === asked.current) setBusy(false);
    }
  };

  useEffect(() => {
    const query = text.trim();
    if (!searchable(query)) {
      ++asked.current;
      setFound(null);
      setBusy(false);
      setError(null);
      return;
    }
    const timer = setTimeout(() => void ask(query), PAUSE_MS);
    return () => clearTimeout(timer);
  }, [text]);

  const links = () => Array.from(list.current?.querySelectorAll<HTMLAnchorElement>("a.search-hit") ?? []);
  const move = (from: Element | null, by: number) => {
    const all = links();
    const i = from ? all.indexOf(from as HTMLAnchorElement) : -1;
    const next = all[i + by];
    if (next) next.focus();
    else if (i + by < 0) box.current?.focus();
  };
  const onResultKey = (e: KeyboardEvent) => {
    if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      e.preventDefault();
      move(e.currentTarget as Element, e.key === "ArrowDown" ? 1 : -1);
    } else if (e.key === "Escape") {
      e.preventDefault();
      box.current?.focus();
    }
  };

  const query = text.trim();
  const showing = searchable(query);
  return (
    <div class="session-search" role="search">
      <input
        ref={box}
        type="search"
        class="search-box"
        aria-label="Search sessions"
        placeholder="Search sessions"
        value={text}
        onInput={(e) => setText((e.currentTarget as HTMLInputElement).value)}
        onKeyDown={(e) => {
          if (e.key === "ArrowDown" && links().length > 0) {
            e.preventDefault();
            links()[0].focus();
          } else if (e.key === "Escape" && text) {
            e.preventDefault();
            setText("");
          }
        }}
      />
      {showing && (
        <div class="search-results">
          <p class="muted search-status" role="status">
            {error
              ? ""
              : busy && !found
                ? "Searching…"
                : found && found.results.length === 0
                  ? `No sessions match “${found.query}”.`
                  : found
                    ? `${found.results.length}${found.next ? "+" : ""} ${found.results.length === 1 && !found.next ? "session matches" : "sessions match"} “${found.query}”.`
                    : ""}
          </p>
          {error && <p class="error-text" role="alert">Search failed: {error}</p>}
          {found && found.results.length > 0 && (
            <ul ref={list} class="search-list" aria-label="Search results">
              {found.results.map((r) => (
                <li key={`${r.session_id}:${r.seq}`}>
                  <a class="search-hit" href={resultHref(r)} onKeyDown={onResultKey} onClick={() => onOpen?.()}>
                    <span class="search-title">
                      {displayTitle(r.title ?? undefined) ?? r.session_id}
                      {r.archived && <span class="badge"> archived</span>}
                    </span>
                    <span class="search-snippet">
                      {r.seq === 0 && <span class="muted">Title: </span>}
                      {snippetParts(r.snippet).map((p, i) => (p.mark ? <mark key={i}>{p.text}</mark> : p.text))}
                    </span>
                    <TimeAgo at={Date.parse(r.at)} />
                  </a>
                </li>
              ))}
            </ul>
          )}
          {found?.next && (
            <button type="button" class="secondary more" disabled={busy} onClick={() => void ask(found.query, found.next)}>
              More results
            </button>
          )}
        </div>
      )}
    </div>
  );
}
