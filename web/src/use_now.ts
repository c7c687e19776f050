import { useEffect, useState } from "preact/hooks";

// The current time for countdowns: re-renders every `periodMs`, and every
// render reads the clock afresh. A row rendered between two ticks (a loop
// just created) must not count from the last tick's time, or an "every
// 5 min" loop shows "in 5 min 1 s".
export function useNow(periodMs: number): number {
  const [, setTick] = useState(0);
  useEffect(() => {
    const t = setInterval(() => setTick((n) => n + 1), periodMs);
    return () => clearInterval(t);
  }, [periodMs]);
  return Date.now();
}
