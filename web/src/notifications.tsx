import { useEffect, useRef, useState } from "preact/hooks";
import { ApiError, request } from "./api";
import { ago } from "./lib/activity";
import {
  ALL_MESSAGES,
  MESSAGE_STATE_CHOICES,
  EMPTY_FORM,
  EVENTS,
  EVERY_EVENT,
  FORMATS,
  attemptWords,
  checkEndpointForm,
  endpointBody,
  endpointFormOf,
  endpointStateWords,
  eventsWords,
  formatWords,
  messageStateWords,
  messagesQuery,
  noMessagesText,
  pendingWords,
  receiptsWords,
  secretOf,
  takesSecret,
  testResultText,
  toMs,
  toggleEvent,
  untilWords,
  type EndpointForm,
  type EndpointView,
  type MessageFilter,
  type NotificationMessage,
  type Receipt,
} from "./lib/notifications";
import { useNow } from "./use_now";

// Outbound notifications (webhooks, docs/NOTIFICATIONS.md) on the Settings
// page: every endpoint with its state, Send test, the form that saves one,
// and the recent messages with their attempts. Re-read when the change feed
// says the notifications changed (`version`); nothing is polled. Also the
// receipts that loop runs and activity items show for the messages written
// for them.

const notificationsApi = {
  endpoints: () => request<{ endpoints: EndpointView[] }>("GET", "/api/notifications").then((r) => r.endpoints),
  messages: (limit: number, filter: MessageFilter) =>
    request<{ messages: NotificationMessage[]; next?: string }>("GET", messagesQuery(limit, filter)),
  message: (id: string) => request<NotificationMessage>("GET", `/api/notifications/messages/${encodeURIComponent(id)}`),
  test: (name: string) =>
    request<{ message: NotificationMessage }>("POST", `/api/notifications/endpoints/${encodeURIComponent(name)}/test`, {})
      .then((r) => r.message),
  // Both answer the endpoints as they are now.
  put: (name: string, body: Record<string, unknown>) =>
    request<{ endpoints: EndpointView[] }>("PUT", `/api/notifications/endpoints/${encodeURIComponent(name)}`, body).then((r) => r.endpoints),
  remove: (name: string) =>
    request<{ endpoints: EndpointView[] }>("DELETE", `/api/notifications/endpoints/${encodeURIComponent(name)}`).then((r) => r.endpoints),
};

const MESSAGES_PAGE = 20;
const message = (e: unknown) => (e instanceof ApiError ? `${e.message} (${e.code})` : String((e as any)?.message ?? e));
const exact = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toLocaleString());

function When({ at, now }: { at: number | string | undefined; now: number }) {
  const ms = toMs(at);
  if (ms === undefined) return null;
  return <time dateTime={new Date(ms).toISOString()} title={exact(ms)}>{ago(ms, now)}</time>;
}

type TestState = { busy: boolean; result?: { ok: boolean; text: string } };

