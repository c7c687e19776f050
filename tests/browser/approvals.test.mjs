// Approvals of workspace tools (issue 33, docs/TOOLS.md): a call the preset
// asks about is a card in the conversation with Allow once, Allow for this
// session and Deny, reachable by keyboard; the decision shows on the call.
// A real `dsh web` whose model is the tests' ScriptedModel, in Debian's chromium.
// Run: DSH_BINARY=build/dsh node --test --test-concurrency=1 tests/browser/approvals.test.mjs
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Host, ScriptedModel, launch, screenshot } from "./harness.mjs";

let model;
let host;
let browser;
let project;

before(async () => {
  project = mkdtempSync(join(tmpdir(), "dsh-project-"));
  model = await ScriptedModel.start();
  host = await Host.start("", { env: model.env() });  // the defaults: write, edit, bash and fetch ask
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await host?.close();
  model?.close();
  rmSync(project, { recursive: true, force: true });
});

async function openSession(viewport, id) {
  const context = await browser.newContext({ viewport, timezoneId: "Asia/Shanghai" });
  const page = await context.newPage();
  await page.goto(host.openUrl);
  const ready = new Promise((ok) =>
    page.on("websocket", (ws) => {
      if (!ws.url().includes(`/api/sessions/${id}/stream`)) return;
      ws.on("framereceived", (f) => JSON.parse(String(f.payload)).type === "ready" && ok());
    }),
  );
  await page.goto(host.url + `/#/s/${id}`);
  await page.getByTestId("conversation").waitFor();
  await ready;
  return page;
}

const conversation = (page) => page.getByTestId("conversation");
const card = (page, tool) => conversation(page).getByRole("article", { name: `Approval needed: ${tool}` });
const toolBlock = (page, name) =>
  conversation(page).locator("li.block.tool", { has: page.locator("summary code", { hasText: new RegExp(`^${name}$`) }) });

describe("a tool call waiting for approval", () => {
  let id;
  let page;
  before(async () => {
    id = (await host.api("POST", "/api/sessions", { cwd: project })).session.id;
    page = await openSession({ width: 1280, height: 800 }, id);
  });
  after(async () => page?.context().close());

  test("shows what it would do, and Allow once runs it", async () => {
    model.script.push(
      { toolCalls: [{ name: "write", arguments: { path: "notes/plan.md", content: "# Plan\n- check the disks\n" } }] },
      { text: "Written." },
    );
    await host.api("POST", `/api/sessions/${id}/messages`, { message: "write a plan" });
    const waiting = card(page, "write");
    await waiting.waitFor();
    assert.match(await waiting.getByLabel("What it would do").innerText(), /^write notes\/plan\.md \(\d+ bytes\)$/);
    assert.match(await waiting.getByLabel("Changes").innerText(), /\+# Plan\n\+- check the disks/);
    assert.match(await conversation(page).locator("li.block.running").innerText(), /Waiting for approval/);
    // The session says so where its state shows: its header and its row.
    await page.locator(".session-header .status", { hasText: "waiting for approval" }).waitFor();
    await page.getByRole("button", { name: /^write a plan, waiting for approval/ }).waitFor();
    assert.equal(existsSync(join(project, "notes", "plan.md")), false, "nothing is written before the answer");
    await screenshot(page, "approval-1280");
    await waiting.getByRole("button", { name: "Allow once" }).click();
    await toolBlock(page, "write").locator(".tag", { hasText: "allowed once" }).waitFor();
    await conversation(page).locator("li.block.assistant", { hasText: "Written." }).waitFor();
    assert.equal(readFileSync(join(project, "notes", "plan.md"), "utf8"), "# Plan\n- check the disks\n");
    assert.equal(await card(page, "write").count(), 0, "the card goes once the decision is in the log");
  });

  test("Deny is reachable by keyboard, and the model reads the denial", async () => {
    model.script.push(
      { toolCalls: [{ name: "bash", arguments: { command: "rm -rf notes" } }] },
      { text: "I will not remove it then." },
    );
    const before = model.requests.length;
    await host.api("POST", `/api/sessions/${id}/messages`, { message: "remove the notes" });
    const waiting = card(page, "bash");
    await waiting.waitFor();
    assert.equal(await waiting.getByLabel("What it would do").innerText(), "rm -rf notes");
    // Tab reaches the three answers in order; Enter answers.
    await waiting.getByRole("button", { name: "Allow once" }).focus();
    await page.keyboard.press("Tab");
    await page.keyboard.press("Tab");
    assert.equal(await page.evaluate(() => document.activeElement?.textContent), "Deny");
    await page.keyboard.press("Enter");
    await toolBlock(page, "bash").locator(".tag", { hasText: "denied" }).waitFor();
    await conversation(page).locator("li.block.assistant", { hasText: "I will not remove it then." }).waitFor();
    assert.equal(existsSync(join(project, "notes", "plan.md")), true, "a denied command does not run");
    const read = model.requests.slice(before).find((r) => r.includes("tool_denied"));
    assert.ok(read, "the model's next request carries the denial");
  });

  test("fits a phone's width", async () => {
    const phone = await openSession({ width: 390, height: 844 }, id);
    try {
      model.script.push({ toolCalls: [{ name: "bash", arguments: { command: "df -h" } }] }, { text: "ok" });
      await host.api("POST", `/api/sessions/${id}/messages`, { message: "disk usage?" });
      const waiting = card(phone, "bash");
      await waiting.waitFor();
      // In view without scrolling (the view follows the tail also when the
      // composer grows its Stop row), and within the screen's width.
      await phone.waitForFunction(() => {
        const button = [...document.querySelectorAll("button")].find((b) => b.textContent === "Deny");
        const scroller = document.querySelector('[data-testid="conversation"]');
        if (!button || !scroller) return false;
        const b = button.getBoundingClientRect();
        const s = scroller.getBoundingClientRect();
        return b.top >= s.top && b.bottom <= s.bottom;
      });
      for (const name of ["Allow once", "Allow for this session", "Deny"]) {
        const box = await waiting.getByRole("button", { name }).boundingBox();
        assert.ok(box && box.x >= 0 && box.x + box.width <= 390, `${name} is within the screen`);
      }
      await screenshot(phone, "approval-390");
      await waiting.getByRole("button", { name: "Allow for this session" }).click();
      await toolBlock(phone, "bash").locator(".tag", { hasText: "allowed for this session" }).waitFor();
    } finally {
      await phone.context().close();
    }
  });
});
