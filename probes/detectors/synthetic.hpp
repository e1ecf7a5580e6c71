// A synthetic healthy run: the metrics stream the default thresholds are calibrated against,
// used by the detector tests (which plant one fault in it at a time) and for trying thresholds.
#pragma once

#include <cstdint>
#include <vector>

#include "common/metrics_record.hpp"

namespace faultline::detectors {

// Whether the records carry cpu_ms (the bundled trainer's; a user's trainer may not).
enum class CpuTime { Absent, Reported };

struct SyntheticRun {
  int64_t steps = 100;
  int ranks = 1;
  uint64_t seed = 1;
  int64_t warmup_steps = 10;  // linear LR warm-up, then cosine to 0.1 x base_lr
  double base_lr = 3e-3;
  CpuTime cpu_time = CpuTime::Absent;
};

// Step records ordered by step, ranks interleaved. Loss falls from ~5.5 toward 1.5 with noise,
// grad_norm from ~3 toward 0.3, memory allocates over the first 3 steps and then stays flat
// (+-64 KiB), step ~50 ms of which ~2 ms data and, with several ranks, ~5 ms communication.
// Loss, grad_norm, lr and param_norm are the same on every rank, as after an all-reduce. With
// CpuTime::Reported, cpu_ms is 90-100 % of the wall compute time (step - data - comm).
std::vector<StepRecord> synthetic_run(const SyntheticRun& spec = {});

}  // namespace faultline::detectors
