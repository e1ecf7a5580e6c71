// Tests for harness/browse/run_diff.cpp: config keys that differ, and the first step record
// (by step, then rank) whose computed values are not the same bits.
#include "harness/browse/run_diff.hpp"

#include <gtest/gtest.h>

#include <limits>

namespace faultline::harness {
namespace {

StepRecord record(int rank, int64_t step, double loss) {
  StepRecord r;
  r.rank = rank;
  r.step = step;
  r.loss = loss;
  r.step_ms = 1.0 + step;  // timings always differ between runs
  return r;
}

TEST(RunDiff, ConfigChangesAreTheKeysWhoseValuesDiffer) {
  const auto changes = config_changes("optim.lr = 0.01\ntrain.steps = 40\nmodel.n_layer = 2\n",
                                      "optim.lr = 0.1\ntrain.steps = 40\nfault.nan_step = 9\n");
  ASSERT_EQ(changes.size(), 3u);
  EXPECT_EQ(changes[0].key, "fault.nan_step");
  EXPECT_FALSE(changes[0].a.has_value());
  EXPECT_EQ(changes[0].b, "9");
  EXPECT_EQ(changes[1].key, "model.n_layer");
  EXPECT_FALSE(changes[1].b.has_value());
  EXPECT_EQ(changes[2].key, "optim.lr");
  EXPECT_EQ(changes[2].a, "0.01");
  EXPECT_EQ(changes[2].b, "0.1");
  EXPECT_TRUE(config_changes("a = 1\n", "a = 1\n").empty());
}

TEST(RunDiff, IdenticalRecordsHaveNoDifferenceWhateverTheirOrderAndTimings) {
  std::vector<StepRecord> a = {record(0, 1, 4.0), record(1, 1, 4.0), record(0, 2, 3.5)};
  std::vector<StepRecord> b = {record(0, 2, 3.5), record(1, 1, 4.0), record(0, 1, 4.0)};
  b[0].step_ms = 99;
  EXPECT_FALSE(first_difference(a, b).has_value());
}

TEST(RunDiff, TheFirstDifferenceIsByStepThenRankWithItsField) {
  std::vector<StepRecord> a = {record(0, 1, 4.0), record(1, 1, 4.0), record(0, 2, 3.5),
                               record(1, 2, 3.5)};
  auto b = a;
  b[3].loss = std::numeric_limits<double>::quiet_NaN();
  b[2].grad_norm = 7;  // step 2 rank 0 comes before step 2 rank 1
  auto difference = first_difference(a, b);
  ASSERT_TRUE(difference.has_value());
  EXPECT_EQ(difference->step, 2);
  EXPECT_EQ(difference->rank, 0);
  EXPECT_EQ(difference->field, "grad_norm");
  EXPECT_EQ(difference->a, "0");
  EXPECT_EQ(difference->b, "7");
  b[2].grad_norm = 0;
  difference = first_difference(a, b);
  ASSERT_TRUE(difference.has_value());
  EXPECT_EQ(difference->rank, 1);
  EXPECT_EQ(difference->field, "loss");
  EXPECT_EQ(difference->b, "nan");
}

TEST(RunDiff, ARecordOnlyOneRunHasIsADifference) {
  std::vector<StepRecord> a = {record(0, 1, 4.0), record(0, 2, 3.5)};
  std::vector<StepRecord> b = {record(0, 1, 4.0)};
  auto difference = first_difference(a, b);
  ASSERT_TRUE(difference.has_value());
  EXPECT_EQ(difference->step, 2);
  EXPECT_EQ(difference->field, "record");
  EXPECT_EQ(difference->b, "-");
  EXPECT_EQ(first_difference(b, a)->a, "-");
}

}  // namespace
}  // namespace faultline::harness
