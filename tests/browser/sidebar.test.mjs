// The sidebar at any size (issue 31), with 300 sessions in the list, on a
// desktop (1280×800) and a phone (390×844): the Global interface stays
// pinned and "New session" (with the search box's slot) stays in view while
// the list scrolls; a deep link to a session older than the loaded page
// shows its real title and status; titles cut short show whole on hover and
// rows are named as sentences; forks link to their parent; "Use the
// automatic title" is offered for every title a person gave, wherever it was
// given. A real `dsh web` (its offline echo model) in Debian's chromium.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Host, launch, manySessions, screenshot, signedIn, waitForEvent } from "./harness.mjs";

const SIZES = [{ width: 1280, height: 800 }, { width: 390, height: 844 }];
const LONG = "A very long session title that cannot possibly fit in the narrow column of the sidebar's rows";

let host;
let browser;
let globalId;
const s = {};  // the sessions the tests look at, by role

before(async () => {
  host = await Host.start();
  browser = await launch();
  globalId = (await host.api("GET", "/api/host")).global_session_id;
  assert.ok(globalId, "the host has a Global interface");
  // Older than the 300 below: none of these is in the first page of 200.
  const { session_id: parent } = await host.tool("session_create", { prompt: "plan the spring release of the mobile app" });
  await waitForEvent(browser, host, parent, "turn/end");
  s.parent = { id: parent, title: (await row(parent)).title };
  assert.ok(s.parent.title, "the parent has an automatic title");
  s.old = (await host.api("POST", "/api/sessions", {})).session.id;
  await host.api("PATCH", `/api/sessions/${s.old}`, { title: "Quarterly numbers from last year" });
  await manySessions(host, 300, { titleEvery: 3 });
  // Newer than the 300: at the top of the list.
  s.fork = (await host.api("POST", `/api/sessions/${parent}/fork`, {})).session.id;
  s.long = (await host.api("POST", "/api/sessions", {})).session.id;
  await host.api("PATCH", `/api/sessions/${s.long}`, { title: LONG });
  s.weekly = (await host.api("POST", "/api/sessions", {})).session.id;
  await host.api("PATCH", `/api/sessions/${s.weekly}`, { title: "Weekly report" });

  const recent = new Set((await host.tool("session_status", { recent_n: 200 })).sessions.map((r) => r.session_id));
  for (const id of [globalId, parent, s.old]) assert.ok(!recent.has(id), `${id} is older than the first page`);
  for (const id of [s.fork, s.long, s.weekly]) assert.ok(recent.has(id), `${id} is in the first page`);
  assert.ok((await host.tool("session_status", { recent_n: 1000 })).sessions.length >= 304);
});
after(async () => {
  await browser?.close();
  await host?.close();
});

async function row(id) {
  return (await host.tool("session_status", { session_id: id })).sessions[0];
}
const nav = (page) => page.getByRole("navigation", { name: "Sessions" });
const rowOf = (page, id) => nav(page).locator(`li[data-session="${id}"]`);
const header = (page) => page.locator("header.session-header");
const menuButton = (scope) => scope.getByRole("button", { name: /^Actions for / });
const item = (page, name) => page.getByRole("menu").getByRole("menuitem", { name, exact: true });
const phone = (size) => size.width < 720;

// On a phone the list is behind the top bar's "Sessions" button.
async function openList(page, size) {
  if (!phone(size)) return;
  const toggle = page.getByRole("button", { name: "Sessions", exact: true });
  if ((await toggle.getAttribute("aria-expanded")) !== "true") await toggle.click();
  await nav(page).waitFor();
}

// Wholly inside the window: seen, not scrolled away or cut off.
async function inView(page, locator, what) {
  const box = await locator.boundingBox();
  const { width, height } = page.viewportSize();
  assert.ok(box, `${what} is shown`);
  assert.ok(box.y >= 0 && box.y + box.height <= height + 0.5 && box.x >= 0 && box.x + box.width <= width + 0.5,
            `${what} is in view: ${JSON.stringify(box)} in ${width}×${height}`);
}

