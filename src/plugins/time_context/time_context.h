#pragma once

#include <optional>
#include <string>

#include "base/clock.h"
#include "base/status.h"
#include "session/session_header.h"

namespace dsh::host {
class Host;
}

namespace dsh::plugins::time_context {

// The time context a root session's model sees with every request (spec
// 001), so it can turn "tomorrow at nine" into an absolute target and knows
// when to ask which zone is meant:
//
//   Time context:
//   - Now: 2026-01-01T00:00:00.000Z (UTC)
//   - Session time zone: Asia/Shanghai; local time there 2026-01-01 08:00:00 (Thursday), UTC+08:00
//   - Request time zone: America/New_York; local time there 2025-12-31 19:00:00 (Wednesday), UTC-05:00
//   - Zones: differ: ask the person which zone they mean before assuming one for a local time
//
// The session zone line says "unavailable" for a session without a usable
// zone; the request zone line says "not given" when the message that started
// the turn carried no client_time_zone (then the zones line says "unknown:
// ask ..."); "same zone" only when both are known and equal.
// Delegated sessions (depth > 0) get "" (nothing is added). Pure function.
std::string TimeContextText(const session::SessionHeader& header, const std::optional<std::string>& client_time_zone,
                            WallTime now);

// The plugin over a host (after Host::Open, before Host::Start; opt-in with
// `plugins.time_context.enabled`): adds TimeContextText to every model
// request of the host's agents.
Status RegisterTimeContextPlugin(host::Host& host);

}  // namespace dsh::plugins::time_context
