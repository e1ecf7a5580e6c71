// loss_regression against a reference band: smoothing, the band per step, the sustained test.
#include "probes/detectors/reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <map>
#include <stdexcept>
#include <string>

#include "probes/detectors/stats.hpp"

namespace faultline::detectors {

namespace {

// Step -> the trailing mean of the last `window` steps' losses (each step's finite losses
// averaged over ranks; a step without any is skipped, not zero).
std::map<int64_t, double> smoothed(const std::vector<StepRecord>& records, int64_t window) {
  std::map<int64_t, std::pair<double, int>> per_step;
  for (const auto& r : records) {
    if (!std::isfinite(r.loss)) continue;
    auto& [sum, count] = per_step[r.step];
    sum += r.loss;
    ++count;
  }
  std::map<int64_t, double> out;
  std::deque<double> recent;
  double total = 0;
  for (const auto& [step, entry] : per_step) {
    const double loss = entry.first / entry.second;
    recent.push_back(loss);
    total += loss;
    if (static_cast<int64_t>(recent.size()) > window) {
      total -= recent.front();
      recent.pop_front();
    }
    out[step] = total / static_cast<double>(recent.size());
  }
  return out;
}

struct Band {
  double low = 0, high = 0, tolerance = 0, mean = 0;
  int runs = 0;
};

// Which rule set the band's tolerance, as the failure's detail says it.
std::string tolerance_rule(const Band& band, const Thresholds::LossRegression& t) {
  if (band.runs == 1) return " (the single-run margin " + num(100 * t.single_margin) + "%)";
  const double spread = t.spread_factor * (band.high - band.low);
  if (spread >= t.min_margin * std::fabs(band.mean))
    return " (" + num(t.spread_factor) + "x the seed spread)";
  return " (the floor of " + num(100 * t.min_margin) + "% of the band's mean " + num(band.mean) +
         "; " + num(t.spread_factor) + "x the seed spread is " + num(spread) + ")";
}

}  // namespace

std::optional<Failure> compare_to_reference(const std::vector<StepRecord>& run,
                                            const std::vector<std::vector<StepRecord>>& reference,
                                            const Thresholds::LossRegression& t) {
  if (reference.empty()) throw std::invalid_argument("loss_regression: the reference has no runs");
  std::vector<std::map<int64_t, double>> curves;
  for (size_t i = 0; i < reference.size(); ++i) {
    curves.push_back(smoothed(reference[i], t.window));
    if (curves.back().empty())
      throw std::invalid_argument("loss_regression: reference run " + std::to_string(i + 1) +
                                  " of " + std::to_string(reference.size()) +
                                  " has no finite loss");
  }
  const auto mine = smoothed(run, t.window);
  if (mine.empty()) return std::nullopt;  // nothing to judge (nonfinite judges a NaN run)
  const int64_t first = mine.begin()->first;
  const int64_t last = mine.rbegin()->first;
  const auto from =
      first + static_cast<int64_t>(std::ceil(t.skip_fraction * static_cast<double>(last - first)));

  int64_t streak = 0, streak_start = -1;
  double start_loss = 0;
  Band start_band;
  for (const auto& [step, loss] : mine) {
    if (step < from) continue;
    Band band;
    band.low = INFINITY;
    band.high = -INFINITY;
    double sum = 0;
    for (const auto& curve : curves) {
      auto it = curve.find(step);
      if (it == curve.end()) continue;
      band.low = std::min(band.low, it->second);
      band.high = std::max(band.high, it->second);
      sum += it->second;
      ++band.runs;
    }
    if (band.runs == 0) {  // a step the reference never reached: not compared, breaks the run
      streak = 0;
      continue;
    }
    const double mean_loss = sum / band.runs;
    band.mean = mean_loss;
    band.tolerance = band.runs == 1 ? t.single_margin * std::fabs(mean_loss)
                                    : std::max(t.spread_factor * (band.high - band.low),
                                               t.min_margin * std::fabs(mean_loss));
    if (!(loss > band.high + band.tolerance)) {
      streak = 0;
      continue;
    }
    if (streak++ == 0) {
      streak_start = step;
      start_loss = loss;
      start_band = band;
    }
    if (streak < t.sustained_steps) continue;
    const double excess = start_loss - start_band.high;
    return Failure{
        FailureKind::LossRegression, streak_start, -1,
        "smoothed loss " + num(start_loss) + " (mean of the last " + std::to_string(t.window) +
            " steps) at step " + std::to_string(streak_start) + " is " + num(excess) + " (" +
            num(100 * excess / std::fabs(start_band.high)) + "%) above the reference band " +
            num(start_band.low) + ".." + num(start_band.high) + " of " +
            std::to_string(start_band.runs) + " run(s); tolerance " + num(start_band.tolerance) +
            tolerance_rule(start_band, t) + "; held for " + std::to_string(t.sustained_steps) +
            " consecutive steps",
        step};
  }
  return std::nullopt;
}

}  // namespace faultline::detectors
