import { useEffect, useRef, useState } from "preact/hooks";
import { api, type ActivityItem, type LoopView } from "./api";
import {
  ago,
  appendOlder,
  durationMs,
  isFailed,
  itemHref,
  kindWords,
  mergeNewest,
  outcomeError,
  outcomeWords,
  tokenWords,
} from "./lib/activity";
import { useLoopIndex } from "./loop_index";
import { Receipts } from "./notifications";
import { useNow } from "./use_now";

// The activity inbox (issue 29, docs/UI.md): what happened without the
// person — loop runs, reminder dispatches, turns other agents started — with
// how each turn ended, newest first. Re-read when the change feed says the
// activity or its notifications changed (`version`); nothing is polled.

type Filter = "all" | "unread" | "failed";
const FILTERS: { id: Filter; label: string; empty: string }[] = [
  { id: "all", label: "All", empty: "Nothing has happened without you yet." },
  { id: "unread", label: "Unread", empty: "Nothing unread." },
  { id: "failed", label: "Failed", empty: "Nothing failed." },
];
const PAGE = 50;

export type NotifyMode = "off" | "failed" | "every";

interface Props {
  version: number;
  loopsVersion: number;  // the loops' prompts name the loop runs
  unread: number;
  titles: Map<string, string | undefined>;
  notify: NotifyMode;
  onNotify: (mode: NotifyMode) => void;
}

export function Activity({ version, loopsVersion, unread, titles, notify, onNotify }: Props) {
  const [filter, setFilter] = useState<Filter>("all");
  const [items, setItems] = useState<ActivityItem[] | null>(null);
  const [next, setNext] = useState<number | undefined>(undefined);
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const asked = useRef(0);
  const now = useNow(30_000);
  const loops = useLoopIndex(!!items?.some((i) => i.loop_id), loopsVersion);

  // The newest page, merged into what is shown (older pages stay).
  useEffect(() => {
    const mine = ++asked.current;
    api
      .activity(filter, PAGE)
      .then((page) => {
        if (mine !== asked.current) return;
        setItems((held) => mergeNewest(held ?? [], page.items, page.next === undefined));
        setNext((n) => (n === undefined || page.next === undefined ? page.next : Math.min(n, page.next)));
        setError(null);
      })
      .catch((e: any) => mine === asked.current && setError(e?.message ?? String(e)));
  }, [filter, version]);

  const choose = (f: Filter) => {
    if (f === filter) return;
    setItems(null);
    setNext(undefined);
    setFilter(f);
  };
  const older = async () => {
    if (next === undefined) return;
    try {
      const page = await api.activity(filter, PAGE, next);
      setItems((held) => appendOlder(held ?? [], page.items));
      setNext(page.next);
    } catch (e: any) {
      setError(e?.message ?? String(e));
    }
  };
  const markAll = async () => {
    try {
      const r = await api.markRead({ all: true });
      setItems((held) => (filter === "unread" ? [] : (held ?? []).map((i) => ({ ...i, read: true }))));
      setNotice(r.marked === 1 ? "Marked 1 item read." : `Marked ${r.marked} items read.`);
    } catch (e: any) {
      setNotice(`Could not mark the items read: ${e?.message ?? e}`);
    }
  };

  const empty = FILTERS.find((f) => f.id === filter)!.empty;
  return (
    <section class="activity" aria-labelledby="activity-title">
      <header class="session-header">
        <h1 id="activity-title">Activity</h1>
        <span class="meta muted">{unread > 0 ? `${unread} unread` : "All read"}</span>
      </header>
      <div class="activity-body">
        <div class="activity-tools">
          <div class="filters" role="group" aria-label="Show">
            {FILTERS.map((f) => (
              <button key={f.id} type="button" class={filter === f.id ? "" : "secondary"} aria-pressed={filter === f.id}
                      onClick={() => choose(f.id)}>
                {f.label}
              </button>
            ))}
          </div>
          <button type="button" class="secondary" disabled={unread === 0} onClick={() => void markAll()}>
            Mark all read
          </button>
          <NotifyControl mode={notify} onChange={onNotify} />
        </div>
        <div class="status-line" role="status" aria-live="polite">{notice}</div>
        {error && <p class="error-text" role="alert">Could not read the activity: {error}</p>}
        {items === null ? (
          !error && <p class="muted">Loading…</p>
        ) : items.length === 0 ? (
          <p class="muted">{empty}</p>
        ) : (
          <ul class="activity-list" aria-label="Activity items">
            {items.map((i) => (
              <ActivityRow key={i.id} item={i} now={now} titles={titles} loop={i.loop_id ? loops.get(i.loop_id) : undefined} />
            ))}
          </ul>
        )}
        {next !== undefined && items && items.length > 0 && (
          <button type="button" class="secondary more" onClick={() => void older()}>
            Show older activity
          </button>
        )}
      </div>
    </section>
  );
}

