// Issue 29 in the browser: run outcomes, the activity inbox, loop and
// reminder cards, finished loops, the composer's status and Manage view, and
// notifications — a real `dsh web` with the schedule plugin, whose model is
// a scripted OpenAI-compatible server on loopback, in Debian's chromium.
// Run: node --test --test-concurrency=1 tests/browser/activity.test.mjs
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Host, ScriptedModel, launch, screenshot, signedIn, waitForEvent } from "./harness.mjs";

const patch = join(resolve(dirname(fileURLToPath(import.meta.url)), "../.."), "examples/web-schedule/cordis.yml");
const desktop = { width: 1280, height: 800 };
const phone = { width: 390, height: 844 };

let model;
let host;
let browser;

before(async () => {
  model = await ScriptedModel.start();
  host = await Host.start(undefined, { env: model.env(), args: ["--patch", patch] });
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await host?.close();
  model?.close();
});

// Waits until `fn` answers something truthy (a condition on the host's API).
async function until(fn, what, timeout = 20000) {
  const end = Date.now() + timeout;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((ok) => setTimeout(ok, 100));
  }
}
const runs = async (loopId) => (await host.api("GET", `/api/loops/${loopId}/runs`)).runs;
// The loop's first run once its turn ended (its outcome is final).
const endedRun = (loopId) =>
  until(async () => {
    const [r] = (await runs(loopId)).slice(-1);
    return r?.outcome && ["completed", "error", "cancelled"].includes(r.outcome.status) ? r : null;
  }, `a finished run of ${loopId}`);
const unread = () => host.api("GET", "/api/activity/unread");

async function newSession() {
  const { session } = await host.api("POST", "/api/sessions", {});
  return session.id;
}
async function say(id, text) {
  await host.api("POST", `/api/sessions/${id}/messages`, { message: text });
  await waitForEvent(browser, host, id, "turn/end");
}
async function open(hash, viewport = desktop) {
  const page = await signedIn(browser, host, viewport);
  await page.goto(host.url + "/" + hash);
  return page;
}
const filterButton = (page, name) => page.getByRole("group", { name: "Show" }).getByRole("button", { name, exact: true });
const sidebar = (page) => page.getByRole("navigation", { name: "Sessions" });

let newLoop;  // the `after` loop of the first test, delivered to a fresh session

