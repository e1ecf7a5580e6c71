// Tests for probes/detectors/gpu_time.cpp: gpu interval records joined with step windows through
// each rank's start event, pro rata where an interval straddles a step edge.
#include "probes/detectors/gpu_time.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

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

// A requeued job: part 1 (its clock at Unix 1000) trains steps 1-4, part 2 (a new process, its
// clock at Unix 2000) resumes from the checkpoint of step 2. The GPU computed all through part 1
// and idled all through part 2, so each step's figures say which part it was placed in.
namespace requeued {

StepRecord step_at(int64_t step, double t) {
  StepRecord record;
  record.step = step;
  record.t = t;
  record.step_ms = 100;
  return record;
}

EventRecord start(double t, double unix_time, int64_t first_step) {
  EventRecord event;
  event.name = "start";
  event.t = t;
  event.json =
      nlohmann::json{{"name", "start"}, {"unix_time", unix_time}, {"first_step", first_step}}
          .dump();
  return event;
}

void add_gpu(GpuStepJoin& join) {
  for (double unix0 : {1000.0, 2000.0}) {
    GpuRecord busy_or_idle{0, 0, 0, unix0, unix0 + 1};
    (unix0 < 2000 ? busy_or_idle.compute_ms : busy_or_idle.idle_ms) = 1000;
    join.add(busy_or_idle);
  }
}

// (step, compute ms to the nearest ms) of each joined step.
std::vector<std::pair<int64_t, long>> placed(const GpuStepJoin& join) {
  std::vector<std::pair<int64_t, long>> out;
  for (const auto& s : join.steps()) out.emplace_back(s.step, std::lround(s.compute_ms));
  return out;
}

}  // namespace requeued

TEST(GpuTime, ARestartedRanksStepsArePlacedThroughThePartThatRanThem) {
  using namespace requeued;
  using Placed = std::vector<std::pair<int64_t, long>>;
  // As a store gives them: every start, then the last run of each step.
  GpuStepJoin stored;
  stored.add(start(0.0, 1000.0, 1));
  stored.add(start(0.0, 2000.0, 3));
  for (int64_t step : {1, 2}) stored.add(step_at(step, 0.1 * static_cast<double>(step)));
  for (int64_t step : {3, 4, 5, 6}) stored.add(step_at(step, 0.1 * static_cast<double>(step - 2)));
  add_gpu(stored);
  EXPECT_EQ(placed(stored), (Placed{{1, 100}, {2, 100}, {3, 0}, {4, 0}, {5, 0}, {6, 0}}));

  // As the metrics file streams them: steps 3 and 4 ran twice, once in each part.
  GpuStepJoin streamed;
  streamed.add(start(0.0, 1000.0, 1));
  for (int64_t step : {1, 2, 3, 4}) streamed.add(step_at(step, 0.1 * static_cast<double>(step)));
  streamed.add(start(0.0, 2000.0, 3));
  for (int64_t step : {3, 4, 5, 6})
    streamed.add(step_at(step, 0.1 * static_cast<double>(step - 2)));
  add_gpu(streamed);
  EXPECT_EQ(placed(streamed),
            (Placed{{1, 100}, {2, 100}, {3, 100}, {4, 100}, {3, 0}, {4, 0}, {5, 0}, {6, 0}}));
}

}  // namespace
}  // namespace faultline::detectors
