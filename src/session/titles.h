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

  std::optional<std::string> Effective() const {
    if (user) return user;
    if (generated) return generated;
    return fallback;
  }
};

// The deterministic fallback title of a first prompt: whitespace collapsed,
// cut at a word boundary to at most 60 characters (UTF-8 safe) with "…" when
// cut. Empty when the prompt has no visible text.
std::string FallbackTitle(std::string_view first_prompt);

}  // namespace dsh::session