describe("loop deliveries", () => {
  test("a loop run is a card with its prompt, its schedule and a link to the loop; no title shows the frame", async () => {
    newLoop = await host.tool("loop_create", {
      prompt: "check <deploy> & report",
      schedule: { kind: "after", after_seconds: 1 },
      session_id: "new",
    });
    const run = await endedRun(newLoop.loop_id);
    assert.equal(run.outcome.status, "completed");
    const sid = run.outcome.session_id ?? run.target_session_id;

    const page = await open(`#/s/${sid}`);
    const card = page.getByRole("article", { name: /^Loop run/ });
    await card.waitFor();
    assert.equal(await card.count(), 1);
    await card.getByText("once, after 1 s").waitFor();  // the loop's schedule, once the loops are read
    const text = await card.innerText();
    assert.match(text, /check <deploy> & report/, "the prompt, unescaped");
    assert.match(text, /once, after 1 s/, "the schedule in words (a finished loop)");
    assert.doesNotMatch(text, /<loop>|&lt;/);
    assert.equal(await page.locator(".block.user").count(), 0, "not a message of the person");
    await page.locator(".block.assistant", { hasText: "All good." }).first().waitFor();
    // No view shows the frame as a title.
    const row = sidebar(page).locator(`[data-session="${sid}"]`);
    await row.waitFor();
    assert.doesNotMatch(await row.innerText(), /<loop>|loop_id/);
    assert.doesNotMatch(await page.locator(".session-header h1").innerText(), /<loop>|loop_id/);
    await screenshot(page, "loop-card");

    const link = card.getByRole("link", { name: /loop in Automation/ });
    assert.equal(await link.getAttribute("href"), `#/automation?loop=${newLoop.loop_id}`);
    await link.click();
    await page.getByRole("heading", { name: "Automation", level: 1 }).waitFor();
    const finished = page.getByRole("list", { name: "Finished loops" }).locator(`[data-loop="${newLoop.loop_id}"]`);
    await finished.waitFor();
    assert.match(await finished.getAttribute("class"), /focused/, "the loop the card named is shown");
    assert.match(await finished.innerText(), /check <deploy> & report/);
    await finished.getByRole("button", { name: /Run history/ }).click();
    const history = finished.locator(".runs tbody tr");
    await history.first().waitFor();
    assert.match(await history.first().innerText(), /completed/);
    assert.match(await history.first().innerText(), /1,200 in · 35 out tokens/);
    const toRun = history.first().getByRole("link");
    assert.equal(await toRun.getAttribute("href"), `#/s/${sid}/${run.outcome.seq}`);
    assert.doesNotMatch(await page.locator("body").innerText(), /<loop>/, "no title anywhere shows the frame");
    await page.context().close();
  });

  test("a loop whose turns fail says 'failing' in words and colour, in the panel, its history and the composer", async () => {
    const sid = await newSession();
    await say(sid, "hello");
    model.fail = true;
    try {
      const loop = await host.tool("loop_create", {
        prompt: "watch the build",
        schedule: { kind: "every", every_seconds: 2 },
        session_id: sid,
      });
      const page = await open("#/automation");
      const row = page.getByRole("list", { name: "Loops" }).locator(`[data-loop="${loop.loop_id}"]`);
      await row.locator(".state.failing").waitFor();
      assert.match(await row.innerText(), /failing/);
      assert.match(await row.innerText(), /failed/);
      const color = await row.locator(".state.failing").evaluate((e) => getComputedStyle(e).color);
      const green = await page.evaluate(() => getComputedStyle(document.documentElement).getPropertyValue("--ok"));
      assert.notEqual(color, green);
      await row.getByRole("button", { name: /Run history/ }).click();
      await row.locator(".runs tbody tr").first().waitFor();
      assert.match(await row.locator(".runs tbody tr").first().innerText(), /failed/);
      await row.evaluate((e) => e.scrollIntoView({ block: "start" }));
      await screenshot(page, "failing-loop");

      await page.goto(host.url + `/#/s/${sid}`);
      const status = page.getByRole("status", { name: "Loops" });
      await status.getByText(/1 loop failing/).waitFor();
      await page.context().close();
      await host.tool("loop_delete", { loop_id: loop.loop_id });
    } finally {
      model.fail = false;
    }
  });
});

