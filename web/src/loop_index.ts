import { useEffect, useState } from "preact/hooks";
import { api, type LoopView } from "./api";

// The loops a view names by id (a conversation's loop cards, the activity
// rows): the active ones and the latest finished ones; read only while
// `needed`, again when the loops change (`version`).
export function useLoopIndex(needed: boolean, version: number): Map<string, LoopView> {
  const [loops, setLoops] = useState<Map<string, LoopView>>(() => new Map());
  useEffect(() => {
    if (!needed) return;
    let live = true;
    Promise.all([
      api.loops("global").catch(() => [] as LoopView[]),
      api.finishedLoops(100).then((p) => p.loops).catch(() => [] as LoopView[]),
    ]).then(([active, finished]) => {
      if (live) setLoops(new Map([...finished, ...active].map((l) => [l.loop_id, l])));
    });
    return () => {
      live = false;
    };
  }, [needed, version]);
  return loops;
}
