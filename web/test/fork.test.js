// node --test — where "Fork from here" forks, and the draft it leaves (issue 30, defect 1).
import { test } from "node:test";
import assert from "node:assert/strict";
import { lastOwnMessage, planFork, userMessagesOf } from "../src/lib/fork.js";

const ev = (seq, type, data = {}) => ({ seq, type, data });
const user = (seq, text, extra = {}) => ev(seq, "message/user", { text, ...extra });

// Two exchanges, as an agent records them.
const twoTurns = [
  ev(1, "title/fallback", { title: "first" }),
  ev(2, "turn/start"),
  user(3, "the first question", { message_id: "msg_1" }),
  ev(4, "message/assistant", { text: "answer one" }),
  ev(5, "turn/end", { status: "ok" }),
  ev(6, "turn/start"),
  user(7, "a second question", { message_id: "msg_2" }),
  ev(8, "message/assistant", { text: "answer two" }),
  ev(9, "turn/end", { status: "ok" }),
];

test("forking before the second message ends at the first turn's end, not inside the second turn", () => {
  assert.deepEqual(planFork(twoTurns, 7), { kind: "fork", seedLength: 5, draft: "a second question" });
});

test("forking before the first message keeps what came before any turn", () => {
  assert.deepEqual(planFork(twoTurns, 3), { kind: "fork", seedLength: 1, draft: "the first question" });
});

test("a steer taken inside a turn forks before that turn; the turn's earlier messages join the draft", () => {
  const events = [
    ev(1, "turn/start"),
    user(2, "write a poem"),
    ev(3, "tool/call", { call_id: "c", name: "t", arguments: "{}" }),
    ev(4, "tool/result", { call_id: "c", name: "t", result: {} }),
    user(5, "make it rhyme"),
    ev(6, "message/assistant", { text: "roses" }),
    ev(7, "turn/end", { status: "ok" }),
  ];
  assert.deepEqual(planFork(events, 5), { kind: "fork", seedLength: 0, draft: "write a poem\n\nmake it rhyme" });
});

test("a loop's delivery in the same turn is not put in the person's draft", () => {
  const events = [
    ev(10, "turn/start"),
    user(11, "<loop>…</loop>", { meta: { origin: "loop", loop_id: "loop_1" } }),
    user(12, "and also this"),
    ev(13, "turn/end", { status: "ok" }),
  ];
  assert.deepEqual(planFork(events, 12), { kind: "fork", seedLength: 9, draft: "and also this" });
});

test("events that do not reach back to the turn's start ask for older ones", () => {
  const window = twoTurns.slice(6);  // seq 7 onwards: the turn/start at 6 is not held
  assert.deepEqual(planFork(window, 7), { kind: "older" });
  assert.deepEqual(planFork(twoTurns.slice(5), 7), { kind: "fork", seedLength: 5, draft: "a second question" });
});

test("a seq that is not a message held is unknown", () => {
  assert.deepEqual(planFork(twoTurns, 8), { kind: "unknown" });
  assert.deepEqual(planFork(twoTurns, 42), { kind: "unknown" });
  assert.deepEqual(planFork([], 1), { kind: "unknown" });
});

test("a message after a turn's end and outside any turn forks right before it", () => {
  const events = [...twoTurns, user(10, "stray")];
  assert.deepEqual(planFork(events, 10), { kind: "fork", seedLength: 9, draft: "stray" });
});

test("user messages carry their ids; the last own message skips deliveries", () => {
  const events = [
    ...twoTurns,
    ev(10, "turn/start"),
    user(11, "[SCHEDULE REMINDER]", { meta: { origin: "schedule", schedule_id: "schedule-1" }, message_id: "msg_3" }),
    ev(12, "turn/end", { status: "ok" }),
  ];
  assert.deepEqual(
    userMessagesOf(events).map((m) => [m.seq, m.messageId, m.own]),
    [[3, "msg_1", true], [7, "msg_2", true], [11, "msg_3", false]],
  );
  assert.equal(lastOwnMessage(events)?.seq, 7);
  assert.equal(lastOwnMessage(events)?.text, "a second question");
  assert.equal(lastOwnMessage([ev(1, "turn/start")]), null);
  assert.equal(userMessagesOf([user(1, "old")])[0].messageId, null);
});
