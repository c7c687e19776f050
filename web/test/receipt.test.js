// node --test web/test/ — a delivered reminder's receipt among the blocks.
import { test } from "node:test";
import assert from "node:assert/strict";
import { appendEvents, blocksOf, emptyConversation, prependEvents } from "../src/lib/stream.js";

const ev = (seq, type, data = {}) => ({ seq, type, at: 1767225600000 + seq, data });
const create = (seq, id, prompt, scheduledAt) =>
  ev(seq, "schedule/change", {
    version: 1,
    op: "create",
    schedule: { id, kind: "after", prompt, after_seconds: 2, scheduled_at: scheduledAt },
  });
const dispatch = (seq, id) => ev(seq, "schedule/change", { version: 1, op: "dispatch", id });
const remove = (seq, id) => ev(seq, "schedule/change", { version: 1, op: "delete", id });
const receipts = (events) => blocksOf(events).filter((b) => b.kind === "receipt");

test("a dispatch is a receipt with its create's prompt and time; creates and deletes are not blocks", () => {
  const blocks = blocksOf([
    ev(1, "message/user", { text: "remind me" }),
    create(2, "schedule-1", "check the oven", "2026-01-01T00:20:00.000Z"),
    create(3, "schedule-2", "never mind", "2026-01-01T00:30:00.000Z"),
    remove(4, "schedule-2"),
    dispatch(5, "schedule-1"),
    ev(6, "message/user", { text: "[SCHEDULE REMINDER] ...", mode: "followup", meta: { origin: "schedule" } }),
  ]);
  assert.deepEqual(blocks.map((b) => b.kind), ["user", "receipt", "user"]);
  assert.deepEqual(blocks[1], {
    kind: "receipt",
    key: "e5",
    seq: 5,
    at: 1767225600005,
    scheduleId: "schedule-1",
    prompt: "check the oven",
    occurrenceAt: "2026-01-01T00:20:00.000Z",
    deliveryMode: "session-local",
    dispatched: true,
    followUpSeq: null,
  });
});

test("a reused id pairs with its nearest preceding create (a fork's own schedule-1 after its parent's)", () => {
  const r = receipts([
    create(1, "schedule-1", "parent's", "2026-01-01T00:00:10.000Z"),
    dispatch(2, "schedule-1"),
    // the fork point: the child's own ids start again at schedule-1
    create(3, "schedule-1", "child's", "2026-01-01T01:00:00.000Z"),
    dispatch(4, "schedule-1"),
  ]);
  assert.deepEqual(
    r.map((b) => [b.seq, b.prompt, b.occurrenceAt]),
    [
      [2, "parent's", "2026-01-01T00:00:10.000Z"],
      [4, "child's", "2026-01-01T01:00:00.000Z"],
    ],
  );
});

test("a receipt whose create is in an older page is incomplete until that page loads", () => {
  let c = appendEvents(emptyConversation(2), [ev(3, "message/user", { text: "later" }), dispatch(4, "schedule-1")]);
  const partial = receipts(c.events);
  assert.equal(partial.length, 1);
  assert.equal(partial[0].scheduleId, "schedule-1");
  assert.equal(partial[0].prompt, null);
  assert.equal(partial[0].occurrenceAt, null);

  c = prependEvents(c, [ev(1, "message/user", { text: "remind me" }), create(2, "schedule-1", "check the oven", "2026-01-01T00:20:00.000Z")], 0);
  const complete = receipts(c.events);
  assert.equal(complete.length, 1, "still one receipt");
  assert.equal(complete[0].key, partial[0].key, "the same block, completed");
  assert.equal(complete[0].prompt, "check the oven");
  assert.equal(complete[0].occurrenceAt, "2026-01-01T00:20:00.000Z");
});

test("replaying the same events (a reconnect, a reload) yields one receipt per dispatch", () => {
  const events = [
    create(1, "schedule-1", "check the oven", "2026-01-01T00:20:00.000Z"),
    dispatch(2, "schedule-1"),
    ev(3, "turn/start"),
    ev(4, "message/user", { text: "[SCHEDULE REMINDER]", mode: "followup", meta: { origin: "schedule" } }),
  ];
  let c = appendEvents(emptyConversation(), events);
  c = appendEvents(c, events);  // the backlog sent again after a reconnect
  c = appendEvents(c, events.slice(1, 2));
  c = prependEvents(c, events, 0);  // an older page that overlaps the window
  assert.deepEqual(receipts(c.events).map((b) => b.seq), [2]);
});

test("a receipt stays when the turn that follows it fails", () => {
  const blocks = blocksOf([
    create(1, "schedule-1", "check the oven", "2026-01-01T00:20:00.000Z"),
    dispatch(2, "schedule-1"),
    ev(3, "turn/start"),
    ev(4, "message/user", { text: "[SCHEDULE REMINDER]", mode: "followup", meta: { origin: "schedule" } }),
    ev(5, "turn/end", { status: "error", error: { code: "model_unavailable", message: "no key" } }),
  ]);
  assert.deepEqual(blocks.map((b) => b.kind), ["receipt", "user", "error"]);
});

test("an event that is not a version-1 dispatch with an id is not a receipt", () => {
  assert.deepEqual(
    receipts([
      ev(1, "schedule/change", { version: 1, op: "dispatch" }),
      ev(2, "schedule/change", { version: 1, op: "create" }),
      ev(3, "schedule/change", { version: 2, op: "dispatch", id: "schedule-1" }),
    ]),
    [],
  );
});
