#pragma once

#include <string_view>

namespace dsh {

// True when `s` is empty or only ASCII whitespace.
inline bool IsBlank(std::string_view s) { return s.find_first_not_of(" \t\r\n\f\v") == std::string_view::npos; }

// The length of valid UTF-8 `s` in UTF-16 code units: what a browser's
// String#length says of the same text (a character past U+FFFF counts 2).
inline size_t Utf16Length(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) {
    if ((c & 0xC0) != 0x80) ++n;  // a lead byte starts a character
    if (c >= 0xF0) ++n;           // a four-byte character is a surrogate pair
  }
  return n;
}

// The longest prefix of UTF-8 `s` of at most `max` bytes that does not end
// inside a character (it backs up over continuation bytes).
inline std::string_view Utf8Prefix(std::string_view s, size_t max) {
  if (s.size() <= max) return s;
  while (max > 0 && (static_cast<unsigned char>(s[max]) & 0xC0) == 0x80) --max;
  return s.substr(0, max);
}

}  // namespace dsh
