// Learning-rate schedules: constant, cosine and warm-up/stable/decay, each with linear warm-up.
#pragma once

#include <cstdint>

#include "trainer/train_config.hpp"

namespace faultline::trainer {

// LR of step `step` (1-based) for a run whose schedule spans `total_steps` steps.
double lr_at(const ScheduleConfig& schedule, double base_lr, int64_t step, int64_t total_steps);

}  // namespace faultline::trainer
