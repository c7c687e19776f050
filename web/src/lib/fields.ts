// Which field of a form an API error belongs to, so the form shows it next
// to that field (docs/UI.md). The host's validation messages name their
// field in backticks (`cwd`, `model.model`, ...); errors of the model route
// carry a code instead.

/** Codes that are about the model route, whatever their message says. */
const MODEL_CODES = new Set([
  "unknown_provider",
  "unknown_model",
  "invalid_reasoning_effort",
  "model_unavailable",
  "no_default_model",
]);

/**
 * The field of `fields` (the form's fields, by their API names) that `error`
 * belongs to, or undefined for a form-wide error. `byCode`: the field of
 * errors whose message names none.
 */
export function fieldOfError(
  error: { code?: string; message?: string } | null | undefined,
  fields: string[],
  byCode: Record<string, string> = {},
): string | undefined {
  const message = String(error?.message ?? "");
  // The first field named, as `field` or `field.sub`.
  let best: string | undefined;
  let at = Infinity;
  for (const f of fields) {
    const i = message.search(new RegExp("`" + f.replace(/[.*+?^${}()|[\]\\]/g, "\\$&") + "[`.]"));
    if (i >= 0 && i < at) {
      best = f;
      at = i;
    }
  }
  if (best) return best;
  const code = String(error?.code);
  if (byCode[code] && fields.includes(byCode[code])) return byCode[code];
  if (MODEL_CODES.has(String(error?.code)) && fields.includes("model")) return "model";
  return undefined;
}
