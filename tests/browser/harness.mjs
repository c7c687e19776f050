// Browser tests' harness: a real `dsh web` (echo model) on a temp profile and
// a loopback port, and Debian's chromium driven by playwright-core (never a
// downloaded browser).
import { spawn } from "node:child_process";
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer as createHttpServer } from "node:http";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
export const binary = process.env.DSH_BINARY ?? join(root, "build", "dsh");
export const screenshots = process.env.DSH_SCREENSHOTS ?? join(root, "build", "ui-screenshots");
export const token = "br0wser-t0ken";

// A free loopback port, so a host can be restarted on the same origin.
export async function freePort() {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
    s.on("error", fail);
  });
}

// A Chat Completions server on loopback whose answers never finish: it
// streams a first piece, then holds the response open until the client
// goes away (a cancelled turn). `aborted` counts the calls the client cut.
export class HoldingModel {
  static async start() {
    const model = new HoldingModel();
    model.aborted = 0;
    model.server = createHttpServer((req, res) => {
      req.resume();
      res.writeHead(200, { "Content-Type": "text/event-stream" });
      const chunk = { choices: [{ index: 0, delta: { content: "thinking it over" } }] };
      res.write(`data: ${JSON.stringify(chunk)}\n\n`);
      res.on("close", () => model.aborted++);
    });
    await new Promise((ok) => model.server.listen(0, "127.0.0.1", ok));
    model.url = `http://127.0.0.1:${model.server.address().port}/v1`;
    return model;
  }
  close() {
    this.server.closeAllConnections();
    this.server.close();
  }
}

// A Chat Completions server on loopback with a script: while `fail` is set it
// answers every call with HTTP 500 (and `Retry-After: 0`, so the adapter's
// retries take no time); otherwise it streams `reply` and reports token
// usage, as an OpenAI-compatible server does with `include_usage`. Asked for
// a session's title, it answers the first words of the message (of a loop
// frame's prompt), as a model would.
//
// `reply` may also be a function of the call's last user message. `answers`
// counts the calls that were not a title's. While `holdAnswers` is set,
// plain answers (not titles, not script steps) wait until `release()`.
// `GET …/models` lists `models`; with `requireKey` set, a request without
// that key is refused with a 401 as OpenAI words it.
export class ScriptedModel {
  static async start() {
    const model = new ScriptedModel();
    model.fail = false;
    model.reply = "All good.";
    model.calls = 0;
    model.script = [];  // steps answered in order before `reply` (streamStep)
    model.requests = [];  // the raw bodies of the calls, in order
    model.held = new Set();  // responses held open (a step with `hold`)
    model.answers = 0;
    model.holdAnswers = false;
    model.waiting = [];  // answers held by holdAnswers
    model.models = ["test-model"];  // what GET /v1/models lists
    model.requireKey = null;  // when set: a request without `Bearer <it>` gets a 401 in OpenAI's words
    model.server = createHttpServer((req, res) => {
      let raw = "";
      req.on("data", (d) => (raw += d));
      req.on("end", () => {
        if (model.requireKey !== null && req.headers.authorization !== `Bearer ${model.requireKey}`) {
          res.writeHead(401, { "Content-Type": "application/json" });
          res.end(JSON.stringify({ error: { message: "Incorrect API key provided", type: "invalid_request_error" } }));
          return;
        }
        if (req.method === "GET" && req.url.endsWith("/models")) {
          res.writeHead(200, { "Content-Type": "application/json" });
          res.end(JSON.stringify({ object: "list", data: model.models.map((id) => ({ id, object: "model" })) }));
          return;
        }
        model.calls++;
        model.requests.push(raw);
        const title = titleAsked(raw);
        if (title === null) model.answers++;
        if (titleAsked(raw) === null && model.script.length > 0) {
          streamStep(model, res, model.script.shift());
          return;
        }
        if (model.fail) {
          res.writeHead(500, { "Content-Type": "application/json", "Retry-After": "0" });
          res.end(JSON.stringify({ error: { message: "the test model server is down", type: "server_error" } }));
          return;
        }
        const answer = () => {
          res.writeHead(200, { "Content-Type": "text/event-stream" });
          const send = (o) => res.write(`data: ${JSON.stringify(o)}\n\n`);
          const reply = typeof model.reply === "function" ? model.reply(lastUserText(raw)) : model.reply;
          send({ choices: [{ index: 0, delta: { role: "assistant", content: title ?? reply } }] });
          send({ choices: [{ index: 0, delta: {}, finish_reason: "stop" }] });
          send({ choices: [], usage: { prompt_tokens: 1200, completion_tokens: 35, total_tokens: 1235 } });
          res.end("data: [DONE]\n\n");
        };
        if (model.holdAnswers && title === null) model.waiting.push(answer);
        else answer();
      });
    });
    await new Promise((ok) => model.server.listen(0, "127.0.0.1", ok));
    model.url = `http://127.0.0.1:${model.server.address().port}/v1`;
    return model;
  }
  // The environment of a `dsh web` whose default model is this server.
  env() {
    return { DSH_MODEL: "openai/test-model", OPENAI_BASE_URL: this.url, OPENAI_API_KEY: "x" };
  }
  // Answers the calls holdAnswers held, and lets those to come through.
  release() {
    this.holdAnswers = false;
    for (const answer of this.waiting.splice(0)) answer();
  }
  close() {
    this.server.closeAllConnections();
    this.server.close();
  }
}

