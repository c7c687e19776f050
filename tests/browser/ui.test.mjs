// The browser UI against a real `dsh web` in Debian's chromium (issue 18).
// Run: npm run test:browser (scripts/test runs it after the C++ tests).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { HoldingModel, Host, launch, screenshot, signedIn, token, waitForEvent } from "./harness.mjs";

let host;
let browser;
let holding;  // the `slow` provider: its answers never finish

before(async () => {
  holding = await HoldingModel.start();
  host = await Host.start(`providers:\n  slow:\n    type: openai\n    base_url: ${holding.url}\n`);
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await host?.close();
  holding?.close();
});

const message = (page) => page.getByRole("textbox", { name: "Message" });
const userTexts = (events) => events.filter((e) => e.type === "message/user").map((e) => e.data.text);

async function newSession(page, prompt) {
  await page.getByRole("button", { name: "New session", exact: true }).click();
  await page.getByLabel("First message").fill(prompt);
  await page.getByRole("button", { name: "Start", exact: true }).click();
  await page.waitForURL(/#\/s\/ses_/);
  return decodeURIComponent(new URL(page.url()).hash.replace("#/s/", ""));
}

describe("signing in", () => {
  test("the token URL sets the cookie and leaves an address without the token", async () => {
    const page = await signedIn(browser, host);
    assert.equal(new URL(page.url()).search, "", "no token in the address");
    await page.getByRole("navigation", { name: "Sessions" }).waitFor();
    const cookies = await page.context().cookies();
    const cookie = cookies.find((c) => c.name === "dsh_token");
    assert.ok(cookie?.httpOnly, "HttpOnly");
    assert.equal(cookie.sameSite, "Strict");
    await page.context().close();
  });

  test("a wrong token or none is refused with the sign-in page", async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    const wrong = await page.goto(host.url + "/?token=nope");
    assert.equal(wrong.status(), 401);
    await page.getByText("not this host's").waitFor();
    const none = await page.goto(host.url + "/");
    assert.equal(none.status(), 401);
    await page.getByText("Open the URL printed by").waitFor();
    const api = await page.request.get(host.url + "/api/host");
    assert.equal(api.status(), 401);
    await context.close();
  });
});

