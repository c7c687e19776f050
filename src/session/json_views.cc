#include "session/event.h"
#include "session/session_header.h"

#include <filesystem>

namespace dsh::session {

Json HeaderToJson(const SessionHeader& h) {
  Json j = {{"id", h.id},
            {"created_at", h.created_at},
            {"updated_at", h.updated_at},
            {"route", {{"provider", h.route.provider}, {"model", h.route.model}}},
            {"time_zone", h.time_zone},
            {"seed_length", h.seed_length},
            {"delegation_depth", h.delegation_depth},
            {"origin", h.origin},
            {"last_seq", h.last_seq},
            {"archived", h.archived}};
  if (h.route.reasoning_effort) j["route"]["reasoning_effort"] = *h.route.reasoning_effort;
  if (h.cwd) j["cwd"] = *h.cwd;
  if (h.preset) j["preset"] = *h.preset;
  if (h.parent_id) j["parent_id"] = *h.parent_id;
  return j;
}

Json EventToJson(const Event& e) { return {{"seq", e.seq}, {"type", e.type}, {"at", e.at}, {"data", e.data}}; }

Result<std::string> CanonicalCwd(const std::string& cwd) {
  std::filesystem::path path(cwd);
  if (!path.is_absolute()) return InvalidArguments("`cwd` must be an absolute path, got \"" + cwd + "\"");
  std::error_code ec;
  std::filesystem::path canonical = std::filesystem::canonical(path, ec);
  if (ec) return InvalidArguments("`cwd` " + cwd + " does not exist or cannot be resolved (" + ec.message() + ")");
  if (!std::filesystem::is_directory(canonical, ec)) return InvalidArguments("`cwd` " + cwd + " is not a directory");
  return canonical.string();
}

}  // namespace dsh::session
