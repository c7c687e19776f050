// The code highlighter, loaded on demand (markdown.ts imports this module
// with a dynamic import(), so Vite puts it in a chunk of its own that the
// first render never waits for). highlight.js: maintained, no dependencies,
// and its core takes only the grammars registered here (about 25 languages
// people paste into a chat), not all 190.
import hljs from "highlight.js/lib/core";
import bash from "highlight.js/lib/languages/bash";
import c from "highlight.js/lib/languages/c";
import cpp from "highlight.js/lib/languages/cpp";
import csharp from "highlight.js/lib/languages/csharp";
import css from "highlight.js/lib/languages/css";
import diff from "highlight.js/lib/languages/diff";
import dockerfile from "highlight.js/lib/languages/dockerfile";
import go from "highlight.js/lib/languages/go";
import ini from "highlight.js/lib/languages/ini";
import java from "highlight.js/lib/languages/java";
import javascript from "highlight.js/lib/languages/javascript";
import json from "highlight.js/lib/languages/json";
import kotlin from "highlight.js/lib/languages/kotlin";
import makefile from "highlight.js/lib/languages/makefile";
import markdown from "highlight.js/lib/languages/markdown";
import php from "highlight.js/lib/languages/php";
import plaintext from "highlight.js/lib/languages/plaintext";
import python from "highlight.js/lib/languages/python";
import ruby from "highlight.js/lib/languages/ruby";
import rust from "highlight.js/lib/languages/rust";
import shell from "highlight.js/lib/languages/shell";
import sql from "highlight.js/lib/languages/sql";
import swift from "highlight.js/lib/languages/swift";
import typescript from "highlight.js/lib/languages/typescript";
import xml from "highlight.js/lib/languages/xml";
import yaml from "highlight.js/lib/languages/yaml";

const grammars = {
  bash, c, cpp, csharp, css, diff, dockerfile, go, ini, java, javascript, json, kotlin, makefile, markdown,
  php, plaintext, python, ruby, rust, shell, sql, swift, typescript, xml, yaml,
};
for (const [name, grammar] of Object.entries(grammars)) hljs.registerLanguage(name, grammar);

/**
 * The code as highlighted HTML (escaped, with `hljs-*` spans), or null when
 * the language is not one registered here (the block then stays plain).
 * Aliases count: `py`, `sh`, `ts`, `html`, `toml`, `yml`, ….
 */
export function highlight(code: string, lang: string): string | null {
  if (!hljs.getLanguage(lang)) return null;
  return hljs.highlight(code, { language: lang, ignoreIllegals: true }).value;
}
