import { useEffect, useRef, useState } from "preact/hooks";
import { ApiError, request } from "./api";
import { NotificationsSettings } from "./notifications";
import {
  checkProviderForm,
  formOf,
  keyText,
  providerBody,
  routeSourceText,
  sourceText,
  testText,
  type ProviderForm,
  type ProviderRow,
  type SettingsView,
  type TestResult,
} from "./lib/settings";

// The Settings page (#/settings, issue 31): the model providers the host
// knows — never their keys — with a Test for each, a form to add or edit an
// OpenAI-compatible one, and the profile's default route. Every change goes
// to the host at once (docs/API.md, "Settings"); `onChanged` lets the rest
// of the page (the New session dialog) see it. Below them, the outbound
// notifications (notifications.tsx), re-read when `notificationsVersion` changes.

const settingsApi = {
  get: () => request<SettingsView>("GET", "/api/settings"),
  put: (name: string, body: Record<string, unknown>) =>
    request<SettingsView>("PUT", `/api/settings/providers/${encodeURIComponent(name)}`, body),
  remove: (name: string) => request<SettingsView>("DELETE", `/api/settings/providers/${encodeURIComponent(name)}`),
  test: (name: string) => request<TestResult>("POST", `/api/settings/providers/${encodeURIComponent(name)}/test`, {}),
  defaultRoute: (provider: string, model: string) =>
    request<SettingsView>("PUT", "/api/settings/default_route", { provider, model }),
};

const EMPTY: ProviderForm = { name: "", baseUrl: "", apiKey: "", forgetKey: false, models: "", efforts: "" };
const message = (e: unknown) => (e instanceof ApiError ? `${e.message} (${e.code})` : String((e as any)?.message ?? e));

export function Settings({ onChanged, notificationsVersion }: { onChanged: () => void; notificationsVersion: number }) {
  const [view, setView] = useState<SettingsView | null>(null);
  const [loadError, setLoadError] = useState<string | null>(null);
  // The form: null when closed; `editing` names the provider being edited.
  const [form, setForm] = useState<ProviderForm | null>(null);
  const [editing, setEditing] = useState<ProviderRow | null>(null);
  const [tests, setTests] = useState<Record<string, { busy: boolean; result?: TestResult }>>({});
  const [rowError, setRowError] = useState<{ name: string; text: string } | null>(null);
  const formHeading = useRef<HTMLHeadingElement>(null);
  const addButton = useRef<HTMLButtonElement>(null);
  // Where the keyboard goes back to when the form closes (its controls leave the page).
  const closeForm = () => {
    setForm(null);
    setEditing(null);
    requestAnimationFrame(() => addButton.current?.focus());
  };

  useEffect(() => {
    settingsApi.get().then(setView).catch((e) => setLoadError(message(e)));
  }, []);
  useEffect(() => {
    if (form) formHeading.current?.focus();
  }, [form !== null, editing?.name]);

  const changed = (next: SettingsView) => {
    setView(next);
    onChanged();
  };
  const openForm = (row: ProviderRow | null) => {
    setEditing(row);
    setForm(row ? formOf(row) : EMPTY);
  };
  const test = async (name: string) => {
    setTests((all) => ({ ...all, [name]: { busy: true } }));
    let result: TestResult;
    try {
      result = await settingsApi.test(name);
    } catch (e) {
      result = { ok: false, error: { code: e instanceof ApiError ? e.code : "error", message: e instanceof ApiError ? e.message : String(e) } };
    }
    setTests((all) => ({ ...all, [name]: { busy: false, result } }));
  };
  const remove = async (row: ProviderRow) => {
    if (!confirm(`Delete the saved provider ${row.name}?`)) return;
    try {
      setRowError(null);
      changed(await settingsApi.remove(row.name));
    } catch (e) {
      setRowError({ name: row.name, text: `Could not delete: ${message(e)}` });
    }
  };

  return (
    <section class="settings" aria-labelledby="settings-title">
      <header class="session-header">
        <h1 id="settings-title">Settings</h1>
        <span class="meta muted">Saved in this host's profile; new sessions use a change at once.</span>
      </header>
      <div class="settings-body">
        {loadError && <p class="error-text" role="alert">Could not read the settings: {loadError}</p>}
        {view && (
          <>
            <section class="settings-section" aria-labelledby="providers-title">
              <h2 id="providers-title">Model providers</h2>
              <ul class="provider-list">
                {view.providers.map((row) => (
                  <ProviderCard key={row.name} row={row} test={tests[row.name]} error={rowError?.name === row.name ? rowError.text : null}
                                onTest={() => void test(row.name)} onEdit={() => openForm(row)} onDelete={() => void remove(row)} />
                ))}
              </ul>
              {!form && (
                <button type="button" ref={addButton} onClick={() => openForm(null)}>Add a provider</button>
              )}
              {form && (
                <ProviderEditor form={form} editing={editing} headingRef={formHeading} onForm={setForm}
                                onSaved={(next, name) => {
                                  changed(next);
                                  closeForm();
                                  setTests((all) => ({ ...all, [name]: { busy: false } }));
                                }}
                                onCancel={closeForm} />
              )}
            </section>
            <DefaultRoute view={view} onSaved={changed} />
          </>
        )}
        <NotificationsSettings version={notificationsVersion} />
      </div>
    </section>
  );
}