export function NotificationsSettings({ version }: { version: number }) {
  const [endpoints, setEndpoints] = useState<EndpointView[] | null>(null);
  const [unsupported, setUnsupported] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [bump, setBump] = useState(0);  // re-read after this page changed something
  const [form, setForm] = useState<EndpointForm | null>(null);
  const [editing, setEditing] = useState<EndpointView | null>(null);
  const [tests, setTests] = useState<Record<string, TestState>>({});
  const [rowError, setRowError] = useState<{ name: string; text: string } | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const asked = useRef(0);
  const formHeading = useRef<HTMLHeadingElement>(null);
  const addButton = useRef<HTMLButtonElement>(null);
  const now = useNow(30_000);

  useEffect(() => {
    // Only the newest answer counts: re-reads may overlap.
    const mine = ++asked.current;
    notificationsApi
      .endpoints()
      .then((list) => {
        if (mine !== asked.current) return;
        setEndpoints(list);
        setError(null);
      })
      .catch((e) => {
        if (mine !== asked.current) return;
        if (e instanceof ApiError && e.status === 404) setUnsupported(true);
        else setError(message(e));
      });
  }, [version, bump]);
  useEffect(() => {
    if (form) formHeading.current?.focus();
  }, [form !== null, editing?.name]);

  const closeForm = () => {
    setForm(null);
    setEditing(null);
    requestAnimationFrame(() => addButton.current?.focus());
  };
  const openForm = (row: EndpointView | null) => {
    setEditing(row);
    setForm(row ? endpointFormOf(row) : EMPTY_FORM);
  };
  const test = async (name: string) => {
    // The last outcome goes while sending: the live region then announces the new one, even in the same words.
    setTests((all) => ({ ...all, [name]: { busy: true } }));
    let result: TestState["result"];
    try {
      result = testResultText(await notificationsApi.test(name), Date.now());
    } catch (e) {
      result = { ok: false, text: `Could not send a test: ${message(e)}` };
    }
    setTests((all) => ({ ...all, [name]: { busy: false, result } }));
    setBump((n) => n + 1);
  };
  const remove = async (row: EndpointView) => {
    if (!confirm(`Delete the endpoint ${row.name}? Nothing more is sent to it.`)) return;
    try {
      setRowError(null);
      const list = await notificationsApi.remove(row.name);
      ++asked.current;  // an older read in flight must not bring it back
      setEndpoints(list);
      setNotice(`Deleted the endpoint ${row.name}.`);
    } catch (e) {
      setRowError({ name: row.name, text: `Could not delete: ${message(e)}` });
    }
  };

  return (
    <section class="settings-section notifications" aria-labelledby="notifications-title">
      <h2 id="notifications-title">Notifications</h2>
      <p class="muted">
        Where dsh sends word of loop runs, reminders, activity and approvals (webhooks). Saved endpoints are kept beside
        dsh.yml, their secrets never shown again.
      </p>
      {unsupported ? (
        <p class="muted">This host does not send notifications.</p>
      ) : (
        <>
          {error && <p class="error-text" role="alert">Could not read the notification endpoints: {error}</p>}
          {endpoints === null ? (
            !error && <p class="muted">Loading…</p>
          ) : endpoints.length === 0 ? (
            <p class="muted">No endpoints yet: add one below, or declare them under notifications.webhooks in dsh.yml.</p>
          ) : (
            <ul class="provider-list endpoint-list" aria-label="Notification endpoints">
              {endpoints.map((row) => (
                <EndpointCard key={row.name} row={row} now={now} test={tests[row.name]}
                              error={rowError?.name === row.name ? rowError.text : null}
                              onTest={() => void test(row.name)} onEdit={() => openForm(row)} onDelete={() => void remove(row)} />
              ))}
            </ul>
          )}
          <div class="status-line" role="status" aria-live="polite">{notice}</div>
          {!form && (
            <button type="button" ref={addButton} onClick={() => openForm(null)}>Add endpoint</button>
          )}
          {form && (
            <EndpointEditor form={form} editing={editing} headingRef={formHeading} onForm={setForm}
                            onSaved={(name, list) => {
                              ++asked.current;  // an older read in flight must not hide it
                              setEndpoints(list);
                              setNotice(editing ? `Saved the endpoint ${name}.` : `Added the endpoint ${name}.`);
                              closeForm();
                            }}
                            onCancel={closeForm} />
          )}
          <RecentMessages version={version + bump} now={now} endpoints={(endpoints ?? []).map((e) => e.name)} />
        </>
      )}
    </section>
  );
}

function EndpointCard({ row, now, test, error, onTest, onEdit, onDelete }: {
  row: EndpointView; now: number; test?: TestState; error: string | null;
  onTest: () => void; onEdit: () => void; onDelete: () => void;
}) {
  const id = `endpoint-${row.name}`;
  const state = endpointStateWords(row.state);
  const failure = row.last_failure;
  return (
    <li class={`provider-card endpoint-card${row.state === "failing" ? " failing" : ""}`} data-endpoint={row.name} aria-labelledby={id}>
      <div class="provider-head">
        <h3 id={id}>{row.name}</h3>
        <span class={`outcome ${state.tone}`} data-testid="endpoint-state">{state.text}</span>
        <span class="tag">{row.source === "config" ? "from dsh.yml" : "saved here"}</span>
      </div>
      <dl class="provider-facts">
        <dt>Format</dt>
        <dd>{formatWords(row.format)}</dd>
        <dt>URL</dt>
        <dd class="mono">{row.url}</dd>
        <dt>Events</dt>
        <dd>{eventsWords(row.events)}</dd>
        <dt>Waiting</dt>
        <dd data-testid="endpoint-pending">{pendingWords(row.pending)}</dd>
        {row.last_delivered_at !== undefined && (
          <>
            <dt>Last delivered</dt>
            <dd><When at={row.last_delivered_at} now={now} /></dd>
          </>
        )}
        {failure && (
          <>
            <dt>Last failure</dt>
            <dd class={row.state === "failing" ? "error-text" : "muted"}>
              {failure.error} (<When at={failure.at} now={now} />)
            </dd>
          </>
        )}
        {row.allow_private && (
          <>
            <dt>Private addresses</dt>
            <dd>allowed</dd>
          </>
        )}
      </dl>
      <div class="provider-actions">
        <button type="button" class="secondary" onClick={onTest} disabled={test?.busy} aria-label={`Send test to ${row.name}`}>
          {test?.busy ? "Sending…" : "Send test"}
        </button>
        {row.source === "saved" && (
          <>
            <button type="button" class="secondary" onClick={onEdit} aria-label={`Edit ${row.name}`}>Edit</button>
            <button type="button" class="secondary danger" onClick={onDelete} aria-label={`Delete ${row.name}`}>Delete</button>
          </>
        )}
      </div>
      {row.source === "config" && (
        <p class="muted endpoint-note">Declared in dsh.yml: change or remove it there.</p>
      )}
      <p class={`test-result${test?.result ? (test.result.ok ? " ok" : " failed") : ""}`} role="status" aria-live="polite">
        {test?.result?.text ?? ""}
      </p>
      {error && <p class="error-text" role="alert">{error}</p>}
    </li>
  );
}

