// node --test — how the sidebar reads search results (issue 31).
import { test } from "node:test";
import assert from "node:assert/strict";
import { resultHref, searchable, snippetParts } from "../src/lib/search.js";

test("a snippet splits into text and marked words, entities decoded, and no markup survives as markup", () => {
  assert.deepEqual(snippetParts("render &lt;b&gt;<mark>bold</mark>&lt;/b&gt; &amp; <mark>more</mark>"), [
    { text: "render <b>", mark: false },
    { text: "bold", mark: true },
    { text: "</b> & ", mark: false },
    { text: "more", mark: true },
  ]);
  assert.deepEqual(snippetParts("no match here"), [{ text: "no match here", mark: false }]);
  assert.deepEqual(snippetParts(""), []);
});

test("a result opens the session at its message, or at the top for a title", () => {
  assert.equal(resultHref({ session_id: "ses_1", seq: 42 }), "#/s/ses_1/42");
  assert.equal(resultHref({ session_id: "ses_1", seq: 0 }), "#/s/ses_1");
});

test("one letter is not worth a search; a word of two, or two words, are", () => {
  assert.equal(searchable("a"), false);
  assert.equal(searchable("  "), false);
  assert.equal(searchable("ab"), true);
  assert.equal(searchable("a b"), true);
  assert.equal(searchable("пр"), true);
});
