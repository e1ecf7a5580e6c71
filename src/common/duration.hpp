// Points in time and lengths of time as people type and read them: "3d", "12h", "2026-12-01",
// the stored ISO-8601 UTC stamps, and "1m 05s" for what a run took or has left.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace faultline {

using Clock = std::chrono::system_clock;

// "90s", "30m", "12h", "3d", "2w" (one number, one unit); nullopt for anything else.
std::optional<std::chrono::seconds> parse_duration(std::string_view text);

// "2026-12-01", "2026-12-01T08:30:00Z" or "2026-12-01T08:30:00.123Z" (the store's stamps), UTC.
std::optional<Clock::time_point> parse_utc(std::string_view text);

// --since / --older-than: a date (parse_utc) or a duration back from `now`.
std::optional<Clock::time_point> point_in_time(std::string_view text, Clock::time_point now);

// The store's stamp format, to the millisecond: "2026-12-04T16:54:23.677Z".
std::string format_utc(Clock::time_point point);

// Seconds from one stored stamp to another; nullopt when either does not parse.
std::optional<double> seconds_between(std::string_view from, std::string_view to);

// What is left of a job `done` of about `expected` units into it, at the pace so far; nullopt
// before the first unit or when the expected count is unknown (0) or already reached.
std::optional<double> estimate_left(double spent_s, int64_t done, int64_t expected);

// "0.4 s", "12.3 s", "4m 05s", "2h 07m".
std::string format_seconds(double seconds);

}  // namespace faultline
