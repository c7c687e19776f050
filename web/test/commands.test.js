// node --test web/test/ — the composer's command matcher (spec 003).
import { test } from "node:test";
import assert from "node:assert/strict";
import { applyCompletion, commandMenu, completeSessionsRead, isCommand } from "../src/lib/commands.js";

const labels = (c) => (c ? c.options.map((o) => o.label) : null);
const sessions = [
  { session_id: "ses_alpha", title: "Plan the release" },
  { session_id: "ses_beta" },
];

test("a draft starting with / (after blanks) is a command", () => {
  assert.equal(isCommand("  /sessions status"), true);
  assert.equal(isCommand("hello /sessions"), false);
});

test("after the session id, both flags are offered", () => {
  assert.deepEqual(labels(completeSessionsRead("/sessions read ses_alpha ", sessions)), ["--offset", "--limit"]);
});

test("choosing a flag writes it with a space and leaves the caret for the value", () => {
  const draft = "/sessions read ses_alpha ";
  const c = completeSessionsRead(draft, sessions);
  assert.equal(applyCompletion(draft, c, c.options[1]), "/sessions read ses_alpha --limit ");
});

test("flags already present are not offered", () => {
  assert.deepEqual(labels(completeSessionsRead("/sessions read ses_alpha --offset 3 ", sessions)), ["--limit"]);
  assert.equal(completeSessionsRead("/sessions read ses_alpha --offset 3 --limit 2 ", sessions), null);
});

test("a partial --l filters, and choosing replaces the partial token", () => {
  const draft = "/sessions read ses_alpha --l";
  const c = completeSessionsRead(draft, sessions);
  assert.deepEqual(labels(c), ["--limit"]);
  assert.equal(applyCompletion(draft, c, c.options[0]), "/sessions read ses_alpha --limit ");
});

test("whitespace around and between /sessions and read matches the same", () => {
  for (const draft of ["  /sessions read ses_alpha ", "/sessions    read ses_alpha ", "/sessionsread ses_alpha ", "\t/sessions\tread ses_alpha  "]) {
    assert.deepEqual(labels(completeSessionsRead(draft, sessions)), ["--offset", "--limit"], JSON.stringify(draft));
  }
});

test("nothing is offered while a flag waits for its value, or for other commands", () => {
  assert.equal(completeSessionsRead("/sessions read ses_alpha --offset ", sessions), null);
  assert.equal(completeSessionsRead("/sessions read ses_alpha --offset 1", sessions), null);
  assert.equal(completeSessionsRead("/sessions status ses_alpha ", sessions), null);
  assert.equal(completeSessionsRead("/sessions reader x ", sessions), null);
  assert.equal(completeSessionsRead("hello", sessions), null);
});

test("the session id completes from ids and titles", () => {
  assert.deepEqual(labels(completeSessionsRead("/sessions read ses_b", sessions)), ["ses_beta"]);
  assert.deepEqual(labels(completeSessionsRead("/sessions read release", sessions)), ["Plan the release"]);
  const draft = "/sessions read plan";
  const c = completeSessionsRead(draft, sessions);
  assert.equal(applyCompletion(draft, c, c.options[0]), "/sessions read ses_alpha ");
});

test("the / menu lists the commands matching a partial name", () => {
  assert.equal(commandMenu("/").length, 5);
  assert.deepEqual(commandMenu("/h").map((c) => c.insert), ["/help"]);
  assert.equal(commandMenu("/help"), null, "typed whole: Enter sends it");
  assert.deepEqual(commandMenu("/sessions r").map((c) => c.name), ["/sessions read"]);
  assert.equal(commandMenu("/sessions read ses_alpha"), null);
  assert.equal(commandMenu("hello"), null);
});
