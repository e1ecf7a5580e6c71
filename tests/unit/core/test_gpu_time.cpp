// Tests for probes/detectors/gpu_time.cpp: gpu interval records joined with step windows through
// each rank's start event, pro rata where an interval straddles a step edge.
#include "probes/detectors/gpu_time.hpp"

#include <gtest/gtest.h>

#include "gpu_run.hpp"

namespace faultline::detectors {
namespace {

TEST(GpuTime, StepsGetComputeNcclIdleAndIdleDuringData) {
  const auto run = testing::gpu_run(3, 50, {10, 4});
  GpuStepJoin join;
  join.anchor(0, 0.0, 1.7e9);
  join.anchor(1, 0.0, 1.7e9 + 0.37);
  for (const auto& s : run.steps) join.add(s);
  for (const auto& g : run.gpu) join.add(g);
  const auto steps = join.steps();
  ASSERT_EQ(steps.size(), 6u);
  const StepGpuTime& first = steps[0];
  EXPECT_EQ(first.rank, 0);
  EXPECT_EQ(first.step, 1);
  EXPECT_NEAR(first.covered_ms, 100, 1e-3);
  EXPECT_NEAR(first.idle_ms, 50, 1e-3);
  EXPECT_NEAR(first.idle_in_data_ms, 50, 1e-3);
  EXPECT_NEAR(first.nccl_ms, 10, 1e-3);
  EXPECT_NEAR(first.compute_ms, 40, 1e-3);
  EXPECT_EQ(steps[3].rank, 1);
  EXPECT_NEAR(steps[3].nccl_ms, 4, 1e-3);
}

TEST(GpuTime, AnIntervalAcrossAStepEdgeCountsProRata) {
  GpuStepJoin join;
  join.anchor(0, 1.0, 100.0);  // t = 1 s was Unix 100 s
  StepRecord step;
  step.step = 1;
  step.t = 1.1;  // the step ran over Unix 100.0 .. 100.1
  step.step_ms = 100;
  step.data_ms = 20;
  join.add(step);
  GpuRecord before{0, 0, 0, 99.95, 100.05};  // half inside the step
  before.idle_ms = 100;
  GpuRecord after{0, 0, 0, 100.05, 100.15};
  after.compute_ms = after.busy_ms = 100;
  join.add(after);
  join.add(before);  // order of arrival does not matter
  const auto steps = join.steps();
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_NEAR(steps[0].covered_ms, 100, 1e-6);
  EXPECT_NEAR(steps[0].idle_ms, 50, 1e-6);
  EXPECT_NEAR(steps[0].compute_ms, 50, 1e-6);
  EXPECT_NEAR(steps[0].idle_in_data_ms, 20, 1e-6);  // the data phase is the step's first 20 ms
}

TEST(GpuTime, RanksWithoutAnAnchorOrGpuRecordsAreLeftOut) {
  const auto run = testing::gpu_run(2, 25, {1, 1});
  GpuStepJoin join;
  join.anchor(1, 0.0, 1.7e9 + 0.37);
  for (const auto& s : run.steps) join.add(s);
  EXPECT_FALSE(join.has_gpu_records());
  EXPECT_TRUE(join.steps().empty());
  for (const auto& g : run.gpu) join.add(g);
  const auto steps = join.steps();
  ASSERT_EQ(steps.size(), 2u);  // rank 0 has no start event with unix_time
  EXPECT_EQ(steps[0].rank, 1);
}

}  // namespace
}  // namespace faultline::detectors
