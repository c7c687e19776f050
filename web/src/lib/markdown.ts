// Model text as GitHub renders Markdown (docs/UI.md, "A conversation"):
// CommonMark with tables, strikethrough, bare URLs as links, task lists as
// read-only checkboxes, line breaks kept; code blocks with their language,
// a Copy button and, once a highlighter is set, colours. Pure: tested with
// node --test (web/test/).
//
// Safe by construction: raw HTML is text (`html: false`), and markdown-it's
// validateLink refuses javascript:, vbscript:, file: and non-image data:
// URLs, so such a link stays text. Links open in a new tab without giving it
// this page (`rel="noopener noreferrer"`).
import { tasklist } from "@mdit/plugin-tasklist";
import MarkdownIt from "markdown-it";

/** Highlighted HTML of `code` in `lang` (escaped), or null for a language it does not know. */
export type Highlight = (code: string, lang: string) => string | null;

let highlighter: Highlight | null = null;

/** Sets the highlighter code blocks are rendered with from now on (the web page loads it lazily). */
export function setHighlighter(h: Highlight | null): void {
  highlighter = h;
}

export function hasHighlighter(): boolean {
  return highlighter !== null;
}

const md = new MarkdownIt({ html: false, linkify: true, breaks: true, typographer: false });
md.use(tasklist, { disabled: true, label: true });
// Bare URLs become links when they have a scheme (https://…); a file name
// such as "main.rs" or "setup.sh" is not taken for a domain.
md.linkify.set({ fuzzyLink: false });

const escapeHtml = md.utils.escapeHtml;

// Links: a new tab, no opener, no referrer.
md.renderer.rules.link_open = (tokens, idx, options, _env, self) => {
  const token = tokens[idx];
  token.attrSet("target", "_blank");
  token.attrSet("rel", "noopener noreferrer");
  return self.renderToken(tokens, idx, options);
};

function codeBlock(code: string, lang: string): string {
  const highlighted = lang && highlighter ? highlighter(code, lang) : null;
  const label = lang ? escapeHtml(lang) : "text";
  const langAttr = lang ? ` data-lang="${escapeHtml(lang)}"` : "";
  const codeClass = highlighted !== null ? ` class="hljs language-${escapeHtml(lang)}"` : "";
  return (
    `<div class="code-block"${langAttr}>` +
    `<div class="code-head"><span class="code-lang">${label}</span>` +
    `<button type="button" class="copy-code" aria-label="Copy code">Copy</button></div>` +
    `<pre><code${codeClass}>${highlighted ?? escapeHtml(code)}</code></pre></div>\n`
  );
}

md.renderer.rules.fence = (tokens, idx) => {
  const token = tokens[idx];
  const info = token.info ? md.utils.unescapeAll(token.info).trim() : "";
  const lang = info.split(/\s+/)[0] ?? "";
  return codeBlock(token.content, lang);
};
md.renderer.rules.code_block = (tokens, idx) => codeBlock(tokens[idx].content, "");

// Task list checkboxes get ids from a counter in `env`; one counter for the
// page keeps them unique across messages.
let nextTaskId = 0;

/** The HTML of Markdown `source`; safe to set as innerHTML (see above). */
export function renderMarkdown(source: string): string {
  const env = { tasklistId: nextTaskId };
  const html = md.render(source, env);
  nextTaskId = env.tasklistId;
  return html;
}

/** True when `source` has a fenced code block of a named language (so the highlighter is worth loading). */
export function wantsHighlighter(source: string): boolean {
  return /^ {0,3}(`{3,}|~{3,})[ \t]*[^\s`]/m.test(source);
}
