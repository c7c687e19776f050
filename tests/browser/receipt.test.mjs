// The reminder receipt in the conversation (issue 19): a real `dsh web` with
// the schedule plugin on, in Debian's chromium.
// Run: node --test --test-concurrency=1 tests/browser/receipt.test.mjs
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { Host, launch, screenshot, signedIn } from "./harness.mjs";

// A provider whose key variable is unset: every turn on it ends with
// `model_unavailable`, so a reminder's follow-up turn fails after the dispatch.
const kAbsentKey = "DSH_RECEIPT_TEST_ABSENT_KEY";

let host;
let browser;

before(async () => {
  delete process.env[kAbsentKey];
  host = await Host.start(
    [
      "plugins:",
      "  schedule: {enabled: true}",
      "  time_context: {enabled: true}",
      "providers:",
      "  keyless:",
      "    type: openai",
      "    base_url: http://127.0.0.1:9/v1",
      `    api_key_env: ${kAbsentKey}`,
      "",
    ].join("\n"),
  );
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await host?.close();
});

const receipts = (page) => page.getByTestId("reminder-receipt");
const dispatches = (events) => events.filter((e) => e.type === "schedule/change" && e.data.op === "dispatch");

async function open(id) {
  const page = await signedIn(browser, host);
  await page.goto(host.url + `/#/s/${id}`);
  await page.getByTestId("conversation").waitFor();
  return page;
}

// Every block's seq once: nothing shown twice.
async function assertNoDuplicates(page) {
  const seqs = await page.locator("[data-seq]").evaluateAll((els) => els.map((e) => Number(e.dataset.seq)));
  assert.equal(new Set(seqs).size, seqs.length, "no block twice: " + seqs.join(","));
}

let delivered;  // the session of the first test, its reminder delivered

test("a reminder due in 2 s shows its receipt once, and once after a reload", async () => {
  const { session } = await host.api("POST", "/api/sessions", {});
  delivered = session.id;
  const page = await open(session.id);
  await host.api("POST", `/api/sessions/${session.id}/messages`, { message: "remind me about the oven" });
  await page.getByText("echo: remind me about the oven").waitFor();

  const made = await host.tool("schedule_create", { prompt: "check the oven", after_seconds: 2 }, session.id);
  assert.equal(made.delivery_mode, "session-local");
  await receipts(page).waitFor({ timeout: 20000 });
  // The follow-up turn the reminder queued is answered after the receipt.
  await page.getByText('echo: [SCHEDULE REMINDER] schedule_id: "schedule-1"').waitFor();
  assert.equal(await receipts(page).count(), 1);
  const card = receipts(page);
  const text = await card.innerText();
  assert.match(text, /Reminder/);
  assert.match(text, /check the oven/);
  assert.match(text, /session-local/);
  assert.match(text, /Asia\/Shanghai/, "the viewer's zone");
  assert.equal(await card.getAttribute("role"), null, "not an alert");
  // The due time (not the card's "just now", class "ago").
  assert.equal(await card.locator("time:not(.ago)").first().getAttribute("datetime"), made.scheduled_at);
  const [dispatch] = dispatches(await host.events(session.id));
  assert.equal(Number(await card.getAttribute("data-seq")), dispatch.seq);
  await assertNoDuplicates(page);
  await screenshot(page, "receipt");
  await page.emulateMedia({ colorScheme: "dark" });
  await screenshot(page, "receipt-dark");

  await page.reload();
  await page.getByText('echo: [SCHEDULE REMINDER] schedule_id: "schedule-1"').waitFor();
  assert.equal(await receipts(page).count(), 1, "once after a reload");
  assert.match(await receipts(page).innerText(), /check the oven/);
  await assertNoDuplicates(page);
  assert.deepEqual((await host.tool("schedule_list", {}, session.id)).schedules, [], "delivered: no longer active");
  await page.setViewportSize({ width: 360, height: 720 });
  await receipts(page).scrollIntoViewIfNeeded();
  await screenshot(page, "receipt-narrow");
  await page.context().close();
});

