#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/json.h"
#include "base/status.h"

namespace dsh::session {

// Which model a session talks to. `reasoning_effort` is present only when it
// was chosen explicitly (never an adapter default).
struct ModelRoute {
  std::string provider;
  std::string model;
  std::optional<std::string> reasoning_effort;

  friend bool operator==(const ModelRoute&, const ModelRoute&) = default;
};

// The durable header of a session. Instants are Unix milliseconds.
struct SessionHeader {
  std::string id;
  int64_t created_at = 0;
  int64_t updated_at = 0;  // `at` of the last durable event; created_at before any
  std::optional<std::string> cwd;
  std::optional<std::string> preset;
  ModelRoute route;
  std::string time_zone;   // IANA name captured at creation; never changes
  std::optional<std::string> parent_id;
  int64_t seed_length = 0;  // events 1..seed_length are the parent's prefix
  int64_t delegation_depth = 0;
  std::string origin;      // who created it: "user", "session_create", "loop", ...
  int64_t last_seq = 0;    // seq of the newest event; 0 when empty
  bool archived = false;   // the latest session/archived event's `archived` (docs/API.md, PATCH)

  friend bool operator==(const SessionHeader&, const SessionHeader&) = default;
};

// What a caller chooses when creating a session; the store fills the rest.
struct NewSession {
  std::optional<std::string> id;  // generated ("ses_...") when absent
  std::optional<std::string> cwd;
  std::optional<std::string> preset;
  ModelRoute route;
  std::string time_zone = "UTC";  // IANA name; stored canonical, invalid_time_zone otherwise
  int64_t delegation_depth = 0;
  std::string origin = "user";
};

Json HeaderToJson(const SessionHeader& h);

// The canonical form of a `cwd` a caller gives a new session: absolute,
// existing, a directory, symlinks and `.`/`..` resolved. Errors:
// `invalid_arguments` naming `cwd`.
Result<std::string> CanonicalCwd(const std::string& cwd);

}  // namespace dsh::session
