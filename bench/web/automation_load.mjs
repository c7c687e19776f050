// The automation panel with many loops (issue 19; docs/PERFORMANCE.md, "Web UI").
//
//   node bench/web/automation_load.mjs [--loops 10000] [--runs 5]
//
// A real `dsh web` (build/dsh, or $DSH_BINARY; echo model) on a temp profile
// gets N loops (every / after / cron in ten rules; targets self and new, all
// far in the future so none runs). Debian's chromium then opens the panel R
// times in a fresh context and measures, from the navigation's start:
//   - first row: the first loop row is visible;
//   - list ready: the count heading says N loops;
// with the panel open:
//   - one update: a loop created through the API until the panel counts it
//     (change feed, throttle, a read of the whole list, a render), and a
//     delete until it no longer does;
//   - idle: long tasks (> 50 ms) during 5 s of countdowns ticking;
// and, in the same run, the load of a bare static page served by the same
// host (the sign-in page) as the peer. Prints medians; asserts nothing.
import { Host, launch, token } from "../../tests/browser/harness.mjs";
import { arg, bareLoad, median, signedInPage } from "./common.mjs";

const loops = arg("--loops", 10000);
const runs = arg("--runs", 5);
const rules = ["0 9 * * *", "30 9 * * 1-5", "0 */2 * * *", "15 8 1 * *", "0 0 * * 0", "45 17 * * 5", "0 12 * * *",
  "5 4 * * *", "0 6 1 1 *", "*/30 * * * *"];

const host = await Host.start();
const browser = await launch();
try {
  let t = Date.now();
  for (let i = 0; i < loops; i += 100) {
    await Promise.all(
      Array.from({ length: Math.min(100, loops - i) }, (_, k) => {
        const n = i + k;
        const schedule = n % 3 === 0 ? { kind: "every", every_seconds: 86400 + n }
          : n % 3 === 1 ? { kind: "after", after_seconds: 86400 + n }
          : { kind: "cron", expr: rules[n % rules.length], tz: "Asia/Shanghai" };
        return host.tool("loop_create", { prompt: `loop ${n}: ${"check the thing ".repeat(3)}`, schedule, session_id: n % 2 ? "self" : "new" });
      }),
    );
  }
  console.log(`${loops} loops made in ${Date.now() - t} ms`);
  t = Date.now();
  const list = await fetch(`${host.url}/api/loops?session_id=global`, { headers: { Authorization: `Bearer ${token}` } });
  const body = await list.text();
  console.log(`GET /api/loops?session_id=global: ${(body.length / 1e6).toFixed(2)} MB in ${Date.now() - t} ms`);

  const heading = (n) => `${n} loops`;
  const firstRow = [];
  const ready = [];
  const update = [];
  const removal = [];
  const longTasks = [];
  const bare = [];
  for (let r = 0; r < runs; r++) {
    const { context, page } = await signedInPage(browser, host);
    let start = Date.now();
    await page.goto(`${host.url}/#/automation`, { waitUntil: "commit" });
    await page.locator("ul.loops > li").first().waitFor();
    firstRow.push(Date.now() - start);
    await page.locator(".loops-count", { hasText: heading(loops) }).waitFor();
    ready.push(Date.now() - start);

    start = Date.now();
    const { loop_id } = await host.tool("loop_create", { prompt: "one more", schedule: { kind: "every", every_seconds: 90000 }, session_id: "self" });
    await page.locator(".loops-count", { hasText: heading(loops + 1) }).waitFor();
    update.push(Date.now() - start);
    start = Date.now();
    await host.tool("loop_delete", { loop_id });
    await page.locator(".loops-count", { hasText: heading(loops) }).waitFor();
    removal.push(Date.now() - start);

    longTasks.push(
      await page.evaluate(
        () =>
          new Promise((ok) => {
            let n = 0;
            const o = new PerformanceObserver((l) => (n += l.getEntries().length));
            o.observe({ type: "longtask" });
            setTimeout(() => {
              o.disconnect();
              ok(n);
            }, 5000);
          }),
      ),
    );

    bare.push(await bareLoad(browser, host));
    await context.close();
  }
  console.log(
    `loops ${loops}, runs ${runs}: first row median ${median(firstRow)} ms (${firstRow.join(", ")}); ` +
      `list ready median ${median(ready)} ms (${ready.join(", ")}); ` +
      `one create shown median ${median(update)} ms (${update.join(", ")}); ` +
      `one delete shown median ${median(removal)} ms (${removal.join(", ")}); ` +
      `long tasks in 5 s idle median ${median(longTasks)} (${longTasks.join(", ")}); ` +
      `bare static page median ${median(bare)} ms (${bare.join(", ")})`,
  );
} finally {
  await browser.close();
  await host.close();
}
