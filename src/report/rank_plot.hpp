// The plot a rank finding stands on: how far each rank's parameters are from rank 0's, step by
// step, and rank 0's from a 1-rank replay of the same batches where the search ran one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/metrics_record.hpp"
#include "report/report_model.hpp"

namespace faultline::report {

// Relative sketch distances (docs/ranks.md) of the `params` fingerprints: "rank r vs rank 0" for
// each other rank of `run` (data parallel keeps them bitwise equal, so 0 until a rank applies an
// update of its own), and "rank 0 vs <replay_label>" against `one_rank_replay` (the 1-rank replay
// of the same batches, "" when none) over the steps both have. Steps where a distance cannot be
// measured (no sketch) have no point. nullopt when neither line has a point.
std::optional<Plot> rank_params_plot(const std::vector<FingerprintRecord>& run,
                                     const std::vector<FingerprintRecord>& one_rank_replay,
                                     const std::string& replay_label);

}  // namespace faultline::report