function EndpointEditor({ form, editing, headingRef, onForm, onSaved, onCancel }: {
  form: EndpointForm; editing: EndpointView | null; headingRef: { current: HTMLHeadingElement | null };
  onForm: (f: EndpointForm) => void; onSaved: (name: string, endpoints: EndpointView[]) => void; onCancel: () => void;
}) {
  const [error, setError] = useState<{ field?: keyof EndpointForm; message: string } | null>(null);
  const [busy, setBusy] = useState(false);
  const [generated, setGenerated] = useState(false);
  const set = (field: keyof EndpointForm) => (e: Event) => {
    const el = e.target as HTMLInputElement;
    onForm({ ...form, [field]: el.type === "checkbox" ? el.checked : el.value });
  };
  const generate = () => {
    const bytes = new Uint8Array(32);
    crypto.getRandomValues(bytes);
    onForm({ ...form, secret: secretOf(bytes), forgetSecret: false });
    setGenerated(true);
  };
  const submit = async (e: Event) => {
    e.preventDefault();
    const problem = checkEndpointForm(form, editing);
    if (problem) return setError(problem);
    setBusy(true);
    setError(null);
    try {
      const name = form.name.trim();
      onSaved(name, await notificationsApi.put(name, endpointBody(form)));
    } catch (err) {
      setError({ message: `Not saved: ${message(err)}` });
    } finally {
      setBusy(false);
    }
  };
  const invalid = (f: keyof EndpointForm) => error?.field === f;
  const described = (f: keyof EndpointForm, hint?: string) =>
    [invalid(f) ? "endpoint-form-error" : "", hint ?? ""].filter(Boolean).join(" ") || undefined;
  const title = editing ? `Edit ${editing.name}` : "Add endpoint";
  const secretLabel = form.format === "standard" ? "Signing secret" : "Access token (optional)";
  const keeps = editing?.has_secret ? " (leave empty to keep the saved one)" : "";
  return (
    <form class="provider-form endpoint-form" aria-labelledby="endpoint-form-title" onSubmit={submit}>
      <h3 id="endpoint-form-title" tabIndex={-1} ref={headingRef}>{title}</h3>
      <label>
        Name
        <input type="text" value={form.name} onInput={set("name")} disabled={!!editing} autocomplete="off"
               aria-invalid={invalid("name")} aria-describedby={described("name", editing ? undefined : "endpoint-name-hint")}
               placeholder="ops" />
      </label>
      {!editing && <p class="muted endpoint-hint" id="endpoint-name-hint">Lowercase letters, digits, - and _.</p>}
      <label>
        URL
        <input type="url" value={form.url} onInput={set("url")} autocomplete="off"
               aria-invalid={invalid("url")} aria-describedby={described("url", editing ? "endpoint-url-again" : undefined)}
               placeholder={editing ? editing.url : "https://hooks.example.net/dsh"} />
      </label>
      {editing && (
        <p class="muted" id="endpoint-url-again">Leave it empty to keep the saved URL, which this page never sees whole: its path may hold a secret.</p>
      )}
      <label>
        Format
        <select value={form.format} onChange={set("format")}>
          {FORMATS.map((f) => <option key={f.id} value={f.id}>{f.words}</option>)}
        </select>
      </label>
      <fieldset class="endpoint-events" aria-invalid={invalid("events")} aria-describedby={described("events")}>
        <legend>Events to send</legend>
        <label class="choice">
          <input type="checkbox" checked={form.events.includes(EVERY_EVENT)}
                 onChange={(e) => onForm({ ...form, events: toggleEvent(form.events, EVERY_EVENT, (e.target as HTMLInputElement).checked) })} />
          Every event
        </label>
        {EVENTS.map((ev) => (
          <label key={ev.id} class="choice">
            <input type="checkbox" checked={form.events.includes(ev.id)} disabled={form.events.includes(EVERY_EVENT)}
                   onChange={(e) => onForm({ ...form, events: toggleEvent(form.events, ev.id, (e.target as HTMLInputElement).checked) })} />
            <span><span class="mono">{ev.id}</span> <span class="muted">— {ev.words}</span></span>
          </label>
        ))}
      </fieldset>
      {takesSecret(form.format) ? (
        <>
          <div class="secret-row">
            <label>
              {secretLabel}{keeps}
              <input type="password" value={form.secret} autocomplete="new-password"
                     onInput={(e) => {
                       setGenerated(false);
                       set("secret")(e);
                     }}
                     aria-invalid={invalid("secret")} aria-describedby={described("secret", generated ? "endpoint-secret-made" : undefined)}
                     placeholder={form.format === "standard" ? "whsec_…" : ""} />
            </label>
            {form.format === "standard" && (
              <button type="button" class="secondary" onClick={generate}>Generate</button>
            )}
          </div>
          {generated && (
            <p class="muted" id="endpoint-secret-made" role="status">
              A new secret is in the field. Copy it to your receiver before saving: it is not shown again.{" "}
              <button type="button" class="link" onClick={() => void navigator.clipboard?.writeText(form.secret)}>Copy the secret</button>
            </p>
          )}
          {editing?.has_secret && (
            <label class="choice">
              <input type="checkbox" checked={form.forgetSecret} onChange={set("forgetSecret")} disabled={!!form.secret} />
              Forget the saved {form.format === "standard" ? "secret" : "token"}
            </label>
          )}
        </>
      ) : (
        <p class="muted">{form.format === "slack" ? "Slack" : "Discord"}'s webhook URL is its secret: no secret to set.</p>
      )}
      <label class="choice">
        <input type="checkbox" checked={form.allowPrivate} onChange={set("allowPrivate")} />
        Allow a private or loopback address (a receiver on this machine or network)
      </label>
      {error && <p class="error-text" id="endpoint-form-error" role="alert">{error.message}</p>}
      <div class="dialog-actions">
        <button type="button" class="secondary" onClick={onCancel}>Cancel</button>
        <button type="submit" disabled={busy}>{busy ? "Saving…" : "Save endpoint"}</button>
      </div>
    </form>
  );
}

