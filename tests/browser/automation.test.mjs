// The automation panel and the composer's loop status against a real
// `dsh web` in Debian's chromium (issue 19; spec 000 §8 and the §12 UI bullets).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Host, launch, screenshot, signedIn, waitForEvent } from "./harness.mjs";

let host;
let browser;

before(async () => {
  // A second preset, so the preset control has something to offer.
  host = await Host.start("presets:\n  reviewer:\n    tools: [sessions]\n");
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await host?.close();
});

const allLoops = async () => (await host.api("GET", "/api/loops?session_id=global")).loops;
const panel = async (hash = "#/automation") => {
  const page = await signedIn(browser, host);
  await page.goto(host.url + "/" + hash);
  await page.getByRole("heading", { name: "Automation", level: 1 }).waitFor();
  return page;
};
const row = (page, prompt) => page.getByRole("list", { name: "Loops" }).locator("li.loop", { hasText: prompt });

async function fillLoop(page, prompt, { target, amount = "5", unit = "minutes" } = {}) {
  await page.getByLabel("Prompt").fill(prompt);
  await page.getByLabel("Amount").fill(amount);
  await page.getByLabel("Unit").selectOption(unit);
  if (target) await page.getByRole("radio", { name: target }).check();
}
const create = (page) => page.getByRole("button", { name: "Create loop" }).click();

async function session(prompt) {
  const { session_id } = await host.tool("session_create", { prompt });
  await waitForEvent(browser, host, session_id, "turn/end");  // nothing pending: a restart leaves it cold
  return session_id;
}

