import { useEffect, useRef, useState } from "preact/hooks";
import { api } from "./api";
import type { NotifyMode } from "./activity";
import { announcement, itemHref, toAnnounce, type AnnounceState } from "./lib/activity";

// "Notify me in this browser" (issue 29): the choice is kept in this
// browser's localStorage; while the page is open and the choice is on, new
// activity items (or new failures) are announced with the Notification API.
// The items are re-read when the change feed says the activity changed;
// what was there when the page opened or the choice was made is not
// announced, and a re-read after a reconnect announces nothing twice.

const KEY = "dsh.notify";

export function useNotifyChoice(): [NotifyMode, (m: NotifyMode) => void] {
  const [mode, setMode] = useState<NotifyMode>(() => {
    const kept = localStorage.getItem(KEY);
    return kept === "failed" || kept === "every" ? kept : "off";
  });
  const choose = (m: NotifyMode) => {
    setMode(m);
    if (m === "off") localStorage.removeItem(KEY);
    else localStorage.setItem(KEY, m);
  };
  return [mode, choose];
}

export function useAnnouncer(mode: NotifyMode, version: number) {
  const state = useRef<AnnounceState | null>(null);
  const asked = useRef(0);
  useEffect(() => {
    state.current = null;  // a new choice starts from what is there now
  }, [mode]);
  useEffect(() => {
    if (mode === "off" || typeof Notification === "undefined" || Notification.permission !== "granted") return;
    const mine = ++asked.current;
    api
      .activity("all", 50)
      .then((page) => {
        if (mine !== asked.current) return;
        const { announce, state: next } = toAnnounce(state.current, page.items, mode);
        state.current = next;
        for (const item of announce) {
          const { title, body } = announcement(item);
          const n = new Notification(title, { body, tag: `dsh-activity-${item.id}` });
          n.onclick = () => {
            window.focus();
            const href = itemHref(item);
            if (href) location.hash = href;
            n.close();
          };
        }
      })
      .catch(() => {});  // the next change re-reads
  }, [mode, version]);
}
