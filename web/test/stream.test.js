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
  assert.deepEqual(p, { afterSeq: null, text: "echo", reasoning: "hm" });
  assert.equal(endsPending(ev(5, "message/assistant", { text: "echo" })), true);
  assert.equal(endsPending(ev(6, "turn/end", { status: "completed" })), true);
  assert.equal(endsPending(ev(4, "title/fallback", { title: "x" })), false);
});

test("a tool call's arguments are kept as the JSON object they are, never as [object Object]", () => {
  const blocks = blocksOf([
    ev(1, "turn/start"),
    ev(2, "message/user", { text: "go" }),
    ev(3, "tool/call", { call_id: "c1", name: "session_status", arguments: { recent_n: 3, deep: { x: [1] } } }),
    ev(4, "tool/call", { call_id: "c2", name: "check_session_status", arguments: { session_id: "ses_x" } }),
    ev(5, "tool/result", { call_id: "c2", name: "check_session_status", error: { code: "not_found", message: "no session" } }),
  ]);
  const [, ok, failed] = blocks;
  assert.equal(ok.kind, "tool");
  assert.deepEqual(ok.args, { recent_n: 3, deep: { x: [1] } });
  assert.equal(ok.done, false, "no result yet");
  assert.equal(prettyJson(ok.args), '{\n  "recent_n": 3,\n  "deep": {\n    "x": [\n      1\n    ]\n  }\n}');
  assert.doesNotMatch(prettyJson(ok.args), /object Object/);
  assert.equal(failed.done, true);
  assert.deepEqual(failed.error, { code: "not_found", message: "no session" });
  assert.equal(prettyJson(undefined), "");
});

test("every block but the running marker carries its event's time", () => {
  const blocks = blocksOf([
    ev(1, "turn/start"),
    ev(2, "message/user", { text: "go" }),
    ev(3, "message/reasoning", { text: "hm" }),
    ev(4, "tool/call", { call_id: "c1", name: "t", arguments: {} }),
    ev(5, "message/assistant", { text: "done" }),
    ev(6, "turn/end", { status: "error", error: { code: "x", message: "y" } }),
  ]);
  assert.deepEqual(blocks.map((b) => b.at), [2, 3, 4, 5, 6].map((seq) => 1767225600000 + seq));
});

test("a stopped turn keeps its partial answer and reasoning, marked partial", () => {
  const blocks = blocksOf([
    ev(1, "turn/start"),
    ev(2, "message/user", { text: "write a poem" }),
    ev(3, "message/reasoning", { text: "rhymes", partial: true }),
    ev(4, "message/assistant", { text: "Roses are", partial: true }),
    ev(5, "turn/end", { status: "error", error: { code: "cancelled", message: "stopped" } }),
    ev(6, "turn/start"),
    ev(7, "message/user", { text: "again" }),
    ev(8, "message/assistant", { text: "Roses are red" }),
    ev(9, "turn/end", { status: "completed" }),
  ]);
  assert.deepEqual(
    blocks.map((b) => [b.kind, b.partial ?? null]),
    [["user", null], ["reasoning", true], ["assistant", true], ["error", null], ["user", null], ["assistant", false]],
  );
  assert.equal(blocks[3].code, "cancelled");
});

test("a failed or stopped turn offers to send the message that started it again", () => {
  const blocks = blocksOf([
    ev(1, "turn/start"),
    ev(2, "message/user", { text: "first try" }),
    ev(3, "message/user", { text: "a steer", mode: "steer" }),
    ev(4, "turn/end", { status: "error", error: { code: "model_unavailable", message: "down" } }),
    ev(5, "turn/start"),
    ev(6, "message/user", { text: "<loop>\n  <loop_id>loop-1</loop_id>\n  <prompt>check</prompt>\n</loop>", meta: { origin: "loop", loop_id: "loop-1" } }),
    ev(7, "turn/end", { status: "error", error: { code: "cancelled", message: "" } }),
    ev(8, "turn/start"),
    ev(9, "turn/end", { status: "error", error: { code: "model_unavailable", message: "down" } }),
  ]);
  const errors = blocks.filter((b) => b.kind === "error");
  assert.deepEqual(errors.map((b) => b.retryText), ["first try", null, null], "the first message; not a loop's frame; none held");
});

