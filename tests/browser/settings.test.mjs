// Model providers from the browser (issue 31): a real `dsh web` on a fresh
// profile (the offline echo model), the tests' scripted OpenAI-compatible
// server as the provider a person adds on the Settings page, its Test (and a
// failing provider's error in words), the default route, and a new session
// on it answering with a streamed reply — all without restarting the host.
// Also the New session dialog's words for a provider it cannot use.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Host, ScriptedModel, launch, screenshot, signedIn } from "./harness.mjs";

const KEY = "sk-right-key-0123456789";

let host;
let browser;
let model;

before(async () => {
  model = await ScriptedModel.start();
  model.requireKey = KEY;
  model.models = ["test-model", "test-model-mini"];
  model.script = [{ text: "Streamed hello from the scripted provider.", pieces: 4, delayMs: 150, quickStart: true }];
  host = await Host.start();
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await host?.close();
  model?.close();
});

const narrow = (page) => page.viewportSize().width < 700;

// The Settings page through its link (in the Sessions drawer on a phone).
async function openSettings(page) {
  if (narrow(page)) await page.getByRole("button", { name: "Sessions", exact: true }).click();
  await page.getByRole("navigation", { name: "Sessions" }).getByRole("link", { name: "Settings" }).click();
  await page.getByRole("heading", { name: "Settings", level: 1 }).waitFor();
}

async function addProvider(page, { name, url, key, models }) {
  await page.getByRole("button", { name: "Add a provider" }).click();
  const form = page.getByRole("form", { name: "Add a provider" });
  await form.getByLabel("Name", { exact: true }).fill(name);
  await form.getByLabel("Base URL", { exact: true }).fill(url);
  await form.getByLabel(/^API key/).fill(key);
  await form.getByLabel(/^Models to offer/).fill(models);
  await form.getByRole("button", { name: "Save provider" }).click();
  await page.locator(`[data-provider="${name}"]`).waitFor();
}

const card = (page, name) => page.locator(`[data-provider="${name}"]`);

for (const viewport of [{ width: 1280, height: 800 }, { width: 390, height: 844 }]) {
  describe(`Settings at ${viewport.width}x${viewport.height}`, () => {
    test("add a provider, Test it, choose it as the default and get a streamed answer on a new session", async () => {
      const wide = viewport.width >= 700;
      const suffix = wide ? "" : "-phone";
      const page = await signedIn(browser, host, viewport);
      await openSettings(page);
      // The providers the host knows, and whether each has a key.
      await card(page, "openai").getByText("No key: set OPENAI_API_KEY or save one here").waitFor();
      await card(page, "echo").getByText("No key needed (offline echo model)").waitFor();
      if (wide) assert.equal(await page.getByTestId("default-route").textContent(), "echo/echo");  // the first run

      // A bad base URL is refused in words, naming what to write.
      const name = `scripted${suffix.replace("-", "")}`;
      await page.getByRole("button", { name: "Add a provider" }).click();
      const form = page.getByRole("form", { name: "Add a provider" });
      await form.getByLabel("Name", { exact: true }).fill(name);
      await form.getByLabel("Base URL", { exact: true }).fill("ftp://nowhere");
      await form.getByRole("button", { name: "Save provider" }).click();
      await form.getByRole("alert").getByText(/must start with http:\/\/ or https:\/\//).waitFor();
      await form.getByRole("button", { name: "Cancel" }).click();
      // The keyboard is back on the button that opened the form.
      await page.waitForFunction(() => document.activeElement?.textContent === "Add a provider");

      await addProvider(page, { name, url: model.url, key: KEY, models: "test-model, test-model-mini" });
      await card(page, name).getByText("Key saved in the profile").waitFor();
      await card(page, name).getByRole("button", { name: `Test ${name}` }).click();
      await card(page, name).getByRole("status").getByText("Works: it offers 2 models (test-model, test-model-mini).").waitFor();

      // The same server with a wrong key: the provider's own words.
      const wrong = `wrongkey${suffix.replace("-", "")}`;
      await addProvider(page, { name: wrong, url: model.url, key: "sk-wrong", models: "test-model" });
      await card(page, wrong).getByRole("button", { name: `Test ${wrong}` }).click();
      await card(page, wrong).getByRole("status")
        .getByText(`Failed: HTTP 401 from ${model.url}/models: Incorrect API key provided (model_error)`).waitFor();
      await card(page, name).scrollIntoViewIfNeeded();
      await screenshot(page, `settings-providers-${viewport.width}`);

      // No key ever reaches the page or the API's answers.
      assert.ok(!(await page.content()).includes(KEY));
      assert.ok(!JSON.stringify(await host.api("GET", "/api/settings")).includes(KEY));
      assert.ok(!JSON.stringify(await host.api("GET", "/api/host")).includes(KEY));

      // The default route for new sessions, at once.
      const routeForm = page.locator(".route-form");
      await routeForm.getByLabel("Provider").selectOption(name);
      await routeForm.getByLabel("Model").selectOption("test-model");
      await routeForm.getByRole("button", { name: "Use for new sessions" }).click();
      await page.getByRole("status").getByText(`New sessions now use ${name}/test-model.`).waitFor();
      assert.equal(await page.getByTestId("default-route").textContent(), `${name}/test-model`);
      await page.getByRole("heading", { name: "Default model for new sessions" }).scrollIntoViewIfNeeded();
      await screenshot(page, `settings-default-route-${viewport.width}`);

      // A new session on it streams the scripted answer; nothing restarted.
      if (!wide) await page.getByRole("button", { name: "Sessions", exact: true }).click();
      await page.getByRole("button", { name: "New session", exact: true }).click();
      const dialog = page.getByRole("dialog", { name: "New session" });
      assert.equal(await dialog.getByLabel("Provider").inputValue(), name);
      await dialog.getByLabel("First message").fill("Hello, provider?");
      await dialog.getByRole("button", { name: "Start", exact: true }).click();
      await page.waitForURL(/#\/s\/ses_/);
      await page.getByTestId("session-route").getByText(`${name}/test-model`).waitFor();
      await page.getByText("Streamed hello from the scripted provider.").waitFor({ timeout: 20000 });
      model.script.push({ text: "Streamed hello from the scripted provider.", pieces: 4, delayMs: 150, quickStart: true });
      await page.close();
    });

    test("the New session dialog says why it cannot use a provider, with a way to Settings", async () => {
      const page = await signedIn(browser, host, viewport);
      if (viewport.width < 700) await page.getByRole("button", { name: "Sessions", exact: true }).click();
      await page.getByRole("button", { name: "New session", exact: true }).click();
      const dialog = page.getByRole("dialog", { name: "New session" });
      const openai = dialog.getByRole("option", { name: "openai (no API key)" });
      assert.equal(await openai.evaluate((o) => o.disabled), true);
      // The words, read with the select too (its description).
      await dialog.getByText("openai — no API key: set OPENAI_API_KEY or add it in Settings.").waitFor();
      const described = await dialog.getByLabel("Provider").getAttribute("aria-describedby");
      assert.equal(described, "provider-hint");
      await screenshot(page, `settings-new-session-hint-${viewport.width}`);
      // Keyboard: the link is reachable and leads to the Settings page.
      const link = dialog.getByRole("link", { name: "Open Settings" });
      await link.focus();
      await page.keyboard.press("Enter");
      await page.getByRole("heading", { name: "Settings", level: 1 }).waitFor();
      assert.equal(await page.getByRole("dialog", { name: "New session" }).count(), 0);
      await page.close();
    });
  });
}
