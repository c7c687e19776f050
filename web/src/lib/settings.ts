// The Settings page's words and checks (GET/PUT /api/settings, docs/API.md
// "Settings"), and the New session dialog's explanation of a provider it
// cannot use. Pure: the page (settings.tsx) and the dialog call these.

export type KeySource = "environment" | "profile" | null;

export interface ProviderRow {
  name: string;
  kind: "openai" | "echo";
  base_url: string | null;
  models: string[];  // empty: any model name
  efforts: Record<string, string[]>;  // models that take reasoning efforts
  key_set: boolean;
  key_source: KeySource;
  key_env: string | null;  // the environment variable that wins over a saved key
  source: "built-in" | "config" | "profile";
  available: boolean;
}

export interface SettingsView {
  providers: ProviderRow[];
  default_route: { provider: string; model: string; source: "environment" | "profile" | "config" | "built-in" };
}

export interface TestResult {
  ok: boolean;
  models?: string[];
  error?: { code: string; message: string };
}

/** "a, b c\nd" -> ["a", "b", "c", "d"]: names split on commas and white space, each once. */
export function parseNames(text: string): string[] {
  const out: string[] = [];
  for (const part of text.split(/[\s,]+/)) {
    if (part && !out.includes(part)) out.push(part);
  }
  return out;
}

/** Which key a provider uses, in words; never the key. */
export function keyText(row: Pick<ProviderRow, "kind" | "key_source" | "key_env">): string {
  if (row.kind === "echo") return "No key needed (offline echo model)";
  if (row.key_source === "environment") return `Key from the environment (${row.key_env}); it wins over a saved key`;
  if (row.key_source === "profile") return "Key saved in the profile";
  return row.key_env ? `No key: set ${row.key_env} or save one here` : "No key";
}

export function sourceText(source: ProviderRow["source"]): string {
  return source === "built-in" ? "built in" : source === "config" ? "from dsh.yml" : "saved here";
}

export function routeSourceText(source: SettingsView["default_route"]["source"]): string {
  switch (source) {
    case "environment": return "DSH_MODEL is set in the host's environment and wins over the choice below.";
    case "profile": return "Chosen here.";
    case "config": return "From `model` in dsh.yml; a choice saved here wins over it.";
    default: return "The built-in default: the offline echo model.";
  }
}

/**
 * Why the New session dialog cannot use a provider, or null when it can:
 * "no API key: set OPENAI_API_KEY or add it in Settings".
 */
export function unavailableReason(p: { available: boolean; key_env?: string | null }): string | null {
  if (p.available) return null;
  return p.key_env ? `no API key: set ${p.key_env} or add it in Settings` : "no API key: add it in Settings";
}

export interface ProviderForm {
  name: string;
  baseUrl: string;
  apiKey: string;     // "" keeps the saved key
  forgetKey: boolean; // drops the saved key
  models: string;     // names, comma or space separated
  efforts: string;    // optional, the same
}

export const NAME_PATTERN = /^[a-z0-9_-]{1,64}$/;

/** The first problem of a form, naming its field; null when it can be sent. */
export function checkProviderForm(form: ProviderForm): { field: keyof ProviderForm; message: string } | null {
  const name = form.name.trim();
  if (!name) return { field: "name", message: "Give the provider a name." };
  if (!NAME_PATTERN.test(name)) return { field: "name", message: "Use lowercase letters, digits, - and _ in the name." };
  if (!/^https?:\/\/[^\s/?#]+\S*$/.test(form.baseUrl.trim())) {
    return { field: "baseUrl", message: "The base URL must start with http:// or https://, e.g. http://127.0.0.1:11434/v1." };
  }
  if (parseNames(form.efforts).length > 0 && parseNames(form.models).length === 0) {
    return { field: "efforts", message: "List the models that take these efforts." };
  }
  return null;
}

/** The PUT /api/settings/providers/{name} body of a checked form. */
export function providerBody(form: ProviderForm): Record<string, unknown> {
  const body: Record<string, unknown> = { kind: "openai", base_url: form.baseUrl.trim(), models: parseNames(form.models) };
  const efforts = parseNames(form.efforts);
  if (efforts.length) body.efforts = efforts;
  if (form.apiKey.trim()) body.api_key = form.apiKey.trim();
  else if (form.forgetKey) body.api_key = null;
  return body;
}

/** The form for editing `row` (never its key). */
export function formOf(row: ProviderRow): ProviderForm {
  const efforts = Object.values(row.efforts)[0] ?? [];
  return { name: row.name, baseUrl: row.base_url ?? "", apiKey: "", forgetKey: false, models: row.models.join(", "), efforts: efforts.join(", ") };
}

/** A Test's outcome in words. */
export function testText(r: TestResult): string {
  if (r.ok) {
    const models = r.models ?? [];
    if (models.length === 0) return "Works.";
    const shown = models.slice(0, 5).join(", ") + (models.length > 5 ? `, and ${models.length - 5} more` : "");
    return `Works: it offers ${models.length === 1 ? "1 model" : `${models.length} models`} (${shown}).`;
  }
  return `Failed: ${r.error?.message ?? "no answer"}${r.error?.code ? ` (${r.error.code})` : ""}`;
}
