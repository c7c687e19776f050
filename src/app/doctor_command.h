#pragma once

#include <string>
#include <vector>

#include "app/command.h"

namespace dsh::app {

// `dsh doctor [--home DIR]` checks a profile without changing it and prints
// one aligned line per check: `ok`, `warn`, `FAIL` or `info`, the check's
// name, what it found and, when something is wrong, what to do.
//
// Checks: the config (dsh.yml, as LoadConfig reads it); the database (SQLite
// opened read-only — a profile without one is fine, nothing is created —
// `PRAGMA integrity_check`; PostgreSQL: `SELECT 1`) and its schema version
// (not newer than this binary's); the token file's mode; the default model
// route (its API key variable, and its base URL reachable within 5 s: an
// HTTP GET of `<base_url>/models` for http://, a TCP connect for https://);
// the tz database; whether a host runs on the profile and answers /healthz;
// each MCP server of `mcp.servers` (a stdio command found on PATH; a URL is
// shown, not contacted).
//
// Exit 0 when no check failed, else 1. Reads the process environment
// (DSH_DATABASE_URL, DSH_MODEL, the providers' key variables, PATH).
void AddDoctorCommand(CLI::App& root, CommandContext& ctx);

// One line of the report.
struct DoctorLine {
  enum class Level { kOk, kInfo, kWarn, kFail };
  Level level = Level::kOk;
  std::string check;   // "config", "database", ...
  std::string found;   // plain words
  std::string action;  // what to do; empty when nothing
};

// The lines as printed: level and check name in aligned columns.
std::string FormatDoctorReport(const std::vector<DoctorLine>& lines);

}  // namespace dsh::app