describe("the automation panel", () => {
  test("is reachable from the sidebar and by its own address", async () => {
    const page = await signedIn(browser, host);
    await page.getByRole("navigation", { name: "Sessions" }).getByRole("link", { name: "Automation" }).click();
    await page.getByRole("heading", { name: "Automation", level: 1 }).waitFor();
    assert.match(page.url(), /#\/automation$/);
    await page.context().close();
  });

  test("creates a loop for the global interface (self), shown in words, every 5 min", async () => {
    const page = await panel();
    await fillLoop(page, "check the deploy", { target: "Global interface" });
    await create(page);
    const r = row(page, "check the deploy");
    await r.waitFor();
    assert.match(await r.innerText(), /every 5 min/);
    assert.match(await r.innerText(), /Global interface/);
    assert.match(await r.locator(".countdown").innerText(), /in 4 min 5\d s|in 5 min 0 s/);
    const loop = (await allLoops()).find((l) => l.prompt === "check the deploy");
    assert.equal(loop.session_id, "self");
    assert.deepEqual(loop.schedule, { kind: "every", every_seconds: 300 });
    await page.context().close();
  });

  test("a fresh session each run offers presets; the other targets do not", async () => {
    const page = await panel();
    await page.getByLabel("Prompt").fill("a daily digest");
    for (const target of ["Global interface", "An existing session"]) {
      await page.getByRole("radio", { name: target }).check();
      assert.equal(await page.getByLabel("Preset").count(), 0, `no preset for ${target}`);
    }
    await page.getByRole("radio", { name: "Fresh session each run" }).check();
    await page.getByLabel("Preset").selectOption("reviewer");
    await create(page);
    await row(page, "a daily digest").waitFor();
    assert.match(await row(page, "a daily digest").innerText(), /Fresh session each run/);
    const loop = (await allLoops()).find((l) => l.prompt === "a daily digest");
    assert.equal(loop.session_id, "new");
    await page.context().close();
  });

  test("opened from a session, it targets that session (current) and lists only its loops", async () => {
    const id = await session("the current one");
    await host.tool("loop_create", { prompt: "elsewhere", schedule: { kind: "every", every_seconds: 600 }, session_id: "self" });
    const page = await panel(`#/automation?session=${id}`);
    assert.equal(await page.getByRole("radio", { name: "This session" }).isChecked(), true);
    await fillLoop(page, "for the current session");
    await create(page);
    await row(page, "for the current session").waitFor();
    assert.equal(await row(page, "elsewhere").count(), 0, "only loops delivering to this session");
    const loop = (await allLoops()).find((l) => l.prompt === "for the current session");
    assert.equal(loop.session_id, id);
    await page.context().close();
  });

  test("discovers sessions by title and targets an existing cold session without resuming it", async () => {
    const id = await session("a cold target");
    await host.stop();
    await host.run();
    assert.equal(await host.status(id), "cold");
    const page = await panel();
    await fillLoop(page, "wake the cold one later", { target: "An existing session", amount: "2", unit: "hours" });
    await page.getByLabel("Find a session").fill("cold tar");
    const select = page.getByRole("listbox", { name: "Session" });
    await select.locator("option", { hasText: "a cold target" }).waitFor();
    await select.selectOption(id);
    await create(page);
    const r = row(page, "wake the cold one later");
    await r.waitFor();
    assert.match(await r.innerText(), /a cold target/, "the target by its title");
    assert.match(await r.innerText(), /every 2 h/);
    const loop = (await allLoops()).find((l) => l.prompt === "wake the cold one later");
    assert.equal(loop.session_id, id);
    assert.equal(await host.status(id), "cold", "creating a loop does not resume its target");
    await page.context().close();
  });

  test("a cron rule is described with its next five runs as you type", async () => {
    const page = await panel();
    await page.getByLabel("Prompt").fill("weekday standup");
    await page.getByRole("radio", { name: "Cron rule" }).check();
    assert.equal(await page.getByLabel("Time zone").inputValue(), "Asia/Shanghai", "the browser's zone");
    await page.getByLabel("Cron expression").fill("30 9 * * 1-5");
    const preview = page.getByTestId("cron-preview");
    await preview.getByText(/09:30/).first().waitFor();
    assert.equal(await preview.locator("li").count(), 5);
    for (const t of await preview.locator("time").evaluateAll((els) => els.map((e) => e.getAttribute("datetime")))) {
      assert.match(t, /T09:30:00\+08:00$/);
    }
    await screenshot(page, "automation-cron");
    await create(page);
    const r = row(page, "weekday standup");
    await r.waitFor();
    await r.getByText(/Asia\/Shanghai/).waitFor();
    await page.context().close();
  });

  test("a bad cron rule and a bad zone show the field error and create nothing", async () => {
    const page = await panel();
    const before = (await allLoops()).length;
    await page.getByLabel("Prompt").fill("never created");
    await page.getByRole("radio", { name: "Cron rule" }).check();
    await page.getByLabel("Cron expression").fill("61 * * * *");
    await page.locator("#err-schedule-expr").waitFor();
    await create(page);
    assert.match(await page.locator("#err-schedule-expr").innerText(), /invalid_cron|minute|61/);
    assert.equal(await page.getByLabel("Cron expression").getAttribute("aria-invalid"), "true");
    await page.getByLabel("Cron expression").fill("0 9 * * *");
    await page.getByLabel("Time zone").fill("Mars/Olympus_Mons");
    await page.locator("#err-schedule-tz").waitFor();
    await create(page);
    await page.locator("#err-schedule-tz").waitFor();
    assert.equal(await page.locator("#err-schedule-expr").count(), 0);
    assert.equal((await allLoops()).length, before, "nothing was created");
    await page.context().close();
  });

  test("a loop created through the API appears in an open panel within a second", async () => {
    const page = await panel();
    await page.getByRole("list", { name: "Loops" }).waitFor();
    const started = Date.now();
    await host.tool("loop_create", { prompt: "made by an agent", schedule: { kind: "after", after_seconds: 3600 }, session_id: "new" });
    await row(page, "made by an agent").waitFor({ timeout: 1000 });
    const r = row(page, "made by an agent");
    assert.match(await r.innerText(), /once, after 1 h/);
    assert.ok(Date.now() - started < 1000);
    await page.context().close();
  });

  test("lists every loop of the profile and deletes any of them", async () => {
    const page = await panel();
    await page.getByRole("list", { name: "Loops" }).waitFor();
    const loops = await allLoops();
    await page.waitForFunction((n) => document.querySelectorAll("ul.loops > li").length === n, loops.length);
    assert.match(await page.locator(".loops-count").innerText(), new RegExp(`^${loops.length} loops?$`));
    await screenshot(page, "automation");
    page.once("dialog", (d) => d.accept());
    await row(page, "check the deploy").getByRole("button", { name: /^Delete/ }).click();
    await page.getByText('Deleted the loop "check the deploy".').waitFor();
    await row(page, "check the deploy").waitFor({ state: "detached" });
    assert.equal((await allLoops()).some((l) => l.prompt === "check the deploy"), false);
    await page.context().close();
  });

  test("a loop deleted elsewhere while confirming is reported plainly and its row goes", async () => {
    const { loop_id } = await host.tool("loop_create", { prompt: "raced away", schedule: { kind: "every", every_seconds: 900 }, session_id: "self" });
    const page = await panel();
    await row(page, "raced away").waitFor();
    page.once("dialog", async (d) => {
      await host.tool("loop_delete", { loop_id });
      await d.accept();
    });
    await row(page, "raced away").getByRole("button", { name: /^Delete/ }).click();
    await page.getByText("That loop no longer exists: it was deleted elsewhere or it finished.").waitFor();
    await row(page, "raced away").waitFor({ state: "detached" });
    await page.context().close();
  });

  test("a row opens its run history", async () => {
    const id = await session("runs land here");
    await host.tool("loop_create", { prompt: "tick each second", schedule: { kind: "every", every_seconds: 1 }, session_id: id });
    const page = await panel();
    // The panel follows the registry: the row's last run appears once one was recorded.
    await row(page, "tick each second").locator(".loop-facts dd", { hasText: "delivered" }).waitFor();
    await row(page, "tick each second").getByRole("button", { name: /^Run history/ }).click();
    const table = row(page, "tick each second").locator(".runs table");
    await table.waitFor();
    // The newest occurrence may still be in flight ("running"); an older one was delivered.
    const delivered = table.locator("tbody tr", { hasText: "delivered" }).first();
    await delivered.waitFor();
    assert.match(await delivered.innerText(), /runs land here/, "the target session by its title");
    const { loop_id } = (await allLoops()).find((l) => l.prompt === "tick each second");
    await host.tool("loop_delete", { loop_id });
    await page.context().close();
  });
});

describe("the composer's loop status", () => {
  test("shows only the open session's loops, with the nearest run as a countdown", async () => {
    const a = await session("session with two loops");
    const b = await session("session with one loop");
    await host.tool("loop_create", { prompt: "a1", schedule: { kind: "every", every_seconds: 3600 } }, a);
    await host.tool("loop_create", { prompt: "a2", schedule: { kind: "after", after_seconds: 120 } }, a);
    await host.tool("loop_create", { prompt: "b1", schedule: { kind: "every", every_seconds: 7200 } }, b);
    const page = await signedIn(browser, host);
    await page.goto(host.url + `/#/s/${a}`);
    const status = page.getByRole("status", { name: "Loops" });
    await status.getByText("2 loops").waitFor();
    assert.match(await status.innerText(), /next in 1 min 5\d s|next in 2 min 0 s/);
    await page.goto(host.url + `/#/s/${b}`);
    await status.getByText("1 loop").waitFor();
    assert.match(await status.innerText(), /next in 1 h 59 min|next in 2 h 0 min/);
    // Live: a loop created for b by someone else shows up without a reload.
    await host.tool("loop_create", { prompt: "b2", schedule: { kind: "every", every_seconds: 60 } }, b);
    await status.getByText("2 loops").waitFor();
    await status.getByRole("link", { name: "Manage loops" }).click();
    await page.getByRole("heading", { name: "Automation", level: 1 }).waitFor();
    assert.equal(decodeURIComponent(new URL(page.url()).hash), `#/automation?session=${b}`);
    await row(page, "b2").waitFor();
    assert.equal(await row(page, "a1").count(), 0);
    await page.context().close();
  });
});
