#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "app/command.h"
#include "base/json.h"
#include "base/status.h"

namespace dsh::app {

// `dsh loop create|list|delete|runs` against the running host of a profile
// (docs/API.md): create, list and delete call the loop_create / loop_list /
// loop_delete tools through `POST /api/tools/{name}` with `--as` as the
// calling session; runs reads `GET /api/loops/{id}/runs`.
void AddLoopCommand(CLI::App& root, CommandContext& ctx);

// `dsh loop create`'s flags, as given.
struct LoopCreateFlags {
  std::string prompt;
  std::optional<int64_t> every;  // --every SECONDS
  std::optional<int64_t> after;  // --after SECONDS
  std::optional<std::string> cron;  // --cron EXPR
  std::optional<std::string> tz;    // --tz ZONE (only with --cron)
  std::optional<std::string> session;  // --session ID|self|new
  std::optional<std::string> preset;   // --preset ID
  std::optional<std::string> as;       // --as SESSION: the calling session
};

// The body of `POST /api/tools/loop_create` for `flags`:
// {"args": {prompt, schedule, session_id?, preset?}, "session_id": as?}.
// Errors: `invalid_arguments` unless exactly one of --every/--after/--cron
// is given, or for --tz without --cron. Values are otherwise passed on for
// the host to validate.
Result<Json> LoopCreateBody(const LoopCreateFlags& flags);

// A schedule in words: "every 60 s", "after 30 s", "cron 0 9 * * *
// (Asia/Shanghai)" ("cron EXPR" without a zone).
std::string DescribeSchedule(const Json& schedule);

// `dsh loop list`'s output for loop_list's result: one line per loop with
// aligned columns — id, state, schedule in words, target, next run (RFC 3339
// UTC, "-" when none), prompt preview (one line, at most 50 characters);
// "no active loops" when empty.
std::string FormatLoopList(const Json& views);

// `dsh loop runs`'s output for GET /api/loops/{id}/runs' `runs`: one line
// per run — occurrence (RFC 3339 UTC), result, target session, attempts,
// then skipped / error / note when present; "no runs" when empty.
std::string FormatLoopRuns(const Json& runs);

}  // namespace dsh::app