test("deltas of one model call are placed by offset: a repeat after a reconnect shows once", async () => {
  const { addDelta, noPending } = await import("../src/lib/stream.js");
  let p = noPending();
  p = addDelta(p, { after_seq: 4, kind: "text", offset: 0, text: "Hel" });
  p = addDelta(p, { after_seq: 4, kind: "text", offset: 3, text: "lo" });
  assert.equal(p.text, "Hello");
  // The reconnect: what was streamed so far, as one delta at offset 0.
  const same = addDelta(p, { after_seq: 4, kind: "text", offset: 0, text: "Hello" });
  assert.equal(same, p, "nothing new: the same state, no re-render");
  p = addDelta(p, { after_seq: 4, kind: "text", offset: 0, text: "Hello, wo" });
  assert.equal(p.text, "Hello, wo", "only the unseen suffix is added");
  p = addDelta(p, { after_seq: 4, kind: "text", offset: 7, text: "world" });
  assert.equal(p.text, "Hello, world", "an overlapping piece adds its unseen rest");
  p = addDelta(p, { after_seq: 4, kind: "text", offset: 20, text: "!" });
  assert.equal(p.text, "Hello, world!", "a gap is appended anyway");
  p = addDelta(p, { after_seq: 4, kind: "reasoning", offset: 0, text: "hm" });
  p = addDelta(p, { after_seq: 4, kind: "reasoning", offset: 0, text: "hm" });
  assert.equal(p.reasoning, "hm", "reasoning is placed by its own offset");
  assert.equal(p.text, "Hello, world!");
});

test("a delta of another model call starts the pending answer afresh; one without offset is appended", async () => {
  const { addDelta, noPending } = await import("../src/lib/stream.js");
  let p = noPending();
  p = addDelta(p, { after_seq: 4, kind: "reasoning", offset: 0, text: "old thoughts" });
  p = addDelta(p, { after_seq: 4, kind: "text", offset: 0, text: "old" });
  p = addDelta(p, { after_seq: 9, kind: "text", offset: 0, text: "new" });
  assert.deepEqual(p, { afterSeq: 9, text: "new", reasoning: "" });
  p = addDelta(p, { after_seq: 9, kind: "text", text: " and more" });
  p = addDelta(p, { kind: "text", text: "!" });
  assert.equal(p.text, "new and more!");
  assert.equal(p.afterSeq, 9);
  // Emoji are two UTF-16 code units: offsets count them as JavaScript does.
  let q = addDelta(noPending(), { after_seq: 1, kind: "text", offset: 0, text: "a😀" });
  q = addDelta(q, { after_seq: 1, kind: "text", offset: 0, text: "a😀b" });
  assert.equal(q.text, "a😀b");
});

test("a call waiting for approval is marked until its decision or result is in the log", async () => {
  const { awaitsApproval } = await import("../src/lib/stream.js");
  const start = [
    ev(1, "turn/start"),
    ev(2, "message/user", { text: "clean up" }),
    ev(3, "tool/call", { call_id: "c1", name: "bash", arguments: { command: "rm -rf build" } }),
    ev(4, "tool/approval_requested", { call_id: "c1", name: "bash", summary: "rm -rf build", timeout_seconds: 900 }),
  ];
  let blocks = blocksOf(start);
  const tool = blocks[1];
  assert.equal(tool.callId, "c1");
  assert.equal(awaitsApproval(tool), true);
  assert.deepEqual(tool.approval, { summary: "rm -rf build", detail: null, requestedAt: 1767225600004, timeoutSeconds: 900 });
  assert.equal(blocks.at(-1).kind, "running");
  assert.equal(blocks.at(-1).waiting, true, "the turn says it waits for the person");

  blocks = blocksOf([...start, ev(5, "tool/approval", { call_id: "c1", name: "bash", decision: "deny", by: "person" })]);
  assert.equal(awaitsApproval(blocks[1]), false);
  assert.equal(blocks[1].approval.decision, "deny");
  assert.equal(blocks[1].approval.summary, "rm -rf build", "the request stays readable");
  assert.equal(blocks.at(-1).waiting, false);

  // A host restart answers the call `interrupted` without a decision.
  blocks = blocksOf([...start, ev(5, "tool/result", { call_id: "c1", name: "bash", error: { code: "interrupted", message: "" } })]);
  assert.equal(awaitsApproval(blocks[1]), false);
});
