// The conversation a person would choose (issue 30): tool calls as JSON,
// reasoning labelled while it streams, a stopped turn's partial answer,
// Markdown as GitHub renders it and safe, highlighted code, copy buttons,
// times on messages, Retry. A real `dsh web` whose model is the tests'
// ScriptedModel (harness.mjs), in Debian's chromium.
// Run: DSH_BINARY=build/dsh node --test --test-concurrency=1 tests/browser/conversation.test.mjs
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Host, ScriptedModel, launch, screenshot, token } from "./harness.mjs";

let model;
let host;
let browser;

before(async () => {
  model = await ScriptedModel.start();
  host = await Host.start("plugins:\n  schedule: {enabled: true}\n", { env: model.env() });
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await host?.close();
  model?.close();
});

// A signed-in page. `options`: more of the context's options (viewport,
// colorScheme, permissions).
async function newPage(options = {}) {
  const context = await browser.newContext({
    viewport: { width: 1280, height: 800 },
    timezoneId: "Asia/Shanghai",
    ...options,
  });
  const page = await context.newPage();
  page.assets = [];  // the script chunks the page loaded
  page.on("request", (r) => r.url().includes("/assets/") && r.url().endsWith(".js") && page.assets.push(r.url()));
  await page.goto(host.openUrl);
  return page;
}

// Opens session `id` and waits until its stream is live (its `ready`), so
// the deltas of what is sent next reach the page.
async function openSession(page, id) {
  const ready = new Promise((ok) =>
    page.on("websocket", (ws) => {
      if (!ws.url().includes(`/api/sessions/${id}/stream`)) return;
      ws.on("framereceived", (f) => JSON.parse(String(f.payload)).type === "ready" && ok());
    }),
  );
  await page.goto(host.url + `/#/s/${id}`);
  await page.getByTestId("conversation").waitFor();
  await ready;
}

async function newSession() {
  return (await host.api("POST", "/api/sessions", {})).session.id;
}

function send(id, message) {
  return host.api("POST", `/api/sessions/${id}/messages`, { message });
}

const conversation = (page) => page.getByTestId("conversation");
const toolBlock = (page, name) => conversation(page).locator("li.block.tool", { has: page.locator("summary code", { hasText: new RegExp(`^${name}$`) }) });

const RICH = [
  "Here is what I found. The docs are at https://example.com/docs/getting-started and [the changelog](https://example.com/changes).",
  "",
  "| session | status |",
  "|---|---|",
  "| ses_1 | idle |",
  "| ses_2 | running |",
  "",
  "- [x] read the sessions",
  "- [ ] write the tests",
  "",
  "> Quoted: a reminder of what you asked.",
  "",
  "A long word: Supercalifragilisticexpialidocious-Supercalifragilisticexpialidocious-Supercalifragilisticexpialidocious and https://example.com/a/very/long/path/that/goes/on/and/on/without/any/break/at/all/in/it/whatsoever",
  "",
  "```python",
  "def greet(name: str) -> str:",
  "    # say hello",
  "    return f\"Hello, {name}!\"  # a line long enough that it has to scroll sideways inside its block rather than wrap",
  "```",
].join("\n");

