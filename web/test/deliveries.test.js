// node --test web/test/ — loop and reminder deliveries as a person reads them
// (issue 29): cards instead of frames, and titles without markup.
import { test } from "node:test";
import assert from "node:assert/strict";
import { displayTitle, parseLoopFrame, parseReminderFrame, unescapeXml } from "../src/lib/deliveries.js";
import { blockOfSeq, blocksOf } from "../src/lib/stream.js";

const ev = (seq, type, data = {}) => ({ seq, type, at: 1767225600000 + seq, data });
const frame = (id, prompt) => `<loop>\n  <loop_id>${id}</loop_id>\n  <prompt>${prompt}</prompt>\n</loop>`;
const loopMessage = (seq, id, prompt) =>
  ev(seq, "message/user", { text: frame(id, prompt), meta: { origin: "loop", loop_id: id, nominal_at: 1767225660000 } });
const reminderText = (id, at, prompt) =>
  `[SCHEDULE REMINDER] schedule_id: ${JSON.stringify(id)} occurrence_at: ${at} prompt: ${JSON.stringify(prompt)}`;
const followUp = (seq, id, prompt, at = "2026-01-01T00:20:00.000Z") =>
  ev(seq, "message/user", {
    text: reminderText(id, at, prompt),
    mode: "followup",
    meta: { origin: "schedule", schedule_id: id, occurrence_at: at },
  });
const create = (seq, id, prompt, scheduledAt = "2026-01-01T00:20:00.000Z") =>
  ev(seq, "schedule/change", { version: 1, op: "create", schedule: { id, kind: "after", prompt, scheduled_at: scheduledAt } });
const dispatch = (seq, id) => ev(seq, "schedule/change", { version: 1, op: "dispatch", id });

test("XML entities are unescaped, numeric ones too; unknown ones stay", () => {
  assert.equal(unescapeXml("a &lt;b&gt; &amp;&amp; &quot;c&quot; &apos;d&apos; &#65;&#x42; &nbsp;"), `a <b> && "c" 'd' AB &nbsp;`);
});

test("a loop frame gives its id and its prompt as text; anything else is no frame", () => {
  assert.deepEqual(parseLoopFrame(frame("loop_01", "check &lt;deploy&gt; &amp; report")), {
    loopId: "loop_01",
    prompt: "check <deploy> & report",
  });
  assert.deepEqual(parseLoopFrame(frame("loop_01", "two\nlines")), { loopId: "loop_01", prompt: "two\nlines" });
  assert.equal(parseLoopFrame("hello"), null);
  assert.equal(parseLoopFrame("<loop><loop_id>x</loop_id></loop>"), null);
  assert.equal(parseLoopFrame(frame("x", "y") + " and more"), null);
});

test("a reminder frame gives its id, time and prompt, with JSON escapes undone", () => {
  assert.deepEqual(parseReminderFrame(reminderText("schedule-1", "2026-01-01T00:20:00.000Z", 'say "hi"\nthen \\ bye')), {
    scheduleId: "schedule-1",
    occurrenceAt: "2026-01-01T00:20:00.000Z",
    prompt: 'say "hi"\nthen \\ bye',
  });
  assert.equal(parseReminderFrame("[SCHEDULE REMINDER] schedule_id: broken"), null);
  assert.equal(parseReminderFrame("remind me"), null);
});

test("titles never show a frame: the prompt, or what it was when cut off", () => {
  assert.equal(displayTitle("Plan the release"), "Plan the release");
  assert.equal(displayTitle(undefined), undefined);
  assert.equal(displayTitle("<loop> <loop_id>loop_01</loop_id> <prompt>check &amp; report</prompt> </loop>"), "check & report");
  assert.equal(displayTitle(frame("loop_01", "multi\nline   prompt")), "multi line prompt");
  assert.equal(displayTitle("<loop> <loop_id>loop_01kd5x…</loop_id>…"), "Loop run");
  assert.equal(displayTitle("<loop> <loop_id>loop_01</loop_id> <prompt>check the deplo…"), "Loop run");
  assert.equal(displayTitle(reminderText("schedule-1", "2026-01-01T00:20:00.000Z", "check the oven")), "check the oven");
  assert.equal(displayTitle('[SCHEDULE REMINDER] schedule_id: "schedule-1" occurrence_…'), "Reminder");
});

test("a loop delivery is a loop block with its prompt, not a message of the person", () => {
  const blocks = blocksOf([loopMessage(1, "loop_01", "check &lt;it&gt;"), ev(2, "message/assistant", { text: "done" })]);
  assert.deepEqual(blocks[0], {
    kind: "loop",
    key: "e1",
    seq: 1,
    at: 1767225600001,
    loopId: "loop_01",
    prompt: "check <it>",
    nominalAt: 1767225660000,
  });
  assert.equal(blocks[1].kind, "assistant");
});

test("a reminder's dispatch and its follow-up are one card", () => {
  const blocks = blocksOf([
    create(1, "schedule-1", "check the oven"),
    dispatch(2, "schedule-1"),
    ev(3, "turn/start"),
    followUp(4, "schedule-1", "check the oven"),
    ev(5, "message/assistant", { text: "the oven!" }),
    ev(6, "turn/end", { status: "completed" }),
  ]);
  assert.deepEqual(blocks.map((b) => b.kind), ["receipt", "assistant"]);
  assert.equal(blocks[0].seq, 2);
  assert.equal(blocks[0].followUpSeq, 4);
  assert.equal(blocks[0].prompt, "check the oven");
  assert.equal(blockOfSeq(blocks, 4), blocks[0], "the follow-up's seq finds the card");
  assert.equal(blockOfSeq(blocks, 3), blocks[0], "an event without a block finds the next one");
  assert.equal(blockOfSeq(blocks, 5), blocks[1]);
});

test("a follow-up whose dispatch is older than the window makes the card from its frame", () => {
  const blocks = blocksOf([followUp(7, "schedule-2", "stretch", "2026-01-02T00:00:00.000Z")]);
  assert.equal(blocks.length, 1);
  assert.deepEqual(
    { kind: blocks[0].kind, seq: blocks[0].seq, prompt: blocks[0].prompt, at: blocks[0].occurrenceAt, f: blocks[0].followUpSeq },
    { kind: "receipt", seq: 7, prompt: "stretch", at: "2026-01-02T00:00:00.000Z", f: 7 },
  );
});

test("a dispatch recorded after its follow-up (a crash in between) joins the card", () => {
  const blocks = blocksOf([create(1, "schedule-1", "check the oven"), followUp(2, "schedule-1", "check the oven"), dispatch(3, "schedule-1")]);
  assert.equal(blocks.length, 1);
  assert.equal(blocks[0].seq, 2);
  assert.equal(blocks[0].dispatched, true);
});

test("a fork's reused id: each dispatch pairs with the follow-up after it", () => {
  const blocks = blocksOf([
    create(1, "schedule-1", "parent's"),
    dispatch(2, "schedule-1"),
    followUp(3, "schedule-1", "parent's"),
    create(4, "schedule-1", "child's"),
    dispatch(5, "schedule-1"),
    followUp(6, "schedule-1", "child's"),
  ]);
  assert.deepEqual(blocks.map((b) => [b.seq, b.followUpSeq, b.prompt]), [
    [2, 3, "parent's"],
    [5, 6, "child's"],
  ]);
});