describe("conversation", () => {
  test("a new session streams the echo model's answer", async () => {
    const page = await signedIn(browser, host);
    const id = await newSession(page, "Hello from the browser");
    await page.getByText("echo: Hello from the browser").waitFor();
    await page.getByRole("navigation", { name: "Sessions" }).getByText("Hello from the browser").waitFor();
    assert.deepEqual(userTexts(await host.events(id)), ["Hello from the browser"]);
    const created = await host.api("GET", `/api/sessions/${id}/events?limit=1`);
    assert.ok(created.last_seq > 0);
    const header = (await host.tool("session_status", { session_id: id })).sessions[0];
    assert.equal(header.session_id, id);
    await screenshot(page, "conversation");
    await page.context().close();
  });

  test("the answer streams as deltas over the WebSocket before it is committed", async () => {
    const page = await signedIn(browser, host);
    const frames = [];
    const isCommitted = (f) => f.type === "event" && f.event.type === "message/assistant" && f.event.data.text === "echo: and again";
    let committedArrived;
    const committedFrame = new Promise((ok) => (committedArrived = ok));
    page.on("websocket", (ws) => ws.on("framereceived", (f) => {
      const frame = JSON.parse(String(f.payload));
      frames.push(frame);
      if (isCommitted(frame)) committedArrived();
    }));
    await newSession(page, "stream please");
    await page.getByText("echo: stream please").waitFor();
    await message(page).fill("and again");
    await page.keyboard.press("Enter");
    // The text shows from the delta already; the committed event comes after.
    await page.getByText("echo: and again").waitFor();
    await committedFrame;
    const delta = frames.findIndex((f) => f.type === "delta" && f.text === "echo: and again");
    const committed = frames.findIndex(isCommitted);
    assert.ok(delta >= 0, "a delta arrived: " + JSON.stringify(frames.map((f) => f.type)));
    assert.ok(delta < committed, "before the committed answer");
    // The committed answer replaces the streamed one: it goes, and the answer shows once.
    await page.getByTestId("streaming").waitFor({ state: "detached" });
    assert.equal(await page.getByText("echo: and again", { exact: true }).count(), 1, "the answer shows once");
    await page.context().close();
  });

  test("the New session dialog offers the profile's model routes and shows a route error at the model", async () => {
    const page = await signedIn(browser, host);
    await page.getByRole("button", { name: "New session", exact: true }).click();
    const provider = page.getByLabel("Provider");
    assert.equal(await provider.inputValue(), "echo");
    const openai = page.locator("select option[value=openai]");
    assert.equal(await openai.innerText(), "openai (no API key)");
    assert.equal(await openai.evaluate((o) => o.disabled), true, "a provider without its key cannot be chosen");
    await page.getByLabel("First message").fill("with a route");
    await page.getByLabel("Model name").fill("");
    await page.getByRole("button", { name: "Start", exact: true }).click();
    const error = page.locator("#err-model");
    await error.waitFor();
    assert.match(await error.innerText(), /model/);
    await page.getByLabel("Model name").fill("mirror");
    await page.getByLabel("Working directory (optional, absolute)").fill("not/absolute");
    await page.getByRole("button", { name: "Start", exact: true }).click();
    const cwdError = page.locator("#err-cwd");
    await cwdError.waitFor();
    assert.match(await cwdError.innerText(), /absolute path/);
    assert.equal(await page.locator("#err-model").count(), 0, "only the field the error names");
    assert.equal(await page.getByLabel("Working directory (optional, absolute)").getAttribute("aria-invalid"), "true");
    await page.getByLabel("Working directory (optional, absolute)").fill("");
    await page.getByRole("button", { name: "Start", exact: true }).click();
    await page.getByText("echo: with a route").waitFor();
    await page.context().close();
  });

  test("keyboard only: Tab to the message box, type, Enter sends", async () => {
    const page = await signedIn(browser, host);
    const id = await newSession(page, "first");
    await page.getByText("echo: first").waitFor();
    await page.locator("body").focus();
    for (let i = 0; i < 40; i++) {
      const label = await page.evaluate(() => document.activeElement?.getAttribute("aria-label"));
      if (label === "Message") break;
      await page.keyboard.press("Tab");
    }
    assert.equal(await page.evaluate(() => document.activeElement?.getAttribute("aria-label")), "Message");
    await page.keyboard.type("typed with keys");
    await page.keyboard.press("Enter");
    await page.getByText("echo: typed with keys").waitFor();
    assert.deepEqual(userTexts(await host.events(id)), ["first", "typed with keys"]);
    await page.context().close();
  });

  test("a reconnect after the host restarts loses and repeats nothing", async () => {
    const page = await signedIn(browser, host);
    const id = await newSession(page, "before the restart");
    await page.getByText("echo: before the restart").waitFor();
    await host.stop();
    await page.getByText("Reconnecting to dsh…").waitFor();
    await host.run();
    // The page reconnects with the last seq it holds; new events arrive once.
    await host.api("POST", `/api/sessions/${id}/messages`, { message: "after the restart" });
    await page.getByText("echo: after the restart").waitFor();
    const seqs = await page.locator("[data-seq]").evaluateAll((els) => els.map((e) => Number(e.dataset.seq)));
    assert.equal(new Set(seqs).size, seqs.length, "no block twice");
    const blocks = await page.locator(".block.user, .block.assistant").count();
    const log = await host.events(id);
    assert.equal(blocks, log.filter((e) => e.type === "message/user" || e.type === "message/assistant").length);
    await page.context().close();
  });

  test("a cold session opened in the browser is only read: it stays cold", async () => {
    const { session } = await host.api("POST", "/api/sessions", {});
    await host.api("POST", `/api/sessions/${session.id}/messages`, { message: "remember me" });
    // Its turn must have ended: a message still pending would resume it at the restart.
    await waitForEvent(browser, host, session.id, "turn/end");
    await host.stop();
    await host.run();
    assert.equal(await host.status(session.id), "cold");
    const page = await signedIn(browser, host);
    // Everything the page does on opening a session: read it to the end (`ready`).
    const caughtUp = page
      .waitForEvent("websocket", (ws) => ws.url().includes(`/api/sessions/${session.id}/stream`))
      .then((ws) => ws.waitForEvent("framereceived", (f) => JSON.parse(String(f.payload)).type === "ready"));
    await page.goto(host.url + `/#/s/${session.id}`);
    try {
      await page.getByText("echo: remember me").waitFor({ timeout: 10000 });
    } catch (e) {
      await screenshot(page, "cold-failure");
      throw new Error(e.message + "\nlog: " + JSON.stringify(await host.events(session.id)) + "\nurl: " + page.url());
    }
    await caughtUp;
    assert.equal(await host.status(session.id), "cold");
    await page.context().close();
  });

  test("Fork from a message opens a new session with the log before it and the message as a draft", async () => {
    const page = await signedIn(browser, host);
    const parent = await newSession(page, "the first question");
    await page.getByText("echo: the first question").waitFor();
    await message(page).fill("a second question");
    await page.keyboard.press("Enter");
    await page.getByText("echo: a second question").waitFor();
    await page.getByRole("button", { name: "Fork the session before this message" }).nth(1).click();
    await page.waitForURL((u) => !u.hash.includes(parent));
    const child = decodeURIComponent(new URL(page.url()).hash.replace("#/s/", ""));
    assert.notEqual(child, parent);
    // The message, to edit and send again.
    await page.waitForFunction(() => document.querySelector("textarea[aria-label=Message]")?.value === "a second question");
    await page.getByText("echo: the first question").waitFor();
    assert.equal(await page.getByText("echo: a second question").count(), 0);
    assert.deepEqual(userTexts(await host.events(child)), ["the first question"]);
    assert.deepEqual(userTexts(await host.events(parent)), ["the first question", "a second question"]);
    await page.context().close();
  });

  test("Send as follow-up sends with that mode; the draft survives a reload", async () => {
    const page = await signedIn(browser, host);
    const id = await newSession(page, "start");
    await page.getByText("echo: start").waitFor();
    await message(page).fill("later, please");
    await page.getByRole("button", { name: "Send as follow-up" }).click();
    await page.getByText("echo: later, please").waitFor();
    const sent = (await host.events(id)).find((e) => e.type === "message/user" && e.data.text === "later, please");
    assert.equal(sent.data.mode, "followup");
    await message(page).fill("half-written\nsecond line");
    await page.reload();
    assert.equal(await message(page).inputValue(), "half-written\nsecond line");
    assert.deepEqual(userTexts(await host.events(id)), ["start", "later, please"], "a draft is not sent");
    await page.context().close();
  });

  test("a slash command's result is shown, and is not a message of the session", async () => {
    const page = await signedIn(browser, host);
    const id = await newSession(page, "a session");
    await page.getByText("echo: a session").waitFor();
    await message(page).fill("/sessions status");
    await page.keyboard.press("Enter");
    const card = page.getByTestId("command-result");
    await card.waitFor();
    assert.match(await card.innerText(), /local, not sent to the model/);
    const texts = userTexts(await host.events(id));
    assert.deepEqual(texts, ["a session"], "the command is not in the log");
    await page.context().close();
  });
});

