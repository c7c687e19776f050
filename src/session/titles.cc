#include "session/titles.h"

namespace dsh::session {
namespace {

constexpr size_t kMaxTitleBytes = 60;

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

}  // namespace

std::string FallbackTitle(std::string_view prompt) {
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
  size_t cut = kMaxTitleBytes;
  // Never split a UTF-8 sequence: back up over continuation bytes.
  while (cut > 0 && (static_cast<unsigned char>(collapsed[cut]) & 0xC0) == 0x80) --cut;
  size_t space = collapsed.rfind(' ', cut);
  if (space != std::string::npos && space >= kMaxTitleBytes / 2) cut = space;
  std::string out = collapsed.substr(0, cut);
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out + "…";
}

}  // namespace dsh::session
