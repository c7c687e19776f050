#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace dsh::session {

// The latest title of each kind a session's log holds. The durable title is
// the first present of: user rename, generated, first-prompt fallback.
struct Titles {
  std::optional<std::string> user;
  std::optional<std::string> generated;
  std::optional<std::string> fallback;

  // A fallback stored from a `<loop>` delivery's markup (before fallbacks
  // were built from the loop's prompt) is shown as FallbackTitle makes it.
  std::optional<std::string> Effective() const;
  // Where Effective() comes from: "user", "generated" or "fallback";
  // nullopt exactly when Effective() is.
  std::optional<std::string_view> Source() const;
};

// The deterministic fallback title of a first prompt: whitespace collapsed,
// cut at a word boundary to at most 60 characters (UTF-8 safe) with "…" when
// cut. Empty when the prompt has no visible text. A loop delivery (spec 000
// section 6, `<loop><loop_id>…</loop_id><prompt>…</prompt></loop>`) gives
// the title of its prompt, XML entities decoded; one whose prompt was cut
// off (a title stored from the markup) is "Loop run".
std::string FallbackTitle(std::string_view first_prompt);

// The prompt of a loop delivery's `<loop>` markup, XML entities decoded;
// "Loop run" when the text holds no prompt.
std::string LoopPrompt(std::string_view text);

}  // namespace dsh::session
