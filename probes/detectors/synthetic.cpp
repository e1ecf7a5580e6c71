// The synthetic healthy run: smooth curves plus seeded noise, nothing near any threshold.
#include "probes/detectors/synthetic.hpp"

#include <algorithm>
#include <cmath>
#include <random>

namespace faultline::detectors {

std::vector<StepRecord> synthetic_run(const SyntheticRun& spec) {
  std::mt19937_64 rng(spec.seed);
  std::normal_distribution<double> noise(0.0, 1.0);
  constexpr double kMiB = 1024.0 * 1024.0;
  const double min_lr = 0.1 * spec.base_lr;
  std::vector<StepRecord> out;
  double param_norm = 30.0;
  for (int64_t step = 1; step <= spec.steps; ++step) {
    const auto s = static_cast<double>(step);
    const double loss = 1.5 + 4.0 * std::exp(-s / 25.0) + 0.03 * noise(rng);
    const double grad_norm = 0.3 + 2.7 * std::exp(-s / 30.0) * (1.0 + 0.1 * noise(rng));
    double lr;
    if (step <= spec.warmup_steps) {
      lr = spec.base_lr * s / static_cast<double>(spec.warmup_steps);
    } else {
      const double span =
          std::max<double>(1.0, static_cast<double>(spec.steps - spec.warmup_steps));
      const double progress =
          std::clamp((s - static_cast<double>(spec.warmup_steps)) / span, 0.0, 1.0);
      lr = min_lr + 0.5 * (spec.base_lr - min_lr) * (1.0 + std::cos(M_PI * progress));
    }
    param_norm += 0.01;
    for (int rank = 0; rank < spec.ranks; ++rank) {
      StepRecord r;
      r.rank = rank;
      r.t = s * 0.05;
      r.step = step;
      r.loss = loss;
      r.grad_norm = grad_norm;
      r.lr = lr;
      const double data_ms = 2.0 + 0.2 * std::fabs(noise(rng));
      const double comm_ms = spec.ranks > 1 ? 5.0 + 0.5 * std::fabs(noise(rng)) : 0.0;
      const double step_ms = 43.0 + data_ms + comm_ms + 2.0 * noise(rng);
      r.data_ms = data_ms;
      r.comm_ms = comm_ms;
      r.step_ms = step_ms;
      if (spec.cpu_time == CpuTime::Reported)
        r.cpu_ms = (step_ms - data_ms - comm_ms) * (0.95 - 0.05 * std::tanh(noise(rng)));
      r.tokens = 1024;
      const double settled = 500 * kMiB + 0.0625 * kMiB * noise(rng);
      r.mem_bytes =
          static_cast<int64_t>(step <= 3 ? settled * static_cast<double>(step) / 3.0 : settled);
      r.mem_total_bytes = int64_t{16} << 30;
      r.param_norm = param_norm;
      r.update_ratio = lr * 0.3;
      r.nonfinite = 0;
      r.collectives = step;
      out.push_back(r);
    }
  }
  return out;
}

}  // namespace faultline::detectors
