// Outbound webhooks (issue 34, docs/NOTIFICATIONS.md) on the real binary: a
// `dsh web` whose model is the tests' scripted OpenAI-compatible server and
// whose endpoints are receivers of this test on loopback (`allow_private`).
// Signatures are checked with the `standardwebhooks` package, the Standard
// Webhooks reference implementation, not with our code.
// Run: DSH_BINARY=build/dsh node --test --test-concurrency=1 tests/webhooks/
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { randomBytes } from "node:crypto";
import { Webhook } from "standardwebhooks";
import { Host, ScriptedModel } from "../browser/harness.mjs";

const secret = "whsec_" + randomBytes(32).toString("base64");
const publicUrl = "https://dsh.example.net";

// Records every request; answers each path by its script (a list of status
// codes, used up in order, then 200), or holds it unanswered while `hold`.
class Receiver {
  static async start() {
    const r = new Receiver();
    r.requests = [];
    r.scripts = new Map();
    r.hold = false;
    r.held = [];
    r.waiters = [];
    r.server = createServer((req, res) => {
      let body = "";
      req.setEncoding("utf8");
      req.on("data", (d) => (body += d));
      req.on("end", () => {
        r.requests.push({ path: req.url, headers: req.headers, body, at: Date.now() });
        for (const w of r.waiters.splice(0)) w();
        if (r.hold) return r.held.push(res);
        const script = r.scripts.get(req.url) ?? [];
        const status = script.length > 0 ? script.shift() : 200;
        res.writeHead(status, { "Content-Type": "text/plain" });
        res.end(status === 200 ? "ok" : "receiver says no");
      });
    });
    await new Promise((ok) => r.server.listen(0, "127.0.0.1", ok));
    r.url = `http://127.0.0.1:${r.server.address().port}`;
    return r;
  }
  on(path) {
    return this.requests.filter((q) => q.path === path);
  }
  // Resolves once `fn(requests)` holds.
  async until(fn, what, timeout = 30000) {
    const end = Date.now() + timeout;
    while (!fn(this.requests)) {
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}; got ${JSON.stringify(this.requests.map((q) => q.path))}`);
      await new Promise((ok) => {
        this.waiters.push(ok);
        setTimeout(ok, 200);
      });
    }
  }
  close() {
    for (const res of this.held) res.destroy();
    this.server.closeAllConnections?.();
    this.server.close();
  }
}

let model;
let receiver;
let host;

function config(r) {
  const hook = (name, path, format, events, extra = "") =>
    `    - name: ${name}\n      url: ${r.url}${path}\n      format: ${format}\n      events: [${events.join(", ")}]\n      allow_private: true\n${extra}`;
  return [
    "server:",
    `  public_url: ${publicUrl}/`,
    "notifications:",
    "  timeout: 2",
    "  webhooks:",
    hook("ops", "/std", "standard", ["loop.run.completed", "loop.run.failed"], `      secret: ${secret}\n`),
    hook("team-slack", "/slack", "slack", ["loop.run.failed"]),
    hook("team-discord", "/discord", "discord", ["loop.run.failed"]),
    hook("phone", "/ntfy", "ntfy", ["loop.run.failed"]),
    "",
  ].join("\n");
}

before(async () => {
  model = await ScriptedModel.start();
  model.reply = "Checked the disks: all fine.";
  receiver = await Receiver.start();
  host = await Host.start(config(receiver), { env: model.env() });
});
after(async () => {
  await host?.close();
  receiver?.close();
  model?.close();
});

const verify = (req) => new Webhook(secret).verify(req.body, req.headers);

async function runOnce(prompt) {
  const loop = await host.tool("loop_create", { prompt, schedule: { kind: "after", after_seconds: 1 }, session_id: "self" });
  return loop.loop_id;
}

const ofLoop = (loopId, path, type) =>
  receiver.on(path).filter((q) => {
    const body = path === "/std" ? JSON.parse(q.body) : null;
    return body ? body.data.loop_id === loopId && (!type || body.type === type) : true;
  });

describe("webhooks", () => {
  test("a loop run sends one signed loop.run.completed that the reference library verifies", async () => {
    const loopId = await runOnce("check the disks");
    await receiver.until(() => ofLoop(loopId, "/std").length >= 1, "loop.run.completed");
    // Nothing more is coming for this run (give a second to show it).
    await new Promise((ok) => setTimeout(ok, 1000));
    const got = ofLoop(loopId, "/std");
    assert.equal(got.length, 1);
    const payload = verify(got[0]);
    assert.equal(payload.type, "loop.run.completed");
    assert.match(got[0].headers["webhook-id"], /^msg_/);
    assert.equal(payload.data.loop_id, loopId);
    assert.equal(payload.data.outcome.status, "completed");
    assert.equal(payload.data.summary, "Checked the disks: all fine.");
    assert.deepEqual(payload.data.tokens, { input_tokens: 1200, output_tokens: 35 });
    assert.equal(payload.data.url, `${publicUrl}/#/s/${payload.data.session_id}/${payload.data.seq}`);
    // A tampered body does not verify.
    assert.throws(() => new Webhook(secret).verify(got[0].body.replace("completed", "failed"), got[0].headers));
    // The run's history shows the receipt.
    const { runs } = await host.api("GET", `/api/loops/${loopId}/runs`);
    await receiver.until(() => true, "");
    const receipt = runs[0].notifications.find((n) => n.endpoint === "ops");
    assert.equal(receipt.event, "loop.run.completed");
    assert.equal(receipt.id, got[0].headers["webhook-id"]);
  });

  test("a failing turn sends loop.run.failed in each format, in its documented shape", async () => {
    model.fail = true;
    const loopId = await runOnce("check the backups");
    await receiver.until(
      () => ofLoop(loopId, "/std", "loop.run.failed").length >= 1 && receiver.on("/slack").length >= 1 &&
        receiver.on("/discord").length >= 1 && receiver.on("/ntfy").length >= 1,
      "loop.run.failed everywhere",
    );
    model.fail = false;
    const [std] = ofLoop(loopId, "/std", "loop.run.failed");
    const payload = verify(std);
    assert.equal(payload.data.outcome.status, "error");
    assert.ok(payload.data.outcome.error.code);

    // Slack: {"text"}, with a <URL|text> link.
    const slack = receiver.on("/slack").at(-1);
    assert.equal(slack.headers["content-type"], "application/json");
    const s = JSON.parse(slack.body);
    assert.deepEqual(Object.keys(s), ["text"]);
    assert.match(s.text, /Loop run failed/);
    assert.match(s.text, new RegExp(`<${publicUrl}/#/s/ses_[^|]+\\|Open in dsh>`));

    // Discord: {"content"} of at most 2,000 characters, no mentions.
    const d = JSON.parse(receiver.on("/discord").at(-1).body);
    assert.match(d.content, /Loop run failed/);
    assert.ok(d.content.length <= 2000);
    assert.deepEqual(d.allowed_mentions, { parse: [] });

    // ntfy: plain text with Title, Tags, Priority and Click headers.
    const n = receiver.on("/ntfy").at(-1);
    assert.match(n.headers["content-type"], /^text\/plain/);
    assert.match(n.headers.title, /Loop run failed/);
    assert.equal(n.headers.tags, "warning");
    assert.equal(n.headers.priority, "high");
    assert.match(n.headers.click, new RegExp(`^${publicUrl}/#/s/ses_`));
    assert.ok(n.body.length > 0);
  });

  test("an endpoint answering 500 three times gets the message once more, with the same id, then it is delivered", async () => {
    receiver.scripts.set("/std", [500, 500, 500]);
    const loopId = await runOnce("count the files");
    await receiver.until(() => ofLoop(loopId, "/std").length >= 4, "four attempts", 40000);
    await new Promise((ok) => setTimeout(ok, 1500));
    const got = ofLoop(loopId, "/std");
    assert.equal(got.length, 4, "three failures and one delivery, nothing after");
    const ids = new Set(got.map((q) => q.headers["webhook-id"]));
    assert.equal(ids.size, 1);
    for (const q of got) verify(q);  // each attempt is signed with its own timestamp
    // Backoff: the retries came later and later.
    const gaps = got.slice(1).map((q, i) => q.at - got[i].at);
    assert.ok(gaps[2] > gaps[0], `gaps ${gaps}`);
    const id = [...ids][0];
    const message = await host.api("GET", `/api/notifications/messages/${id}`);
    assert.equal(message.state, "delivered");
    assert.equal(message.attempts, 4);
    assert.deepEqual(message.attempts_log.map((a) => a.status), [500, 500, 500, 200]);
  });

  test("a host killed while it sends delivers the message after it restarts, with the same id", async () => {
    receiver.hold = true;
    const loopId = await runOnce("rotate the logs");
    await receiver.until(() => ofLoop(loopId, "/std").length >= 1, "the first attempt");
    host.proc.kill("SIGKILL");
    await new Promise((ok) => host.proc.once("exit", ok));
    receiver.hold = false;
    for (const res of receiver.held.splice(0)) res.destroy();
    await host.run();
    // The dead host's lease ends (timeout + 5 s), then the message goes out again.
    await receiver.until(() => ofLoop(loopId, "/std").length >= 2, "the message after the restart", 40000);
    await new Promise((ok) => setTimeout(ok, 1500));
    const got = ofLoop(loopId, "/std");
    assert.equal(got.length, 2);
    assert.equal(got[0].headers["webhook-id"], got[1].headers["webhook-id"]);
    verify(got[1]);
    const { messages } = await host.api("GET", "/api/notifications/messages?endpoint=ops&state=delivered");
    assert.ok(messages.some((m) => m.id === got[1].headers["webhook-id"]));
  });

  test("nothing was ever sent twice with different ids for one fact", async () => {
    const byFact = new Map();
    for (const q of receiver.on("/std")) {
      const body = JSON.parse(q.body);
      const fact = `${body.type}:${body.data.activity_id}`;
      if (!byFact.has(fact)) byFact.set(fact, new Set());
      byFact.get(fact).add(q.headers["webhook-id"]);
    }
    assert.ok(byFact.size >= 4);
    for (const [fact, ids] of byFact) assert.equal(ids.size, 1, fact);
  });

  test("Send test answers after its first attempt, and the endpoint list tells the states", async () => {
    const { message } = await host.api("POST", "/api/notifications/endpoints/ops/test");
    assert.equal(message.state, "delivered", JSON.stringify(message));
    assert.equal(message.last_attempt.status, 200);
    const last = receiver.on("/std").at(-1);
    assert.equal(verify(last).type, "webhook.test");
    receiver.scripts.set("/slack", [404]);
    const failed = (await host.api("POST", "/api/notifications/endpoints/team-slack/test")).message;
    assert.equal(failed.state, "failed");
    const { endpoints } = await host.api("GET", "/api/notifications");
    const by = Object.fromEntries(endpoints.map((e) => [e.name, e]));
    assert.equal(by.ops.state, "ok");
    assert.equal(by.ops.has_secret, true);
    assert.equal(by["team-slack"].state, "failing");
    assert.match(by["team-slack"].last_failure.error, /404/);
    assert.equal(by["team-slack"].url, receiver.url + "/…");
    assert.ok(!JSON.stringify(endpoints).includes(secret.slice(6)), "the secret is never shown");
  });

  test("endpoints saved from the Settings page send at once; bad ones are refused", async () => {
    const bad = await fetch(host.url + "/api/notifications/endpoints/x", {
      method: "PUT",
      headers: { Authorization: "Bearer br0wser-t0ken", "Content-Type": "application/json" },
      body: JSON.stringify({ url: receiver.url + "/saved", format: "standard", events: ["loop.run.completed"] }),
    });
    assert.equal(bad.status, 400);
    assert.match((await bad.json()).error.message, /secret/);
    const conflict = await fetch(host.url + "/api/notifications/endpoints/ops", {
      method: "DELETE",
      headers: { Authorization: "Bearer br0wser-t0ken" },
    });
    assert.equal(conflict.status, 409);
    await host.api("PUT", "/api/notifications/endpoints/saved", {
      url: receiver.url + "/saved", format: "discord", events: ["loop.run.completed"], allow_private: true,
    });
    const loopId = await runOnce("say hello");
    await receiver.until(() => receiver.on("/saved").length >= 1, "the saved endpoint's message");
    assert.match(JSON.parse(receiver.on("/saved")[0].body).content, /Loop run completed/);
    const metrics = await (await fetch(host.url + "/metrics", { headers: { Authorization: "Bearer br0wser-t0ken" } })).text();
    assert.match(metrics, /dsh_webhook_deliveries_total\{endpoint="ops",result="delivered"\} [1-9]/);
    assert.match(metrics, /dsh_webhook_outbox_pending \d/);
    await host.api("DELETE", "/api/notifications/endpoints/saved");
    assert.ok(loopId);
  });

  test("the default: no endpoint refuses a private address", async () => {
    const r = await Receiver.start();
    const h = await Host.start(
      `notifications:\n  webhooks:\n    - name: local\n      url: ${r.url}/x\n      format: slack\n      events: ["*"]\n`,
      { env: model.env() },
    );
    try {
      const { message } = await h.api("POST", "/api/notifications/endpoints/local/test");
      assert.equal(message.state, "failed");
      assert.match(message.last_attempt.error, /address_not_allowed|not allowed|refus/i);
      assert.equal(r.requests.length, 0);
    } finally {
      await h.close();
      r.close();
    }
  });
});
