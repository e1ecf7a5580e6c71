// Distances of parameter fingerprints, as plot lines.
#include "report/rank_plot.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "harness/isolate/rank_agreement.hpp"

namespace faultline::report {

namespace {

// Rank -> step -> its params fingerprint.
std::map<int, std::map<int64_t, const FingerprintRecord*>> params_by_rank(
    const std::vector<FingerprintRecord>& records) {
  std::map<int, std::map<int64_t, const FingerprintRecord*>> out;
  for (const auto& record : records)
    if (record.is(Fingerprinted::Params)) out[record.rank][record.step] = &record;
  return out;
}

// The distance of `line` from `reference` at each step both have.
Series distances(const std::string& label, SeriesRole role,
                 const std::map<int64_t, const FingerprintRecord*>& line,
                 const std::map<int64_t, const FingerprintRecord*>& reference) {
  Series series{label, role, {}, {}};
  for (const auto& [step, record] : line) {
    auto other = reference.find(step);
    if (other == reference.end()) continue;
    const double distance = harness::sketch_distance(*record, *other->second);
    if (std::isnan(distance)) continue;
    series.steps.push_back(step);
    series.values.push_back(distance);
  }
  return series;
}

}  // namespace

std::optional<Plot> rank_params_plot(const std::vector<FingerprintRecord>& run,
                                     const std::vector<FingerprintRecord>& one_rank_replay,
                                     const std::string& replay_label) {
  Plot plot{"params_distance", "Parameters: relative distance", "", {}};
  const auto ranks = params_by_rank(run);
  auto zero = ranks.find(0);
  if (zero == ranks.end()) return std::nullopt;
  for (const auto& [rank, steps] : ranks)
    if (rank != 0)
      plot.series.push_back(distances(fmt::format("rank {} vs rank 0", rank), SeriesRole::Subject,
                                      steps, zero->second));
  if (!replay_label.empty()) {
    const auto replay = params_by_rank(one_rank_replay);
    if (auto alone = replay.find(0); alone != replay.end())
      plot.series.push_back(
          distances("rank 0 vs " + replay_label, SeriesRole::Replay, zero->second, alone->second));
  }
  plot.series.erase(std::remove_if(plot.series.begin(), plot.series.end(),
                                   [](const Series& s) { return s.steps.empty(); }),
                    plot.series.end());
  if (plot.series.empty()) return std::nullopt;
  return plot;
}

}  // namespace faultline::report