test("a fork made after the delivery shows the receipt as history, with no active reminder", async () => {
  assert.ok(delivered, "the first test's session");
  const { session: child } = await host.api("POST", `/api/sessions/${delivered}/fork`);
  const page = await open(child.id);
  await receipts(page).waitFor();
  assert.equal(await receipts(page).count(), 1);
  assert.match(await receipts(page).innerText(), /check the oven/);
  assert.deepEqual((await host.tool("schedule_list", {}, child.id)).schedules, [], "the child has no reminder");
  await assertNoDuplicates(page);
  await page.context().close();
});

test("a reminder pending when its session is forked is delivered in the parent only", async () => {
  const { session: parent } = await host.api("POST", "/api/sessions", {});
  await host.tool("schedule_create", { prompt: "water the plants", after_seconds: 3 }, parent.id);
  const { session: child } = await host.api("POST", `/api/sessions/${parent.id}/fork`);
  assert.deepEqual((await host.tool("schedule_list", {}, child.id)).schedules, [], "the fork starts with none");
  assert.equal((await host.tool("schedule_list", {}, parent.id)).schedules.length, 1);

  // The child live too, so that a reminder it wrongly inherited would fire.
  const childPage = await open(child.id);
  await host.api("POST", `/api/sessions/${child.id}/messages`, { message: "hello child" });
  await childPage.getByText("echo: hello child").waitFor();

  const parentPage = await open(parent.id);
  await receipts(parentPage).waitFor({ timeout: 20000 });
  assert.match(await receipts(parentPage).innerText(), /water the plants/);
  await parentPage.getByText('echo: [SCHEDULE REMINDER] schedule_id: "schedule-1"').waitFor();

  assert.equal(await receipts(childPage).count(), 0, "no receipt in the fork");
  assert.deepEqual(dispatches(await host.events(child.id)), []);
  await childPage.reload();
  await childPage.getByText("echo: hello child").waitFor();
  assert.equal(await receipts(childPage).count(), 0, "none after a reload either");
  await childPage.context().close();
  await parentPage.context().close();
});

test("a receipt stays when the turn after it fails", async () => {
  // A root session on the keyless provider: every turn ends in an error.
  const created = await host.tool("session_create", {
    prompt: "remind me to stretch",
    model: { provider: "keyless", model: "any" },
  });
  const id = created.session_id;
  const page = await open(id);
  const errors = page.locator(".block.turn-error");
  await errors.first().waitFor();
  assert.match(await errors.first().innerText(), /model_unavailable/);

  await host.tool("schedule_create", { prompt: "stretch your legs", after_seconds: 2 }, id);
  await receipts(page).waitFor({ timeout: 20000 });
  await page.waitForFunction(() => document.querySelectorAll(".block.turn-error").length === 2);
  const receiptSeq = Number(await receipts(page).getAttribute("data-seq"));
  const errorSeq = Number(await errors.nth(1).getAttribute("data-seq"));
  assert.ok(receiptSeq < errorSeq, "the failed turn follows the receipt");

  await page.reload();
  await page.waitForFunction(() => document.querySelectorAll(".block.turn-error").length === 2);
  assert.equal(await receipts(page).count(), 1, "the receipt is still there, once");
  assert.match(await receipts(page).innerText(), /stretch your legs/);
  await assertNoDuplicates(page);
  await page.context().close();
});

test("the composer lists the session's active reminders as session-local, next to its loops", async () => {
  const { session } = await host.api("POST", "/api/sessions", {});
  const page = await open(session.id);
  await host.api("POST", `/api/sessions/${session.id}/messages`, { message: "hello" });
  await page.getByText("echo: hello").waitFor();
  const status = page.getByRole("status", { name: "Loops" });
  await status.getByText("No loops").waitFor();
  await host.tool("schedule_create", { prompt: "stretch your legs", after_seconds: 3600 }, session.id);
  // Live: the reminder's create event reaches the change feed.
  await status.getByText("1 reminder").waitFor();
  assert.match(await status.innerText(), /session-local/);
  assert.match(await status.innerText(), /next in 59 min 5\d s|next in 1 h 0 min/);
  await host.tool("schedule_delete", { id: "schedule-1" }, session.id);
  await status.getByText("1 reminder").waitFor({ state: "detached" });
  await page.context().close();
});