describe("a conversation with tools, Markdown and a stopped turn", () => {
  let id;
  let page;
  before(async () => {
    id = await newSession();
    page = await newPage({ permissions: ["clipboard-read", "clipboard-write"] });
    await openSession(page, id);
    model.script.push(
      {
        reasoning: "I should look at the sessions first.",
        toolCalls: [
          { name: "session_status", arguments: { recent_n: 3 } },
          { name: "check_session_status", arguments: { session_id: "" } },
        ],
      },
      { text: RICH },
    );
    await send(id, "Check the sessions, then summarise");
    await conversation(page).getByRole("table").waitFor();
  });
  after(async () => page?.context().close());

  test("tool calls show their name, whether they failed, and arguments and results as formatted JSON, collapsed", async () => {
    const call = (await host.events(id)).find((e) => e.type === "tool/call" && e.data.name === "session_status");
    assert.equal(typeof call.data.arguments, "object", "the host stores arguments as a JSON object");
    const ok = toolBlock(page, "session_status");
    const failed = toolBlock(page, "check_session_status");
    await failed.locator(".tag", { hasText: "failed" }).waitFor();
    assert.match(await ok.locator("summary").innerText(), /^Tool\s+session_status\s+done\b/);
    assert.match(await failed.locator("summary").innerText(), /^Tool\s+check_session_status\s+failed\b/, "failed, in words");
    // Collapsed until opened.
    assert.equal(await ok.getByLabel("Arguments").isVisible(), false);
    await ok.locator("summary").click();
    const args = await ok.getByLabel("Arguments").innerText();
    assert.equal(args, '{\n  "recent_n": 3\n}');
    const result = JSON.parse(await ok.getByLabel("Result").innerText());
    assert.ok(Array.isArray(result.sessions), "the result, parsed back from what is shown");
    assert.match(await ok.getByLabel("Result").innerText(), /\n {2}"sessions": \[/, "indented");
    await failed.locator("summary").click();
    assert.equal(await failed.getByLabel("Arguments").innerText(), '{\n  "session_id": ""\n}');
    assert.match(await failed.getByLabel("Error").innerText(), /^invalid_arguments: .*session_id/);
    assert.doesNotMatch(await conversation(page).innerText(), /\[object Object\]/);
  });

  test("Markdown as GitHub renders it: links to a new tab, bordered tables, read-only task lists, quotes, wrapped words", async () => {
    const answer = conversation(page).locator("li.block.assistant", { hasText: "Here is what I found." });
    const bare = answer.getByRole("link", { name: "https://example.com/docs/getting-started" });
    assert.equal(await bare.getAttribute("href"), "https://example.com/docs/getting-started");
    assert.equal(await bare.getAttribute("target"), "_blank");
    assert.equal(await bare.getAttribute("rel"), "noopener noreferrer");
    assert.equal(await answer.getByRole("link", { name: "the changelog" }).getAttribute("target"), "_blank");
    const cell = answer.getByRole("cell", { name: "ses_2" });
    const border = await cell.evaluate((el) => getComputedStyle(el));
    assert.equal(await cell.evaluate((el) => getComputedStyle(el).borderTopStyle), "solid", "cells have borders");
    assert.ok(await cell.evaluate((el) => parseFloat(getComputedStyle(el).borderLeftWidth) >= 1), border);
    const done = answer.getByRole("checkbox", { name: "read the sessions" });
    const unchecked = answer.getByRole("checkbox", { name: "write the tests" });
    assert.equal(await done.isChecked(), true);
    assert.equal(await unchecked.isChecked(), false);
    assert.equal(await unchecked.isDisabled(), true, "read-only");
    const quote = answer.locator("blockquote");
    assert.ok(await quote.evaluate((el) => parseFloat(getComputedStyle(el).borderLeftWidth) >= 3), "a bar on the left");
    // Nothing sticks out of the bubble: long words and URLs wrap, the code block scrolls inside.
    const overflow = await answer.evaluate((el) => el.scrollWidth - el.clientWidth);
    assert.ok(overflow <= 1, `the bubble does not overflow (${overflow} px)`);
    const pre = answer.locator(".code-block pre");
    assert.equal(await pre.evaluate((el) => getComputedStyle(el).overflowX), "auto");
    assert.ok(await pre.evaluate((el) => el.scrollWidth > el.clientWidth), "the long code line scrolls sideways");
  });

  test("code blocks get their language's colours once the highlighter's chunk arrives, and a language label", async () => {
    const block = conversation(page).locator(".code-block").first();
    assert.equal(await block.locator(".code-lang").innerText(), "python");
    await block.locator("code.hljs.language-python .hljs-keyword", { hasText: "def" }).waitFor();
    assert.equal(await block.locator(".hljs-comment").first().innerText(), "# say hello");
    const highlighter = page.assets.filter((u) => /\/highlight-[\w-]+\.js$/.test(u));
    assert.equal(highlighter.length, 1, "the highlighter is a chunk of its own: " + page.assets.join(", "));
    const html = await (await fetch(host.url + "/", { headers: { Cookie: `dsh_token=${token}` } })).text();
    assert.doesNotMatch(html, /highlight-/, "the first page load does not ask for it");
  });

  test("copy buttons on code blocks and messages put their text on the clipboard and say Copied", async () => {
    const answer = conversation(page).locator("li.block.assistant", { hasText: "Here is what I found." });
    const copyCode = answer.getByRole("button", { name: "Copy code" });
    await copyCode.click();
    await answer.getByRole("button", { name: "Copy code" }).filter({ hasText: "Copied" }).waitFor();
    const code = await page.evaluate(() => navigator.clipboard.readText());
    assert.equal(code, RICH.split("```python\n")[1].split("```")[0]);
    await answer.getByRole("button", { name: "Copy message" }).click();
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), RICH, "the answer's Markdown");
    await answer.getByRole("button", { name: "Copy message" }).filter({ hasText: "Copied" }).waitFor();
    const mine = conversation(page).locator("li.block.user", { hasText: "Check the sessions" });
    await mine.getByRole("button", { name: "Copy message" }).click();
    await mine.getByRole("button", { name: "Copy message" }).filter({ hasText: "Copied" }).waitFor();
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), "Check the sessions, then summarise");
    // "Copied" goes again.
    await mine.getByRole("button", { name: "Copy message" }).filter({ hasText: /^Copy$/ }).waitFor();
  });

  test("streaming reasoning says it is reasoning, apart from the answer being written", async () => {
    model.script.push({ reasoning: "Five, seven, five: count the syllables.", text: "Autumn moonlight—\na worm digs silently", pieces: 4, delayMs: 150, hold: true });
    await send(id, "Now a haiku, slowly");
    const thinking = page.getByTestId("streaming-reasoning");
    await thinking.waitFor();
    assert.equal(await thinking.locator(".who").innerText(), "Reasoning (thinking…)");
    // While only reasoning streams (its pieces come 150 ms apart), nothing claims the assistant is writing.
    assert.equal(await conversation(page).getByText("Assistant (writing…)").count(), 0);
    await conversation(page).evaluate((el) => (el.scrollTop = el.scrollHeight));
    await screenshot(page, "conversation-thinking");
    const writing = page.getByTestId("streaming");
    await writing.getByText("a worm digs silently").waitFor();
    assert.equal(await writing.locator(".who").innerText(), "Assistant (writing…)");
    assert.equal(await thinking.locator(".who").innerText(), "Reasoning", "the reasoning is done once the text streams");
    assert.equal(await thinking.locator(".text").innerText(), "Five, seven, five: count the syllables.");
    await conversation(page).evaluate((el) => (el.scrollTop = el.scrollHeight));
    await screenshot(page, "conversation-streaming");

    await page.getByRole("button", { name: "Stop", exact: true }).click();
    await conversation(page).getByText("You stopped this turn.").waitFor();
  });

  test("Stop keeps the half-written answer and reasoning, marked as stopped", async () => {
    const partial = conversation(page).locator("li.block.assistant", { hasText: "a worm digs silently" });
    await partial.getByText("Stopped — partial answer").waitFor();
    assert.match(await partial.locator(".markdown").innerText(), /^Autumn moonlight—\s*a worm digs silently$/);
    await conversation(page).locator("li.block.reasoning summary", { hasText: "Reasoning (stopped — partial)" }).waitFor();
    assert.equal(await page.getByTestId("streaming").count(), 0, "the streamed copy is gone: the answer shows once");
    assert.equal(await conversation(page).getByText("a worm digs silently").count(), 1);
    const events = await host.events(id);
    const kept = events.filter((e) => e.data.partial === true).map((e) => e.type);
    assert.deepEqual(kept.sort(), ["message/assistant", "message/reasoning"]);
    assert.equal(events.at(-1).type, "turn/end");
    assert.equal(events.at(-1).data.error?.code, "cancelled");
  });

  test("every message, tool call and turn note shows when it happened, with the exact local time on hover", async () => {
    const blocks = conversation(page).locator("li.block:not(.running):not(.streaming)");
    const n = await blocks.count();
    assert.ok(n >= 7, `blocks: ${n}`);
    for (let i = 0; i < n; i++) {
      const time = blocks.nth(i).locator("time.ago").first();
      const what = await blocks.nth(i).getAttribute("class");
      assert.equal(await time.count(), 1, `a time on ${what}`);
      const datetime = await time.getAttribute("datetime");
      assert.ok(Number.isFinite(Date.parse(datetime)), `${what}: datetime ${datetime}`);
      assert.match(await time.innerText(), /^(just now|\d+ min ago)$/);
      assert.match(await time.getAttribute("title"), /China Standard Time|GMT\+8/, `${what}: the exact local time`);
    }
    const user = conversation(page).locator("li.block.user", { hasText: "Check the sessions" }).locator("time");
    const at = (await host.events(id)).find((e) => e.type === "message/user").at;
    assert.equal(Date.parse(await user.getAttribute("datetime")), at);
  });

  test("screenshots: wide and narrow, light and dark", async () => {
    for (const colorScheme of ["light", "dark"]) {
      for (const [name, viewport] of [["", { width: 1280, height: 800 }], ["-mobile", { width: 390, height: 844 }]]) {
        const p = await newPage({ colorScheme, viewport });
        await openSession(p, id);
        await conversation(p).locator(".hljs-keyword").first().waitFor();
        await toolBlock(p, "check_session_status").locator("summary").click();
        await toolBlock(p, "check_session_status").evaluate((el) => el.scrollIntoView({ block: "start" }));
        await screenshot(p, `conversation-${colorScheme}${name}`);
        await conversation(p).evaluate((el) => (el.scrollTop = el.scrollHeight));
        await screenshot(p, `conversation-${colorScheme}${name}-end`);
        // On a phone too, nothing is wider than the screen.
        const wide = await p.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
        assert.ok(wide <= 0, `no sideways scrolling of the page (${wide} px)`);
        await p.context().close();
      }
    }
  });
});

