// The automation panel's words for the MCP servers the host runs for its
// agents (GET /api/host's `mcp_servers`, docs/MCP.md), and what a message of
// the change feed asks the views to re-read.

/**
 * @typedef {{name: string, transport: "stdio" | "http", state: "starting" | "ready" | "down" | "stopped",
 *   tools: number, protocol_version: string, last_error: string}} McpServerView
 */

const ORDER = ["ready", "starting", "down", "stopped"];

/**
 * "2 servers: 1 ready, 1 down" (states in a fixed order, the empty ones left out).
 * @param {McpServerView[]} servers
 */
export function mcpSummary(servers) {
  /** @type {Map<string, number>} */
  const counts = new Map();
  for (const s of servers) counts.set(s.state, (counts.get(s.state) ?? 0) + 1);
  const states = [...counts.keys()].sort((a, b) => rank(a) - rank(b));
  const parts = states.map((state) => `${counts.get(state)} ${state}`);
  const total = servers.length === 1 ? "1 server" : `${servers.length} servers`;
  return parts.length ? `${total}: ${parts.join(", ")}` : total;
}

/** @param {string} state */
function rank(state) {
  const i = ORDER.indexOf(state);
  return i < 0 ? ORDER.length : i;
}

/**
 * The error a server's row shows: why a down server is down (`current`), or
 * for one that works again, why it last went down (`past`); null when it
 * never failed.
 * @param {McpServerView} server
 * @returns {{kind: "current" | "past", text: string} | null}
 */
export function mcpError(server) {
  if (!server.last_error) return null;
  return { kind: server.state === "down" ? "current" : "past", text: server.last_error };
}

/**
 * What a change-feed message asks the views to re-read. `ready` (a first
 * connect or a reconnect) asks for everything: changes made while the feed
 * was down were not announced.
 * @param {{type: string, sessions?: string[], all_sessions?: boolean, loops?: boolean, mcp?: boolean, activity?: boolean}} m
 * @returns {{sessions: boolean, loops: boolean, mcp: boolean, activity: boolean}}
 */
export function rereads(m) {
  if (m.type === "ready") return { sessions: true, loops: true, mcp: true, activity: true };
  if (m.type !== "changed") return { sessions: false, loops: false, mcp: false, activity: false };
  return { sessions: !!(m.sessions?.length || m.all_sessions), loops: !!m.loops, mcp: !!m.mcp, activity: !!m.activity };
}
