// node --test — what the landing page says about models (issue 31) and that
// docs/CONFIG.md says the same, line for line.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { CONNECT_RECIPES, isOfflineEcho } from "../src/lib/first_run.js";

// build/web-test/test/ → the checkout's root.
const root = join(dirname(fileURLToPath(import.meta.url)), "../../..");
const config = readFileSync(join(root, "docs/CONFIG.md"), "utf8");

test("the offline echo model is recognised by its provider or its description", () => {
  assert.equal(isOfflineEcho({ provider: "echo", description: "echo/echo — echo (offline echo model: replies with your last message)" }), true);
  assert.equal(isOfflineEcho({ provider: "stub", description: "stub/x — echo (offline echo model: replies with your last message)" }), true);
  assert.equal(isOfflineEcho({ provider: "openai", description: "openai/gpt-4o-mini" }), false);
});

test("every recipe's lines are docs/CONFIG.md's, and name variables and providers dsh reads", () => {
  const known = new Set(["OPENAI_BASE_URL", "OPENAI_API_KEY", "DEEPSEEK_API_KEY", "DSH_MODEL"]);
  const block = (r) => r.lines.join("\n");
  for (const r of CONNECT_RECIPES) {
    assert.ok(config.includes("```sh\n" + block(r) + "\n```"), `docs/CONFIG.md has the lines for ${r.name}:\n${block(r)}`);
    for (const line of r.lines) {
      const [name, value] = line.split("=");
      assert.ok(known.has(name), `${name} is a variable dsh reads`);
      if (name === "DSH_MODEL") assert.match(value, /^(openai|deepseek)\/\S+$/);
      if (name === "OPENAI_BASE_URL") assert.match(value, /^https?:\/\/\S+\/v1$/);
    }
  }
  const names = CONNECT_RECIPES.map((r) => r.name).join(" | ");
  for (const what of ["OpenAI-compatible", "DeepSeek", "Ollama", "llama.cpp"]) assert.ok(names.includes(what), what);
  assert.ok(CONNECT_RECIPES.some((r) => r.lines.includes("OPENAI_BASE_URL=http://localhost:11434/v1")));
  assert.ok(CONNECT_RECIPES.some((r) => r.lines.includes("OPENAI_BASE_URL=http://localhost:8080/v1")));
  assert.ok(CONNECT_RECIPES.some((r) => r.lines.includes("DSH_MODEL=deepseek/deepseek-chat")));
});