function ProviderCard({ row, test, error, onTest, onEdit, onDelete }: {
  row: ProviderRow; test?: { busy: boolean; result?: TestResult }; error: string | null;
  onTest: () => void; onEdit: () => void; onDelete: () => void;
}) {
  const id = `provider-${row.name}`;
  return (
    <li class="provider-card" data-provider={row.name} aria-labelledby={id}>
      <div class="provider-head">
        <h3 id={id}>{row.name}</h3>
        <span class="tag">{sourceText(row.source)}</span>
        {!row.available && <span class="tag bad">needs a key</span>}
      </div>
      <dl class="provider-facts">
        <dt>Kind</dt>
        <dd>{row.kind === "echo" ? "offline echo model" : "OpenAI-compatible"}</dd>
        {row.base_url && (
          <>
            <dt>Base URL</dt>
            <dd class="mono">{row.base_url}</dd>
          </>
        )}
        <dt>Models</dt>
        <dd>{row.models.length ? row.models.map((m) => m + (row.efforts[m] ? ` (${row.efforts[m].join(", ")})` : "")).join(", ") : "any model name"}</dd>
        <dt>Key</dt>
        <dd data-testid="key-status">{keyText(row)}</dd>
      </dl>
      <div class="provider-actions">
        <button type="button" class="secondary" onClick={onTest} disabled={test?.busy} aria-label={`Test ${row.name}`}>
          {test?.busy ? "Testing…" : "Test"}
        </button>
        {row.kind === "openai" && (
          <button type="button" class="secondary" onClick={onEdit} aria-label={`Edit ${row.name}`}>Edit</button>
        )}
        {row.source === "profile" && (
          <button type="button" class="secondary danger" onClick={onDelete} aria-label={`Delete ${row.name}`}>Delete</button>
        )}
      </div>
      <p class={`test-result${test?.result ? (test.result.ok ? " ok" : " failed") : ""}`} role="status" aria-live="polite">
        {test?.result ? testText(test.result) : ""}
      </p>
      {error && <p class="error-text" role="alert">{error}</p>}
    </li>
  );
}

