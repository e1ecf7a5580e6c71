// Learning-rate schedules. Written in double precision so the value is the same on every machine.
#include "trainer/schedule.hpp"

#include <algorithm>
#include <cmath>

namespace faultline::trainer {

double lr_at(const ScheduleConfig& schedule, double base_lr, int64_t step, int64_t total_steps) {
  const double min_lr = base_lr * schedule.min_lr_ratio;
  if (schedule.warmup_steps > 0 && step <= schedule.warmup_steps)
    return base_lr * static_cast<double>(step) / static_cast<double>(schedule.warmup_steps);
  switch (schedule.kind) {
    case ScheduleKind::Constant:
      return base_lr;
    case ScheduleKind::Cosine: {
      int64_t span = std::max<int64_t>(1, total_steps - schedule.warmup_steps);
      double progress =
          std::clamp(static_cast<double>(step - schedule.warmup_steps) / span, 0.0, 1.0);
      return min_lr + 0.5 * (base_lr - min_lr) * (1.0 + std::cos(M_PI * progress));
    }
    case ScheduleKind::Wsd: {
      auto decay_steps = static_cast<int64_t>(std::llround(schedule.decay_fraction * total_steps));
      int64_t decay_start = total_steps - decay_steps;
      if (step <= decay_start || decay_steps == 0) return base_lr;
      double progress = std::clamp(static_cast<double>(step - decay_start) / decay_steps, 0.0, 1.0);
      return base_lr + (min_lr - base_lr) * progress;
    }
  }
  return base_lr;
}

}  // namespace faultline::trainer
