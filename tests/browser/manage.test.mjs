// Rename and archive (issue 31): a session's menu in the sidebar and in its
// header, the inline rename (Enter saves, Esc cancels, an empty title is
// refused), the way back to the automatic title, archiving out of the
// default list and back, and another page following the change live. A real
// `dsh web` (its offline echo model) in Debian's chromium.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Host, launch, screenshot, signedIn, waitForEvent } from "./harness.mjs";

let host;
let browser;

before(async () => {
  host = await Host.start();
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await host?.close();
});

const nav = (page) => page.getByRole("navigation", { name: "Sessions" });
const rowOf = (page, id) => nav(page).locator(`[data-session="${id}"]`);
const menuButton = (scope) => scope.getByRole("button", { name: /^Actions for / });
const menu = (page) => page.getByRole("menu");
const item = (page, name) => menu(page).getByRole("menuitem", { name, exact: true });
const header = (page) => page.locator("header.session-header");
const focusedLabel = (page) => page.evaluate(() => document.activeElement?.getAttribute("aria-label") ?? document.activeElement?.textContent);
const row = async (id) => (await host.tool("session_status", { session_id: id })).sessions[0];
const userTitleEvents = async (id) => (await host.events(id)).filter((e) => e.type === "title/user");

// A session whose first turn ended, and its automatic title.
async function session(prompt) {
  const { session_id } = await host.tool("session_create", { prompt });
  await waitForEvent(browser, host, session_id, "turn/end");
  const { title } = await row(session_id);
  assert.ok(title, `session ${session_id} has an automatic title`);
  return { id: session_id, title };
}

async function until(check, what) {
  for (let i = 0; i < 200; i++) {
    if (await check()) return;
    await new Promise((ok) => setTimeout(ok, 50));
  }
  throw new Error(`timed out: ${what}`);
}

