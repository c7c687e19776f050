// node --test web/test/ — Markdown as GitHub renders it, and safe.
import { test } from "node:test";
import assert from "node:assert/strict";
import { renderMarkdown, setHighlighter, wantsHighlighter } from "../src/lib/markdown.js";

test("bare URLs are links to a new tab without opener or referrer; file names are not links", () => {
  const html = renderMarkdown("see https://example.com/a_b?x=1 and main.rs or setup.sh");
  assert.match(html, /<a href="https:\/\/example\.com\/a_b\?x=1" target="_blank" rel="noopener noreferrer">https:\/\/example\.com\/a_b\?x=1<\/a>/);
  assert.equal((html.match(/<a /g) ?? []).length, 1, html);
  assert.match(renderMarkdown("[docs](https://example.com)"), /<a href="https:\/\/example\.com" target="_blank" rel="noopener noreferrer">docs<\/a>/);
});

test("tables, blockquotes, strikethrough and line breaks", () => {
  const table = renderMarkdown("| a | b |\n|---|:-:|\n| 1 | 2 |");
  assert.match(table, /<table>[\s\S]*<th>a<\/th>[\s\S]*<td style="text-align:center">2<\/td>/);
  assert.match(renderMarkdown("> quoted"), /<blockquote>\s*<p>quoted<\/p>\s*<\/blockquote>/);
  assert.match(renderMarkdown("~~gone~~"), /<s>gone<\/s>/);
  assert.match(renderMarkdown("one\ntwo"), /one<br>\s*two/);
});

test("task lists are read-only checkboxes labelled by their text, with ids unique across messages", () => {
  const first = renderMarkdown("- [ ] write tests\n- [x] ship it");
  assert.match(first, /<input type="checkbox" class="task-list-item-checkbox" id="task-item-(\d+)" disabled="disabled"><label class="task-list-item-label" for="task-item-\1"> write tests<\/label>/);
  assert.match(first, /id="task-item-\d+" checked="checked" disabled="disabled"><label[^>]*> ship it</);
  const ids = (html) => [...html.matchAll(/id="(task-item-\d+)"/g)].map((m) => m[1]);
  const second = renderMarkdown("- [ ] again");
  assert.equal(new Set([...ids(first), ...ids(second)]).size, 3);
});

test("hostile Markdown: raw HTML is text, script links are not links", () => {
  const hostile = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    '<a href="javascript:alert(1)">x</a>',
    "[x](javascript:alert(1))",
    "[x](JaVaScRiPt:alert(1))",
    "[x](vbscript:msgbox(1))",
    "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "<javascript:alert(1)>",
    "![x](javascript:alert(1))",
    '[x](https://example.com "a" onclick="alert(1)")',
    "```js\n</code></pre><script>alert(1)</script>\n```",
    "```\"><img src=x onerror=alert(1)>\nx\n```",
  ];
  for (const source of hostile) {
    const html = renderMarkdown(source);
    assert.doesNotMatch(html, /<script|<img[^>]*onerror|href="(javascript|vbscript|data):|src="javascript:|<a[^>]* onclick/i, `${source} -> ${html}`);
  }
  assert.match(renderMarkdown("<script>alert(1)</script>"), /&lt;script&gt;alert\(1\)&lt;\/script&gt;/, "shown as text");
  // An image as a data: URL of an image type is allowed, as markdown-it does.
  assert.match(renderMarkdown("![dot](data:image/png;base64,AAAA)"), /<img src="data:image\/png;base64,AAAA" alt="dot">/);
});

test("a code block has its language as a label, a Copy button, and is highlighted once a highlighter is set", () => {
  const source = "```python\nprint('<b>')\n```";
  assert.equal(wantsHighlighter(source), true);
  assert.equal(wantsHighlighter("```\nplain\n```"), false, "no language, nothing to highlight");
  assert.equal(wantsHighlighter("just `inline` code"), false);
  const plain = renderMarkdown(source);
  assert.match(plain, /<span class="code-lang">python<\/span>/);
  assert.match(plain, /<button type="button" class="copy-code" aria-label="Copy code">Copy<\/button>/);
  assert.match(plain, /<pre><code>print\('&lt;b&gt;'\)\n<\/code><\/pre>/, "plain and escaped before the highlighter arrives");
  setHighlighter((code, lang) => (lang === "python" ? `<span class="hljs-built_in">${code.slice(0, 5)}</span>` : null));
  try {
    assert.match(renderMarkdown(source), /<code class="hljs language-python"><span class="hljs-built_in">print<\/span><\/code>/);
    assert.match(renderMarkdown("```klingon\nqapla\n```"), /<span class="code-lang">klingon<\/span>[\s\S]*<pre><code>qapla/, "an unknown language stays plain, with its label");
    assert.match(renderMarkdown("    indented\n"), /<span class="code-lang">text<\/span>[\s\S]*<pre><code>indented/);
  } finally {
    setHighlighter(null);
  }
});