describe("the activity inbox", () => {
  test("lists what ran with its outcome, filters it, counts unread in the sidebar and the title, and opens the exact event", async () => {
    // Runs nobody has looked at: one completed (in `other`), two whose turn failed (in `sid`).
    const sid = await newSession();
    await say(sid, "hello");
    const other = await newSession();
    await say(other, "hello");
    const good = await host.tool("loop_create", { prompt: "summarise the day", schedule: { kind: "after", after_seconds: 1 }, session_id: other });
    await endedRun(good.loop_id);
    model.fail = true;
    try {
      for (const prompt of ["check the backups", "rotate the logs"]) {
        const bad = await host.tool("loop_create", { prompt, schedule: { kind: "after", after_seconds: 1 }, session_id: sid });
        await endedRun(bad.loop_id);
      }
    } finally {
      model.fail = false;
    }
    const u = await unread();
    assert.ok(u.sessions[sid] >= 2 && u.sessions[other] >= 1, JSON.stringify(u));
    const page = await open("");
    const link = sidebar(page).getByRole("link", { name: /^Activity/ });
    await page.waitForFunction((n) => document.title === `(${n}) dsh`, u.total);
    assert.match(await link.innerText(), new RegExp(`${u.total} unread`));
    const badge = sidebar(page).locator(`[data-session="${sid}"] .badge.unread`);
    assert.equal(await badge.innerText(), `${u.sessions[sid]} unread`);

    await link.click();
    await page.getByRole("heading", { name: "Activity", level: 1 }).waitFor();
    const items = page.getByRole("list", { name: "Activity items" }).locator("li");
    await items.first().waitFor();
    const all = await items.count();
    assert.ok(all >= 2);
    assert.match(await page.locator(".activity-list").innerText(), /completed/);
    assert.match(await page.locator(".activity-list").innerText(), /failed/);
    await page.locator(".activity-list", { hasText: "check the backups" }).waitFor();  // the loop's prompt names the run
    await screenshot(page, "activity");

    await filterButton(page, "Failed").click();
    await page.waitForFunction(() => {
      const rows = [...document.querySelectorAll(".activity-list li")];
      return rows.length > 0 && rows.every((r) => r.classList.contains("is-failed"));
    });
    const failedRow = items.first();
    assert.match(await failedRow.innerText(), /failed/);
    assert.match(await failedRow.innerText(), /500|model/i, "the error in words");
    await filterButton(page, "Unread").click();
    await page.waitForFunction(() => [...document.querySelectorAll(".activity-list li")].every((r) => r.classList.contains("is-unread")));
    await filterButton(page, "All").click();
    await page.waitForFunction((n) => document.querySelectorAll(".activity-list li").length === n, all);

    // A row opens its session at the event, highlighted; opening it marks its items read.
    await filterButton(page, "Failed").click();
    await page.waitForFunction(() => [...document.querySelectorAll(".activity-list li")].every((r) => r.classList.contains("is-failed")));
    const href = await failedRow.getByRole("link").getAttribute("href");
    const [, opened, seq] = /^#\/s\/([^/]+)\/(\d+)$/.exec(href);
    assert.equal(opened, sid, "the newest failure is the run just made");
    await failedRow.getByRole("link").click();
    const target = page.locator(`.blocks [data-seq="${seq}"]`);
    await target.waitFor();
    assert.match(await target.getAttribute("class"), /focused/);
    assert.ok(await target.evaluate((e) => {
      const r = e.getBoundingClientRect();
      return r.bottom > 0 && r.top < innerHeight;
    }), "scrolled into view");
    await sidebar(page).locator(`[data-session="${sid}"] .badge.unread`).waitFor({ state: "detached" });
    // The badge goes at once; the host has it once the page's mark-read request is answered.
    await until(async () => ((await unread()).sessions[sid] ?? 0) === 0, "the session's items marked read");
    assert.ok((await unread()).sessions[other] >= 1, "another session's items stay unread");

    await link.click();
    await page.getByRole("button", { name: "Mark all read" }).click();
    await page.waitForFunction(() => document.title === "dsh");
    assert.equal((await link.innerText()).trim(), "Activity");
    await until(async () => (await unread()).total === 0, "every item marked read");
    await page.setViewportSize(phone);
    await filterButton(page, "All").click();
    await screenshot(page, "activity-narrow");
    await page.context().close();
  });

  test("#/s/ID/SEQ reads back to an event older than the window and highlights it", async () => {
    const sid = await newSession();
    for (let i = 0; i < 60; i++) await host.api("POST", `/api/sessions/${sid}/messages`, { message: `note ${i}`, mode: "followup" });
    const events = await until(async () => {
      const all = (await host.api("GET", `/api/sessions/${sid}/events?limit=1000`)).events;
      return all.filter((e) => e.type === "turn/end").length >= 60 ? all : null;
    }, "60 answered messages", 60000);
    const last = events[events.length - 1].seq;
    const early = events.find((e) => e.type === "message/user" && e.data.text === "note 2").seq;
    assert.ok(early < last - 200, "older than the first window");
    const page = await open(`#/s/${sid}/${early}`);
    const target = page.locator(`.blocks [data-seq="${early}"]`);
    await target.waitFor();
    assert.match(await target.innerText(), /note 2/);
    await page.waitForFunction((s) => {
      const e = document.querySelector(`.blocks [data-seq="${s}"]`);
      if (!e || !e.classList.contains("focused")) return false;
      const r = e.getBoundingClientRect();
      return r.bottom > 0 && r.top < innerHeight;
    }, early);
    await page.context().close();
  });

  test("'Notify me in this browser' announces new items, or only failures, as chosen", async () => {
    const context = await browser.newContext({ viewport: desktop, timezoneId: "Asia/Shanghai" });
    await context.addInitScript(() => {
      window.__notes = [];
      class FakeNotification {
        constructor(title, options) {
          window.__notes.push({ title, body: options?.body ?? "" });
        }
        close() {}
      }
      FakeNotification.permission = "default";
      FakeNotification.requestPermission = async () => (FakeNotification.permission = "granted");
      window.Notification = FakeNotification;
    });
    const page = await context.newPage();
    await page.goto(host.openUrl);
    await page.goto(host.url + "/#/activity");
    await page.getByRole("heading", { name: "Activity", level: 1 }).waitFor();
    await page.getByRole("checkbox", { name: "Notify me in this browser" }).check();
    await page.getByRole("combobox", { name: "Notify about" }).selectOption("every");
    assert.equal(await page.evaluate(() => localStorage.getItem("dsh.notify")), "every");

    const ok = await host.tool("loop_create", { prompt: "say hello", schedule: { kind: "after", after_seconds: 1 }, session_id: "new" });
    await page.waitForFunction(() => window.__notes.length >= 1);
    assert.match((await page.evaluate(() => window.__notes))[0].title, /^Loop run/);
    await endedRun(ok.loop_id);

    await page.getByRole("combobox", { name: "Notify about" }).selectOption("failed");
    assert.equal(await page.evaluate(() => localStorage.getItem("dsh.notify")), "failed");
    const before = await page.evaluate(() => window.__notes.length);
    model.fail = true;
    try {
      const bad = await host.tool("loop_create", { prompt: "doomed", schedule: { kind: "after", after_seconds: 1 }, session_id: "new" });
      await endedRun(bad.loop_id);
      await page.waitForFunction((n) => window.__notes.length > n, before);
    } finally {
      model.fail = false;
    }
    const notes = await page.evaluate(() => window.__notes);
    const failures = notes.slice(before);
    assert.equal(failures.length, 1, "announced once: " + JSON.stringify(failures));
    assert.match(failures[0].title, /failed/);
    await page.getByRole("checkbox", { name: "Notify me in this browser" }).uncheck();
    assert.equal(await page.evaluate(() => localStorage.getItem("dsh.notify")), null);
    await context.close();
  });
});