// One scripted answer of a ScriptedModel, streamed as an OpenAI-compatible
// server does (reasoning as `reasoning_content`, then text, then tool calls
// with their arguments as JSON text in fragments):
//   {reasoning?: string, text?: string,
//    toolCalls?: [{name: string, arguments: object}],
//    pieces?: number,   // each of reasoning and text in this many pieces (default 3)
//    delayMs?: number,  // between pieces (default 0)
//    quickStart?: boolean, // the first piece at once, only the later ones delayMs apart
//    hold?: boolean,    // after the pieces, keep the response open until the client goes (a Stop)
//    fail?: number}     // answer with this HTTP status instead
function streamStep(model, res, step) {
  if (step.fail) {
    res.writeHead(step.fail, { "Content-Type": "application/json", "Retry-After": "0" });
    res.end(JSON.stringify({ error: { message: "the scripted step fails", type: "server_error" } }));
    return;
  }
  res.writeHead(200, { "Content-Type": "text/event-stream" });
  const chunks = [{ role: "assistant", content: "" }];
  const split = (text) => {
    const n = Math.max(1, Math.min(step.pieces ?? 3, text.length));
    const size = Math.ceil(text.length / n);
    const out = [];
    for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
    return out;
  };
  for (const piece of split(step.reasoning ?? "")) chunks.push({ content: null, reasoning_content: piece });
  for (const piece of split(step.text ?? "")) chunks.push({ content: piece });
  (step.toolCalls ?? []).forEach((call, index) => {
    const args = JSON.stringify(call.arguments ?? {});
    const half = Math.floor(args.length / 2);
    chunks.push({ tool_calls: [{ index, id: `call_${model.calls}_${index}`, type: "function", function: { name: call.name, arguments: args.slice(0, half) } }] });
    chunks.push({ tool_calls: [{ index, function: { arguments: args.slice(half) } }] });
  });
  let closed = false;
  res.on("close", () => {
    closed = true;
    model.held.delete(res);
  });
  const send = (delta, finish = null) => res.write(`data: ${JSON.stringify({ choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`);
  let i = 0;
  const next = () => {
    if (closed) return;
    if (i < chunks.length) {
      send(chunks[i++]);
      setTimeout(next, step.quickStart && i < 2 ? 0 : step.delayMs ?? 0);
      return;
    }
    if (step.hold) {
      model.held.add(res);
      return;
    }
    send({}, step.toolCalls?.length ? "tool_calls" : "stop");
    res.write(`data: ${JSON.stringify({ choices: [], usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 } })}\n\n`);
    res.end("data: [DONE]\n\n");
  };
  next();
}

// The text of the last user message of a Chat Completions request.
function lastUserText(raw) {
  try {
    const users = JSON.parse(raw).messages.filter((m) => m.role === "user");
    const content = users[users.length - 1]?.content;
    return typeof content === "string" ? content : (content ?? []).map((p) => p.text ?? "").join("");
  } catch {
    return "";
  }
}

function titleAsked(raw) {
  let body;
  try {
    body = JSON.parse(raw);
  } catch {
    return null;
  }
  const text = (m) => (typeof m?.content === "string" ? m.content : "");
  if (!body.messages?.some((m) => m.role === "system" && text(m).startsWith("Write a short title"))) return null;
  const user = text(body.messages.find((m) => m.role === "user"));
  const prompt = /<prompt>([^<]*)<\/prompt>/.exec(user)?.[1].replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");
  const words = (prompt ?? user).split(/\s+/).filter(Boolean).slice(0, 6).join(" ");
  return words.charAt(0).toUpperCase() + words.slice(1);
}

export class Host {
  constructor(home, port, options = {}) {
    this.home = home;
    this.port = port;
    this.url = `http://127.0.0.1:${port}`;
    this.options = options;
  }

