#include "host/command_line.h"

#include <optional>

namespace dsh::host {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

bool IsSafe(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("_@%+=:,./-").find(c) != std::string_view::npos;
}

}  // namespace

Result<std::vector<CommandToken>> SplitCommandLine(std::string_view text) {
  std::vector<CommandToken> tokens;
  std::optional<CommandToken> current;  // the argument being read, if any
  auto start = [&](size_t at) -> CommandToken& {
    if (!current) current = CommandToken{"", at, false};
    return *current;
  };
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    if (IsSpace(c)) {
      if (current) tokens.push_back(std::move(*current));
      current.reset();
      ++i;
    } else if (c == '\'') {
      size_t close = text.find('\'', i + 1);
      if (close == std::string_view::npos) {
        return InvalidArguments("unterminated single quote at column " + std::to_string(i + 1));
      }
      CommandToken& t = start(i);
      t.quoted = true;
      t.value.append(text.substr(i + 1, close - i - 1));
      i = close + 1;
    } else if (c == '"') {
      CommandToken& t = start(i);
      t.quoted = true;
      size_t j = i + 1;
      for (;; ++j) {
        if (j >= text.size()) {
          return InvalidArguments("unterminated double quote at column " + std::to_string(i + 1));
        }
        if (text[j] == '"') break;
        if (text[j] == '\\' && j + 1 < text.size() && (text[j + 1] == '"' || text[j + 1] == '\\')) ++j;
        t.value.push_back(text[j]);
      }
      i = j + 1;
    } else if (c == '\\') {
      if (i + 1 >= text.size()) return InvalidArguments("a lone backslash ends the command line");
      if (text[i + 1] == '\n') {  // line continuation
        i += 2;
        continue;
      }
      CommandToken& t = start(i);
      t.quoted = true;
      t.value.push_back(text[i + 1]);
      i += 2;
    } else {
      start(i).value.push_back(c);
      ++i;
    }
  }
  if (current) tokens.push_back(std::move(*current));
  return tokens;
}

std::string QuoteCommandArgument(std::string_view arg) {
  bool safe = !arg.empty();
  for (char c : arg) safe = safe && IsSafe(c);
  if (safe) return std::string(arg);
  std::string out = "'";
  for (char c : arg) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out.push_back(c);
    }
  }
  out += "'";
  return out;
}

}  // namespace dsh::host
