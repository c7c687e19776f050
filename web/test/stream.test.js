// node --test web/test/ — the conversation window and its blocks.
import { test } from "node:test";
import assert from "node:assert/strict";
import { appendEvents, blocksOf, emptyConversation, prependEvents, prettyJson } from "../src/lib/stream.js";

const ev = (seq, type, data = {}) => ({ seq, type, at: 1767225600000 + seq, data });

test("events are taken once and in order; a repeat after a reconnect changes nothing", () => {
  let c = emptyConversation();
  c = appendEvents(c, [ev(1, "turn/start"), ev(2, "message/user", { text: "hi" })]);
  const again = appendEvents(c, [ev(1, "turn/start"), ev(2, "message/user", { text: "hi" })]);
  assert.equal(again, c, "no new state for repeated events");
  c = appendEvents(c, [ev(2, "message/user", { text: "hi" }), ev(3, "message/assistant", { text: "echo: hi" })]);
  assert.deepEqual(c.events.map((e) => e.seq), [1, 2, 3]);
  assert.equal(c.gap, false);
});

test("an event past a missing seq is a gap, not a block", () => {
  const c = appendEvents(emptyConversation(), [ev(1, "turn/start"), ev(3, "message/user", { text: "x" })]);
  assert.equal(c.gap, true);
  assert.equal(c.lastSeq, 1);
});

test("older pages are prepended without duplicates", () => {
  let c = appendEvents(emptyConversation(10), [ev(11, "message/user", { text: "b" })]);
  c = prependEvents(c, [ev(9, "message/user", { text: "x" }), ev(10, "message/user", { text: "a" }), ev(11, "message/user", { text: "dup" })], 9);
  assert.deepEqual(c.events.map((e) => e.data.text), ["a", "b"]);
  assert.equal(c.firstSeq, 9);
});

test("blocks: messages, reasoning, a tool call with its result, a turn error and a running turn", () => {
  const blocks = blocksOf([
    ev(1, "turn/start"),
    ev(2, "message/user", { text: "go", mode: "steer", meta: { origin: "api" } }),
    ev(3, "title/fallback", { title: "go" }),
    ev(4, "message/reasoning", { text: "thinking" }),
    ev(5, "tool/call", { call_id: "c1", name: "session_status", arguments: '{"recent_n":1}' }),
    ev(6, "tool/result", { call_id: "c1", name: "session_status", result: { sessions: [] } }),
    ev(7, "message/assistant", { text: "done" }),
    ev(8, "turn/end", { status: "error", error: { code: "model_unavailable", message: "down" } }),
    ev(9, "turn/start"),
    ev(10, "message/user", { text: "again" }),
  ]);
  assert.deepEqual(blocks.map((b) => b.kind), ["user", "reasoning", "tool", "assistant", "error", "user", "running"]);
  assert.deepEqual(blocks[2].result, { sessions: [] });
  assert.equal(blocks[4].code, "model_unavailable");
});

test("tool arguments are pretty-printed, invalid JSON shown as is", () => {
  assert.equal(prettyJson('{"a":1}'), '{\n  "a": 1\n}');
  assert.equal(prettyJson("{oops"), "{oops");
});

test("deltas build the answer being written; the committed answer ends it", async () => {
  const { addDelta, endsPending, noPending } = await import("../src/lib/stream.js");
  let p = noPending();
  p = addDelta(p, { kind: "text", text: "ec" });
  p = addDelta(p, { kind: "reasoning", text: "hm" });
  p = addDelta(p, { kind: "text", text: "ho" });
  assert.deepEqual(p, { text: "echo", reasoning: "hm" });
  assert.equal(endsPending(ev(5, "message/assistant", { text: "echo" })), true);
  assert.equal(endsPending(ev(6, "turn/end", { status: "completed" })), true);
  assert.equal(endsPending(ev(4, "title/fallback", { title: "x" })), false);
});
