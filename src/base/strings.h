#pragma once

#include <string_view>

namespace dsh {

// True when `s` is empty or only ASCII whitespace.
inline bool IsBlank(std::string_view s) { return s.find_first_not_of(" \t\r\n\f\v") == std::string_view::npos; }

}  // namespace dsh
