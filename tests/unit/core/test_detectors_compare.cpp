// Tests for probes/detectors/compare.cpp: slow against a baseline's throughput, and
// nondeterministic as the first bitwise difference between two runs of one spec.
#include "probes/detectors/compare.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>

#include "detector_expectations.hpp"
#include "probes/detectors/synthetic.hpp"

namespace faultline::detectors {
namespace {

using faultline::testing::record_at;

TEST(DetectorsCompare, ThroughputBelowTheRatioIsSlow) {
  auto slow = compare_throughput(1000.0, 700.0, 0.75);
  ASSERT_TRUE(slow.has_value());
  EXPECT_STREQ(to_string(slow->kind), "slow");
  EXPECT_EQ(slow->step, -1);
  EXPECT_EQ(slow->rank, -1);
  EXPECT_NE(slow->detail.find("70% of the baseline's 1000 tokens/s"), std::string::npos)
      << slow->detail;
  EXPECT_FALSE(compare_throughput(1000.0, 800.0, 0.75).has_value());
  EXPECT_FALSE(compare_throughput(1000.0, 1500.0, 0.75).has_value());  // faster is fine
}

TEST(DetectorsCompare, MissingThroughputJudgesNothing) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(compare_throughput(0.0, 10.0, 0.75).has_value());
  EXPECT_FALSE(compare_throughput(1000.0, 0.0, 0.75).has_value());
  EXPECT_FALSE(compare_throughput(nan, 10.0, 0.75).has_value());
  EXPECT_FALSE(compare_throughput(1000.0, nan, 0.75).has_value());
}

TEST(DetectorsCompare, IdenticalRunsAreDeterministic) {
  auto a = synthetic_run({50, 2});
  auto b = a;
  for (auto& record : b) *record.step_ms += 3;  // timings are not deterministic fields
  EXPECT_FALSE(compare_runs(a, b).has_value());
  for (auto& record : a) record.loss = std::numeric_limits<double>::quiet_NaN();
  b = a;  // the same NaN bits in both: not a difference
  EXPECT_FALSE(compare_runs(a, b).has_value());
}

TEST(DetectorsCompare, OneUlpIsADifferenceReportedAtItsFirstStepAndRank) {
  auto a = synthetic_run({60, 4});
  auto b = a;
  record_at(b, 50, 0).grad_norm += 1.0;
  double& loss = record_at(b, 42, 3).loss;
  loss = std::nextafter(loss, 10.0);
  record_at(b, 42, 1).lr = std::nextafter(record_at(b, 42, 1).lr, 1.0);
  std::shuffle(b.begin(), b.end(), std::mt19937(7));  // order does not matter
  auto failure = compare_runs(a, b);
  ASSERT_TRUE(failure.has_value());
  EXPECT_STREQ(to_string(failure->kind), "nondeterministic");
  EXPECT_EQ(failure->step, 42);
  EXPECT_EQ(failure->rank, 1);
  EXPECT_NE(failure->detail.find("lr "), std::string::npos) << failure->detail;
  // Both values with every digit: they must not print alike.
  auto first = failure->detail.find("lr ") + 3;
  auto vs = failure->detail.find(" vs ", first);
  ASSERT_NE(vs, std::string::npos);
  EXPECT_NE(failure->detail.substr(first, vs - first), failure->detail.substr(vs + 4));
}

TEST(DetectorsCompare, ParamNormAndItsAbsenceCount) {
  auto a = synthetic_run({20, 1});
  auto b = a;
  record_at(b, 7, 0).param_norm = *record_at(b, 7, 0).param_norm * 2;
  auto failure = compare_runs(a, b);
  ASSERT_TRUE(failure.has_value());
  EXPECT_EQ(failure->step, 7);
  EXPECT_NE(failure->detail.find("param_norm"), std::string::npos);
  b = a;
  record_at(b, 9, 0).param_norm.reset();
  failure = compare_runs(a, b);
  ASSERT_TRUE(failure.has_value());
  EXPECT_EQ(failure->step, 9);
}

TEST(DetectorsCompare, StepsInOneRunOnlyAreNotCompared) {
  auto a = synthetic_run({40, 2});
  auto b = a;
  b.resize(50);  // the same first 25 steps: a run that stopped early
  EXPECT_FALSE(compare_runs(a, b).has_value());
  EXPECT_FALSE(compare_runs(a, {}).has_value());
}

}  // namespace
}  // namespace faultline::detectors
