// The profile's change feed (`GET /api/changes`, docs/API.md): which
// sessions changed and whether the loops, the host's MCP servers, the
// activity inbox or the outbound notifications did. It
// carries no data; the views re-read what it names. Reconnects with backoff;
// every (re)connect starts with `ready`, after which a view re-reads
// everything it shows, so nothing that changed while the feed was down is
// missed.

export interface ChangeMessage {
  type: "ready" | "changed";
  sessions?: string[];
  all_sessions?: boolean;
  loops?: boolean;
  mcp?: boolean;
  activity?: boolean;
  notifications?: boolean;
}

export function changesUrl(): string {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${location.host}/api/changes`;
}

// Calls `onMessage` for every message, and `onDown` each time the feed's
// connection closes (the host went away; it reconnects, then says `ready`);
// returns a function that closes the feed.
export function followChanges(onMessage: (m: ChangeMessage) => void, onDown?: () => void): () => void {
  let socket: WebSocket | null = null;
  let retry: ReturnType<typeof setTimeout> | null = null;
  let attempt = 0;
  let closed = false;
  const connect = () => {
    socket = new WebSocket(changesUrl());
    socket.onmessage = (e) => {
      attempt = 0;
      try {
        onMessage(JSON.parse(e.data as string) as ChangeMessage);
      } catch {
        // A message this client does not understand: ignore it.
      }
    };
    socket.onclose = () => {
      if (closed) return;
      onDown?.();
      retry = setTimeout(connect, Math.min(5000, 250 * 2 ** Math.min(attempt++, 5)));
    };
  };
  connect();
  return () => {
    closed = true;
    if (retry) clearTimeout(retry);
    socket?.close();
  };
}

// Runs `fn` at most once per `ms`, always after the last call (trailing).
export function throttle(fn: () => void, ms: number): () => void {
  let timer: ReturnType<typeof setTimeout> | null = null;
  let last = 0;
  return () => {
    if (timer) return;
    const wait = Math.max(0, last + ms - Date.now());
    timer = setTimeout(() => {
      timer = null;
      last = Date.now();
      fn();
    }, wait);
  };
}
