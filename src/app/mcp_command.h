#pragma once

#include <chrono>
#include <cstddef>
#include <iosfwd>
#include <optional>
#include <string>

#include "app/command.h"

namespace dsh::app {

// `dsh mcp [--home DIR] [--session ID]`: dsh as an MCP server over stdio
// (docs/MCP.md), for clients that start their servers as child processes.
void AddMcpCommand(CLI::App& root, CommandContext& ctx);

struct McpProxyOptions {
  std::optional<std::string> home;        // the profile (default $DSH_HOME, else ~/.dsh)
  std::optional<std::string> session_id;  // the calling session (`?session_id=`); root calls when absent
  size_t max_in_flight = 32;              // requests forwarded at once; more are answered `unavailable`
  // A request the host has not answered by then gets `unavailable` (the
  // host's tools answer in well under a second; a stopped host never does).
  std::chrono::seconds request_timeout = std::chrono::minutes(5);
};

// The stdio transport: reads newline-delimited JSON-RPC messages from `in`
// and forwards each to `POST /mcp` of the profile's running host (looked up
// for every message, as `dsh tool` does, so a restarted host is found
// again), writing each answer as one line to `out`. Requests run
// concurrently, each on its own thread (a slow tools/call does not hold up a
// ping); lines are written whole, under a lock. A request the host cannot
// answer (none running, unreachable, an HTTP error) gets a JSON-RPC error
// -32000 whose message starts with the dsh error code ("unavailable: no dsh
// host is running …") and whose data is {code, message}; a line that is not
// one well-formed message gets -32700 / -32600 without contacting the host;
// notifications and responses get nothing. Diagnostics go to `err` only.
// At EOF waits for the requests in flight and returns kExitOk.
int RunMcpProxy(const McpProxyOptions& options, std::istream& in, std::ostream& out, std::ostream& err);

}  // namespace dsh::app