  // A host on a fresh profile. `config`: the profile's dsh.yml, if any;
  // `options.env`: more environment; `options.args`: more `dsh web` flags.
  static async start(config, options = {}) {
    const home = mkdtempSync(join(tmpdir(), "dsh-browser-"));
    if (config) {
      mkdirSync(join(home, "profile"));
      writeFileSync(join(home, "profile", "dsh.yml"), config);
    }
    const host = new Host(home, await freePort(), options);
    await host.run();
    return host;
  }

  async run() {
    const args = ["web", "--home", join(this.home, "profile"), "--port", String(this.port), ...(this.options.args ?? [])];
    this.proc = spawn(binary, args, {
      env: { ...process.env, ...(this.options.env ?? {}), DSH_TOKEN: token },
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.stderr = "";
    this.proc.stderr.on("data", (d) => (this.stderr += d));
    const lines = createInterface({ input: this.proc.stdout });
    this.openUrl = await new Promise((ok, fail) => {
      const timer = setTimeout(() => fail(new Error("dsh web did not start: " + this.stderr)), 20000);
      lines.on("line", (line) => {
        if (line.startsWith("open ")) {
          clearTimeout(timer);
          ok(line.slice(5));
        }
      });
      this.proc.on("exit", (code) => fail(new Error(`dsh web exited (${code}): ${this.stderr}`)));
    });
  }

  async stop() {
    if (!this.proc || this.proc.exitCode !== null) return;
    const exited = new Promise((ok) => this.proc.once("exit", ok));
    this.proc.kill("SIGTERM");
    await exited;
  }

  async close() {
    await this.stop();
    rmSync(this.home, { recursive: true, force: true });
  }

  async api(method, path, body) {
    const r = await fetch(this.url + path, {
      method,
      headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const json = await r.json();
    if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(json)}`);
    return json;
  }
  tool(name, args, sessionId) {
    return this.api("POST", `/api/tools/${name}`, sessionId ? { args, session_id: sessionId } : { args }).then((r) => r.result);
  }
  async events(id) {
    return (await this.api("GET", `/api/sessions/${id}/events?limit=1000`)).events;
  }
  async status(id) {
    return (await this.tool("session_status", { session_id: id })).sessions[0].status;
  }
}

export async function launch() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu"],
  });
}

// A page signed in through the token URL.
export async function signedIn(browser, host, viewport = { width: 1200, height: 760 }) {
  const context = await browser.newContext({ viewport, timezoneId: "Asia/Shanghai" });
  const page = await context.newPage();
  await page.goto(host.openUrl);
  return page;
}

export async function screenshot(page, name) {
  mkdirSync(screenshots, { recursive: true });
  await page.screenshot({ path: join(screenshots, name + ".png") });
}

// Waits, without polling, until session `id` has an event of `type` (already
// stored or yet to come): a page of the host follows the session's event
// stream (docs/API.md) and resolves on the first such event.
export async function waitForEvent(browser, host, id, type, timeout = 20000) {
  const context = await browser.newContext();
  try {
    const page = await context.newPage();
    await page.goto(host.url + "/healthz");  // the host's origin, for the WebSocket
    return await page.evaluate(
      ({ url, type, timeout }) =>
        new Promise((ok, fail) => {
          const ws = new WebSocket(url);
          const timer = setTimeout(() => fail(new Error(`no ${type} event within ${timeout} ms`)), timeout);
          ws.onmessage = (m) => {
            const msg = JSON.parse(m.data);
            if (msg.type === "event" && msg.event.type === type) {
              clearTimeout(timer);
              ws.close();
              ok(msg.event);
            }
          };
          ws.onerror = () => fail(new Error("the event stream failed"));
        }),
      { url: `ws://127.0.0.1:${host.port}/api/sessions/${encodeURIComponent(id)}/stream?token=${token}`, type, timeout },
    );
  } finally {
    await context.close();
  }
}

// Makes `n` sessions quickly (POST /api/sessions: no first message, no
// turn), a few at a time; each of every `titleEvery`-th gets the title
// `${prefix} N` (a rename). Returns their ids, by N.
export async function manySessions(host, n, { titleEvery = 0, prefix = "Filler session" } = {}) {
  const ids = new Array(n);
  let next = 0;
  const worker = async () => {
    while (next < n) {
      const i = next++;
      ids[i] = (await host.api("POST", "/api/sessions", {})).session.id;
      if (titleEvery > 0 && i % titleEvery === 0) await host.api("PATCH", `/api/sessions/${ids[i]}`, { title: `${prefix} ${i}` });
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  return ids;
}