describe("hostile Markdown", () => {
  test("raw HTML is shown as text and no link, image or script of the model runs", async () => {
    const id = await newSession();
    const page = await newPage();
    const dialogs = [];
    page.on("dialog", (d) => {
      dialogs.push(d.message());
      void d.dismiss();
    });
    await openSession(page, id);
    const hostile = [
      "<script>window.__pwned = 'script'</script>",
      "",
      "<img src=x onerror=\"window.__pwned = 'img'\">",
      "",
      "[click me](javascript:window.__pwned='link') and [data me](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==) and [vb](vbscript:msgbox(1))",
      "",
      "<javascript:alert('autolink')> and <https://example.com/ok>",
      "",
      "![pic](javascript:alert('img'))",
      "",
      "<a href=\"javascript:alert('a')\">raw anchor</a> <iframe src=\"javascript:alert('frame')\"></iframe>",
      "",
      "```html\n<script>alert('in code')</script>\n```",
      "",
      "The end.",
    ].join("\n");
    model.script.push({ text: hostile });
    await send(id, "show me something nasty");
    const answer = conversation(page).locator("li.block.assistant", { hasText: "The end." });
    await answer.waitFor();
    await answer.locator(".hljs").waitFor();  // the code block, highlighted too
    const markdown = answer.locator(".markdown");
    assert.equal(await markdown.locator("script, iframe, img, object, embed").count(), 0, "no element of the model's HTML");
    const hrefs = await markdown.locator("a").evaluateAll((as) => as.map((a) => a.getAttribute("href")));
    assert.deepEqual(hrefs, ["https://example.com/ok"], "the only link is the https autolink");
    const text = await markdown.innerText();
    assert.match(text, /<script>window\.__pwned = 'script'<\/script>/, "raw HTML shows as text");
    assert.match(text, /\[click me\]\(javascript:window\.__pwned='link'\)/, "a javascript: link stays text");
    assert.match(text, /<img src=x onerror=/);
    await markdown.getByText("click me", { exact: false }).first().click();
    assert.equal(await page.evaluate(() => window.__pwned ?? null), null, "nothing ran");
    assert.deepEqual(dialogs, [], "no alert");
    await page.context().close();
  });
});

