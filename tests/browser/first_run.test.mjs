// The first run explains itself (issue 31), with 300 sessions in the list,
// on a desktop (1280×800) and a phone (390×844): the landing page says which
// model new sessions get and, for the offline echo model, how to connect a
// real one; the New session dialog starts on Enter and asks before Esc
// discards a message; on a phone New session is one tap away; `/help` lists
// the slash commands and the composer's menu offers it. A real `dsh web` in
// Debian's chromium.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Host, launch, manySessions, screenshot, signedIn } from "./harness.mjs";

const SIZES = [{ width: 1280, height: 800 }, { width: 390, height: 844 }];

let host;
let browser;

before(async () => {
  host = await Host.start();
  browser = await launch();
  await manySessions(host, 300, { titleEvery: 2 });
});
after(async () => {
  await browser?.close();
  await host?.close();
});

const landing = (page) => page.locator("section.landing");
const dialog = (page) => page.getByRole("dialog", { name: "New session" });
const firstMessage = (page) => dialog(page).getByRole("textbox", { name: "First message" });
const message = (page) => page.getByRole("textbox", { name: "Message" });
const sessionCount = async () => (await host.tool("session_status", { recent_n: 10000 })).sessions.length;

// Opens the New session dialog the way a person would at this size: on a
// phone from the top bar, without opening the Sessions drawer.
async function openDialog(page, size) {
  const toggle = page.getByRole("button", { name: "Sessions", exact: true });
  if (size.width < 720) assert.equal(await toggle.getAttribute("aria-expanded"), "false", "the drawer stays closed");
  await page.getByRole("button", { name: "New session", exact: true }).click();
  await firstMessage(page).waitFor();
}

