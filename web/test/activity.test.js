// node --test web/test/ — outcomes and the activity inbox in words (issue 29).
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  ago,
  appendOlder,
  announcement,
  durationMs,
  isFailed,
  itemHref,
  mergeNewest,
  outcomeWords,
  pageTitle,
  toAnnounce,
  tokenWords,
} from "../src/lib/activity.js";
import { automationSummary } from "../src/lib/loops.js";

const item = (id, status, extra = {}) => ({
  id,
  at: 1767225600000 + id,
  kind: "loop_run",
  session_id: "ses_a",
  seq: id * 2,
  outcome: { status, ...(status === "error" ? { error: { code: "model_unavailable", message: "HTTP 500" } } : {}) },
  read: false,
  ...extra,
});

test("outcomes in words and tones: a failed turn or delivery is never 'ok'", () => {
  assert.deepEqual(outcomeWords({ status: "completed" }), { text: "completed", tone: "ok" });
  assert.deepEqual(outcomeWords({ status: "error", error: { code: "x", message: "y" } }), { text: "failed", tone: "bad" });
  assert.deepEqual(outcomeWords({ status: "none", error: { code: "x", message: "y" } }), { text: "not delivered", tone: "bad" });
  assert.equal(outcomeWords({ status: "pending" }).tone, "busy");
  assert.equal(outcomeWords({ status: "cancelled" }).text, "cancelled");
  assert.equal(outcomeWords(undefined).text, "unknown");
  assert.equal(isFailed({ status: "error" }), true);
  assert.equal(isFailed({ status: "none", error: { code: "x", message: "" } }), true);
  assert.equal(isFailed({ status: "none" }), false);
  assert.equal(isFailed({ status: "completed" }), false);
});

test("durations, tokens, relative times and the page title", () => {
  assert.equal(durationMs(420), "420 ms");
  assert.equal(durationMs(1234), "1.2 s");
  assert.equal(durationMs(45_000), "45 s");
  assert.equal(durationMs(184_000), "3 min 4 s");
  assert.equal(durationMs(undefined), "");
  assert.equal(tokenWords({ input_tokens: 1200, output_tokens: 35 }), "1,200 in · 35 out tokens");
  assert.equal(tokenWords(undefined), "");
  assert.equal(ago(1000, 1000 + 10_000), "just now");
  assert.equal(ago(0, 5 * 60_000), "5 min ago");
  assert.equal(ago(0, 3 * 3600_000), "3 h ago");
  assert.equal(ago(0, 2 * 86400_000), "2 days ago");
  assert.equal(pageTitle(0), "dsh");
  assert.equal(pageTitle(3), "(3) dsh");
  assert.equal(pageTitle(0, "Weekly report"), "Weekly report — dsh");
  assert.equal(pageTitle(2, "Weekly report"), "(2) Weekly report — dsh");
});

test("an item opens its session at the event", () => {
  assert.equal(itemHref({ session_id: "ses_a", seq: 12 }), "#/s/ses_a/12");
  assert.equal(itemHref({ session_id: "ses_a" }), "#/s/ses_a");
  assert.equal(itemHref({}), null);
});

test("a re-read newest page replaces its items and keeps older pages; no item twice", () => {
  const held = [item(9, "pending"), item(8, "completed"), item(5, "completed"), item(4, "error")];
  const page = [item(10, "running"), item(9, "error"), item(8, "completed")];
  const merged = mergeNewest(held, page, false);
  assert.deepEqual(merged.map((i) => [i.id, i.outcome.status]), [
    [10, "running"],
    [9, "error"],
    [8, "completed"],
    [5, "completed"],
    [4, "error"],
  ]);
  assert.deepEqual(mergeNewest(held, page, true).map((i) => i.id), [10, 9, 8], "the page is all there is");
  assert.deepEqual(appendOlder(merged, [item(5, "completed"), item(3, "completed")]).map((i) => i.id), [10, 9, 8, 5, 4, 3]);
});

test("announcements: nothing already there; then each new item once, or each failure once", () => {
  const first = toAnnounce(null, [item(2, "error"), item(1, "completed")], "every");
  assert.deepEqual(first.announce, []);
  const second = toAnnounce(first.state, [item(3, "pending"), item(2, "error"), item(1, "completed")], "every");
  assert.deepEqual(second.announce.map((i) => i.id), [3]);
  const again = toAnnounce(second.state, [item(3, "error"), item(2, "error")], "every");
  assert.deepEqual(again.announce, [], "a reconnect's re-read announces nothing again");

  let f = toAnnounce(null, [item(2, "error"), item(1, "pending")], "failed");
  f = toAnnounce(f.state, [item(3, "completed"), item(2, "error"), item(1, "pending")], "failed");
  assert.deepEqual(f.announce, [], "old failures and successes are not announced");
  f = toAnnounce(f.state, [item(4, "error"), item(3, "completed"), item(2, "error"), item(1, "error")], "failed");
  assert.deepEqual(f.announce.map((i) => i.id), [1, 4], "a run that fails later is announced when it fails");
  f = toAnnounce(f.state, [item(4, "error"), item(1, "error")], "failed");
  assert.deepEqual(f.announce, []);
});

test("an announcement names the kind, the outcome, the session and the error", () => {
  const a = announcement(item(1, "error", { title: "Deploy watch" }));
  assert.equal(a.title, "Loop run failed — Deploy watch");
  assert.equal(a.body, "model_unavailable: HTTP 500");
  assert.equal(announcement(item(2, "completed", { kind: "reminder", summary: "Done." })).title, "Reminder completed");
});

test("the composer's status covers loops and reminders", () => {
  const now = 1767225600000;
  const loop = (next_at, extra = {}) => ({ loop_id: "l" + next_at, prompt: "p", schedule: { kind: "every", every_seconds: 60 },
    session_id: "ses_a", created_at: 0, next_at, state: "scheduled", ...extra });
  const reminder = (at, state = "scheduled") => ({ id: "schedule-1", prompt: "r", scheduled_at: new Date(at).toISOString(), state });
  const s = automationSummary([loop(now + 600_000), loop(now + 900_000, { health: "failing" })], [reminder(now + 240_000)]);
  assert.equal(s.words, "2 loops · 1 reminder");
  assert.equal(s.nextAt, now + 240_000);
  assert.equal(s.failing, 1);
  assert.equal(automationSummary([], []).words, "No loops or reminders");
  assert.equal(automationSummary([], null).words, "No loops", "a host without reminders");
  const o = automationSummary([], [reminder(now - 60_000, "overdue")]);
  assert.equal(o.words, "1 reminder");
  assert.equal(o.overdueReminders, 1);
  assert.equal(o.nextAt, null, "an overdue reminder is no next run");
});
