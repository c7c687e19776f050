// Page-load benchmark of the browser UI (issue 18; docs/PERFORMANCE.md, "Web UI").
//
//   node bench/web/page_load.mjs [--sessions 1000] [--events 10000] [--runs 5]
//
// A real `dsh web` (build/dsh, or $DSH_BINARY; echo model) on a temp profile
// gets N sessions and one session of at least E events; then Debian's
// chromium opens that session's address R times in a fresh browser context
// and measures, from the navigation's start:
//   - first render: the Sessions list shows its first row;
//   - last block in view: the session's newest block is visible;
// and, in the same run, the load of a bare static page served by the same
// host (the sign-in page) as the peer. Every tenth message holds a fenced
// code block (so the echo answers do too, and the page wants its
// highlighter): it also reports when the page asked for the highlighter's
// chunk, which must come after the first render, never before it (issue
// 30). Prints medians; asserts nothing.
import { Host, launch } from "../../tests/browser/harness.mjs";
import { arg, bareLoad, median, signedInPage } from "./common.mjs";

const sessions = arg("--sessions", 1000);
const events = arg("--events", 10000);
const runs = arg("--runs", 5);

const text = (i) =>
  i % 10 === 0
    ? `message ${i}: ${"lorem ipsum ".repeat(4)}\n\n\`\`\`js\nconst answer = ${i};\nconsole.log(answer * 2);\n\`\`\``
    : `message ${i}: ${"lorem ipsum ".repeat(8)}`;

const host = await Host.start();
const browser = await launch();
try {
  let t = Date.now();
  for (let i = 0; i < sessions; i += 50) {
    await Promise.all(
      Array.from({ length: Math.min(50, sessions - i) }, () => host.api("POST", "/api/sessions", {})),
    );
  }
  console.log(`${sessions} sessions made in ${Date.now() - t} ms`);
  const big = (await host.api("POST", "/api/sessions", {})).session.id;
  t = Date.now();
  let last = 0;
  for (let n = 0; last < events; n++) {
    await Promise.all(
      Array.from({ length: 20 }, (_, k) =>
        host.api("POST", `/api/sessions/${big}/messages`, { message: text(n * 20 + k) }),
      ),
    );
    last = (await host.api("GET", `/api/sessions/${big}/events?limit=1`)).last_seq;
  }
  // Let the last turns end, so the log stops growing.
  for (let i = 0; i < 400; i++) {
    const head = await host.api("GET", `/api/sessions/${big}/events?limit=1`);
    const tail = await host.api("GET", `/api/sessions/${big}/events?after=${Math.max(0, head.last_seq - 1)}&limit=1`);
    last = head.last_seq;
    if (tail.events[0]?.type === "turn/end") break;
    await new Promise((ok) => setTimeout(ok, 50));
  }
  const tail = await host.api("GET", `/api/sessions/${big}/events?after=${last - 20}&limit=20`);
  const lastBlock = [...tail.events].reverse().find((e) => e.type === "message/assistant" || e.type === "message/user");
  console.log(`one session of ${last} events in ${Date.now() - t} ms; its newest block is seq ${lastBlock.seq}`);

  const app = [];
  const firstRender = [];
  const bare = [];
  const highlighter = [];  // [first row, highlighter chunk asked for] in the page's clock, ms
  for (let r = 0; r < runs; r++) {
    const { context, page } = await signedInPage(browser, host);
    await page.addInitScript(() => {
      new MutationObserver((_, observer) => {
        if (document.querySelector(".session-list .session")) {
          window.__firstRow = performance.now();
          observer.disconnect();
        }
      }).observe(document, { childList: true, subtree: true });
    });
    const start = Date.now();
    await page.goto(`${host.url}/#/s/${big}`, { waitUntil: "commit" });
    await page.locator(".session-list .session").first().waitFor();
    firstRender.push(Date.now() - start);
    await page.locator(`[data-seq="${lastBlock.seq}"]`).waitFor({ state: "visible" });
    app.push(Date.now() - start);
    await page.locator(".hljs").first().waitFor();  // the highlighted code
    highlighter.push(
      await page.evaluate(() => [
        Math.round(window.__firstRow),
        Math.round(performance.getEntriesByType("resource").find((e) => e.name.includes("/assets/highlight-"))?.startTime ?? -1),
      ]),
    );
    bare.push(await bareLoad(browser, host));
    await context.close();
  }
  console.log(
    `sessions ${sessions}, events ${last}, runs ${runs}: first render median ${median(firstRender)} ms ` +
      `(${firstRender.join(", ")}); last block in view median ${median(app)} ms (${app.join(", ")}); ` +
      `bare static page median ${median(bare)} ms (${bare.join(", ")})`,
  );
  const late = highlighter.filter(([row, asked]) => asked > row).length;
  console.log(
    `highlighter chunk asked for after the first render in ${late} of ${runs} runs ` +
      `(page clock, first row → chunk asked: ${highlighter.map(([row, asked]) => `${row} → ${asked}`).join(", ")} ms)`,
  );
} finally {
  await browser.close();
  await host.close();
}