for (const size of SIZES) {
  describe(`${size.width}×${size.height}`, () => {
    test("the landing page says new sessions get the offline echo model, and how to connect a real one", async () => {
      const page = await signedIn(browser, host, size);
      await landing(page).getByTestId("landing-route").getByText("echo/echo", { exact: true }).waitFor();
      await landing(page).getByText("offline echo model").first().waitFor();
      const text = await landing(page).innerText();
      for (const line of [
        "OPENAI_BASE_URL=https://api.openai.com/v1",
        "OPENAI_API_KEY=sk-your-key",
        "DSH_MODEL=openai/gpt-4o-mini",
        "DEEPSEEK_API_KEY=sk-your-key",
        "DSH_MODEL=deepseek/deepseek-chat",
        "OPENAI_BASE_URL=http://localhost:11434/v1",
        "OPENAI_BASE_URL=http://localhost:8080/v1",
      ]) {
        assert.ok(text.includes(line), `the landing page shows ${line}`);
      }
      for (const name of ["An OpenAI-compatible server", "DeepSeek", "Ollama on this machine", "llama.cpp's llama-server on this machine"]) {
        await landing(page).getByRole("button", { name: `Copy the lines for ${name}` }).waitFor();
      }
      assert.equal(await landing(page).getByRole("link", { name: "Settings" }).getAttribute("href"), "#/settings");
      // The Global interface in one sentence, and the way to the Automation panel.
      const globalId = (await host.api("GET", "/api/host")).global_session_id;
      const part = landing(page).locator("section", { has: page.getByRole("heading", { name: "The Global interface" }) });
      assert.match(await part.innerText(), /loops deliver to when they target self/);
      assert.equal(await part.getByRole("link", { name: "Global interface" }).getAttribute("href"), `#/s/${globalId}`);
      assert.equal(await part.getByRole("link", { name: "Automation" }).getAttribute("href"), "#/automation");
      await screenshot(page, `landing-echo-${size.width}`);
      await part.getByRole("link", { name: "Automation" }).click();
      await page.waitForURL(/#\/automation$/);
      await page.context().close();
    });

    test("New session is reachable at once; Enter starts the session, Shift+Enter is a new line", async () => {
      const page = await signedIn(browser, host, size);
      await openDialog(page, size);
      await screenshot(page, `new-session-${size.width}`);
      const box = firstMessage(page);
      assert.equal(await page.evaluate(() => document.activeElement?.getAttribute("aria-label") ?? document.activeElement?.tagName),
                   "TEXTAREA", "the first message has the focus");
      await box.pressSequentially("Plan the week");
      await box.press("Shift+Enter");
      await box.pressSequentially("and the weekend");
      assert.equal(await box.inputValue(), "Plan the week\nand the weekend");
      await box.press("Enter");
      await page.waitForURL(/#\/s\/ses_/);
      await dialog(page).waitFor({ state: "detached" });
      const id = decodeURIComponent(new URL(page.url()).hash.replace("#/s/", ""));
      const events = await host.events(id);
      assert.deepEqual(events.filter((e) => e.type === "message/user").map((e) => e.data.text), ["Plan the week\nand the weekend"]);
      await page.context().close();
    });

    test("Esc with a message written asks before discarding it; without one it just closes", async () => {
      const page = await signedIn(browser, host, size);
      const before = await sessionCount();
      await openDialog(page, size);
      await firstMessage(page).fill("A message worth keeping");
      await page.keyboard.press("Escape");
      const question = dialog(page).getByRole("alertdialog", { name: "Discard the message you wrote?" });
      await question.waitFor();
      const focused = () => page.evaluate(() => document.activeElement?.textContent);
      assert.equal(await focused(), "Keep writing", "the safe answer has the focus");
      await screenshot(page, `new-session-discard-${size.width}`);
      // Esc again keeps the message.
      await page.keyboard.press("Escape");
      await question.waitFor({ state: "detached" });
      assert.equal(await firstMessage(page).inputValue(), "A message worth keeping");
      assert.equal(await page.evaluate(() => document.activeElement?.tagName), "TEXTAREA");
      // Asked again, Discard closes it; nothing was created.
      await page.keyboard.press("Escape");
      await question.getByRole("button", { name: "Discard" }).click();
      await dialog(page).waitFor({ state: "detached" });
      assert.equal(await sessionCount(), before);
      // With nothing written, Esc closes at once.
      await openDialog(page, size);
      await page.keyboard.press("Escape");
      await dialog(page).waitFor({ state: "detached" });
      assert.equal(await sessionCount(), before);
      await page.context().close();
    });

    test("/help lists the slash commands, and the / menu offers it", async () => {
      const { session_id: id } = await host.tool("session_create", { prompt: "a place to type commands" });
      const page = await signedIn(browser, host, size);
      await page.goto(`${host.url}/#/s/${id}`);
      await message(page).fill("/");
      const menu = page.getByRole("listbox", { name: "Commands" });
      await menu.getByRole("option", { name: /^\/help/ }).waitFor();
      await message(page).fill("/he");
      await message(page).press("Enter");  // chooses /help from the menu
      await page.waitForFunction(() => document.querySelector("textarea[aria-label=Message]")?.value === "/help");
      const before = (await host.events(id)).length;
      await message(page).press("Enter");  // runs it
      const result = page.getByTestId("command-result");
      await result.getByText("List the slash commands, one line each.").waitFor();
      const lines = (await result.innerText()).split("\n");
      assert.ok(lines.includes("/help — List the slash commands, one line each."), lines.join("\n"));
      assert.ok(lines.some((l) => /^\/sessions — \S/.test(l)), "/sessions with its description");
      assert.equal((await host.events(id)).length, before, "a command is not a message of the session");
      await page.context().close();
    });
  });
}

describe("a host with a real model", () => {
  test("the landing page names the route and shows no echo instructions", async () => {
    const real = await Host.start(undefined, { env: { DSH_MODEL: "deepseek/deepseek-chat", DEEPSEEK_API_KEY: "not-a-real-key" } });
    try {
      const page = await signedIn(browser, real, SIZES[0]);
      await landing(page).getByTestId("landing-route").getByText("deepseek/deepseek-chat", { exact: true }).waitFor();
      assert.equal(await landing(page).getByText("offline echo model").count(), 0);
      assert.equal(await landing(page).getByRole("button", { name: /^Copy the lines/ }).count(), 0);
      await landing(page).getByRole("heading", { name: "The Global interface" }).waitFor();
      await page.context().close();
    } finally {
      await real.close();
    }
  });
});
