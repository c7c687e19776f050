#pragma once

#include "agent/tool_registry.h"
#include "base/status.h"
#include "host/command_registry.h"

namespace dsh::plugins::sessions {

// Registers `/sessions` (spec 003 sections 1 and 4, docs/SESSIONS.md):
//
//   /sessions status [SESSION_ID] [--recent N]
//   /sessions read SESSION_ID [--offset N] [--limit N]
//   /sessions create PROMPT [--preset ID] [--provider P --model M] [--effort LEVEL] [--cwd PATH]
//   /sessions create {JSON object with session_create's fields}
//   /sessions send SESSION_ID MESSAGE [--mode steer|followup]
//
// Each form calls the tool of the same service by name through `tools`
// (session_status, session_read, session_create, session_send) with the
// command's calling session as the tool's calling session, so the command
// and the tools cannot drift apart; the result's data is the tool's result,
// its text a rendering for people. The command validates only its own
// syntax (flags, positionals, integers) and leaves the fields to the tool,
// whose errors it passes through unchanged.
//
// `tools` is borrowed and must outlive `commands`; the tools need not be
// registered yet (an absent one is `unknown_tool` when used). Errors:
// `already_exists` when /sessions is taken.
Status RegisterSessionsCommand(host::CommandRegistry& commands, agent::ToolRegistry& tools);

}  // namespace dsh::plugins::sessions