describe("reminders", () => {
  test("a reminder's dispatch and its follow-up are one card, not a message of the person", async () => {
    const sid = await newSession();
    const page = await open(`#/s/${sid}`);
    await host.api("POST", `/api/sessions/${sid}/messages`, { message: "remind me about the oven" });
    await page.locator(".block.assistant", { hasText: "All good." }).first().waitFor();
    await host.tool("schedule_create", { prompt: "check the oven", after_seconds: 2 }, sid);
    const card = page.getByRole("article", { name: /^Reminder/ });
    await card.waitFor({ timeout: 20000 });
    await page.waitForFunction(() => document.querySelectorAll(".block.assistant").length === 2);
    assert.equal(await card.count(), 1);
    assert.match(await card.innerText(), /check the oven/);
    assert.match(await card.innerText(), /Asia\/Shanghai/);
    assert.equal(await page.locator(".block.user", { hasText: "SCHEDULE REMINDER" }).count(), 0);
    const li = page.getByTestId("reminder-receipt");
    assert.ok(Number(await li.getAttribute("data-follow-seq")) > Number(await li.getAttribute("data-seq")));
    await page.context().close();
  });

  test("the composer counts loops and reminders, and its Manage view deletes each", async () => {
    const sid = await newSession();
    await say(sid, "hello");
    await host.tool("loop_create", { prompt: "hourly check", schedule: { kind: "every", every_seconds: 3600 } }, sid);
    await host.tool("schedule_create", { prompt: "stretch your legs", after_seconds: 240 }, sid);
    const page = await open(`#/s/${sid}`);
    const status = page.getByRole("status", { name: "Loops" });
    await status.getByText("1 loop · 1 reminder").waitFor();
    assert.match(await status.innerText(), /next in 3 min 5\d s|next in 4 min 0 s/);
    await status.getByRole("link", { name: "Manage loops and reminders" }).click();
    await page.getByRole("heading", { name: "Automation", level: 1 }).waitFor();
    const reminders = page.getByRole("list", { name: "Reminders" });
    await reminders.getByText("stretch your legs").waitFor();
    await page.getByRole("list", { name: "Loops" }).getByText("hourly check").waitFor();
    await screenshot(page, "manage-reminders");

    page.once("dialog", (d) => d.accept());
    await reminders.getByRole("button", { name: /Delete the reminder/ }).click();
    await reminders.waitFor({ state: "detached" });
    assert.deepEqual((await host.tool("schedule_list", {}, sid)).schedules, []);
    page.once("dialog", (d) => d.accept());
    await page.getByRole("button", { name: 'Delete "hourly check"' }).click();
    await page.getByText("No loops deliver to this session").waitFor();

    await page.goto(host.url + `/#/s/${sid}`);
    await status.getByText("No loops or reminders").waitFor();
    await page.context().close();
  });

  test("a reminder overdue in a cold session says so, and opening the session delivers it", async () => {
    const sid = await newSession();
    await say(sid, "hello");
    await host.tool("schedule_create", { prompt: "water the plants", after_seconds: 2 }, sid);
    await host.stop();  // before it is due: the session is cold when the host is back
    await new Promise((ok) => setTimeout(ok, 2500));  // the real clock passes the reminder's time
    await host.run();
    assert.equal(await host.status(sid), "cold");

    const page = await open(`#/s/${sid}`);
    const status = page.getByRole("status", { name: "Loops" });
    await status.getByText("overdue — fires when this session is next opened").waitFor();
    await screenshot(page, "overdue-reminder");
    await status.getByRole("button", { name: /Open this session now/ }).click();
    await page.getByRole("article", { name: /^Reminder/ }).waitFor({ timeout: 20000 });
    assert.match(await page.getByRole("article", { name: /^Reminder/ }).innerText(), /water the plants/);
    await status.getByText("overdue").waitFor({ state: "detached" });
    await page.context().close();
  });

  test("a reminder in a session idle past agents.idle_eviction still fires", async () => {
    // Idle agents are evicted after 2 s here; the reminder is due in 8 s.
    const eager = await Host.start("agents:\n  idle_eviction: 2\n", { env: model.env(), args: ["--patch", patch] });
    try {
      const { session } = await eager.api("POST", "/api/sessions", {});
      const idle = (await eager.api("POST", "/api/sessions", {})).session.id;
      // Made while the session is live (a message made it live).
      await eager.api("POST", `/api/sessions/${session.id}/messages`, { message: "remind me in a moment" });
      await eager.tool("schedule_create", { prompt: "take the bread out", after_seconds: 8 }, session.id);
      await eager.api("POST", `/api/sessions/${idle}/messages`, { message: "nothing to remember" });
      await until(async () => (await eager.status(idle)) === "cold", "the session without reminders evicted");
      assert.notEqual(await eager.status(session.id), "cold", "the one with a pending reminder stays live");
      const context = await browser.newContext({ viewport: desktop });
      const page = await context.newPage();
      await page.goto(eager.openUrl);
      await page.goto(eager.url + `/#/s/${session.id}`);
      const card = page.getByRole("article", { name: /^Reminder/ });
      await card.waitFor({ timeout: 20000 });
      assert.match(await card.innerText(), /take the bread out/);
      assert.notEqual(await eager.status(session.id), "cold", "kept live until its reminder fired");
      await context.close();
    } finally {
      await eager.close();
    }
  });

  test("a host without the schedule plugin shows no reminder controls and never asks for reminders", async () => {
    const plain = await Host.start(undefined, { env: model.env() });
    try {
      const { session } = await plain.api("POST", "/api/sessions", {});
      const context = await browser.newContext({ viewport: desktop });
      const page = await context.newPage();
      const asked = [];
      page.on("request", (r) => r.url().includes("schedule_") && asked.push(r.url()));
      await page.goto(plain.openUrl);
      await page.goto(plain.url + `/#/s/${session.id}`);
      const status = page.getByRole("status", { name: "Loops" });
      await status.getByText("No loops").waitFor();
      assert.doesNotMatch(await status.innerText(), /reminder/);
      await page.goto(plain.url + `/#/automation?session=${session.id}`);
      await page.getByRole("heading", { name: "Automation", level: 1 }).waitFor();
      await page.getByText("No loops deliver to this session").waitFor();
      assert.equal(await page.getByRole("list", { name: "Reminders" }).count(), 0);
      assert.deepEqual(asked, [], "no schedule_* call");
      await context.close();
    } finally {
      await plain.close();
    }
  });
});
