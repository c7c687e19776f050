#include "session/titles.h"

#include <utility>

#include "base/strings.h"

namespace dsh::session {
namespace {

constexpr size_t kMaxTitleBytes = 60;

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

bool StartsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

}  // namespace

std::string LoopPrompt(std::string_view text) {
  size_t open = text.find("<prompt>");
  if (open == std::string_view::npos) return "Loop run";
  std::string_view body = text.substr(open + 8);
  if (size_t close = body.find("</prompt>"); close != std::string_view::npos) body = body.substr(0, close);
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    static constexpr std::pair<std::string_view, char> kEntities[] = {
        {"&lt;", '<'}, {"&gt;", '>'}, {"&amp;", '&'}, {"&quot;", '"'}, {"&apos;", '\''}};
    bool decoded = false;
    for (const auto& [entity, c] : kEntities) {
      if (body.substr(i, entity.size()) == entity) {
        out.push_back(c);
        i += entity.size() - 1;
        decoded = true;
        break;
      }
    }
    if (!decoded) out.push_back(body[i]);
  }
  return out;
}

std::optional<std::string> Titles::Effective() const {
  if (user) return user;
  if (generated) return generated;
  if (fallback && StartsWith(*fallback, "<loop>")) return FallbackTitle(*fallback);
  return fallback;
}

std::optional<std::string_view> Titles::Source() const {
  if (user) return "user";
  if (generated) return "generated";
  if (fallback) return "fallback";
  return std::nullopt;
}

std::string FallbackTitle(std::string_view prompt) {
  size_t start = prompt.find_first_not_of(" \t\r\n");
  if (start != std::string_view::npos && StartsWith(prompt.substr(start), "<loop>")) {
    return FallbackTitle(LoopPrompt(prompt));
  }
  std::string collapsed;
  bool pending_space = false;
  for (char c : prompt) {
    if (IsSpace(c)) {
      pending_space = !collapsed.empty();
      continue;
    }
    if (pending_space) collapsed.push_back(' ');
    pending_space = false;
    collapsed.push_back(c);
  }
  if (collapsed.size() <= kMaxTitleBytes) return collapsed;
  size_t cut = Utf8Prefix(collapsed, kMaxTitleBytes).size();  // never a split UTF-8 sequence
  size_t space = collapsed.rfind(' ', cut);
  if (space != std::string::npos && space >= kMaxTitleBytes / 2) cut = space;
  std::string out = collapsed.substr(0, cut);
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out + "…";
}

}  // namespace dsh::session
