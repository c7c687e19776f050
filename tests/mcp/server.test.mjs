// dsh as an MCP server (docs/MCP.md), driven by the official TypeScript SDK:
// Streamable HTTP against `POST /mcp` of a real `dsh web`, and stdio through
// `dsh mcp`, which proxies to it.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import { Host, binary, cleanEnv, until } from "./harness.mjs";

const EXPOSED = [
  "loop_create", "loop_list", "loop_delete",
  "session_status", "session_read", "session_send", "session_create", "list_sessions", "check_session_status",
];

let host;
before(async () => {
  host = await Host.start();
});
after(async () => {
  await host?.close();
});

async function httpClient(token = host.token) {
  const client = new Client({ name: "dsh-mcp-test", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(host.mcpUrl, {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  return { client, transport };
}

async function stdioClient(extraArgs = []) {
  const client = new Client({ name: "dsh-mcp-test", version: "1.0.0" });
  const transport = new StdioClientTransport({
    command: binary,
    args: ["mcp", "--home", host.home, ...extraArgs],
    env: cleanEnv(),
    stderr: "pipe",
  });
  await client.connect(transport);
  return { client, transport };
}

// A fresh session (the echo model answers its prompt), created through MCP.
async function newSession(client, prompt) {
  const r = await client.callTool({ name: "session_create", arguments: { prompt } });
  assert.equal(r.isError, false, JSON.stringify(r));
  return r.structuredContent.session_id;
}

describe("over Streamable HTTP", () => {
  let client;
  let transport;
  before(async () => {
    ({ client, transport } = await httpClient());
  });
  after(async () => {
    await client?.close();
  });

  test("initialize negotiates 2025-06-18 and describes dsh", () => {
    assert.equal(transport.protocolVersion, "2025-06-18");
    assert.equal(client.getServerVersion().name, "dsh");
    assert.deepEqual(client.getServerCapabilities(), { tools: { listChanged: false } });
    assert.match(client.getInstructions(), /loops/i);
    assert.equal(transport.sessionId, undefined);  // stateless: no Mcp-Session-Id
  });

  test("lists exactly the session and loop tools", async () => {
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name), EXPOSED);
    for (const t of tools) {
      assert.equal(t.inputSchema.type, "object", t.name);
      assert.ok(t.description.length > 0, t.name);
    }
  });

  test("a loop created through MCP is delivered to its session", async () => {
    const sessionId = await newSession(client, "a session for a loop " + Date.now());
    const created = await client.callTool({
      name: "loop_create",
      arguments: { prompt: "mcp check-in", schedule: { kind: "after", after_seconds: 1 }, session_id: sessionId },
    });
    assert.equal(created.isError, false, JSON.stringify(created));
    const loop = created.structuredContent;
    assert.equal(loop.session_id, sessionId);
    assert.equal(loop.created_by_session_id, "root");
    assert.deepEqual(JSON.parse(created.content[0].text), loop);

    // Its message reaches the session's conversation (read through MCP)...
    const marker = `<loop_id>${loop.loop_id}</loop_id>`;
    await until("the loop's message in the session", async () => {
      const read = await client.callTool({ name: "session_read", arguments: { session_id: sessionId } });
      assert.equal(read.isError, false, JSON.stringify(read));
      return read.structuredContent.messages.some((m) => m.role === "user" && String(m.content).includes(marker));
    });
    // ...its run is recorded as delivered, and the completed `after` loop leaves the list.
    const { runs } = await host.get(`/api/loops/${loop.loop_id}/runs`);
    assert.equal(runs.length, 1);
    assert.equal(runs[0].result, "delivered");
    assert.equal(runs[0].target_session_id, sessionId);
    const listed = await client.callTool({ name: "loop_list", arguments: { session_id: sessionId } });
    assert.deepEqual(JSON.parse(listed.content[0].text), []);
  });

  test("bad arguments are a tool error with the code and message of POST /api/tools", async () => {
    const sessionId = await newSession(client, "a session for bad loops " + Date.now());
    const badCalls = [
      { prompt: "no schedule", session_id: sessionId },
      { prompt: "zero", schedule: { kind: "every", every_seconds: 0 }, session_id: sessionId },
      { prompt: "root call without a target", schedule: { kind: "every", every_seconds: 60 } },
      { prompt: "extra", schedule: { kind: "after", after_seconds: 60 }, session_id: sessionId, model: "x" },
      { prompt: "never", schedule: { kind: "cron", expr: "0 0 30 2 *" }, session_id: sessionId },
    ];
    for (const args of badCalls) {
      const http = await host.httpTool("loop_create", args);
      assert.ok(http.status >= 400, JSON.stringify(http));
      const { code, message } = http.body.error;
      const r = await client.callTool({ name: "loop_create", arguments: args });
      assert.equal(r.isError, true, JSON.stringify(args));
      assert.deepEqual(r.structuredContent, { error: { code, message } });
      assert.deepEqual(r.content, [{ type: "text", text: `${code}: ${message}` }]);
    }
  });

  test("an unknown tool is a JSON-RPC invalid-params error", async () => {
    await assert.rejects(client.callTool({ name: "nope", arguments: {} }), (e) => {
      assert.equal(e.code, -32602);
      assert.equal(e.data.code, "unknown_tool");
      return true;
    });
  });
});

describe("over stdio (dsh mcp)", () => {
  test("lists the tools and calls one through the running host", async () => {
    const { client } = await stdioClient();
    try {
      assert.equal(client.getServerVersion().name, "dsh");
      const { tools } = await client.listTools();
      assert.deepEqual(tools.map((t) => t.name), EXPOSED);
      const sessionId = await newSession(client, "made over stdio " + Date.now());
      const status = await client.callTool({ name: "check_session_status", arguments: { session_id: sessionId } });
      assert.equal(status.isError, false, JSON.stringify(status));
      assert.equal(status.structuredContent.session_id, sessionId);
      assert.ok(["running", "idle"].includes(status.structuredContent.status), JSON.stringify(status));
    } finally {
      await client.close();
    }
  });

  test("--session makes the calls from that session", async () => {
    const sessionId = await (async () => {
      const { client } = await httpClient();
      try {
        return await newSession(client, "the calling session " + Date.now());
      } finally {
        await client.close();
      }
    })();
    const { client } = await stdioClient(["--session", sessionId]);
    try {
      const r = await client.callTool({
        name: "loop_create",
        arguments: { prompt: "from the session", schedule: { kind: "every", every_seconds: 3600 } },
      });
      assert.equal(r.isError, false, JSON.stringify(r));
      assert.equal(r.structuredContent.created_by_session_id, sessionId);
      assert.equal(r.structuredContent.session_id, sessionId);  // no target: the calling session
      const deleted = await client.callTool({ name: "loop_delete", arguments: { loop_id: r.structuredContent.loop_id } });
      assert.equal(deleted.isError, false, JSON.stringify(deleted));
    } finally {
      await client.close();
    }
  });

  test("a host restarted under a running dsh mcp: a call while it is down is unavailable, the next one works", async () => {
    const restartable = await Host.start();
    const client = new Client({ name: "dsh-mcp-test", version: "1.0.0" });
    try {
      await client.connect(new StdioClientTransport({
        command: binary, args: ["mcp", "--home", restartable.home], env: cleanEnv(), stderr: "pipe",
      }));
      assert.equal((await client.listTools()).tools.length, EXPOSED.length);
      await restartable.stop();
      await assert.rejects(client.callTool({ name: "list_sessions", arguments: {} }), (e) => {
        assert.ok(e instanceof McpError, String(e));
        assert.equal(e.code, -32000);
        assert.equal(e.data.code, "unavailable", JSON.stringify(e.data));
        return true;
      });
      const again = await Host.start(restartable.dir);
      restartable.proc = again.proc;
      const r = await client.callTool({ name: "list_sessions", arguments: {} });
      assert.equal(r.isError, false, JSON.stringify(r));
    } finally {
      await client.close();
      await restartable.close();
    }
  });

  test("without a running host each request gets an error, notifications nothing, and EOF exits 0", async () => {
    const dir = mkdtempSync(join(tmpdir(), "dsh-mcp-nohost-"));
    const home = join(dir, "not-created");  // looking for a host creates no profile
    try {
      const proc = spawn(binary, ["mcp", "--home", home], { env: cleanEnv(), stdio: ["pipe", "pipe", "pipe"] });
      const lines = [];
      createInterface({ input: proc.stdout }).on("line", (l) => lines.push(l));
      const exited = new Promise((ok) => proc.once("exit", (code) => ok(code)));
      proc.stdin.write(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) + "\n");
      proc.stdin.write(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }) + "\n");
      proc.stdin.write("not json\n");
      proc.stdin.write(JSON.stringify({ jsonrpc: "2.0", id: "t", method: "tools/list" }) + "\n");
      proc.stdin.end();
      assert.equal(await exited, 0);
      const answers = lines.map((l) => JSON.parse(l));
      assert.equal(answers.length, 3, lines.join("\n"));
      const byId = new Map(answers.map((a) => [JSON.stringify(a.id), a]));
      for (const id of [1, "t"]) {
        const a = byId.get(JSON.stringify(id));
        assert.equal(a.error.code, -32000, JSON.stringify(a));
        assert.match(a.error.message, /^unavailable: no dsh host is running/);
        assert.equal(a.error.data.code, "unavailable");
      }
      assert.equal(byId.get("null").error.code, -32700);
      assert.equal(existsSync(home), false, "dsh mcp created the profile directory");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("dsh mcp against a stand-in host", () => {
  // A loopback server in the place of a host (the profile's run file names
  // it): it records what reaches /mcp, holds every tools/call until told and
  // answers everything else at once.
  let server;
  let home;
  const seen = [];
  const held = [];
  before(async () => {
    server = createServer((req, res) => {
      let body = "";
      req.on("data", (d) => (body += d));
      req.on("end", () => {
        const message = JSON.parse(body);
        seen.push({ url: req.url, auth: req.headers.authorization, message });
        const answer = () => {
          res.writeHead(200, { "Content-Type": "application/json" });
          res.end(JSON.stringify({ jsonrpc: "2.0", id: message.id, result: { method: message.method } }));
        };
        if (message.id === undefined) {
          res.writeHead(202);
          res.end();
        } else if (message.method === "tools/call") {
          held.push(answer);
        } else {
          answer();
        }
      });
    });
    await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
    home = mkdtempSync(join(tmpdir(), "dsh-mcp-standin-"));
    mkdirSync(join(home, "run"));
    const runFile = { url: `http://127.0.0.1:${server.address().port}/`, token: "stand-in-token", pid: process.pid };
    writeFileSync(join(home, "run", `${process.pid}.json`), JSON.stringify(runFile), { mode: 0o600 });
  });
  after(() => {
    server?.closeAllConnections();
    server?.close();
    rmSync(home, { recursive: true, force: true });
  });

  test("a slow tools/call does not hold up a ping, and --session reaches the host as ?session_id=", { timeout: 20000 }, async () => {
    const proc = spawn(binary, ["mcp", "--home", home, "--session", "ses_a b"], {
      env: cleanEnv(),
      stdio: ["pipe", "pipe", "pipe"],
    });
    const exited = new Promise((ok) => proc.once("exit", (code) => ok(code)));
    const answers = [];
    let arrived;
    createInterface({ input: proc.stdout }).on("line", (l) => {
      answers.push(JSON.parse(l));
      arrived?.();
    });
    const next = () => new Promise((ok) => (arrived = ok));
    const send = (m) => proc.stdin.write(JSON.stringify(m) + "\n");

    send({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "session_status", arguments: {} } });
    await until("the held tools/call to reach the host", () => held.length === 1);
    let got = next();
    send({ jsonrpc: "2.0", id: 2, method: "ping" });
    await got;
    assert.deepEqual(answers.map((a) => a.id), [2]);  // answered while the call is held

    got = next();
    held[0]();
    await got;
    assert.deepEqual(answers.map((a) => a.id), [2, 1]);
    assert.deepEqual(answers[1].result, { method: "tools/call" });

    // With every slot taken (32 calls held by the host), a request is
    // answered at once instead of stopping the reading.
    for (let id = 100; id < 132; id++) {
      send({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "session_status", arguments: {} } });
    }
    await until("32 held tools/calls to reach the host", () => held.length === 33);
    got = next();
    send({ jsonrpc: "2.0", id: 3, method: "ping" });
    await got;
    const busy = answers.at(-1);
    assert.equal(busy.id, 3, JSON.stringify(busy));
    assert.equal(busy.error.code, -32000);
    assert.equal(busy.error.data.code, "unavailable");
    assert.match(busy.error.message, /already forwarding 32 requests/);
    for (const answer of held.slice(1)) answer();
    await until("the held calls' answers", () => answers.length === 3 + 32);

    proc.stdin.end();
    assert.equal(await exited, 0);
    for (const s of seen) {
      assert.equal(s.url, "/mcp?session_id=ses_a%20b");
      assert.equal(s.auth, "Bearer stand-in-token");
    }
  });
});

describe("authentication", () => {
  test("with a wrong token the HTTP connect fails with 401", async () => {
    const client = new Client({ name: "dsh-mcp-test", version: "1.0.0" });
    const transport = new StreamableHTTPClientTransport(host.mcpUrl, {
      requestInit: { headers: { Authorization: "Bearer wrong-token" } },
    });
    await assert.rejects(client.connect(transport), (e) => {
      assert.equal(e.code, 401, String(e));
      return true;
    });
    await client.close();
  });
});
