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

// A replay from the checkpoint of step 2 against the run it came from: compared over steps 3..4,
// the steps both have; the run's steps 1..2 are beyond, not a difference.
TEST(RunDiff, RecordsAreComparedOverTheStepsBothRunsHave) {
  std::vector<StepRecord> run = {record(0, 1, 4.0), record(0, 2, 3.5), record(0, 3, 3.0),
                                 record(0, 4, 2.5)};
  std::vector<StepRecord> replay = {record(0, 3, 3.0), record(0, 4, 2.5)};
  auto same = compare_records(run, replay);
  EXPECT_EQ(same.a, (StepSpan{1, 4}));
  EXPECT_EQ(same.b, (StepSpan{3, 4}));
  EXPECT_EQ(same.common, (StepSpan{3, 4}));
  EXPECT_EQ(same.compared, 2);
  EXPECT_FALSE(same.difference.has_value());
  EXPECT_EQ(outside(*same.a, *same.common), (std::vector<StepSpan>{{1, 2}}));
  EXPECT_TRUE(outside(*same.b, *same.common).empty());

  replay[1].loss = 9;
  auto differs = compare_records(run, replay);
  ASSERT_TRUE(differs.difference.has_value());
  EXPECT_EQ(differs.difference->step, 4);
  EXPECT_EQ(differs.difference->field, "loss");

  // A middle part: a run of steps 1..9 against one of 4..6 has parts on both sides.
  EXPECT_EQ(outside({1, 9}, {4, 6}), (std::vector<StepSpan>{{1, 3}, {7, 9}}));
  // No step in common, or no records at all.
  EXPECT_FALSE(compare_records({record(0, 1, 4.0)}, {record(0, 5, 2.0)}).common.has_value());
  const auto empty = compare_records(run, {});
  EXPECT_FALSE(empty.b.has_value());
  EXPECT_FALSE(empty.common.has_value());
}

// Inside the steps both have, a record only one run has (a rank's) is still a difference.
TEST(RunDiff, ARanksMissingRecordInsideTheCommonStepsIsADifference) {
  std::vector<StepRecord> a = {record(0, 1, 4.0), record(1, 1, 4.0), record(0, 2, 3.5),
                               record(1, 2, 3.5)};
  std::vector<StepRecord> b = {record(0, 1, 4.0), record(1, 1, 4.0), record(0, 2, 3.5)};
  const auto comparison = compare_records(a, b);
  ASSERT_TRUE(comparison.difference.has_value());
  EXPECT_EQ(comparison.difference->step, 2);
  EXPECT_EQ(comparison.difference->rank, 1);
  EXPECT_EQ(comparison.difference->field, "record");
}

}  // namespace
}  // namespace faultline::harness
