// Two-run detectors: a run slower than its baseline, and two runs of one spec that differ.
#pragma once

#include <optional>
#include <vector>

#include "common/metrics_record.hpp"
#include "probes/detectors/failure.hpp"

namespace faultline::detectors {

// slow: the run's tokens/s below min_ratio x the baseline's (thresholds.slow.min_ratio).
// Nothing is judged when either rate is missing, zero or not finite.
std::optional<Failure> compare_throughput(double baseline_tokens_per_s, double run_tokens_per_s,
                                          double min_ratio);

// nondeterministic: the first (step, rank) present in both runs at which a deterministic field
// (loss, grad_norm, lr, param_norm) differs bitwise. Steps in only one run are not compared: a
// run that stopped early is a crash or a hang, which the harness judges.
std::optional<Failure> compare_runs(const std::vector<StepRecord>& run_a,
                                    const std::vector<StepRecord>& run_b);

}  // namespace faultline::detectors
