#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace dsh::host {

// One argument of a slash command line.
struct CommandToken {
  std::string value;    // after quote removal and escapes
  size_t offset = 0;    // where the token starts in the text that was split
  bool quoted = false;  // some part of it was quoted or escaped
};

// Splits a command line into arguments the way a POSIX shell does, without
// expansions:
//   - unquoted whitespace (space, tab, newline) separates arguments; any run of
//     it, leading or trailing, counts as one separator or none;
//   - '...' is literal up to the next single quote;
//   - "..." is literal except that \" and \\ stand for " and \ (any other
//     backslash stays as written);
//   - outside quotes a backslash makes the next character literal
//     (backslash-newline is a line continuation and disappears);
//   - '' and "" give an empty argument.
// Errors: `invalid_arguments` for an unterminated quote or a trailing lone
// backslash. Pure.
Result<std::vector<CommandToken>> SplitCommandLine(std::string_view text);

// `arg` written so that SplitCommandLine gives it back unchanged: as is when
// it is non-empty and only [A-Za-z0-9_@%+=:,./-], otherwise in single quotes
// (a single quote inside becomes '\''). Pure.
std::string QuoteCommandArgument(std::string_view arg);

}  // namespace dsh::host