describe("live updates and stopping", () => {
  const rowStatus = (page, id) => page.getByRole("navigation", { name: "Sessions" }).locator(`li[data-session="${id}"] .status`);

  test("Stop cancels a running turn; the sidebar shows running, then idle", async () => {
    const page = await signedIn(browser, host);
    const { session_id: id } = await host.tool("session_create", {
      prompt: "take your time",
      model: { provider: "slow", model: "hold" },
    });
    await page.goto(host.url + `/#/s/${id}`);
    await page.getByText("Working…").waitFor();
    await page.waitForFunction((sel) => document.querySelector(sel)?.textContent === "running", `li[data-session="${id}"] .status`);
    await screenshot(page, "running");
    await page.getByRole("button", { name: "Stop", exact: true }).click();
    await page.getByText("You stopped this turn.").waitFor();
    assert.equal(await page.getByRole("button", { name: "Stop", exact: true }).count(), 0, "no Stop once the turn ended");
    const end = (await host.events(id)).find((e) => e.type === "turn/end");
    assert.equal(end?.data.error?.code, "cancelled");
    assert.equal(holding.aborted, 1, "the model call was cut");
    await page.waitForFunction((sel) => document.querySelector(sel)?.textContent === "idle", `li[data-session="${id}"] .status`);
    assert.equal(await rowStatus(page, id).innerText(), "idle");
    await page.context().close();
  });

  test("the sidebar follows sessions made elsewhere without polling", async () => {
    // The page's timers run on a fake clock the test steps.
    const context = await browser.newContext({ viewport: { width: 1200, height: 760 } });
    await context.clock.install();
    const page = await context.newPage();
    const feed = page.waitForEvent("websocket", (ws) => ws.url().endsWith("/api/changes"));
    let reads = 0;
    page.on("request", (r) => r.url().endsWith("/api/tools/session_status") && reads++);
    await page.goto(host.openUrl);
    await page.getByRole("navigation", { name: "Sessions" }).getByRole("listitem").first().waitFor();
    const changes = await feed;
    // At start the list is read twice: the page's first read, and again when
    // the feed says `ready` (whatever changed before it connected). Wait for
    // both, or the second would count as a read in the quiet minute below.
    for (const deadline = Date.now() + 10_000; reads < 2 && Date.now() < deadline; ) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.equal(reads, 2, "the first read and the feed's ready re-read");
    // Quiet: nothing changes, so a minute passes without a read (the old sidebar polled every 2 s).
    const before = reads;
    await page.clock.runFor(60_000);
    assert.equal(reads, before, "no reads while nothing changes");
    const changed = changes.waitForEvent("framereceived", (f) => JSON.parse(String(f.payload)).type === "changed");
    const { session_id: id } = await host.tool("session_create", { prompt: "made by another client" });
    await changed;
    await page.clock.runFor(1_000);  // the list's re-read is throttled to one per 300 ms
    await rowStatus(page, id).waitFor();
    await page.getByRole("navigation", { name: "Sessions" }).getByText("made by another client").waitFor();
    await page.context().close();
  });
});

