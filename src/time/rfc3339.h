#pragma once

#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/status.h"
#include "time/time_zone.h"

namespace dsh {

// Parses a strict RFC 3339 date-time: YYYY-MM-DDTHH:MM:SS[.fraction] followed
// by Z or ±HH:MM ('t' and 'z' may be lower case, RFC 3339 §5.6; "-00:00" is
// UTC). Years 0001-9999; the date must exist; hours 00-23, seconds 00-59
// (leap second 60 is rejected); fraction digits beyond the clock's precision
// are truncated. Anything else -- a missing offset, a space separator,
// "24:00", 2026-02-30, surrounding whitespace -- is `invalid_timestamp`
// with a message quoting the input and saying what is wrong. So is a valid
// timestamp whose instant is outside 0001-01-01 .. 9999-12-31 UTC.
// Thread-safe; never throws.
Result<WallTime> ParseRfc3339(std::string_view text);

// The canonical form: "2026-11-01T05:30:00.000Z" (UTC, milliseconds, floor).
std::string FormatRfc3339Utc(WallTime t);

// The local time in `zone` with its offset, as `dsh cron next` prints it:
// "2026-03-08T03:00:00-04:00". Milliseconds appear only when non-zero. An
// offset with seconds (local mean time before ~1900) is rounded to the
// minute and the local time shifted to match, so the text still names `t`.
std::string FormatRfc3339InZone(WallTime t, const TimeZone& zone);

}  // namespace dsh
