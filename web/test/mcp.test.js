// node --test web/test/ — the automation panel's MCP servers, and which views
// a change-feed message re-reads.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mcpError, mcpSummary, rereads } from "../src/lib/mcp.js";

const server = (name, state, last_error = "") => ({
  name, transport: "stdio", state, tools: 3, protocol_version: "2025-06-18", last_error,
});

test("the summary counts the servers by state, working ones first", () => {
  assert.equal(mcpSummary([server("fs", "ready")]), "1 server: 1 ready");
  assert.equal(
    mcpSummary([server("a", "down"), server("b", "ready"), server("c", "starting"), server("d", "ready")]),
    "4 servers: 2 ready, 1 starting, 1 down",
  );
});

test("a down server shows why; one that works again shows its last failure as past", () => {
  const why = "MCP server x is unavailable: cannot run MCP server x: `nope`: No such file or directory";
  assert.deepEqual(mcpError(server("x", "down", why)), { kind: "current", text: why });
  assert.deepEqual(mcpError(server("x", "ready", why)), { kind: "past", text: why });
  assert.deepEqual(mcpError(server("x", "starting", why)), { kind: "past", text: why });
  assert.equal(mcpError(server("x", "ready")), null);
});

test("the feed's mcp flag re-reads the MCP servers, and only them", () => {
  assert.deepEqual(rereads({ type: "changed", mcp: true }), { sessions: false, loops: false, mcp: true, activity: false, notifications: false });
  assert.deepEqual(rereads({ type: "changed", loops: true, sessions: ["ses_a"] }), { sessions: true, loops: true, mcp: false, activity: false, notifications: false });
  assert.deepEqual(rereads({ type: "changed", all_sessions: true }), { sessions: true, loops: false, mcp: false, activity: false, notifications: false });
  assert.deepEqual(rereads({ type: "changed", sessions: [] }), { sessions: false, loops: false, mcp: false, activity: false, notifications: false });
  assert.deepEqual(rereads({ type: "changed", activity: true }), { sessions: false, loops: false, mcp: false, activity: true, notifications: false });
  assert.deepEqual(rereads({ type: "changed", notifications: true }), { sessions: false, loops: false, mcp: false, activity: false, notifications: true });
});

test("every (re)connect re-reads everything, the MCP servers and the notifications too", () => {
  assert.deepEqual(rereads({ type: "ready" }), { sessions: true, loops: true, mcp: true, activity: true, notifications: true });
  assert.deepEqual(rereads({ type: "something new" }), { sessions: false, loops: false, mcp: false, activity: false, notifications: false });
});
