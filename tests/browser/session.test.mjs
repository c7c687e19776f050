// The page around a conversation (issue 30): "Fork from here" at a turn
// boundary with the message as a draft, messages queued during a turn, the
// words after the host went away, the keyboard, and the session header with
// its route, zone and exports. A real `dsh web` whose model is the tests'
// scripted OpenAI-compatible server, in Debian's chromium.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Host, ScriptedModel, launch, screenshot, signedIn, waitForEvent } from "./harness.mjs";

let host;
let browser;
let model;

before(async () => {
  model = await ScriptedModel.start();
  model.reply = (question) => `answer to: ${question}`;
  host = await Host.start(undefined, { env: model.env() });
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await host?.close();
  model?.close();
});

const message = (page) => page.getByRole("textbox", { name: "Message" });
const draftIs = (page, text) =>
  page.waitForFunction((t) => document.querySelector("textarea[aria-label=Message]")?.value === t, text);
const userTexts = (events) => events.filter((e) => e.type === "message/user").map((e) => e.data.text);
const sessionOfPage = (page) => decodeURIComponent(new URL(page.url()).hash.replace(/^#\/s\//, "").split("/")[0]);
const lastEvent = async (id) => (await host.events(id)).at(-1);

// A session of two exchanges, made through the page; the page shows it.
async function twoExchanges(page, first, second) {
  await page.getByRole("button", { name: "New session", exact: true }).click();
  await page.getByLabel("First message").fill(first);
  await page.getByRole("button", { name: "Start", exact: true }).click();
  await page.waitForURL(/#\/s\/ses_/);
  const id = sessionOfPage(page);
  await page.getByText(`answer to: ${first}`).waitFor();
  await message(page).fill(second);
  await message(page).press("Enter");
  await page.getByText(`answer to: ${second}`).waitFor();
  await waitForTurnEnds(id, 2);
  return id;
}

// Until the session's log holds `n` turn ends (a turn that ended).
async function waitForTurnEnds(id, n) {
  for (let i = 0; i < 200; i++) {
    if ((await host.events(id)).filter((e) => e.type === "turn/end").length >= n) return;
    await new Promise((ok) => setTimeout(ok, 50));
  }
  throw new Error(`session ${id}: fewer than ${n} turns ended`);
}

// Light and dark, wide and narrow: a screenshot of each.
async function screenshots(page, name) {
  const size = page.viewportSize();
  for (const [w, h] of [[1280, 800], [390, 844]]) {
    await page.setViewportSize({ width: w, height: h });
    for (const scheme of ["light", "dark"]) {
      await page.emulateMedia({ colorScheme: scheme });
      await screenshot(page, `${name}-${w}-${scheme}`);
    }
  }
  await page.emulateMedia({ colorScheme: "light" });
  await page.setViewportSize(size);
}

describe("Fork from here (defect 1)", () => {
  test("forks at the turn boundary before the message, with the message as the draft; sending calls the model once", async () => {
    const page = await signedIn(browser, host);
    const parent = await twoExchanges(page, "the first question", "a second question");
    await page.getByRole("button", { name: "Fork the session before this message" }).nth(1).click();
    await page.waitForURL((u) => u.hash.startsWith("#/s/") && !u.hash.includes(parent));
    const child = sessionOfPage(page);
    await draftIs(page, "a second question");
    await page.getByText("answer to: the first question").waitFor();
    // Cold and whole: no turn left open, nothing running, the first exchange once.
    assert.equal(await page.getByText("Working…").count(), 0, "no Working… in the fork");
    assert.equal(await page.getByRole("button", { name: "Stop", exact: true }).count(), 0, "no Stop in the fork");
    assert.equal(await page.getByText("answer to: the first question").count(), 1);
    assert.equal(await page.getByText("answer to: a second question").count(), 0);
    const seeded = await host.events(child);
    const turns = seeded.filter((e) => e.type === "turn/start" || e.type === "turn/end").map((e) => e.type);
    assert.deepEqual(turns, ["turn/start", "turn/end"], "the fork holds the first turn, closed, and nothing of the second");
    assert.deepEqual(userTexts(seeded), ["the first question"]);
    assert.equal(await host.status(child), "cold");

    // Edit and resend: one model call, the new answer once, the old one not again.
    const before = model.answers;
    await message(page).press("Enter");
    await page.getByText("answer to: a second question").waitFor();
    await waitForTurnEnds(child, 2);
    assert.equal(model.answers, before + 1, "exactly one more model call");
    const log = await host.events(child);
    assert.deepEqual(userTexts(log), ["the first question", "a second question"]);
    assert.deepEqual(
      log.filter((e) => e.type === "message/assistant").map((e) => e.data.text),
      ["answer to: the first question", "answer to: a second question"],
    );
    assert.equal(await page.getByText("answer to: the first question").count(), 1, "the old answer shows once");
    assert.deepEqual(userTexts(await host.events(parent)), ["the first question", "a second question"], "the parent is unchanged");
    await page.context().close();
  });
});

describe("messages sent during a turn (defect 4)", () => {
  test("show at once as queued, with where they land, and give way to the message once it arrives", async () => {
    const page = await signedIn(browser, host);
    model.holdAnswers = true;
    const { session_id: id } = await host.tool("session_create", { prompt: "a long job" });
    await page.goto(host.url + `/#/s/${id}`);
    // Every frame the page paints: a text both queued and in the conversation is shown twice.
    await page.evaluate(() => {
      window.__twice = [];
      const look = () => {
        const queued = [...document.querySelectorAll("[data-testid=queued] .queued-text")].map((e) => e.textContent);
        const shown = new Set([...document.querySelectorAll(".block.user .text")].map((e) => e.textContent));
        for (const t of queued) if (shown.has(t)) window.__twice.push(t);
        requestAnimationFrame(look);
      };
      requestAnimationFrame(look);
    });
    try {
      await page.getByText("Working…").waitFor();
      await message(page).fill("steer this way");
      await message(page).press("Enter");
      const queued = page.getByRole("region", { name: "Queued messages" });
      await queued.getByRole("listitem", { name: "Queued for the next step: steer this way" }).waitFor();
      await message(page).fill("and after that, this");
      await page.getByRole("button", { name: "Send as follow-up" }).click();
      await queued.getByRole("listitem", { name: "Queued for the next turn: and after that, this" }).waitFor();
      assert.equal(await message(page).inputValue(), "", "the message left the box");
      assert.equal(await page.locator(".block.user", { hasText: "steer this way" }).count(), 0, "not in the conversation yet");
      await screenshots(page, "queued");
    } finally {
      model.release();
    }
    await page.locator(".block.user", { hasText: "steer this way" }).waitFor();
    await page.locator(".block.user", { hasText: "and after that, this" }).waitFor();
    await page.getByRole("region", { name: "Queued messages" }).waitFor({ state: "detached" });
    assert.equal(await page.locator(".block.user", { hasText: "steer this way" }).count(), 1);
    assert.equal(await page.locator(".block.user", { hasText: "and after that, this" }).count(), 1);
    assert.deepEqual(await page.evaluate(() => window.__twice), [], "never shown twice in a frame");
    await page.context().close();
  });
});

describe("after the host went away (defect 6)", () => {
  test("says so in words, keeps the unsent message with Retry and Discard, and clears when the host is back", async () => {
    const page = await signedIn(browser, host);
    const { session_id: id } = await host.tool("session_create", { prompt: "before the outage" });
    await page.goto(host.url + `/#/s/${id}`);
    await page.getByText("answer to: before the outage").waitFor();
    await waitForTurnEnds(id, 1);
    await host.stop();
    const banner = page.getByRole("status").filter({ hasText: "Reconnecting to dsh…" });
    await banner.waitFor();
    await message(page).fill("sent while it was down");
    await message(page).press("Enter");
    await message(page).fill("this one I take back");
    await message(page).press("Enter");
    const notice = page.locator(".composer").getByRole("alert");
    await notice.filter({ hasText: "Lost the connection to dsh — your message was not sent; reconnecting…" }).waitFor();
    const unsent = page.getByRole("listitem", { name: "Not sent: sent while it was down" });
    await unsent.getByRole("alert").filter({ hasText: "Not sent: lost the connection to dsh." }).waitFor();
    assert.equal(await page.getByText("Failed to fetch").count(), 0, "no raw browser error");
    await screenshots(page, "reconnect");

    await host.run();
    await banner.waitFor({ state: "detached" });
    await notice.filter({ hasText: "Lost the connection" }).waitFor({ state: "detached" });
    await page.getByRole("listitem", { name: "Not sent: this one I take back" }).getByRole("button", { name: "Discard" }).click();
    await unsent.getByRole("button", { name: "Retry" }).click();
    await page.locator(".block.user", { hasText: "sent while it was down" }).waitFor();
    await page.getByText("answer to: sent while it was down").waitFor();
    await page.getByRole("region", { name: "Queued messages" }).waitFor({ state: "detached" });
    await waitForTurnEnds(id, 2);
    assert.deepEqual(userTexts(await host.events(id)), ["before the outage", "sent while it was down"], "sent once; the discarded one never");
    assert.equal(await page.locator(".block.user", { hasText: "sent while it was down" }).count(), 1);
    await page.context().close();
  });
});

describe("keyboard", () => {
  test("Enter sends, Shift+Enter adds a line", async () => {
    const page = await signedIn(browser, host);
    const { session_id: id } = await host.tool("session_create", { prompt: "lines" });
    await page.goto(host.url + `/#/s/${id}`);
    await page.getByText("answer to: lines").waitFor();
    await message(page).click();
    await page.keyboard.type("line one");
    await page.keyboard.press("Shift+Enter");
    await page.keyboard.type("line two");
    assert.equal(await message(page).inputValue(), "line one\nline two", "Shift+Enter is a new line, not a send");
    await page.keyboard.press("Enter");
    await page.getByText("answer to: line one\nline two").waitFor();
    assert.deepEqual(userTexts(await host.events(id)), ["lines", "line one\nline two"]);
    assert.equal(await message(page).inputValue(), "");
    await page.context().close();
  });

  test("Esc stops a running turn from the composer, unless it closes a popup", async () => {
    const page = await signedIn(browser, host);
    model.holdAnswers = true;
    try {
      const { session_id: id } = await host.tool("session_create", { prompt: "hold on" });
      await page.goto(host.url + `/#/s/${id}`);
      await page.evaluate(() => {
        window.__cancels = 0;
        const fetch = window.fetch;
        window.fetch = (input, init) => {
          if (String(input).endsWith("/cancel")) window.__cancels++;
          return fetch(input, init);
        };
      });
      await page.getByText("Working…").waitFor();
      await message(page).fill("/");
      await page.getByRole("listbox", { name: "Commands" }).waitFor();
      await message(page).press("Escape");
      assert.equal(await page.getByRole("listbox").count(), 0, "Esc closed the popup");
      assert.equal(await page.evaluate(() => window.__cancels), 0, "and stopped nothing");
      await message(page).fill("");
      await message(page).press("Escape");
      await page.getByText("You stopped this turn.").waitFor();
      assert.equal(await page.evaluate(() => window.__cancels), 1);
      assert.equal((await lastEvent(id)).data.error?.code, "cancelled");
      assert.equal(await page.getByRole("button", { name: "Stop", exact: true }).count(), 0);
    } finally {
      model.release();
    }
    await page.context().close();
  });

  test("Up in an empty composer edits the last message: a fork before it, with its text as the draft", async () => {
    const page = await signedIn(browser, host);
    const parent = await twoExchanges(page, "what is up", "and what is down");
    await message(page).fill("not empty");
    await message(page).press("ArrowUp");
    assert.equal(sessionOfPage(page), parent, "Up in a box with text moves the caret only");
    await message(page).fill("");
    await message(page).press("ArrowUp");
    await page.waitForURL((u) => u.hash.startsWith("#/s/") && !u.hash.includes(parent));
    const child = sessionOfPage(page);
    await draftIs(page, "and what is down");
    await page.getByText("answer to: what is up").waitFor();
    assert.equal(await page.getByText("Working…").count(), 0);
    assert.deepEqual(userTexts(await host.events(child)), ["what is up"]);
    assert.equal(await page.evaluate(() => document.activeElement?.getAttribute("aria-label")), "Message", "ready to edit");
    await page.context().close();
  });

  test("focus moves to the composer when a session opens", async () => {
    const page = await signedIn(browser, host);
    const { session_id: id } = await host.tool("session_create", { prompt: "focus please" });
    await waitForEvent(browser, host, id, "turn/end");
    const nav = page.getByRole("navigation", { name: "Sessions" });
    await nav.getByRole("button", { name: /^focus please/i }).click();
    await page.getByText("answer to: focus please").waitFor();
    assert.equal(await page.evaluate(() => document.activeElement?.getAttribute("aria-label")), "Message");
    await page.keyboard.type("typed at once");
    assert.equal(await message(page).inputValue(), "typed at once");
    await page.context().close();
  });
});

describe("the session header", () => {
  test("shows the model route and the session's zone, and exports the session as Markdown and JSON", async () => {
    const page = await signedIn(browser, host);
    const { session_id: id } = await host.tool("session_create", { prompt: "export me" });
    await waitForEvent(browser, host, id, "turn/end");
    await page.goto(host.url + `/#/s/${id}`);
    await page.getByText("answer to: export me").waitFor();
    const header = page.locator(".session-header");
    await header.getByTestId("session-route").filter({ hasText: "openai/test-model" }).waitFor();
    const zone = (await host.api("GET", `/api/sessions/${id}`)).session.time_zone;
    assert.equal(await header.getByTestId("session-zone").innerText(), zone);
    await screenshots(page, "header");

    // Each link downloads the file the host names, signed in by the page's cookie.
    const download = async (name) => {
      const [d] = await Promise.all([page.waitForEvent("download"), header.getByRole("link", { name }).click()]);
      assert.equal(await d.failure(), null, `${name}: the download failed`);
      const chunks = [];
      for await (const c of await d.createReadStream()) chunks.push(c);
      return { name: d.suggestedFilename(), text: Buffer.concat(chunks).toString("utf8") };
    };
    const md = await download("Export as Markdown");
    assert.match(md.name, /\.md$/);
    assert.match(md.text, /export me/);
    assert.match(md.text, /answer to: export me/);
    const json = await download("Export as JSON");
    assert.match(json.name, /\.json$/);
    const parsed = JSON.parse(json.text);
    const events = Array.isArray(parsed) ? parsed : parsed.events;
    assert.deepEqual(events.map((e) => e.seq), (await host.events(id)).map((e) => e.seq), "every event, in order");
    assert.deepEqual(userTexts(events), ["export me"]);
    await page.context().close();
  });
});
