// loss_regression: one run's loss curve judged against a reference of one or more healthy runs
// (seeds of one config). Pure: the caller reads the records (the store, a smoke rung).
#pragma once

#include <optional>
#include <vector>

#include "common/metrics_record.hpp"
#include "probes/detectors/failure.hpp"
#include "probes/detectors/thresholds.hpp"

namespace faultline::detectors {

// The run fails when, at `sustained_steps` consecutive steps it shares with the reference, its
// smoothed loss (the trailing mean of `window` steps, each step's loss averaged over ranks) is
// above the reference band's top by more than the tolerance. Band: min..max of the reference
// runs' smoothed losses at that step. Tolerance: spread_factor x (max - min), at least
// min_margin x the band's mean; one reference run: single_margin x its smoothed loss. Judged
// from skip_fraction of the run's last step on (the first steps of every seed look alike).
// Step: the first step of the sustained stretch. Throws std::invalid_argument for an empty
// reference or a reference run without finite losses.
std::optional<Failure> compare_to_reference(const std::vector<StepRecord>& run,
                                            const std::vector<std::vector<StepRecord>>& reference,
                                            const Thresholds::LossRegression& thresholds);

}  // namespace faultline::detectors