describe("retry", () => {
  test("a turn that ended in an error offers Retry, which sends the same message again", async () => {
    const id = await newSession();
    const page = await newPage();
    await openSession(page, id);
    model.fail = true;
    try {
      await send(id, "please try this again");
      await conversation(page).getByText(/The turn ended with an error/).waitFor({ timeout: 30000 });
    } finally {
      model.fail = false;
    }
    const retry = conversation(page).getByRole("button", { name: "Retry: send “please try this again” again" });
    await retry.click();
    // The committed answer (not its streamed copy), and the turn over.
    await conversation(page).locator("li.block.assistant:not(.streaming)", { hasText: "All good." }).waitFor();
    await conversation(page).getByText("Working…").waitFor({ state: "detached" });
    const texts = (await host.events(id)).filter((e) => e.type === "message/user").map((e) => e.data.text);
    assert.deepEqual(texts, ["please try this again", "please try this again"]);
    assert.equal((await host.events(id)).filter((e) => e.type === "turn/end").at(-1).data.status, "completed");
    await page.context().close();
  });

  test("a stopped turn offers Retry too", async () => {
    const id = await newSession();
    const page = await newPage();
    await openSession(page, id);
    model.script.push({ text: "Half an ans", hold: true });
    await send(id, "a long answer, please");
    await page.getByTestId("streaming").getByText("Half an ans").waitFor();
    await page.getByRole("button", { name: "Stop", exact: true }).click();
    await conversation(page).getByText("You stopped this turn.").waitFor();
    await conversation(page).getByRole("button", { name: "Retry: send “a long answer, please” again" }).click();
    await conversation(page).getByText("All good.").waitFor();
    const texts = (await host.events(id)).filter((e) => e.type === "message/user").map((e) => e.data.text);
    assert.deepEqual(texts, ["a long answer, please", "a long answer, please"]);
    await page.context().close();
  });
});

