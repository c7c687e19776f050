// Outbound notifications in the browser (docs/NOTIFICATIONS.md): a real
// `dsh web` (the offline echo model) whose dsh.yml patch declares two webhook
// endpoints on loopback receivers — one answering 200, one 500 — the
// Settings page's Notifications section (the endpoints, Send test, the form
// that saves one, recent messages and their attempts), and the receipts a
// loop run shows in the automation panel's run history and in Activity.
// Run: DSH_BINARY=build/dsh node --test --test-concurrency=1 tests/browser/notifications.test.mjs
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Host, launch, screenshot, signedIn } from "./harness.mjs";

const desktop = { width: 1280, height: 800 };
const phone = { width: 390, height: 844 };
// 32 bytes of 7s: a well-formed Standard Webhooks secret for the dsh.yml endpoint.
const SECRET = "whsec_" + Buffer.alloc(32, 7).toString("base64");

// A receiver on loopback answering every request with `status`; `requests`
// holds what it got ({path, headers, body}).
async function receiver(status) {
  const r = { status, requests: [] };
  r.server = createServer((req, res) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => {
      r.requests.push({ path: req.url, headers: req.headers, body });
      res.writeHead(r.status, { "Content-Type": "text/plain" });
      res.end(r.status < 300 ? "ok" : "the receiver is down");
    });
  });
  await new Promise((ok) => r.server.listen(0, "127.0.0.1", ok));
  r.url = `http://127.0.0.1:${r.server.address().port}`;
  return r;
}

let good;
let bad;
let host;
let browser;
let dir;