function ProviderEditor({ form, editing, headingRef, onForm, onSaved, onCancel }: {
  form: ProviderForm; editing: ProviderRow | null; headingRef: { current: HTMLHeadingElement | null };
  onForm: (f: ProviderForm) => void; onSaved: (view: SettingsView, name: string) => void; onCancel: () => void;
}) {
  const [error, setError] = useState<{ field?: keyof ProviderForm; message: string } | null>(null);
  const [busy, setBusy] = useState(false);
  const set = (field: keyof ProviderForm) => (e: Event) => {
    const el = e.target as HTMLInputElement;
    onForm({ ...form, [field]: el.type === "checkbox" ? el.checked : el.value });
  };
  const submit = async (e: Event) => {
    e.preventDefault();
    const problem = checkProviderForm(form);
    if (problem) return setError(problem);
    setBusy(true);
    setError(null);
    try {
      const name = form.name.trim();
      onSaved(await settingsApi.put(name, providerBody(form)), name);
    } catch (err) {
      setError({ message: `Not saved: ${message(err)}` });
    } finally {
      setBusy(false);
    }
  };
  const invalid = (f: keyof ProviderForm) => error?.field === f;
  const described = (f: keyof ProviderForm, hint?: string) =>
    [invalid(f) ? "provider-form-error" : "", hint ?? ""].filter(Boolean).join(" ") || undefined;
  const title = editing ? `Edit ${editing.name}` : "Add a provider";
  return (
    <form class="provider-form" aria-labelledby="provider-form-title" onSubmit={submit}>
      <h3 id="provider-form-title" tabIndex={-1} ref={headingRef}>{title}</h3>
      <p class="muted">An OpenAI-compatible server: OpenAI, DeepSeek, vLLM, Ollama, llama.cpp…</p>
      <label>
        Name
        <input type="text" value={form.name} onInput={set("name")} disabled={!!editing} autocomplete="off"
               aria-invalid={invalid("name")} aria-describedby={described("name")} placeholder="local" />
      </label>
      <label>
        Base URL
        <input type="url" value={form.baseUrl} onInput={set("baseUrl")} autocomplete="off"
               aria-invalid={invalid("baseUrl")} aria-describedby={described("baseUrl")} placeholder="http://127.0.0.1:11434/v1" />
      </label>
      <label>
        API key{editing?.key_source === "profile" ? " (leave empty to keep the saved one)" : " (optional)"}
        <input type="password" value={form.apiKey} onInput={set("apiKey")} autocomplete="new-password"
               aria-describedby={described("apiKey", editing?.key_source === "environment" ? "provider-key-env" : undefined)} />
      </label>
      {editing?.key_source === "environment" && (
        <p class="muted" id="provider-key-env">{editing.key_env} is set in the host's environment; it wins over a key saved here.</p>
      )}
      {editing?.key_source === "profile" && (
        <label class="choice">
          <input type="checkbox" checked={form.forgetKey} onChange={set("forgetKey")} disabled={!!form.apiKey} />
          Forget the saved key
        </label>
      )}
      <label>
        Models to offer (comma separated; empty for any model name)
        <input type="text" value={form.models} onInput={set("models")} autocomplete="off"
               aria-describedby={described("models")} placeholder="qwen3, llama3.2" />
      </label>
      <label>
        Reasoning efforts (optional, for every model above)
        <input type="text" value={form.efforts} onInput={set("efforts")} autocomplete="off"
               aria-invalid={invalid("efforts")} aria-describedby={described("efforts")} placeholder="low, medium, high" />
      </label>
      {error && <p class="error-text" id="provider-form-error" role="alert">{error.message}</p>}
      <div class="dialog-actions">
        <button type="button" class="secondary" onClick={onCancel}>Cancel</button>
        <button type="submit" disabled={busy}>{busy ? "Saving…" : "Save provider"}</button>
      </div>
    </form>
  );
}

function DefaultRoute({ view, onSaved }: { view: SettingsView; onSaved: (view: SettingsView) => void }) {
  const current = view.default_route;
  const [provider, setProvider] = useState(current.provider);
  const [model, setModel] = useState(current.model);
  const [note, setNote] = useState<{ ok: boolean; text: string } | null>(null);
  const usable = view.providers.filter((p) => p.available || p.name === current.provider);
  const listed = view.providers.find((p) => p.name === provider)?.models ?? [];
  const save = async (e: Event) => {
    e.preventDefault();
    if (!model.trim()) return setNote({ ok: false, text: "Give a model name." });
    try {
      onSaved(await settingsApi.defaultRoute(provider, model.trim()));
      setNote({ ok: true, text: `New sessions now use ${provider}/${model.trim()}.` });
    } catch (err) {
      setNote({ ok: false, text: `Not saved: ${message(err)}` });
    }
  };
  return (
    <section class="settings-section" aria-labelledby="route-title">
      <h2 id="route-title">Default model for new sessions</h2>
      <p>
        Now: <strong data-testid="default-route">{current.provider}/{current.model}</strong>.{" "}
        <span class="muted">{routeSourceText(current.source)}</span>
      </p>
      <form class="route-form" onSubmit={save}>
        <label>
          Provider
          <select value={provider} onChange={(e) => {
            const name = (e.target as HTMLSelectElement).value;
            setProvider(name);
            setModel(view.providers.find((p) => p.name === name)?.models[0] ?? "");
          }}>
            {usable.map((p) => <option key={p.name} value={p.name}>{p.name}</option>)}
          </select>
        </label>
        <label>
          Model
          {listed.length ? (
            <select value={model} onChange={(e) => setModel((e.target as HTMLSelectElement).value)}>
              {listed.map((m) => <option key={m} value={m}>{m}</option>)}
            </select>
          ) : (
            <input type="text" value={model} onInput={(e) => setModel((e.target as HTMLInputElement).value)} />
          )}
        </label>
        <button type="submit">Use for new sessions</button>
      </form>
      {note && <p class={note.ok ? "ok-text" : "error-text"} role={note.ok ? "status" : "alert"}>{note.text}</p>}
    </section>
  );
}
