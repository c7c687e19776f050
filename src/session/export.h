#pragma once

#include <optional>
#include <string>
#include <vector>

#include "session/event.h"
#include "session/session_header.h"

namespace dsh::session {

// A session's conversation as a person reads it, in Markdown (the export of
// docs/API.md, GET /api/sessions/{id}/export?format=markdown): a heading with
// the title and what the session is, then one section per message in log
// order with its time in the session's zone. Loop and reminder deliveries
// show their prompt (never the frame the model reads); reasoning and tool
// calls are collapsed (<details>); a partial answer and a turn that ended
// in an error or was stopped say so. Bookkeeping events are left out.
// Pure; thread-compatible.
std::string ExportMarkdown(const SessionHeader& header, const std::optional<std::string>& title,
                           const std::vector<Event>& events);

}  // namespace dsh::session
