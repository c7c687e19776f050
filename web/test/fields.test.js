// node --test web/test/ — where the New session dialog shows an error.
import { test } from "node:test";
import assert from "node:assert/strict";
import { fieldOfError } from "../src/lib/fields.js";

const form = ["prompt", "preset", "cwd", "model"];
const at = (code, message) => fieldOfError({ code, message }, form);

// The messages below are the host's own (session_actions.cc, schema.cc, model_routes.cc).
test("validation messages go to the field they name", () => {
  assert.equal(at("invalid_arguments", "`prompt` must not be blank"), "prompt");
  assert.equal(at("invalid_arguments", '`preset` names no configured preset: "x"'), "preset");
  assert.equal(at("invalid_arguments", '`cwd` must be an absolute path, got "tmp"'), "cwd");
  assert.equal(at("invalid_arguments", "`cwd` /nope does not exist or cannot be resolved (No such file)"), "cwd");
  assert.equal(at("invalid_arguments", "`model.model` must be a non-empty string"), "model");
});

test("route errors go to the model, whatever they say", () => {
  assert.equal(at("unknown_model", 'provider `echo` has no model "x"'), "model");
  assert.equal(at("unknown_provider", "no provider `nope`"), "model");
  assert.equal(at("invalid_reasoning_effort", 'reasoning effort "max" is not one of low, high'), "model");
  assert.equal(at("model_unavailable", "provider `local` needs the environment variable LOCAL_KEY"), "model");
  assert.equal(at("no_default_model", "no default model is configured; pass `model` {provider, model}"), "model");
});

test("the first field named wins; a name inside another word does not count", () => {
  assert.equal(at("invalid_arguments", "`cwd` conflicts with `preset`"), "cwd");
  assert.equal(at("invalid_arguments", "`prompts` is not a property"), undefined);
});

test("anything else is shown for the whole form", () => {
  assert.equal(at("invalid_arguments", "`client_time_zone` is not a time zone"), undefined);
  assert.equal(at("shutting_down", "the host is shutting down"), undefined);
  assert.equal(fieldOfError(undefined, form), undefined);
});

test("a form may place code-only errors (the loop form's cron rule)", () => {
  const loopForm = ["prompt", "schedule.expr", "schedule.tz", "schedule.every_seconds", "session_id", "preset"];
  const place = (code, message) => fieldOfError({ code, message }, loopForm, { cron_never_fires: "schedule.expr" });
  assert.equal(place("invalid_cron", "loop_create: `schedule.expr`: cron expression is empty"), "schedule.expr");
  assert.equal(place("invalid_time_zone", "loop_create: `schedule.tz`: unknown time zone \"Mars/Base\""), "schedule.tz");
  assert.equal(place("cron_never_fires", "loop_create: the cron rule has no occurrence left"), "schedule.expr");
  assert.equal(place("not_found", "loop_create: `session_id`: no session ses_x exists"), "session_id");
  assert.equal(place("invalid_arguments", "loop_create: `preset` is only accepted with `session_id` \"new\""), "preset");
});