// The newest messages, each expandable to its attempts (read when opened,
// and again while open whenever the notifications change).
function RecentMessages({ version, now, endpoints }: { version: number; now: number; endpoints: string[] }) {
  const [messages, setMessages] = useState<NotificationMessage[] | null>(null);
  const [more, setMore] = useState(false);
  const [limit, setLimit] = useState(MESSAGES_PAGE);
  const [filter, setFilter] = useState<MessageFilter>(ALL_MESSAGES);
  const [error, setError] = useState<string | null>(null);
  const [open, setOpen] = useState<Set<string>>(new Set());
  const asked = useRef(0);
  useEffect(() => {
    const mine = ++asked.current;
    notificationsApi
      .messages(limit, filter)
      .then((page) => {
        if (mine !== asked.current) return;
        setMessages(page.messages);
        setMore(page.next !== undefined && page.next !== null);
        setError(null);
      })
      .catch((e) => mine === asked.current && setError(message(e)));
  }, [version, limit, filter.endpoint, filter.state]);
  // A new filter starts again from the newest page.
  const choose = (f: MessageFilter) => {
    setFilter(f);
    setLimit(MESSAGES_PAGE);
  };
  const toggle = (id: string) =>
    setOpen((held) => {
      const next = new Set(held);
      if (next.has(id)) next.delete(id);
      else next.add(id);
      return next;
    });
  return (
    <section class="recent-messages" aria-labelledby="messages-title">
      <h3 id="messages-title">Recent messages</h3>
      <div class="message-filters">
        <label>
          Endpoint{" "}
          <select value={filter.endpoint} onChange={(e) => choose({ ...filter, endpoint: (e.target as HTMLSelectElement).value })}>
            <option value="">All endpoints</option>
            {/* A filter on an endpoint since removed stays choosable. */}
            {[...new Set([...endpoints, ...(filter.endpoint ? [filter.endpoint] : [])])].map((name) => (
              <option key={name} value={name}>{name}</option>
            ))}
          </select>
        </label>
        <label>
          State{" "}
          <select value={filter.state}
                  onChange={(e) => choose({ ...filter, state: (e.target as HTMLSelectElement).value as MessageFilter["state"] })}>
            {MESSAGE_STATE_CHOICES.map((c) => <option key={c.value} value={c.value}>{c.label}</option>)}
          </select>
        </label>
      </div>
      {error && <p class="error-text" role="alert">Could not read the messages: {error}</p>}
      {messages === null ? (
        !error && <p class="muted">Loading…</p>
      ) : messages.length === 0 ? (
        <p class="muted">{noMessagesText(filter)}</p>
      ) : (
        <ul class="message-list" aria-label="Recent messages">
          {messages.map((m) => (
            <MessageRow key={m.id} message={m} now={now} open={open.has(m.id)} version={version} onToggle={() => toggle(m.id)} />
          ))}
        </ul>
      )}
      {more && messages && messages.length > 0 && (
        <button type="button" class="secondary more" onClick={() => setLimit(limit + MESSAGES_PAGE)}>Older messages</button>
      )}
    </section>
  );
}