before(async () => {
  good = await receiver(200);
  bad = await receiver(500);
  dir = mkdtempSync(join(tmpdir(), "dsh-notifications-"));
  const patch = join(dir, "notifications.yml");
  writeFileSync(patch, [
    "notifications:",
    "  webhooks:",
    "    - name: ops",
    `      url: ${good.url}/hooks/ops?token=hidden`,
    "      format: standard",
    `      secret: ${SECRET}`,
    '      events: ["*"]',
    "      allow_private: true",
    "    - name: team-slack",
    `      url: ${bad.url}/services/T000/B000/XXXX`,
    "      format: slack",
    "      events: [loop.run.completed, loop.run.failed]",
    "      allow_private: true",
    "",
  ].join("\n"));
  host = await Host.start(undefined, { args: ["--patch", patch] });
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await host?.close();
  good?.server.close();
  bad?.server.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
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

async function open(hash, viewport = desktop) {
  const page = await signedIn(browser, host, viewport);
  await page.goto(host.url + "/" + hash);
  return page;
}
const section = (page) => page.getByRole("region", { name: "Notifications" });
const card = (page, name) => section(page).locator(`[data-endpoint="${name}"]`);

describe("the Notifications section of Settings", () => {
  test("lists the endpoints of dsh.yml, read-only, with their redacted URL, events and state", async () => {
    const page = await open("#/settings");
    await section(page).getByRole("heading", { name: "Notifications", level: 2 }).waitFor();
    const ops = card(page, "ops");
    await ops.waitFor();
    const text = await ops.innerText();
    assert.match(text, /No messages yet/);
    assert.match(text, /from dsh\.yml/);
    assert.match(text, /Declared in dsh\.yml/);
    assert.match(text, /every event/);
    assert.match(text, /Standard Webhooks/);
    assert.doesNotMatch(text, /token=hidden|\/hooks\/ops/, "the URL's path and query are never shown");
    assert.doesNotMatch(await page.locator("body").innerText(), /XXXX|whsec_/, "nor Slack's secret path, nor a secret");
    assert.match(await card(page, "team-slack").innerText(), /loop\.run\.completed, loop\.run\.failed/);
    // Read-only: Send test, but no Edit or Delete.
    await ops.getByRole("button", { name: "Send test to ops" }).waitFor();
    assert.equal(await ops.getByRole("button", { name: "Edit ops" }).count(), 0);
    assert.equal(await ops.getByRole("button", { name: "Delete ops" }).count(), 0);
    await page.context().close();
  });

  test("Send test delivers to the receiver that answers 200 and says so; the recent message opens to its attempts", async () => {
    const page = await open("#/settings");
    const ops = card(page, "ops");
    await ops.getByRole("button", { name: "Send test to ops" }).click();
    const result = ops.getByRole("status");
    await result.getByText(/^Delivered \(200\) in \d+(\.\d+)? m?s$/).waitFor();
    assert.match(await result.getAttribute("aria-live"), /polite/);
    const got = good.requests.find((r) => r.body.includes("webhook.test"));
    assert.ok(got, "the receiver got the test");
    assert.equal(got.path, "/hooks/ops?token=hidden");
    assert.match(got.headers["webhook-signature"], /^v1,/);
    // The page follows the change feed: the endpoint now delivers.
    await ops.getByTestId("endpoint-state").getByText("Delivering").waitFor();

    const messages = page.getByRole("list", { name: "Recent messages" });
    const row = messages.locator("li", { hasText: "webhook.test" }).filter({ hasText: "ops" }).first();
    await row.waitFor();
    const toggle = row.getByRole("button", { name: /delivered webhook\.test to ops/ });
    assert.equal(await toggle.getAttribute("aria-expanded"), "false");
    await toggle.focus();
    await page.keyboard.press("Enter");  // the keyboard opens it
    assert.equal(await toggle.getAttribute("aria-expanded"), "true");
    await row.getByRole("list", { name: "Attempts" }).getByText(/200 in \d+/).waitFor();
    await row.evaluate((el) => el.scrollIntoView({ block: "end" }));  // the cards above, the attempts in view
    await screenshot(page, "notifications-1280");
    await page.keyboard.press("Enter");
    assert.equal(await toggle.getAttribute("aria-expanded"), "false");
    await page.context().close();
  });

  test("Send test to the endpoint answering 500 says it will retry, and the endpoint shows Retrying", async () => {
    const page = await open("#/settings");
    const slack = card(page, "team-slack");
    await slack.getByRole("button", { name: "Send test to team-slack" }).click();
    await slack.getByRole("status").getByText(/^Failed: 500 .*will retry/).waitFor();
    assert.match(await slack.getByRole("status").getAttribute("class"), /failed/);
    await slack.getByTestId("endpoint-state").getByText("Retrying").waitFor();
    assert.match(await slack.getByTestId("endpoint-pending").innerText(), /1 message waiting/);
    assert.ok(bad.requests.some((r) => r.path === "/services/T000/B000/XXXX"), "the 500 receiver was asked");
    const row = page.getByRole("list", { name: "Recent messages" }).locator("li", { hasText: "team-slack" }).first();
    await row.getByText("retrying").waitFor();
    await page.context().close();
  });

  test("the recent messages filter by endpoint and by state, and say when nothing matches", async () => {
    const page = await open("#/settings");
    const recent = page.getByRole("region", { name: "Recent messages" });
    const rows = recent.getByRole("list", { name: "Recent messages" }).locator(":scope > li");
    await rows.first().waitFor();
    // The two tests above left a delivered message to ops and a retrying one to team-slack.
    const endpoint = recent.getByRole("combobox", { name: "Endpoint" });
    const state = recent.getByRole("combobox", { name: "State" });
    await state.selectOption({ label: "Waiting or retrying" });
    await until(async () => {
      const texts = await rows.allInnerTexts();
      return texts.length > 0 && texts.every((t) => t.includes("team-slack") && /retrying|waiting/.test(t));
    }, "only team-slack's waiting messages");
    await endpoint.selectOption("team-slack");
    await state.selectOption({ label: "Delivered" });
    await recent.getByText("No delivered messages for team-slack.").waitFor();
    await endpoint.selectOption("ops");
    await until(async () => {
      const texts = await rows.allInnerTexts();
      return texts.length > 0 && texts.every((t) => t.includes("ops") && t.includes("delivered"));
    }, "only ops's delivered messages");
    await endpoint.focus();
    await page.keyboard.press("Home");  // the keyboard chooses too: back to every endpoint
    await state.selectOption({ label: "Any state" });
    await until(async () => {
      const texts = await rows.allInnerTexts();
      return texts.some((t) => t.includes("team-slack")) && texts.some((t) => t.includes("ops"));
    }, "every message again");
    await page.context().close();
  });

  test("an endpoint added from the form is listed as saved, delivers its test, and can be deleted", async () => {
    const page = await open("#/settings");
    await section(page).getByRole("button", { name: "Add endpoint" }).click();
    const form = page.getByRole("form", { name: "Add endpoint" });
    await form.getByLabel("Name", { exact: true }).fill("phone");
    // A bad URL is refused in words, naming what to write.
    await form.getByLabel("URL", { exact: true }).fill("ftp://nowhere");
    await form.getByRole("button", { name: "Save endpoint" }).click();
    await form.getByRole("alert").getByText(/must start with http:\/\/ or https:\/\//).waitFor();
    await form.getByLabel("URL", { exact: true }).fill(`${good.url}/saved`);
    assert.equal(await form.getByLabel("Format").inputValue(), "standard");
    await form.getByRole("checkbox", { name: /loop\.run\.completed/ }).check();
    // A standard endpoint needs a secret: Generate makes one.
    const secret = form.getByLabel(/^Signing secret/);
    assert.equal(await secret.getAttribute("type"), "password");
    await form.getByRole("button", { name: "Generate" }).click();
    const made = await secret.inputValue();
    assert.match(made, /^whsec_[A-Za-z0-9+/]{43}=$/);
    assert.equal(Buffer.from(made.slice(6), "base64").length, 32);
    await form.getByRole("checkbox", { name: /private or loopback address/ }).check();
    await form.getByRole("button", { name: "Save endpoint" }).click();

    const phone = card(page, "phone");
    await phone.waitFor();
    assert.match(await phone.innerText(), /saved here/);
    assert.match(await phone.innerText(), /loop\.run\.completed, loop\.run\.failed/);
    assert.doesNotMatch(await page.locator("body").innerText(), /whsec_/, "the secret is not shown back");
    // Focus is back on the button that opened the form.
    await page.waitForFunction(() => document.activeElement?.textContent === "Add endpoint");
    await phone.getByRole("button", { name: "Send test to phone" }).click();
    await phone.getByRole("status").getByText(/^Delivered \(200\)/).waitFor();
    assert.ok(good.requests.some((r) => r.path === "/saved"));

    // Edit keeps the saved secret when its field is left empty.
    await phone.getByRole("button", { name: "Edit phone" }).click();
    const edit = page.getByRole("form", { name: "Edit phone" });
    await edit.getByLabel("URL", { exact: true }).fill(`${good.url}/saved-again`);
    await edit.getByRole("checkbox", { name: /approval\.requested/ }).check();
    await edit.getByRole("button", { name: "Save endpoint" }).click();
    await phone.getByText(/approval\.requested/).waitFor();
    await phone.getByRole("button", { name: "Send test to phone" }).click();
    await phone.getByRole("status").getByText(/^Delivered \(200\)/).waitFor();
    assert.ok(good.requests.some((r) => r.path === "/saved-again"));

    // Edit with the URL left empty keeps the saved one.
    await phone.getByRole("button", { name: "Edit phone" }).click();
    const again = page.getByRole("form", { name: "Edit phone" });
    await again.getByRole("checkbox", { name: /approval\.requested/ }).uncheck();
    await again.getByRole("button", { name: "Save endpoint" }).click();
    await again.waitFor({ state: "detached" });
    await phone.getByText(/approval\.requested/).waitFor({ state: "detached" });
    const before = good.requests.filter((r) => r.path === "/saved-again").length;
    await phone.getByRole("button", { name: "Send test to phone" }).click();
    await until(() => good.requests.filter((r) => r.path === "/saved-again").length === before + 1,
      "the test sent to the kept URL");

    page.once("dialog", (d) => d.accept());
    await phone.getByRole("button", { name: "Delete phone" }).click();
    await phone.waitFor({ state: "detached" });
    const list = await host.api("GET", "/api/notifications");
    assert.deepEqual(list.endpoints.map((e) => e.name).sort(), ["ops", "team-slack"]);
    await page.context().close();
  });
});

describe("receipts", () => {
  let loop;
  test("a loop run's notifications show in its run history and in Activity, in words and colour", async () => {
    const { global_session_id: global } = await host.api("GET", "/api/host");
    loop = await host.tool("loop_create", { prompt: "tell the team", schedule: { kind: "after", after_seconds: 1 }, session_id: "self" });
    // The run's turn ended (echo answers at once) and ops got its messages.
    const run = await until(async () => {
      const [r] = (await host.api("GET", `/api/loops/${loop.loop_id}/runs`)).runs;
      const done = r?.outcome?.status === "completed";
      return done && r.notifications?.some((n) => n.endpoint === "ops" && n.event === "loop.run.completed" && n.state === "delivered") ? r : null;
    }, "the run's notification to ops to be delivered");
    assert.ok(run.notifications.some((n) => n.endpoint === "team-slack"), "team-slack was written too");
    assert.equal(run.outcome.session_id ?? run.target_session_id, global);

    const page = await open(`#/automation?loop=${loop.loop_id}`);
    const row = page.locator(`[data-loop="${loop.loop_id}"]`);
    await row.waitFor();
    await row.getByRole("button", { name: /Run history/ }).click();
    const receipts = row.locator(".runs tbody tr").first().locator(".run-outcome");
    // ops takes every event: one message for the new activity item, one for the run's end, each named.
    await receipts.getByRole("img", { name: "Notification to ops (run completed) delivered" }).waitFor();
    await receipts.getByRole("img", { name: "Notification to ops (new activity) delivered" }).waitFor();
    assert.equal(await receipts.getByRole("img", { name: "Notification to ops (run completed) delivered" }).innerText(),
      "ops (run completed): delivered");
    const slack = receipts.getByRole("img", { name: /^Notification to team-slack (retrying|waiting to be sent)/ });
    await slack.waitFor();
    assert.match(await slack.innerText(), /^team-slack: (retrying|waiting)/);
    assert.match(await slack.getAttribute("class"), /busy/);
    await row.scrollIntoViewIfNeeded();
    await screenshot(page, "notifications-receipts-1280");

    await page.goto(host.url + "/#/activity");
    const item = page.getByRole("list", { name: "Activity items" }).locator("li", { hasText: "tell the team" }).first();
    await item.getByRole("img", { name: "Notification to ops (run completed) delivered" }).waitFor();
    await item.getByRole("img", { name: /^Notification to team-slack/ }).waitFor();
    await screenshot(page, "notifications-activity-1280");
    await page.context().close();
  });

  test("on a phone: the section, a message's attempts, the run history and Activity fit the screen", async () => {
    const page = await open("#/settings", phone);
    const ops = card(page, "ops");
    await ops.waitFor();
    await ops.getByRole("button", { name: "Send test to ops" }).click();
    await ops.getByRole("status").getByText(/^Delivered/).waitFor();
    await section(page).getByRole("button", { name: "Add endpoint" }).click();
    await page.getByRole("form", { name: "Add endpoint" }).getByRole("button", { name: "Generate" }).click();
    const overflow = () => page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    assert.equal(await overflow(), 0, "nothing wider than the phone");
    await ops.scrollIntoViewIfNeeded();
    await screenshot(page, "notifications-390");
    await page.getByRole("form", { name: "Add endpoint" }).scrollIntoViewIfNeeded();
    await screenshot(page, "notifications-form-390");
    await page.getByRole("form", { name: "Add endpoint" }).getByRole("button", { name: "Cancel" }).click();
    const first = page.getByRole("list", { name: "Recent messages" }).locator("li").first();
    await first.getByRole("button").first().click();
    await first.getByRole("list", { name: "Attempts" }).waitFor();
    await first.scrollIntoViewIfNeeded();
    assert.equal(await overflow(), 0);
    await screenshot(page, "notifications-messages-390");

    await page.goto(host.url + "/#/activity");
    const item = page.getByRole("list", { name: "Activity items" }).locator("li", { hasText: "tell the team" }).first();
    await item.getByRole("img", { name: "Notification to ops (run completed) delivered" }).waitFor();
    assert.equal(await overflow(), 0);
    await screenshot(page, "notifications-activity-390");

    await page.goto(host.url + `/#/automation?loop=${loop.loop_id}`);
    const row = page.locator(`[data-loop="${loop.loop_id}"]`);
    await row.getByRole("button", { name: /Run history/ }).click();
    await row.getByRole("img", { name: "Notification to ops (run completed) delivered" }).waitFor();
    await row.scrollIntoViewIfNeeded();
    await screenshot(page, "notifications-receipts-390");
    await page.context().close();
  });
});
