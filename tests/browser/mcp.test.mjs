// The automation panel's MCP servers against a real `dsh web` in Debian's
// chromium: the official "everything" server from node_modules (npm ci) and
// a server whose command does not exist (docs/MCP.md, docs/UI.md).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Host, launch, screenshot, signedIn } from "./harness.mjs";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const everything = join(root, "node_modules/@modelcontextprotocol/server-everything/dist/index.js");
// In the everything server's argv (it ignores it): marks this test's child
// among other node processes.
const marker = `dsh-browser-mcp-${process.pid}`;
const missing = `/nonexistent/${marker}/mcp-server`;

// The pids of processes whose command line contains `needle`.
function processesWith(needle) {
  const pids = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (readFileSync(`/proc/${name}/cmdline`, "latin1").replaceAll("\0", " ").includes(needle)) pids.push(Number(name));
    } catch {
      // It ended while we looked.
    }
  }
  return pids;
}

let host;
let browser;

before(async () => {
  assert.ok(existsSync(everything), "the MCP servers from npm are missing: run `npm ci` (scripts/test does)");
  host = await Host.start(
    "mcp:\n  servers:\n" +
      `    ev:\n      command: [node, ${JSON.stringify(everything)}, stdio, ${marker}]\n` +
      `    broken:\n      command: [${JSON.stringify(missing)}]\n`,
  );
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await host?.close();
  assert.deepEqual(processesWith(marker), [], "the everything server stopped with the host");
});

// What the page's change feed says, as it arrives: `next(pred)` resolves on
// the first message from then on that `pred` accepts.
function followFeed(page) {
  const listeners = new Set();
  page.on("websocket", (ws) => {
    if (new URL(ws.url()).pathname !== "/api/changes") return;
    ws.on("framereceived", ({ payload }) => {
      const m = JSON.parse(String(payload));
      for (const l of listeners) l(m);
    });
  });
  return {
    next: (pred, timeout = 20000) =>
      new Promise((ok, fail) => {
        const timer = setTimeout(() => {
          listeners.delete(listener);
          fail(new Error(`no such change-feed message within ${timeout} ms`));
        }, timeout);
        const listener = (m) => {
          if (!pred(m)) return;
          clearTimeout(timer);
          listeners.delete(listener);
          ok(m);
        };
        listeners.add(listener);
      }),
  };
}

const table = (page) => page.getByRole("table", { name: "MCP servers" });
const row = (page, name) => table(page).locator(`tr[data-server="${name}"]`);
const cells = (r) => r.locator("th, td").allInnerTexts();
// A row read at one moment when its state is `state`: its cells, and whether
// its last error is shown as the current one. The broken server is retried
// with a backoff (docs/MCP.md), so its row goes from `down` to `starting` and
// back: a wait for `down` followed by separate reads can see `starting`.
async function rowWhen(r, state) {
  const stateCell = r.locator("td", { hasText: new RegExp(`^${state}$`) });
  for (;;) {
    await stateCell.waitFor();
    const seen = await r.evaluate((tr) => ({
      cells: [...tr.querySelectorAll("th, td")].map((c) => c.innerText),
      currentError: tr.querySelectorAll("td.mcp-error .error-text").length === 1,
    }));
    if (seen.cells[2] === state) return seen;
  }
}

describe("the automation panel's MCP servers", () => {
  test("shows each server's transport, state, tools and protocol, and why one is down", async () => {
    const page = await signedIn(browser, host);
    await page.goto(host.url + "/#/automation");
    await page.getByRole("heading", { name: "MCP servers", level: 2 }).waitFor();
    const servers = (await host.api("GET", "/api/host")).mcp_servers;
    const ev = servers.find((s) => s.name === "ev");
    assert.equal(ev.state, "ready", JSON.stringify(servers));
    assert.ok(ev.tools > 0, JSON.stringify(ev));
    // The page shows what the host says (the row may still show `starting`
    // if the page read the host before it was ready).
    await row(page, "ev").locator("td", { hasText: /^ready$/ }).waitFor();
    assert.deepEqual(await cells(row(page, "ev")), ["ev", "stdio", "ready", String(ev.tools), ev.protocol_version, "—"]);
    const broken = await rowWhen(row(page, "broken"), "down");
    assert.deepEqual(broken.cells.slice(0, 5), ["broken", "stdio", "down", "0", "—"]);
    assert.match(broken.cells[5], /cannot run MCP server broken: .*No such file or directory/);
    assert.ok(broken.currentError, "an error, not a past failure");
    assert.equal(await table(page).getByRole("columnheader").count(), 6);
    assert.equal(await table(page).getByRole("rowheader").count(), 2, "each row is named by its server");
    await page.getByText("2 servers: 1 ready, 1 down").waitFor();
    await screenshot(page, "automation-mcp");
    await page.context().close();

    // On a phone the table scrolls within the panel; the page does not.
    const narrow = await signedIn(browser, host, { width: 360, height: 760 });
    await narrow.goto(host.url + "/#/automation");
    await row(narrow, "broken").locator("td", { hasText: /^down$/ }).waitFor();
    await row(narrow, "ev").locator("td", { hasText: /^ready$/ }).waitFor();
    assert.equal(await narrow.evaluate(() => document.documentElement.scrollWidth), 360);
    const error = await row(narrow, "broken").locator("td.mcp-error").boundingBox();
    assert.ok(error.x >= 0 && error.x + error.width <= 360, `the error is on screen: ${JSON.stringify(error)}`);
    await screenshot(narrow, "automation-mcp-narrow");
    await narrow.context().close();
  });

  test("follows a server's restart through the change feed, without reloading", async () => {
    const page = await signedIn(browser, host);
    const feed = followFeed(page);
    let hostReads = 0;
    page.on("request", (r) => {
      if (new URL(r.url()).pathname === "/api/host") hostReads++;
    });
    await page.goto(host.url + "/#/automation");
    await page.reload();  // the feed opens again, now followed by followFeed
    await row(page, "ev").locator("td", { hasText: /^ready$/ }).waitFor();
    assert.equal((await cells(row(page, "ev")))[5], "—", "it never failed");
    await page.evaluate(() => (window.__sameDocument = true));
    const pids = processesWith(marker);
    assert.equal(pids.length, 1, `one everything server: ${pids}`);
    const readsBefore = hostReads;
    const announced = feed.next((m) => m.type === "changed" && m.mcp === true);
    process.kill(pids[0], "SIGKILL");
    await announced;
    // The page never polls: only a re-read that the feed asked for can show
    // why the server went down. It is restarted at once and ready again.
    await row(page, "ev").locator("td.mcp-error", { hasText: "MCP server ev exited" }).waitFor();
    await row(page, "ev").locator("td", { hasText: /^ready$/ }).waitFor();
    assert.ok(hostReads > readsBefore, "GET /api/host was read again");
    assert.equal(await page.evaluate(() => window.__sameDocument), true, "the page was not reloaded");
    assert.equal(await row(page, "ev").locator("td.mcp-error .muted").count(), 1, "a past failure, not an error");
    const restarted = processesWith(marker);
    assert.equal(restarted.length, 1);
    assert.notEqual(restarted[0], pids[0]);
    await page.context().close();
  });
});