describe("the /sessions read completion popup", () => {
  let page;
  let target;
  before(async () => {
    target = (await host.api("POST", "/api/sessions", {})).session.id;
    page = await signedIn(browser, host);
    await newSession(page, "completion");
  });
  after(async () => page.context().close());

  const options = async () => {
    const list = page.getByRole("listbox");
    if ((await list.count()) === 0) return [];
    return page.getByRole("option").evaluateAll((els) => els.map((e) => e.querySelector(".mono")?.textContent));
  };
  const draft = () => message(page).inputValue();

  test("after the session id it offers --offset and --limit", async () => {
    await message(page).fill(`/sessions read ${target} `);
    assert.deepEqual(await options(), ["--offset", "--limit"]);
    await screenshot(page, "completion");
  });

  test("Enter chooses a flag: the flag and a space, the caret after them", async () => {
    await message(page).fill(`/sessions read ${target} `);
    await message(page).press("ArrowDown");
    await message(page).press("Enter");
    assert.equal(await draft(), `/sessions read ${target} --limit `);
    const caret = await message(page).evaluate((el) => el.selectionStart);
    assert.equal(caret, (await draft()).length);
  });

  test("Tab and a click choose too", async () => {
    await message(page).fill(`/sessions read ${target} `);
    await message(page).press("Tab");
    assert.equal(await draft(), `/sessions read ${target} --offset `);
    await message(page).fill(`/sessions read ${target} `);
    await page.getByRole("option", { name: /--limit/ }).click();
    assert.equal(await draft(), `/sessions read ${target} --limit `);
  });

  test("flags already present are not offered", async () => {
    await message(page).fill(`/sessions read ${target} --offset 2 `);
    assert.deepEqual(await options(), ["--limit"]);
  });

  test("a partial --l filters", async () => {
    await message(page).fill(`/sessions read ${target} --l`);
    assert.deepEqual(await options(), ["--limit"]);
  });

  test("whitespace around and between /sessions and read matches the same", async () => {
    for (const d of [`  /sessions   read ${target} `, `/sessionsread ${target} `]) {
      await message(page).fill(d);
      assert.deepEqual(await options(), ["--offset", "--limit"], d);
    }
  });

  test("choosing never sends anything", async () => {
    const before = await host.events(target);
    const sent = [];
    page.on("request", (r) => r.method() === "POST" && sent.push(r.url()));
    await message(page).fill(`/sessions read ${target} `);
    await message(page).press("Enter");
    // The choice is made (a send would have started its request by then).
    await page.waitForFunction((t) => document.querySelector("textarea[aria-label=Message]")?.value === `/sessions read ${t} --offset `, target);
    assert.deepEqual(sent, []);
    assert.equal(await page.getByTestId("command-result").count(), 0);
    assert.deepEqual(await host.events(target), before);
  });
});

describe("layout", () => {
  test("360 px wide: the sessions list opens from the top bar", async () => {
    const page = await signedIn(browser, host, { width: 360, height: 720 });
    const toggle = page.getByRole("button", { name: "Sessions", exact: true });
    await toggle.click();
    await page.getByRole("button", { name: "New session", exact: true }).waitFor();
    assert.equal(await toggle.getAttribute("aria-expanded"), "true");
    await screenshot(page, "narrow");
    await page.context().close();
  });

  test("the token is the host's", () => assert.ok(host.openUrl.endsWith(`?token=${token}`)));
});