describe("times", () => {
  test("relative times keep counting, and loop and reminder cards have them too", async () => {
    const id = await newSession();
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, timezoneId: "Asia/Shanghai" });
    await context.clock.install();
    const page = await context.newPage();
    await page.goto(host.openUrl);
    await openSession(page, id);
    await send(id, "what time is it");
    await conversation(page).getByText("All good.").waitFor();
    await host.tool("loop_create", { prompt: "look at the deploy", schedule: { kind: "after", after_seconds: 1 }, session_id: id });
    await host.tool("schedule_create", { prompt: "stretch your legs", after_seconds: 1 }, id);
    const loop = page.getByRole("article", { name: /^Loop run/ });
    const reminder = page.getByRole("article", { name: /^Reminder/ });
    await loop.waitFor({ timeout: 20000 });
    await reminder.waitFor({ timeout: 20000 });
    for (const card of [loop, reminder]) {
      const time = card.locator("time.ago");
      assert.equal(await time.innerText(), "just now");
      assert.match(await time.getAttribute("title"), /China Standard Time|GMT\+8/);
    }
    const mine = conversation(page).locator("li.block.user", { hasText: "what time is it" }).locator("time.ago");
    assert.equal(await mine.innerText(), "just now");
    await page.clock.fastForward(3 * 60_000);
    await conversation(page).locator("li.block.user", { hasText: "what time is it" }).getByText("3 min ago").waitFor();
    assert.equal(await loop.locator("time.ago").innerText(), "3 min ago");
    await context.close();
  });
});

