// The MCP tests' harness: a real `dsh web` (echo model) on a temp profile and
// a loopback port chosen by the host (`--port 0`), with the token it
// generated into <home>/auth-token — what an MCP client is configured with.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
export const binary = process.env.DSH_BINARY ?? join(root, "build", "dsh");

// The environment of every dsh process a test starts: none of the caller's
// DSH_* settings (token, model, database), so the profile decides.
export function cleanEnv() {
  const env = { ...process.env };
  for (const key of Object.keys(env)) if (key.startsWith("DSH_") && key !== "DSH_BINARY") delete env[key];
  delete env.OPENAI_API_KEY;
  delete env.DEEPSEEK_API_KEY;
  return env;
}

export class Host {
  // A host on a fresh profile (<tmp>/profile), or on the profile in `dir`
  // that an earlier host left (see stop()), ready to serve.
  static async start(dir) {
    const host = new Host();
    host.dir = dir ?? mkdtempSync(join(tmpdir(), "dsh-mcp-"));
    host.home = join(host.dir, "profile");
    host.proc = spawn(binary, ["web", "--home", host.home, "--port", "0"], {
      env: cleanEnv(),
      stdio: ["ignore", "pipe", "pipe"],
    });
    host.stderr = "";
    host.proc.stderr.on("data", (d) => (host.stderr += d));
    const lines = createInterface({ input: host.proc.stdout });
    const url = await new Promise((ok, fail) => {
      const timer = setTimeout(() => fail(new Error("dsh web did not start: " + host.stderr)), 20000);
      lines.on("line", (line) => {
        const m = /^dsh web listening on (http:\/\/\S+?)\/?$/.exec(line);
        if (m) {
          clearTimeout(timer);
          ok(m[1]);
        }
      });
      host.proc.on("exit", (code) => fail(new Error(`dsh web exited (${code}): ${host.stderr}`)));
    });
    host.url = url;
    host.mcpUrl = new URL(url + "/mcp");
    host.token = readFileSync(join(host.home, "auth-token"), "utf8").trim();
    const health = await fetch(url + "/healthz");
    if (!health.ok) throw new Error("/healthz answered " + health.status);
    return host;
  }

  // Stops the host and keeps its profile.
  async stop() {
    if (this.proc && this.proc.exitCode === null) {
      const exited = new Promise((ok) => this.proc.once("exit", ok));
      this.proc.kill("SIGTERM");
      await exited;
    }
  }

  async close() {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }

  // POST /api/tools/{name} as the CLI and browser call it: {status, body}.
  async httpTool(name, args, sessionId) {
    const r = await fetch(`${this.url}/api/tools/${name}`, {
      method: "POST",
      headers: { Authorization: `Bearer ${this.token}`, "Content-Type": "application/json" },
      body: JSON.stringify(sessionId ? { args, session_id: sessionId } : { args }),
    });
    return { status: r.status, body: await r.json() };
  }

  async get(path) {
    const r = await fetch(this.url + path, { headers: { Authorization: `Bearer ${this.token}` } });
    const body = await r.json();
    if (!r.ok) throw new Error(`GET ${path}: ${r.status} ${JSON.stringify(body)}`);
    return body;
  }
}

// Polls `probe` (async, returns a truthy value when done) every `interval`
// ms until it succeeds or `timeout` ms passed.
export async function until(what, probe, { timeout = 20000, interval = 100 } = {}) {
  const deadline = Date.now() + timeout;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeout} ms waiting for ${what}`);
    await new Promise((ok) => setTimeout(ok, interval));
  }
}
