import { useState } from "preact/hooks";
import type { HostInfo } from "./api";
import { CONNECT_RECIPES, isOfflineEcho } from "./lib/first_run";
import { copyText } from "./markdown";

// The page with no session open (issue 31, "the first run explains
// itself"): which model new sessions get — and, when it is the offline echo
// model, how to connect a real one — and what the Global interface is.
export function Landing({ host, globalId, globalTitle }: {
  host: HostInfo | null; globalId: string | null; globalTitle: string | null;
}) {
  const model = host?.default_model;
  const echo = model ? isOfflineEcho(model) : false;
  return (
    <section class="empty landing" aria-labelledby="landing-title">
      <h1 id="landing-title">dsh</h1>
      <p>Choose a session from the Sessions list, or start a new one with <strong>New session</strong>.</p>

      {model && (
        <section class={`landing-part${echo ? " offline" : ""}`} aria-labelledby="landing-model">
          <h2 id="landing-model">Model</h2>
          <p data-testid="landing-route">
            New sessions use <code>{model.provider}/{model.model}</code>
            {echo ? <>: the <strong>offline echo model</strong>. It repeats your message back and no real model answers.</> : "."}
          </p>
          {echo ? (
            <>
              <p>
                To connect a real model, start <code>dsh web</code> with one of these in its environment
                (it reads the environment when it starts), or add a provider on the <a href="#/settings">Settings</a> page.
              </p>
              <div class="recipes">
                {CONNECT_RECIPES.map((r) => <Recipe key={r.name} {...r} />)}
              </div>
              <p class="muted">
                A session keeps the model it was created with; the New session dialog can choose another for one session.
              </p>
            </>
          ) : (
            <p class="muted">
              The New session dialog can choose another model for one session; <a href="#/settings">Settings</a> lists the providers.
            </p>
          )}
        </section>
      )}

      {globalId && (
        <section class="landing-part" aria-labelledby="landing-global">
          <h2 id="landing-global">The Global interface</h2>
          <p>
            The <a href={`#/s/${encodeURIComponent(globalId)}`}>Global interface</a>
            {globalTitle ? <> (“{globalTitle}”)</> : null} is the one session that is always there, pinned at the top of the
            list: the stable session loops deliver to when they target <code>self</code>. Loops and reminders are managed in
            the <a href="#/automation">Automation</a> panel.
          </p>
        </section>
      )}
    </section>
  );
}

function Recipe({ name, note, lines }: { name: string; note: string; lines: string[] }) {
  const [copied, setCopied] = useState<"copied" | "failed" | null>(null);
  const text = lines.join("\n");
  return (
    <section class="recipe" aria-label={name}>
      <div class="recipe-title">
        <h3>{name}</h3>
        <button type="button" class="secondary copy" aria-label={`Copy the lines for ${name}`}
                onClick={async () => setCopied((await copyText(text)) ? "copied" : "failed")}>
          {copied === "copied" ? "Copied" : copied === "failed" ? "Copy failed" : "Copy"}
        </button>
      </div>
      <p class="muted">{note}</p>
      <pre><code>{text}</code></pre>
    </section>
  );
}