function ActivityRow({ item, now, titles, loop }: {
  item: ActivityItem;
  now: number;
  titles: Map<string, string | undefined>;
  loop?: LoopView;
}) {
  const outcome = outcomeWords(item.outcome);
  const failed = isFailed(item.outcome);
  const session = item.title || (item.session_id ? titles.get(item.session_id) || item.session_id : "");
  const detail = failed ? outcomeError(item.outcome) || item.summary : item.summary;
  const facts = [durationMs(item.duration_ms), tokenWords(item.tokens)].filter(Boolean);
  const href = itemHref(item);
  const body = (
    <>
      <span class="activity-line">
        <span class={`outcome ${outcome.tone}`}>{outcome.text}</span>
        <span class="activity-kind">
          {kindWords(item.kind)}
          {loop && <span class="activity-loop"> “{loop.prompt.length > 60 ? loop.prompt.slice(0, 59) + "…" : loop.prompt}”</span>}
        </span>
        {session && <span class="muted">in</span>}
        {session && <span class="activity-session">{session}</span>}
        {!item.read && <span class="badge unread">unread</span>}
      </span>
      {detail && <span class={`activity-summary${failed ? " error-text" : ""}`}>{detail}</span>}
      <span class="activity-meta muted">
        <time dateTime={new Date(item.at).toISOString()} title={new Date(item.at).toLocaleString()}>{ago(item.at, now)}</time>
        {facts.map((f) => (
          <span key={f}> · {f}</span>
        ))}
      </span>
      <Receipts receipts={item.notifications} />
    </>
  );
  return (
    <li class={`activity-item${item.read ? "" : " is-unread"}${failed ? " is-failed" : ""}`} data-activity={item.id}>
      {href ? <a href={href}>{body}</a> : <div>{body}</div>}
    </li>
  );
}

// "Notify me in this browser": off, or the choice of what to announce; the
// browser's permission is asked when it is turned on.
function NotifyControl({ mode, onChange }: { mode: NotifyMode; onChange: (m: NotifyMode) => void }) {
  const [problem, setProblem] = useState<string | null>(null);
  const supported = typeof window !== "undefined" && "Notification" in window;
  const turnOn = async (want: NotifyMode) => {
    setProblem(null);
    if (want === "off") return onChange("off");
    let permission = Notification.permission;
    if (permission === "default") permission = await Notification.requestPermission();
    if (permission !== "granted") {
      setProblem("This browser blocks notifications from this page; allow them in its site settings.");
      return onChange("off");
    }
    onChange(want);
  };
  if (!supported) return <span class="muted notify">This browser cannot show notifications.</span>;
  return (
    <div class="notify">
      <label class="choice">
        <input type="checkbox" checked={mode !== "off"} onChange={(e) => void turnOn((e.target as HTMLInputElement).checked ? "failed" : "off")} />
        Notify me in this browser
      </label>
      {mode !== "off" && (
        <label class="choice">
          <span class="visually-hidden">Notify about</span>
          <select value={mode} onChange={(e) => void turnOn((e.target as HTMLSelectElement).value as NotifyMode)}>
            <option value="failed">failed runs only</option>
            <option value="every">every new item</option>
          </select>
        </label>
      )}
      {problem && <span class="error-text" role="alert">{problem}</span>}
    </div>
  );
}
