// node --test web/test/ — the Settings page's words and checks, and the
// New session dialog's reason for a provider it cannot use.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  checkProviderForm,
  formOf,
  keyText,
  parseNames,
  providerBody,
  testText,
  unavailableReason,
} from "../src/lib/settings.js";

const form = (over = {}) => ({ name: "local", baseUrl: "http://127.0.0.1:11434/v1", apiKey: "", forgetKey: false, models: "", efforts: "", ...over });

test("names split on commas and white space, each once", () => {
  assert.deepEqual(parseNames(" qwen3, llama3.2  qwen3,\nmistral ,"), ["qwen3", "llama3.2", "mistral"]);
  assert.deepEqual(parseNames(""), []);
});

test("a provider's key in words, never the key: the environment's wins", () => {
  assert.equal(keyText({ kind: "openai", key_source: "environment", key_env: "OPENAI_API_KEY" }),
    "Key from the environment (OPENAI_API_KEY); it wins over a saved key");
  assert.equal(keyText({ kind: "openai", key_source: "profile", key_env: null }), "Key saved in the profile");
  assert.equal(keyText({ kind: "openai", key_source: null, key_env: "DEEPSEEK_API_KEY" }), "No key: set DEEPSEEK_API_KEY or save one here");
  assert.equal(keyText({ kind: "openai", key_source: null, key_env: null }), "No key");
  assert.equal(keyText({ kind: "echo", key_source: null, key_env: null }), "No key needed (offline echo model)");
});

test("the dialog explains a provider it cannot use, naming the variable when there is one", () => {
  assert.equal(unavailableReason({ available: true, key_env: "OPENAI_API_KEY" }), null);
  assert.equal(unavailableReason({ available: false, key_env: "OPENAI_API_KEY" }), "no API key: set OPENAI_API_KEY or add it in Settings");
  assert.equal(unavailableReason({ available: false }), "no API key: add it in Settings");
});

test("the form's first problem names its field", () => {
  assert.equal(checkProviderForm(form()), null);
  assert.equal(checkProviderForm(form({ name: " " })).field, "name");
  assert.equal(checkProviderForm(form({ name: "My Server" })).field, "name");
  assert.equal(checkProviderForm(form({ baseUrl: "ftp://x" })).field, "baseUrl");
  assert.equal(checkProviderForm(form({ baseUrl: "http://" })).field, "baseUrl");
  assert.equal(checkProviderForm(form({ efforts: "low" })).field, "efforts");
  assert.equal(checkProviderForm(form({ efforts: "low", models: "qwen3" })), null);
});

test("the PUT body: a typed key replaces, an empty one keeps, forgetting sends null", () => {
  assert.deepEqual(providerBody(form({ models: "a, b", efforts: "low high" })),
    { kind: "openai", base_url: "http://127.0.0.1:11434/v1", models: ["a", "b"], efforts: ["low", "high"] });
  assert.equal(providerBody(form({ apiKey: " sk-1 " })).api_key, "sk-1");
  assert.equal("api_key" in providerBody(form()), false);
  assert.equal(providerBody(form({ forgetKey: true })).api_key, null);
});

test("editing starts from the provider's settings, without a key", () => {
  const f = formOf({ name: "local", kind: "openai", base_url: "http://h/v1", models: ["a", "b"], efforts: { a: ["low"], b: ["low"] },
    key_set: true, key_source: "profile", key_env: null, source: "profile", available: true });
  assert.deepEqual(f, { name: "local", baseUrl: "http://h/v1", apiKey: "", forgetKey: false, models: "a, b", efforts: "low" });
});

test("a Test's outcome in words", () => {
  assert.equal(testText({ ok: true, models: ["m1"] }), "Works: it offers 1 model (m1).");
  assert.equal(testText({ ok: true, models: [] }), "Works.");
  assert.equal(testText({ ok: true, models: ["a", "b", "c", "d", "e", "f", "g"] }), "Works: it offers 7 models (a, b, c, d, e, and 2 more).");
  assert.equal(testText({ ok: false, error: { code: "model_error", message: "HTTP 401 from http://h/v1/models: Incorrect API key provided" } }),
    "Failed: HTTP 401 from http://h/v1/models: Incorrect API key provided (model_error)");
});