describe("rename", () => {
  test("from the sidebar: the keyboard opens the menu, Esc cancels, an empty title is refused, Enter saves", async () => {
    const s = await session("draft the quarterly plan");
    const page = await signedIn(browser, host);
    const r = rowOf(page, s.id);
    await r.getByText(s.title).waitFor();

    // The menu opens with Enter (first item focused) and Esc gives focus back.
    await menuButton(r).focus();
    await page.keyboard.press("Enter");
    await item(page, "Rename").waitFor();
    assert.equal(await focusedLabel(page), "Rename");
    assert.equal(await menuButton(r).getAttribute("aria-expanded"), "true");
    await page.keyboard.press("Escape");
    await menu(page).waitFor({ state: "detached" });
    assert.equal(await focusedLabel(page), `Actions for ${s.title}`);

    // Space opens it too; Enter on Rename edits the title in place.
    await page.keyboard.press("Space");
    await item(page, "Rename").waitFor();
    await page.keyboard.press("Enter");
    const input = r.getByRole("textbox", { name: `New title for ${s.title}` });
    await input.waitFor();
    assert.equal(await input.inputValue(), s.title);
    assert.equal(await focusedLabel(page), `New title for ${s.title}`);

    // Esc cancels: nothing is written.
    await input.fill("Not this one");
    await input.press("Escape");
    await input.waitFor({ state: "detached" });
    await r.getByText(s.title).waitFor();
    assert.equal(await focusedLabel(page), `Actions for ${s.title}`);
    assert.deepEqual(await userTitleEvents(s.id), []);

    // An empty title is refused in words, and nothing is written.
    await menuButton(r).click();
    await item(page, "Rename").click();
    await input.fill("   ");
    await input.press("Enter");
    await r.getByRole("alert").filter({ hasText: "A title cannot be empty" }).waitFor();
    assert.equal(await input.getAttribute("aria-invalid"), "true");
    assert.deepEqual(await userTitleEvents(s.id), []);

    // Enter saves: the row shows it, the host has it, focus is back on the menu.
    await input.fill("  Weekly report  ");
    await input.press("Enter");
    await input.waitFor({ state: "detached" });
    await r.getByRole("button", { name: /^Weekly report/ }).waitFor();
    assert.equal((await row(s.id)).title, "Weekly report");
    assert.deepEqual((await userTitleEvents(s.id)).map((e) => e.data.title), ["Weekly report"]);
    await until(async () => (await focusedLabel(page)) === "Actions for Weekly report", "focus back on the menu button");
    await page.context().close();
  });

  test("from the header, then back to the automatic title; sidebar, header and page title follow", async () => {
    const s = await session("compare two database engines");
    const page = await signedIn(browser, host);
    await rowOf(page, s.id).getByRole("button", { name: new RegExp(`^${s.title}`) }).click();
    await header(page).getByRole("heading", { name: s.title }).waitFor();
    await page.waitForFunction((t) => document.title === `${t} — dsh`, s.title);
    // Not renamed by this page: no way "back" is offered.
    await menuButton(header(page)).click();
    await item(page, "Rename").waitFor();
    assert.equal(await item(page, "Use the automatic title").count(), 0);

    await item(page, "Rename").click();
    const input = header(page).getByRole("textbox", { name: `New title for ${s.title}` });
    await input.fill("Engines compared");
    await input.press("Enter");
    await header(page).getByRole("heading", { name: "Engines compared" }).waitFor();
    await rowOf(page, s.id).getByRole("button", { name: /^Engines compared/ }).waitFor();
    await page.waitForFunction(() => document.title === "Engines compared — dsh");
    assert.equal((await row(s.id)).title, "Engines compared");

    await menuButton(header(page)).click();
    await item(page, "Use the automatic title").click();
    await header(page).getByRole("heading", { name: s.title }).waitFor();
    await rowOf(page, s.id).getByRole("button", { name: new RegExp(`^${s.title}`) }).waitFor();
    await page.waitForFunction((t) => document.title === `${t} — dsh`, s.title);
    assert.equal((await row(s.id)).title, s.title);
    assert.deepEqual((await userTitleEvents(s.id)).map((e) => e.data.title), ["Engines compared", null]);
    await menuButton(header(page)).click();
    await item(page, "Rename").waitFor();
    assert.equal(await item(page, "Use the automatic title").count(), 0, "nothing left to go back from");
    await page.keyboard.press("Escape");
    await page.context().close();
  });

  test("another page sees the rename live, without a reload", async () => {
    const s = await session("plan the team offsite");
    const watcher = await signedIn(browser, host);
    await watcher.goto(`${host.url}/#/s/${s.id}`);
    await header(watcher).getByRole("heading", { name: s.title }).waitFor();
    await rowOf(watcher, s.id).getByText(s.title).waitFor();
    const marker = await watcher.evaluate(() => (window.__notReloaded = true));
    assert.equal(marker, true);

    const page = await signedIn(browser, host);
    const r = rowOf(page, s.id);
    await menuButton(r).click();
    await item(page, "Rename").click();
    const input = r.getByRole("textbox", { name: `New title for ${s.title}` });
    await input.fill("Offsite in May");
    await input.press("Enter");

    await rowOf(watcher, s.id).getByRole("button", { name: /^Offsite in May/ }).waitFor();
    await header(watcher).getByRole("heading", { name: "Offsite in May" }).waitFor();
    await watcher.waitForFunction(() => document.title === "Offsite in May — dsh");
    assert.equal(await watcher.evaluate(() => window.__notReloaded), true, "the same page, not reloaded");
    await page.context().close();
    await watcher.context().close();
  });
});

