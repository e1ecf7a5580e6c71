// Tests for probes/detectors/gpu.cpp through RunJudge: a GPU idle while data loads is data_stall
// evidence; a rank whose NCCL time is far above its peers' is slow_comm (a warning).
#include <gtest/gtest.h>

#include "detector_expectations.hpp"
#include "gpu_run.hpp"
#include "probes/detectors/run_judge.hpp"

namespace faultline::detectors {
namespace {
using faultline::testing::describe;

std::vector<Failure> judge(const testing::GpuRun& run) {
  RunJudge judge;
  for (const auto& e : run.starts) judge.observe(MetricsRecord{e});
  for (const auto& s : run.steps) judge.observe(MetricsRecord{s});
  for (const auto& g : run.gpu) judge.observe(MetricsRecord{g});
  return judge.finish();
}

TEST(DetectorsGpu, HealthyGpuRunHasNoFinding) {
  const auto failures = judge(testing::gpu_run(20, 25, {5, 5, 6, 5}));
  EXPECT_TRUE(failures.empty()) << describe(failures);
}

TEST(DetectorsGpu, GpuIdleWhileDataLoadsIsADataStallOnTheDevice) {
  const auto failures = judge(testing::gpu_run(20, 75, {5}));
  ASSERT_NO_FATAL_FAILURE(testing::expect_one(failures, "data_stall", -1, 0));
  EXPECT_NE(failures[0].detail.find("GPU sits idle while its data loads a median 75%"),
            std::string::npos)
      << failures[0].detail;
}

TEST(DetectorsGpu, ARankWithLongNcclKernelsIsNamed) {
  const auto failures = judge(testing::gpu_run(20, 25, {4, 4, 20, 5}));
  ASSERT_NO_FATAL_FAILURE(testing::expect_one(failures, "slow_comm", -1, 2));
  EXPECT_EQ(severity(failures[0].kind), Severity::Warning);
  EXPECT_NE(failures[0].detail.find("median 20 ms per step against its peers' 4 ms"),
            std::string::npos)
      << failures[0].detail;
}

TEST(DetectorsGpu, TooFewJoinedStepsJudgeNothing) {
  const auto failures = judge(testing::gpu_run(3, 75, {4, 4, 20, 5}));
  EXPECT_TRUE(failures.empty()) << describe(failures);
}

}  // namespace
}  // namespace faultline::detectors
