// node --test web/test/ — the words of the automation panel and the composer's loop status.
import { test } from "node:test";
import assert from "node:assert/strict";
import { appendOlderRuns, countdown, durationWords, loopSummary, mergeNewestRuns, scheduleWords, splitDuration, targetWords, toSeconds } from "../src/lib/loops.js";

test("durations in the largest unit that divides them", () => {
  assert.equal(durationWords(300), "5 min");
  assert.equal(durationWords(30), "30 s");
  assert.equal(durationWords(90), "90 s");
  assert.equal(durationWords(7200), "2 h");
  assert.equal(durationWords(86400), "1 day");
  assert.equal(durationWords(3 * 86400), "3 days");
  assert.deepEqual(splitDuration(7200), { amount: 2, unit: "hours" });
  assert.deepEqual(splitDuration(61), { amount: 61, unit: "seconds" });
});

test("the unit picker still sends seconds", () => {
  assert.equal(toSeconds("5", "minutes"), 300);
  assert.equal(toSeconds(2, "days"), 172800);
  assert.equal(toSeconds("1.5", "hours"), 5400);
  assert.ok(Number.isNaN(toSeconds("", "minutes")));
  assert.ok(Number.isNaN(toSeconds("soon", "seconds")));
});

test("schedules in words", () => {
  assert.equal(scheduleWords({ kind: "every", every_seconds: 300 }), "every 5 min");
  assert.equal(scheduleWords({ kind: "after", after_seconds: 30 }), "once, after 30 s");
  assert.equal(scheduleWords({ kind: "cron", expr: "0 9 * * *", tz: "Asia/Shanghai" }), "cron 0 9 * * * (Asia/Shanghai)");
  assert.equal(scheduleWords({ kind: "cron", expr: "0 9 * * *", tz: "Asia/Shanghai" }, "At 09:00"), "At 09:00 (Asia/Shanghai)");
  assert.equal(scheduleWords({ kind: "cron", expr: "@daily" }, "Every day at midnight"), "Every day at midnight (the host's zone)");
});

test("countdowns derived from next_at and the clock", () => {
  const now = 1_000_000_000;
  assert.equal(countdown(now + 4_000, now), "in 4 s");
  assert.equal(countdown(now + 243_000, now), "in 4 min 3 s");
  assert.equal(countdown(now + 2 * 3600_000 + 5 * 60_000, now), "in 2 h 5 min");
  assert.equal(countdown(now + 3 * 86400_000, now), "in 3 days 0 h");
  assert.equal(countdown(now, now), "now");
  assert.equal(countdown(now - 5_000, now), "5 s ago");
});

test("targets: self, new, a session by title with the id as fallback", () => {
  const titles = new Map([["ses_a", "Release plan"], ["ses_b", undefined]]);
  assert.equal(targetWords("self", titles), "Global interface");
  assert.equal(targetWords("new", titles), "Fresh session each run");
  assert.equal(targetWords("ses_a", titles), "Release plan");
  assert.equal(targetWords("ses_b", titles), "ses_b");
  assert.equal(targetWords("ses_c", titles), "ses_c");
});

test("the composer's summary: count, nearest next run, overdue and failed", () => {
  const loops = [
    { loop_id: "a", state: "scheduled", next_at: 500 },
    { loop_id: "b", state: "overdue", next_at: 100 },
    { loop_id: "c", state: "failed", next_at: 900 },
    { loop_id: "d", state: "running" },
  ];
  assert.deepEqual(loopSummary(loops), { count: 4, nextAt: 100, overdue: 1, failed: 1 });
  assert.deepEqual(loopSummary([]), { count: 0, nextAt: null, overdue: 0, failed: 0 });
});

test("a re-read run history keeps the older runs loaded and replaces the newest, each once", () => {
  const run = (t, extra = {}) => ({ nominal_at: t, ...extra });
  const held = [run(50), run(40), run(30), run(20), run(10)];
  // The newest page now says 50's notification was delivered; 60 is new.
  const page = [run(60), run(50, { notifications: [{ id: "m", state: "delivered" }] }), run(40)];
  const merged = mergeNewestRuns(held, page, false);
  assert.deepEqual(merged.map((r) => r.nominal_at), [60, 50, 40, 30, 20, 10]);
  assert.equal(merged[1].notifications[0].state, "delivered");
  // A page that holds every run is the whole history.
  assert.deepEqual(mergeNewestRuns(held, [run(60)], true).map((r) => r.nominal_at), [60]);
  assert.deepEqual(appendOlderRuns([run(60), run(50)], [run(50), run(40)]).map((r) => r.nominal_at), [60, 50, 40]);
});