describe("reconnecting mid-answer", () => {
  test("the answer being written shows once, without a gap and without flicker, after the connection drops", async () => {
    const id = await newSession();
    const page = await newPage();
    // The page's stream goes through a route the test can cut, as a flaky network does.
    const routes = [];
    let onReady = () => {};
    const nextReady = () => new Promise((ok) => (onReady = ok));
    await page.routeWebSocket(/\/api\/sessions\/[^/]+\/stream/, (ws) => {
      const server = ws.connectToServer();
      server.onMessage((m) => {
        ws.send(m);
        if (JSON.parse(String(m)).type === "ready") onReady();
      });
      routes.push(ws);
    });
    let live = nextReady();
    await page.goto(host.url + `/#/s/${id}`);
    await page.reload();  // the route applies to documents loaded after it
    await live;
    const words = "One two three four five six seven eight nine ten";
    model.script.push({ text: words, pieces: 10, delayMs: 200, hold: true });
    await send(id, "count slowly");
    const writing = page.getByTestId("streaming");
    await writing.getByText("One two").waitFor();
    // Every text the streaming answer shows, from here on; and whether it ever went away.
    await page.evaluate(() => {
      window.__seen = [];
      const look = () => {
        const el = document.querySelector('[data-testid="streaming"] .markdown');
        window.__seen.push(el ? el.textContent.trim() : null);
      };
      new MutationObserver(look).observe(document.querySelector('[data-testid="conversation"]'), { subtree: true, childList: true, characterData: true });
    });
    live = nextReady();
    await routes[0].close();
    await page.getByText("Reconnecting…").waitFor();
    await live;
    await page
      .waitForFunction((w) => document.querySelector('[data-testid="streaming"] .markdown')?.textContent.trim() === w, words, { timeout: 20000 })
      .catch(async () => assert.fail("the answer being written: " + JSON.stringify(await writing.locator(".markdown").innerText())));
    assert.equal(await writing.locator(".markdown").innerText(), words, "once, and whole");
    const seen = await page.evaluate(() => window.__seen);
    assert.ok(!seen.includes(null), "the streaming answer never went away: " + JSON.stringify(seen));
    for (let i = 1; i < seen.length; i++) {
      assert.ok(seen[i].startsWith(seen[i - 1]), `it only grew: ${JSON.stringify(seen[i - 1])} then ${JSON.stringify(seen[i])}`);
    }
    assert.ok(routes.length >= 2, "the page reconnected");
    await page.getByRole("button", { name: "Stop", exact: true }).click();
    await conversation(page).getByText("You stopped this turn.").waitFor();
    await page.context().close();
  });
});

describe("a brand-new session", () => {
  // The model starts answering before the page's stream of the new session
  // is connected: the first piece went out to nobody. The host now sends
  // what was streamed so far once the page has caught up.
  test("shows its answer from the first word, though the page connects after the model began", async () => {
    const page = await newPage();
    await page.getByRole("navigation", { name: "Sessions" }).waitFor();
    await page.evaluate(() => {
      window.__seen = [];
      new MutationObserver(() => {
        const el = document.querySelector('[data-testid="streaming"] .markdown');
        if (el) window.__seen.push(el.textContent.trim());
      }).observe(document.body, { subtree: true, childList: true, characterData: true });
    });
    // The first piece at once, the rest slowly, then the answer stays open.
    const words = "This is a slow streamed answer, word by word.";
    model.script.push({ text: words, pieces: 8, delayMs: 300, quickStart: true, hold: true });
    await page.getByRole("button", { name: "New session", exact: true }).click();
    await page.getByLabel("First message").fill("Tell me slowly");
    await page.getByRole("button", { name: "Start", exact: true }).click();
    const writing = page.getByTestId("streaming");
    await writing.getByText("word by word.").waitFor();
    assert.equal(await writing.locator(".markdown").innerText(), words);
    const seen = await page.evaluate(() => window.__seen);
    assert.ok(seen.length > 0);
    for (const text of seen) assert.ok(text.startsWith("This"), `begins with the first word: ${JSON.stringify(text)}`);
    await page.getByRole("button", { name: "Stop", exact: true }).click();
    await conversation(page).getByText("You stopped this turn.").waitFor();
    await page.context().close();
  });
});
