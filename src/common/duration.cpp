// Parses and formats the times of run listings and gc; UTC throughout (timegm, gmtime_r).
#include "common/duration.hpp"

#include <fmt/core.h>

#include <cmath>
#include <cstdio>
#include <ctime>

namespace faultline {

std::optional<std::chrono::seconds> parse_duration(std::string_view text) {
  if (text.size() < 2) return std::nullopt;
  long long count = 0;
  for (char c : text.substr(0, text.size() - 1)) {
    if (c < '0' || c > '9' || count > 1'000'000'000) return std::nullopt;
    count = count * 10 + (c - '0');
  }
  switch (text.back()) {
    case 's':
      return std::chrono::seconds(count);
    case 'm':
      return std::chrono::seconds(count * 60);
    case 'h':
      return std::chrono::seconds(count * 3600);
    case 'd':
      return std::chrono::seconds(count * 86400);
    case 'w':
      return std::chrono::seconds(count * 7 * 86400);
    default:
      return std::nullopt;
  }
}

std::optional<Clock::time_point> parse_utc(std::string_view text) {
  std::tm tm{};
  int millis = 0;
  int used = 0;
  const std::string copy(text);
  if (std::sscanf(copy.c_str(), "%4d-%2d-%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &used) !=
          3 ||
      used != 10)
    return std::nullopt;
  std::string_view rest = text.substr(10);
  if (!rest.empty()) {
    int more = 0;
    if (std::sscanf(copy.c_str() + 10, "T%2d:%2d:%2d%n", &tm.tm_hour, &tm.tm_min, &tm.tm_sec,
                    &more) != 3 ||
        more != 9)
      return std::nullopt;
    rest = rest.substr(9);
    if (!rest.empty() && rest.front() == '.') {
      int digits = 0;
      for (rest.remove_prefix(1); !rest.empty() && rest.front() >= '0' && rest.front() <= '9';
           rest.remove_prefix(1))
        if (digits++ < 3) millis = millis * 10 + (rest.front() - '0');
      for (; digits < 3; ++digits) millis *= 10;
    }
    if (rest != "Z") return std::nullopt;
  }
  // system_clock counts nanoseconds in 64 bits: it ends in 2262.
  if (tm.tm_year < 1970 || tm.tm_year > 2200 || tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 ||
      tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60)
    return std::nullopt;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return Clock::from_time_t(timegm(&tm)) + std::chrono::milliseconds(millis);
}

std::optional<Clock::time_point> point_in_time(std::string_view text, Clock::time_point now) {
  if (auto back = parse_duration(text)) return now - *back;
  return parse_utc(text);
}

std::string format_utc(Clock::time_point point) {
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(point.time_since_epoch()).count();
  const std::time_t seconds = static_cast<std::time_t>(millis / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, millis % 1000);
}

std::optional<double> seconds_between(std::string_view from, std::string_view to) {
  const auto a = parse_utc(from), b = parse_utc(to);
  if (!a || !b) return std::nullopt;
  return std::chrono::duration<double>(*b - *a).count();
}

std::optional<double> estimate_left(double spent_s, int64_t done, int64_t expected) {
  if (done <= 0 || expected <= done || spent_s < 0) return std::nullopt;
  return spent_s / static_cast<double>(done) * static_cast<double>(expected - done);
}

std::string format_seconds(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "-";
  if (seconds < 60) return fmt::format("{:.1f} s", seconds);
  const auto whole = static_cast<long long>(std::llround(seconds));
  if (whole < 3600) return fmt::format("{}m {:02}s", whole / 60, whole % 60);
  return fmt::format("{}h {:02}m", whole / 3600, whole % 3600 / 60);
}

}  // namespace faultline
