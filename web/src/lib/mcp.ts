// The automation panel's words for the MCP servers the host runs for its
// agents (GET /api/host's `mcp_servers`, docs/MCP.md), and what a message of
// the change feed asks the views to re-read.

export interface McpServerView {
  name: string;
  transport: "stdio" | "http";
  state: "starting" | "ready" | "down" | "stopped";
  tools: number;
  protocol_version: string;
  last_error: string;
}

const ORDER = ["ready", "starting", "down", "stopped"];

/** "2 servers: 1 ready, 1 down" (states in a fixed order, the empty ones left out). */
export function mcpSummary(servers: McpServerView[]): string {
  const counts = new Map<string, number>();
  for (const s of servers) counts.set(s.state, (counts.get(s.state) ?? 0) + 1);
  const states = [...counts.keys()].sort((a, b) => rank(a) - rank(b));
  const parts = states.map((state) => `${counts.get(state)} ${state}`);
  const total = servers.length === 1 ? "1 server" : `${servers.length} servers`;
  return parts.length ? `${total}: ${parts.join(", ")}` : total;
}

function rank(state: string): number {
  const i = ORDER.indexOf(state);
  return i < 0 ? ORDER.length : i;
}

/**
 * The error a server's row shows: why a down server is down (`current`), or
 * for one that works again, why it last went down (`past`); null when it
 * never failed.
 */
export function mcpError(server: McpServerView): { kind: "current" | "past"; text: string } | null {
  if (!server.last_error) return null;
  return { kind: server.state === "down" ? "current" : "past", text: server.last_error };
}

export interface ChangeMessage {
  type: string;
  sessions?: string[];
  all_sessions?: boolean;
  loops?: boolean;
  mcp?: boolean;
  activity?: boolean;
  notifications?: boolean;
}

export interface Rereads {
  sessions: boolean;
  loops: boolean;
  mcp: boolean;
  activity: boolean;
  notifications: boolean;  // outbound webhooks' messages (docs/NOTIFICATIONS.md)
}

/**
 * What a change-feed message asks the views to re-read. `ready` (a first
 * connect or a reconnect) asks for everything: changes made while the feed
 * was down were not announced.
 */
export function rereads(m: ChangeMessage): Rereads {
  if (m.type === "ready") return { sessions: true, loops: true, mcp: true, activity: true, notifications: true };
  if (m.type !== "changed") return { sessions: false, loops: false, mcp: false, activity: false, notifications: false };
  return {
    sessions: !!(m.sessions?.length || m.all_sessions),
    loops: !!m.loops,
    mcp: !!m.mcp,
    activity: !!m.activity,
    notifications: !!m.notifications,
  };
}
