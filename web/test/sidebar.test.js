// node --test — the Sessions list's words and the rows it reads one by one (issue 31).
import { test } from "node:test";
import assert from "node:assert/strict";
import { agoInWords, rowLabel, rowsToRead, titledByPerson } from "../src/lib/sidebar.js";

const now = Date.parse("2026-12-04T12:00:00Z");
const at = (secondsAgo) => new Date(now - secondsAgo * 1000).toISOString();

test("times read as whole words", () => {
  assert.equal(agoInWords(now - 10_000, now), "just now");
  assert.equal(agoInWords(now - 60_000, now), "1 minute ago");
  assert.equal(agoInWords(now - 120_000, now), "2 minutes ago");
  assert.equal(agoInWords(now - 3 * 3600_000, now), "3 hours ago");
  assert.equal(agoInWords(now - 86400_000, now), "1 day ago");
  assert.equal(agoInWords(now - 9 * 86400_000, now), "9 days ago");
});

test("a row's accessible name is a sentence", () => {
  const row = { session_id: "ses_a", title: "Weekly report", status: "idle", updated_at: at(120) };
  assert.equal(rowLabel(row, now), "Weekly report, idle, updated 2 minutes ago");
  assert.equal(rowLabel({ ...row, title: undefined }, now), "ses_a, idle, updated 2 minutes ago");
  assert.equal(rowLabel(row, now, { pinned: true, unread: 3 }),
               "Global interface: Weekly report, idle, updated 2 minutes ago, 3 unread");
  assert.equal(rowLabel({ ...row, parent_id: "ses_p" }, now, { parentTitle: "Plan the release" }),
               "Weekly report, idle, updated 2 minutes ago, fork of Plan the release");
  assert.equal(rowLabel({ ...row, parent_id: "ses_p" }, now), "Weekly report, idle, updated 2 minutes ago, fork of ses_p");
  assert.equal(rowLabel({ session_id: "ses_x", status: "missing" }, now), "ses_x, missing");
  assert.equal(rowLabel({ session_id: "ses_g", status: "cold", updated_at: at(7200) }, now, { pinned: true }),
               "Global interface, cold, updated 2 hours ago");
  assert.equal(rowLabel({ session_id: "ses_g", status: "" }, now, { pinned: true }), "Global interface", "its row not read yet");
});

test("the rows to read on their own: the Global interface, the open session, the forks' parents, each once and only when not loaded", () => {
  const rows = [
    { session_id: "a", status: "idle", parent_id: "old" },
    { session_id: "b", status: "cold", parent_id: "a" },
    { session_id: "c", status: "cold", parent_id: "old" },
    { session_id: "d", status: "cold", parent_id: null },
  ];
  const loaded = new Set(rows.map((r) => r.session_id));
  assert.deepEqual(rowsToRead(loaded, { global: "g", current: "deep", rows }), ["g", "deep", "old"]);
  assert.deepEqual(rowsToRead(loaded, { global: "a", current: "b", rows: rows.slice(1, 2) }), []);
  assert.deepEqual(rowsToRead(loaded, { global: null, current: null, rows: [] }), []);
});

test("only a title a person gave offers the way back to the automatic one", () => {
  assert.equal(titledByPerson({ session_id: "a", status: "idle", title: "Mine", title_source: "user" }), true);
  for (const source of ["generated", "fallback", null, undefined]) {
    assert.equal(titledByPerson({ session_id: "a", status: "idle", title: "T", title_source: source }), false);
  }
  assert.equal(titledByPerson(undefined), false);
});

test("a running session whose tool call waits for the person says so", async () => {
  const { statusWords } = await import("../src/lib/sidebar.js");
  const row = { session_id: "ses_1", title: "Disk report", status: "running", awaiting_approval: true };
  assert.equal(statusWords(row), "waiting for approval");
  assert.equal(statusWords({ ...row, awaiting_approval: false }), "running");
  assert.equal(statusWords({ ...row, status: "idle" }), "idle", "only a running turn waits");
  assert.match(rowLabel(row, Date.now()), /^Disk report, waiting for approval/);
});
