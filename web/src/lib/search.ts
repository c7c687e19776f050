// Search results as the sidebar shows them (GET /api/search, docs/API.md):
// the host's snippet is escaped HTML with the matched words in <mark>; the
// browser splits it into text runs instead of handing it to innerHTML, so
// no markup of a message can ever reach the page.

export interface SearchResult {
  session_id: string;
  title: string | null;
  seq: number;  // 0: the title matched
  at: string;   // RFC 3339
  snippet: string;
  archived?: boolean;
}

export interface SnippetPart {
  text: string;
  mark: boolean;
}

const ENTITIES: Record<string, string> = { "&amp;": "&", "&lt;": "<", "&gt;": ">", "&quot;": '"' };
const decode = (s: string) => s.replace(/&(?:amp|lt|gt|quot);/g, (e) => ENTITIES[e]);

/** The runs of a snippet: plain text, and the matched words (`mark`). */
export function snippetParts(snippet: string): SnippetPart[] {
  const parts: SnippetPart[] = [];
  const re = /<mark>([\s\S]*?)<\/mark>/g;
  let at = 0;
  for (let m = re.exec(snippet); m !== null; m = re.exec(snippet)) {
    if (m.index > at) parts.push({ text: decode(snippet.slice(at, m.index)), mark: false });
    parts.push({ text: decode(m[1]), mark: true });
    at = m.index + m[0].length;
  }
  if (at < snippet.length) parts.push({ text: decode(snippet.slice(at)), mark: false });
  return parts;
}

/** Where a result opens: the session at the matching message, or its top for a title. */
export const resultHref = (r: Pick<SearchResult, "session_id" | "seq">) =>
  `#/s/${encodeURIComponent(r.session_id)}${r.seq > 0 ? `/${r.seq}` : ""}`;

/** Whether a typed text is worth a search: a word of two characters, or two words. */
export function searchable(text: string): boolean {
  const words = text.split(/[^\p{L}\p{N}]+/u).filter(Boolean);
  return words.some((w) => w.length >= 2) || words.length >= 2;
}
