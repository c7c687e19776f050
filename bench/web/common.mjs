// What the web benchmarks share: arguments, medians, a signed-in page and
// the peer (the same host's bare static sign-in page, to its text).
import { token } from "../../tests/browser/harness.mjs";

export const arg = (name, fallback) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
};

export const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

// A fresh context signed in by cookie, and its page.
export async function signedInPage(browser, host) {
  const context = await browser.newContext({ viewport: { width: 1200, height: 800 } });
  await context.addCookies([{ name: "dsh_token", value: token, url: host.url }]);
  return { context, page: await context.newPage() };
}

// Milliseconds to load the bare sign-in page in a fresh context.
export async function bareLoad(browser, host) {
  const peer = await browser.newContext();
  const plain = await peer.newPage();
  const start = Date.now();
  await plain.goto(host.url + "/", { waitUntil: "load" });
  await plain.getByText("Open the URL printed by").waitFor();
  const ms = Date.now() - start;
  await peer.close();
  return ms;
}
