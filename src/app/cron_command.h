#pragma once

#include "app/command.h"

namespace dsh::app {

// `dsh cron next EXPR [--tz ZONE] [--from RFC3339] [--count N]` prints the
// next N occurrences (default 5) strictly after --from (default: now, from
// ctx.clock), one per line, as RFC 3339 in --tz (default: the host zone)
// with that zone's offset, e.g. "2026-03-08T03:00:00-04:00".
// `dsh cron describe EXPR` prints the rule in English.
// Bad input exits 2 with "error: CODE: message" on stderr (codes from
// time/errors.h, or invalid_arguments for --count). Local: no host needed.
void AddCronCommand(CLI::App& root, CommandContext& ctx);

}  // namespace dsh::app