function MessageRow({ message: m, now, open, version, onToggle }: {
  message: NotificationMessage; now: number; open: boolean; version: number; onToggle: () => void;
}) {
  const state = messageStateWords(m.state);
  const last = attemptWords(m.last_attempt);
  const panel = `message-${m.id}`;
  const next = toMs(m.next_attempt_at);
  return (
    <li class={`message-row state-${m.state}`} data-message={m.id}>
      <button type="button" class="message-summary" aria-expanded={open} aria-controls={panel} onClick={onToggle}>
        <span class="message-line">
          {/* Spaces between the words: they are the button's accessible name. */}
          <span class={`outcome ${state.tone}`}>{state.text}</span>{" "}
          <span class="mono message-event">{m.event}</span>{" "}
          <span class="muted">to</span>{" "}
          <span class="message-endpoint">{m.endpoint}</span>
        </span>{" "}
        <span class="message-meta muted">
          <When at={m.created_at} now={now} />
          {" · "}
          {m.attempts === 1 ? "1 attempt" : `${m.attempts} attempts`}
          {last && <> · <span class={m.state === "delivered" ? undefined : "error-text"}>last: {last}</span></>}
          {m.state === "retrying" && next !== undefined && (
            <> · next try <time dateTime={new Date(next).toISOString()} title={exact(next)}>{untilWords(next, Date.now())}</time></>
          )}
        </span>
      </button>
      {open && <MessageDetails id={m.id} panel={panel} version={version} now={now} />}
    </li>
  );
}

function MessageDetails({ id, panel, version, now }: { id: string; panel: string; version: number; now: number }) {
  const [detail, setDetail] = useState<NotificationMessage | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let live = true;
    notificationsApi
      .message(id)
      .then((d) => live && (setDetail(d), setError(null)))
      .catch((e) => live && setError(message(e)));
    return () => void (live = false);
  }, [id, version]);
  return (
    <div class="message-details" id={panel}>
      {error && <p class="error-text" role="alert">Could not read the message: {error}</p>}
      {!detail ? (
        !error && <p class="muted">Loading attempts…</p>
      ) : (
        <>
          {(detail.attempts_log ?? []).length === 0 ? (
            <p class="muted">No attempt yet.</p>
          ) : (
            <ol class="attempts" aria-label="Attempts">
              {(detail.attempts_log ?? []).map((a, i) => (
                <li key={i}>
                  <When at={a.at} now={now} />
                  {" — "}
                  <span class={typeof a.status === "number" && a.status >= 200 && a.status < 300 ? "ok-text" : "error-text"}>
                    {attemptWords(a) || "no answer"}
                  </span>
                </li>
              ))}
            </ol>
          )}
          <p class="muted message-id">Message <span class="mono">{detail.id}</span></p>
          {detail.payload !== undefined && (
            <details class="message-payload">
              <summary>Payload</summary>
              <pre>{JSON.stringify(detail.payload, null, 2)}</pre>
            </details>
          )}
        </>
      )}
    </div>
  );
}

// The messages written for a loop run or an activity item: "ops: delivered",
// "team-slack: retrying (3 attempts)", coloured by how each fared.
export function Receipts({ receipts }: { receipts?: Receipt[] }) {
  if (!receipts?.length) return null;
  return (
    <span class="receipts">
      {receiptsWords(receipts).map((w, i) => (
        <span key={w.id} class={`receipt ${w.tone}`} role="img" aria-label={w.label} title={`${receipts[i].event} → ${receipts[i].endpoint}`}>
          {w.text}
        </span>
      ))}
    </span>
  );
}