describe("archive", () => {
  test("leaves the default list, shows under Archived, and unarchive brings it back; the Global interface is never offered Archive", async () => {
    const kept = await session("keep this one around");
    const s = await session("an old experiment");
    const page = await signedIn(browser, host);
    const r = rowOf(page, s.id);
    await r.getByText(s.title).waitFor();

    await menuButton(r).click();
    await item(page, "Archive").click();
    await r.waitFor({ state: "detached" });
    await rowOf(page, kept.id).waitFor();
    const archived = await row(s.id);
    assert.equal(archived.archived, true);
    assert.equal(archived.title, s.title, "still a session for the tools");

    // The filter is a pair of buttons; the keyboard reaches it.
    const archivedFilter = nav(page).getByRole("button", { name: "Archived", exact: true });
    const activeFilter = nav(page).getByRole("button", { name: "Active", exact: true });
    assert.equal(await activeFilter.getAttribute("aria-pressed"), "true");
    await archivedFilter.focus();
    await page.keyboard.press("Enter");
    assert.equal(await archivedFilter.getAttribute("aria-pressed"), "true");
    await r.getByText(s.title).waitFor();
    assert.equal(await rowOf(page, kept.id).count(), 0, "only archived sessions under Archived");

    await menuButton(r).click();
    assert.equal(await item(page, "Archive").count(), 0);
    await item(page, "Unarchive").click();
    await r.waitFor({ state: "detached" });
    await nav(page).getByText("No archived sessions").waitFor();
    assert.equal((await row(s.id)).archived, false);
    await activeFilter.click();
    await r.getByText(s.title).waitFor();

    // The Global interface: Rename, never Archive.
    const { global_session_id: globalId } = await host.api("GET", "/api/host");
    assert.ok(globalId, "the host has a Global interface");
    const g = rowOf(page, globalId);
    await menuButton(g).click();
    await item(page, "Rename").waitFor();
    assert.equal(await item(page, "Archive").count(), 0);
    await page.keyboard.press("Escape");
    await page.context().close();
  });

  test("an archive made elsewhere leaves an open page's list live; the header says Archived and offers Unarchive", async () => {
    const s = await session("a page that watches");
    const page = await signedIn(browser, host);
    await page.goto(`${host.url}/#/s/${s.id}`);
    await rowOf(page, s.id).getByText(s.title).waitFor();
    await host.api("PATCH", `/api/sessions/${s.id}`, { archived: true });
    await rowOf(page, s.id).waitFor({ state: "detached" });
    // Still open in the main pane: the header says so and can undo it.
    await header(page).getByText("Archived", { exact: true }).waitFor();
    await menuButton(header(page)).click();
    await item(page, "Unarchive").click();
    await rowOf(page, s.id).getByText(s.title).waitFor();
    assert.equal(await header(page).getByText("Archived", { exact: true }).count(), 0);
    await page.context().close();
  });
});

describe("screenshots", () => {
  test("the menu and the inline rename, wide and narrow, light and dark", async () => {
    const s = await session("write the release notes");
    const page = await signedIn(browser, host);
    await page.goto(`${host.url}/#/s/${s.id}`);
    await header(page).getByRole("heading", { name: s.title }).waitFor();
    for (const [w, h] of [[1280, 800], [390, 844]]) {
      await page.setViewportSize({ width: w, height: h });
      const toggle = page.getByRole("button", { name: "Sessions", exact: true });
      if (await toggle.isVisible() && (await toggle.getAttribute("aria-expanded")) !== "true") await toggle.click();
      const r = rowOf(page, s.id);
      await menuButton(r).click();
      await item(page, "Archive").waitFor();
      for (const scheme of ["light", "dark"]) {
        await page.emulateMedia({ colorScheme: scheme });
        await screenshot(page, `manage-menu-${w}-${scheme}`);
      }
      await item(page, "Rename").click();
      const input = r.getByRole("textbox", { name: `New title for ${s.title}` });
      await input.fill("");
      await input.press("Enter");
      await r.getByRole("alert").waitFor();
      for (const scheme of ["light", "dark"]) {
        await page.emulateMedia({ colorScheme: scheme });
        await screenshot(page, `manage-rename-${w}-${scheme}`);
      }
      await input.press("Escape");
      await input.waitFor({ state: "detached" });
      await page.emulateMedia({ colorScheme: "light" });
    }
    await page.context().close();
  });
});
