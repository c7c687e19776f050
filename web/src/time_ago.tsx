import { useEffect, useState } from "preact/hooks";
import { ago } from "./lib/activity";

// One timer for every relative time on the page: each <TimeAgo> re-renders
// on its tick, nothing else does.
const TICK_MS = 15_000;
const ticking = new Set<() => void>();
let timer: ReturnType<typeof setInterval> | null = null;

function useTick(): number {
  const [, setTick] = useState(0);
  useEffect(() => {
    const tick = () => setTick((n) => n + 1);
    ticking.add(tick);
    timer ??= setInterval(() => ticking.forEach((f) => f()), TICK_MS);
    return () => {
      ticking.delete(tick);
      if (ticking.size === 0 && timer !== null) {
        clearInterval(timer);
        timer = null;
      }
    };
  }, []);
  return Date.now();
}

// One formatter for every exact time: Date#toLocaleString with options makes
// a new one per call, which cost a conversation of 200 blocks about 85 ms
// (docs/PERFORMANCE.md, "Web UI").
let exact: Intl.DateTimeFormat | null = null;
const exactTime = (date: Date) => (exact ??= new Intl.DateTimeFormat(undefined, { dateStyle: "full", timeStyle: "long" })).format(date);

/** "3 min ago", kept current, with the exact local time on hover (`title`). `at`: Unix ms. */
export function TimeAgo({ at }: { at: number }) {
  const now = useTick();
  const date = new Date(at);
  if (Number.isNaN(date.getTime())) return null;
  return (
    <time class="ago" dateTime={date.toISOString()} title={exactTime(date)}>
      {ago(at, now)}
    </time>
  );
}