for (const size of SIZES) {
  describe(`${size.width}×${size.height}`, () => {
    test("the Global interface stays pinned, and New session and the search slot stay in view, while 300 sessions scroll", async () => {
      const page = await signedIn(browser, host, size);
      await openList(page, size);
      const list = nav(page).locator(".sidebar-scroll");
      await list.locator("li.session").nth(199).waitFor();
      const pinned = rowOf(page, globalId);
      await pinned.getByText("Global interface").waitFor();
      const newSession = page.getByRole("button", { name: "New session", exact: true });
      assert.equal(await newSession.count(), 1, "one New session button in view");
      const slot = nav(page).locator('[data-slot="search"]');
      assert.equal(await slot.count(), 1, "a slot for the search box");
      assert.equal(await slot.evaluate((el) => !el.closest(".sidebar-scroll")), true, "the slot is in the part that stays");

      // The list scrolls inside the sidebar; the page itself does not.
      await list.evaluate((el) => (el.scrollTop = el.scrollHeight));
      const more = nav(page).getByRole("button", { name: "Show more sessions" });
      await inView(page, more, "Show more sessions, at the end of the list");
      assert.ok(await list.evaluate((el) => el.scrollTop > 1000), "the list scrolled");
      assert.equal(await page.evaluate(() => document.scrollingElement.scrollTop), 0, "the page did not");
      await inView(page, pinned, "the pinned Global interface");
      await inView(page, newSession, "New session");
      await inView(page, slot.getByRole("searchbox", { name: "Search sessions" }), "the search box, in its slot");
      await screenshot(page, `sidebar-300-${size.width}`);

      // More of the list: the Global interface is still pinned, and once.
      await more.click();
      await list.locator("li.session").nth(299).waitFor();
      assert.equal(await rowOf(page, globalId).count(), 1);
      await list.evaluate((el) => (el.scrollTop = el.scrollHeight / 2));
      await inView(page, pinned, "the pinned Global interface after Show more");
      await inView(page, newSession, "New session after Show more");
      await page.context().close();
    });

    test("rows are named as sentences, and a title cut short shows whole on hover", async () => {
      const page = await signedIn(browser, host, size);
      await openList(page, size);
      const sentence = /^Weekly report, (idle|cold), updated (just now|\d+ minutes? ago)$/;
      await rowOf(page, s.weekly).getByRole("button", { name: sentence }).waitFor();
      // Untitled, the Global interface is named by what it is.
      await rowOf(page, globalId).getByRole("button", { name: /^Global interface, (idle|cold|running), updated / }).waitFor();

      const long = rowOf(page, s.long).locator("button.open");
      assert.ok((await long.getAttribute("aria-label")).startsWith(`${LONG}, `), "the whole title, to screen readers");
      const name = long.locator(".name");
      assert.equal(await name.getAttribute("title"), LONG, "the whole title, on hover");
      assert.ok(await name.evaluate((el) => el.scrollWidth > el.clientWidth), "the title is cut short in the row");
      await page.context().close();
    });

    test("a deep link to a session older than the loaded page shows its title and status", async () => {
      const page = await signedIn(browser, host, size);
      await page.goto(`${host.url}/#/s/${s.old}`);
      const h1 = header(page).getByRole("heading", { name: "Quarterly numbers from last year" });
      await h1.waitFor();
      const status = (await row(s.old)).status;
      await header(page).locator(".status").getByText(status, { exact: true }).waitFor();
      assert.equal(await header(page).getByText(s.old, { exact: true }).count(), 1, "its id once, beside the title");
      await page.waitForFunction(() => document.title === "Quarterly numbers from last year — dsh");
      await page.context().close();
    });

    test("a fork says where it came from, with a link to its parent", async () => {
      const page = await signedIn(browser, host, size);
      await openList(page, size);
      const link = rowOf(page, s.fork).getByRole("link", { name: `fork of ${s.parent.title}` });
      await link.waitFor();
      assert.equal(await link.getAttribute("href"), `#/s/${s.parent.id}`);
      assert.match(await rowOf(page, s.fork).locator("button.open").getAttribute("aria-label"),
                   new RegExp(`, fork of ${s.parent.title.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`));
      await link.click();
      await header(page).getByRole("heading", { name: s.parent.title }).waitFor();
      await page.waitForURL(new RegExp(`#/s/${s.parent.id}$`));
      // The fork's own header says it too.
      await page.goto(`${host.url}/#/s/${s.fork}`);
      await header(page).getByRole("link", { name: `fork of ${s.parent.title}` }).waitFor();
      await page.context().close();
    });

    test("Use the automatic title is offered for a title a person gave anywhere, and only then", async () => {
      const page = await signedIn(browser, host, size);
      await openList(page, size);
      // Renamed through the API, not by this page.
      await menuButton(rowOf(page, s.weekly)).click();
      await item(page, "Use the automatic title").waitFor();
      await page.keyboard.press("Escape");
      // An automatic title (the parent's, opened by link: it is not in the loaded page).
      await page.goto(`${host.url}/#/s/${s.parent.id}`);
      await header(page).getByRole("heading", { name: s.parent.title }).waitFor();
      await menuButton(header(page)).click();
      await item(page, "Rename").waitFor();
      assert.equal(await item(page, "Use the automatic title").count(), 0);
      await page.keyboard.press("Escape");
      await page.context().close();
    });
  });
}

describe("the automatic title", () => {
  test("chosen for a session renamed elsewhere, the title it had comes back", async () => {
    const { session_id: id } = await host.tool("session_create", { prompt: "compare three note-taking apps" });
    await waitForEvent(browser, host, id, "turn/end");
    const automatic = (await row(id)).title;
    await host.api("PATCH", `/api/sessions/${id}`, { title: "Notes apps" });
    assert.equal((await row(id)).title_source, "user");
    const page = await signedIn(browser, host, SIZES[0]);
    const r = rowOf(page, id);
    await r.getByRole("button", { name: /^Notes apps, / }).waitFor();
    await menuButton(r).click();
    await item(page, "Use the automatic title").click();
    await r.getByRole("button", { name: new RegExp(`^${automatic.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}, `) }).waitFor();
    const after = await row(id);
    assert.equal(after.title, automatic);
    assert.notEqual(after.title_source, "user");
    await menuButton(r).click();
    await item(page, "Rename").waitFor();
    assert.equal(await item(page, "Use the automatic title").count(), 0, "nothing left to go back from");
    await page.keyboard.press("Escape");
    await page.context().close();
  });
});
