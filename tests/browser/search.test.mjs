// Search (issue 31): the sidebar's search box finds sessions by their title
// and the words of their messages as a person types, shows the matching text
// with the words marked and its time, opens the session at that message
// (highlighted), pages with "More results", and works by keyboard, among
// 300 other sessions, at
// 1280x800 and on a phone (390x844), where choosing a result closes the
// Sessions drawer. A real `dsh web` (its offline echo model) in Debian's
// chromium.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Host, launch, manySessions, screenshot, signedIn, waitForEvent } from "./harness.mjs";

let host;
let browser;

before(async () => {
  host = await Host.start();
  browser = await launch();
  // A list of the size a person ends up with; none of these match the searches below.
  await manySessions(host, 300, { titleEvery: 3 });
});
after(async () => {
  await browser?.close();
  await host?.close();
});

const desktop = { width: 1280, height: 800 };
const phone = { width: 390, height: 844 };
const box = (page) => page.getByRole("searchbox", { name: "Search sessions" });
const results = (page) => page.getByRole("list", { name: "Search results" });

async function session(prompt) {
  const { session_id } = await host.tool("session_create", { prompt });
  await waitForEvent(browser, host, session_id, "turn/end");
  return session_id;
}

async function until(check, what, timeout = 10000) {
  const end = Date.now() + timeout;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out: ${what}`);
    await new Promise((ok) => setTimeout(ok, 50));
  }
}

const api = (q) => host.api("GET", `/api/search?q=${encodeURIComponent(q)}&limit=100`);
const indexed = (q, n = 1) => until(async () => (await api(q)).results.length >= n, `"${q}" indexed`);

describe("search", () => {
  test("finds a session by a word of a later message, marks it, and opens the session there, highlighted", async () => {
    const sid = await session("plan the garden for spring");
    await host.api("POST", `/api/sessions/${sid}/messages`, { message: "add <b>tomatoes</b> & Basil near the fence", mode: "followup" });
    await until(async () => (await host.events(sid)).filter((e) => e.type === "turn/end").length >= 2, "second answer");
    await session("quarterly numbers for the board");
    await indexed("basil");
    const [expected] = (await api("basi")).results;
    assert.equal(expected.session_id, sid);

    const page = await signedIn(browser, host, desktop);
    await page.getByRole("button", { name: "Show more sessions" }).waitFor();  // more than a page of sessions
    await box(page).fill("BASI");  // a prefix, in another case
    const hits = results(page).getByRole("link");
    await hits.first().waitFor();
    assert.equal(await hits.count(), 1, "one result per session");
    const hit = hits.first();
    assert.equal(await hit.getAttribute("href"), `#/s/${sid}/${expected.seq}`);
    assert.match(await hit.innerText(), /plan the garden for spring/);
    assert.equal(await hit.locator("mark").first().innerText(), "Basil");
    // Markup in a message is shown as text, never rendered.
    assert.match(await hit.innerText(), /<b>tomatoes<\/b> & Basil/);
    assert.equal(await page.locator(".search-snippet b").count(), 0);
    assert.match(await page.locator(".search-status").innerText(), /^1 session matches “BASI”\.$/);
    await screenshot(page, "search-desktop");

    await hit.click();
    await page.waitForFunction((s) => document.querySelector(`.blocks [data-seq="${s}"]`)?.classList.contains("focused"), expected.seq);
    assert.equal(await page.evaluate(() => location.hash), `#/s/${sid}/${expected.seq}`);
    await page.context().close();
  });

  test("pages with More results, finds titles, says when nothing matches, and works by keyboard", async () => {
    const ids = [];
    for (let i = 0; i < 24; i++) ids.push((await host.tool("session_create", { prompt: `weekly standup notes ${i}` })).session_id);
    await indexed("standup", 24);
    const renamed = ids[3];
    await host.api("PATCH", `/api/sessions/${renamed}`, { title: "Tax return 2026" });
    await indexed("tax return");

    const page = await signedIn(browser, host, desktop);
    await box(page).fill("standup");
    const hits = results(page).getByRole("link");
    await until(async () => (await hits.count()) === 20, "a first page of 20");
    await page.getByRole("button", { name: "More results" }).click();
    await until(async () => (await hits.count()) === 24, "all 24 after More results");
    assert.equal(await page.getByRole("button", { name: "More results" }).count(), 0);

    // Keyboard: ArrowDown into the results and on, ArrowUp back to the box, Enter opens.
    await box(page).focus();
    await page.keyboard.press("ArrowDown");
    assert.equal(await page.evaluate(() => document.activeElement?.classList.contains("search-hit")), true);
    await page.keyboard.press("ArrowDown");
    const second = await page.evaluate(() => document.activeElement?.getAttribute("href"));
    assert.equal(second, await hits.nth(1).getAttribute("href"));
    await page.keyboard.press("ArrowUp");
    await page.keyboard.press("ArrowUp");
    assert.equal(await page.evaluate(() => document.activeElement?.getAttribute("aria-label")), "Search sessions");
    await page.keyboard.press("ArrowDown");
    await page.keyboard.press("Enter");
    await page.waitForFunction((h) => location.hash === h, await hits.first().getAttribute("href"));

    // A title: the session opens at its top.
    await box(page).fill("tax ret");
    await until(async () => (await hits.count()) === 1 && (await hits.first().getAttribute("href")) === `#/s/${renamed}`, "the renamed session");
    assert.match(await hits.first().innerText(), /Title: .*Tax/);

    await box(page).fill("zyxwv");
    await page.getByText("No sessions match “zyxwv”.").waitFor();
    // Esc clears the box.
    await box(page).press("Escape");
    assert.equal(await box(page).inputValue(), "");
    assert.equal(await results(page).count(), 0);
    await page.context().close();
  });

  test("on a phone the box is in the Sessions drawer and choosing a result closes it", async () => {
    await indexed("garden");
    const page = await signedIn(browser, host, phone);
    await page.getByRole("button", { name: "Sessions" }).click();
    await box(page).fill("garden");
    const hit = results(page).getByRole("link").first();
    await hit.waitFor();
    await screenshot(page, "search-phone");
    await hit.click();
    await page.waitForFunction(() => !document.querySelector(".layout")?.classList.contains("nav-open"));
    await page.waitForFunction(() => /^#\/s\//.test(location.hash));
    await page.context().close();
  });
});
