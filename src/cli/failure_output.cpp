// How a run's failures and malformed metrics lines print: --json fields and the text lines under
// a run (train, smoke, import); a warning is marked and a kind's hint follows it.
#include <fmt/core.h>

#include "cli/run_commands.hpp"

namespace faultline::cli {

using nlohmann::json;

json failures_json(const std::vector<detectors::Failure>& failures) {
  json out = json::array();
  for (const auto& f : failures)
    out.push_back({{"kind", f.kind},
                   {"step", f.step < 0 ? json() : json(f.step)},
                   {"rank", f.rank < 0 ? json() : json(f.rank)},
                   {"detail", f.detail},
                   {"severity", to_string(detectors::severity(f.kind))}});
  return out;
}

void print_failures(const std::vector<detectors::Failure>& failures) {
  for (const auto& f : failures) {
    const bool warning = detectors::severity(f.kind) == detectors::Severity::Warning;
    fmt::print("  {}{} at step {} rank {}: {}\n", warning ? "warning: " : "", to_string(f.kind),
               f.step < 0 ? std::string("-") : std::to_string(f.step),
               f.rank < 0 ? std::string("-") : std::to_string(f.rank), f.detail);
    if (*detectors::hint(f.kind)) fmt::print("    hint: {}\n", detectors::hint(f.kind));
  }
}

void print_malformed(const std::vector<store::RankMalformed>& malformed) {
  for (const auto& m : malformed)
    fmt::print("  rank {}: {} malformed metrics line(s) (first: \"{}\": {})\n", m.rank, m.lines,
               m.first_line, m.first_error);
}

}  // namespace faultline::cli
