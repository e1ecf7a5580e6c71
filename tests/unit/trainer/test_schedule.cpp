// Tests for src/trainer/schedule.cpp: linear warm-up, cosine, wsd and constant learning rates.
#include "trainer/schedule.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace faultline::trainer {
namespace {

ScheduleConfig schedule(ScheduleKind kind, int64_t warmup, double min_lr_ratio = 0.1,
                        double decay_fraction = 0.2) {
  ScheduleConfig s;
  s.kind = kind;
  s.warmup_steps = warmup;
  s.min_lr_ratio = min_lr_ratio;
  s.decay_fraction = decay_fraction;
  return s;
}

TEST(Schedule, WarmupIsLinearForEveryKind) {
  for (ScheduleKind kind : {ScheduleKind::Constant, ScheduleKind::Cosine, ScheduleKind::Wsd}) {
    SCOPED_TRACE(to_string(kind));
    ScheduleConfig s = schedule(kind, 10);
    for (int64_t step = 1; step <= 10; ++step)
      EXPECT_DOUBLE_EQ(lr_at(s, 2.0, step, 100), 2.0 * step / 10.0);
  }
}

TEST(Schedule, ConstantStaysAtBase) {
  ScheduleConfig s = schedule(ScheduleKind::Constant, 5);
  for (int64_t step : {6, 50, 100, 1000}) EXPECT_DOUBLE_EQ(lr_at(s, 0.3, step, 100), 0.3);
  ScheduleConfig no_warmup = schedule(ScheduleKind::Constant, 0);
  EXPECT_DOUBLE_EQ(lr_at(no_warmup, 0.3, 1, 100), 0.3);
}

TEST(Schedule, CosineEndpoints) {
  ScheduleConfig s = schedule(ScheduleKind::Cosine, 10, 0.1);
  EXPECT_DOUBLE_EQ(lr_at(s, 1.0, 10, 100), 1.0);     // end of warm-up: the base
  EXPECT_NEAR(lr_at(s, 1.0, 100, 100), 0.1, 1e-15);  // end of the run: base × min_lr_ratio
  EXPECT_NEAR(lr_at(s, 1.0, 55, 100), 0.55, 1e-12);  // half-way: the mean
  EXPECT_NEAR(lr_at(s, 1.0, 500, 100), 0.1, 1e-15);  // past the horizon: stays at the floor
}

TEST(Schedule, CosineDecreasesMonotonically) {
  ScheduleConfig s = schedule(ScheduleKind::Cosine, 10, 0.0);
  double previous = lr_at(s, 1.0, 10, 100);
  for (int64_t step = 11; step <= 100; ++step) {
    double lr = lr_at(s, 1.0, step, 100);
    EXPECT_LT(lr, previous) << "step " << step;
    EXPECT_GE(lr, 0.0);
    previous = lr;
  }
  EXPECT_NEAR(previous, 0.0, 1e-15);
}

TEST(Schedule, CosineWithoutWarmupStartsBelowBase) {
  ScheduleConfig s = schedule(ScheduleKind::Cosine, 0, 0.0);
  double expected = 0.5 * (1.0 + std::cos(M_PI * 1.0 / 100.0));
  EXPECT_NEAR(lr_at(s, 1.0, 1, 100), expected, 1e-15);
  EXPECT_NEAR(lr_at(s, 1.0, 100, 100), 0.0, 1e-15);
}

TEST(Schedule, WsdIsStableThenDecaysLinearly) {
  ScheduleConfig s = schedule(ScheduleKind::Wsd, 10, 0.1, 0.2);  // decay over steps 81..100
  for (int64_t step = 11; step <= 80; ++step) EXPECT_DOUBLE_EQ(lr_at(s, 1.0, step, 100), 1.0);
  double previous = 1.0;
  for (int64_t step = 81; step <= 100; ++step) {
    double lr = lr_at(s, 1.0, step, 100);
    EXPECT_NEAR(lr, 1.0 + (0.1 - 1.0) * (step - 80) / 20.0, 1e-12) << "step " << step;
    EXPECT_LT(lr, previous);
    previous = lr;
  }
  EXPECT_NEAR(lr_at(s, 1.0, 90, 100), 0.55, 1e-12);
  EXPECT_NEAR(lr_at(s, 1.0, 100, 100), 0.1, 1e-12);
  EXPECT_NEAR(lr_at(s, 1.0, 150, 100), 0.1, 1e-12);  // clamped past the horizon
}

TEST(Schedule, WsdWithoutDecayIsConstant) {
  ScheduleConfig s = schedule(ScheduleKind::Wsd, 0, 0.1, 0.0);
  for (int64_t step : {1, 50, 100}) EXPECT_DOUBLE_EQ(lr_at(s, 0.5, step, 100), 0.5);
}

TEST(Schedule, ScalesWithTheBaseRate) {
  for (ScheduleKind kind : {ScheduleKind::Constant, ScheduleKind::Cosine, ScheduleKind::Wsd}) {
    ScheduleConfig s = schedule(kind, 4);
    for (int64_t step : {1, 4, 30, 90, 100})
      EXPECT_NEAR(lr_at(s, 3e-3, step, 100), 3e-3 * lr_at(s, 1.0, step, 100), 1e-18);
  }
}

}  // namespace
}  // namespace faultline::trainer
