// Tests for the judgements of a run alone that catch training going wrong without a NaN:
// stalled (a meaningful share of the first loss; a fine-tune only has to fall), loss_spike's rise
// in median absolute deviations, and the bad_init warning against ln(vocab size).
#include <gtest/gtest.h>

#include <cmath>

#include "detector_expectations.hpp"
#include "probes/detectors/run_judge.hpp"
#include "probes/detectors/synthetic.hpp"

namespace faultline::detectors {
namespace {
using faultline::testing::describe;
using faultline::testing::expect_one;

std::vector<Failure> judge(const std::vector<StepRecord>& records, RunContext context = {}) {
  RunJudge judge({}, context);
  for (const auto& record : records) judge.observe(record);
  return judge.finish();
}

TEST(DetectorsAlone, StalledNeedsATenthOfTheFirstLossGone) {
  // 5.5 -> 5.0 over 100 steps: 9 % down, which the former 1 % rule passed.
  auto records = synthetic_run();
  for (auto& r : records) r.loss = 5.5 - 0.5 * static_cast<double>(r.step) / 100;
  expect_one(judge(records), "stalled", 100, 0);
  // 5.5 -> 4.6: 16 % down in the last window's mean against the first's.
  for (auto& r : records) r.loss = 5.5 - 1.0 * static_cast<double>(r.step) / 100;
  EXPECT_TRUE(judge(records).empty()) << describe(judge(records));
}

TEST(DetectorsAlone, AFineTuneStartsNearItsFloorAndOnlyHasToFall) {
  // A fine-tune of a 256-token model: it starts at 2.0, far below ln(256) = 5.55, and falls 5 %.
  auto records = synthetic_run();
  for (auto& r : records) r.loss = 2.0 - 0.1 * static_cast<double>(r.step) / 100;
  const RunContext tiny{1, 10, 256};
  EXPECT_TRUE(judge(records, tiny).empty()) << describe(judge(records, tiny));
  // Without the vocabulary size it cannot tell a fine-tune from a fresh run: 10 % applies.
  expect_one(judge(records), "stalled", 100, 0);
  // Flat: not even 1 % down.
  for (auto& r : records) r.loss = 2.0 - 0.01 * static_cast<double>(r.step) / 100;
  auto failures = judge(records, tiny);
  ASSERT_NO_FATAL_FAILURE(expect_one(failures, "stalled", 100, 0));
  EXPECT_NE(failures[0].detail.find("started trained"), std::string::npos) << failures[0].detail;
  // A fresh run (first loss at ln(vocab)) is still held to 10 %.
  for (auto& r : records) r.loss = 5.5 - 0.5 * static_cast<double>(r.step) / 100;
  expect_one(judge(records, tiny), "stalled", 100, 0);
}

TEST(DetectorsAlone, AnEarlyJumpOfAFewNatsIsASpikeInMedianAbsoluteDeviations) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {  // the healthy noise never reaches it
    auto healthy = synthetic_run({100, 1, seed});
    EXPECT_TRUE(judge(healthy).empty()) << seed << ": " << describe(judge(healthy));
  }
  auto records = synthetic_run();
  // Step 15: loss ~3.4 -> +2.5 nats, far below 10x the median but ~100 MADs of the changes.
  for (auto& r : records)
    if (r.step == 15) r.loss += 2.5;
  auto failures = judge(records);
  ASSERT_NO_FATAL_FAILURE(expect_one(failures, "loss_spike", 15, 0));
  EXPECT_NE(failures[0].detail.find("median absolute deviations"), std::string::npos)
      << failures[0].detail;
}

// A replay from a checkpoint shows a spike again when it starts history_needed() steps before
// it (isolate --run picks its checkpoint so); from the step just before, it cannot.
TEST(DetectorsAlone, ASpikeIsShownAgainByARecordsWindowOfTheHistoryItNeeds) {
  auto records = synthetic_run();
  for (auto& r : records)
    if (r.step == 60) r.loss += 2.5;  // a jump the rise rule judges against the losses before it
  const int64_t history = history_needed(FailureKind::LossSpike, Thresholds{});
  EXPECT_EQ(history, Thresholds{}.loss_spike.warmup_steps);
  auto window_from = [&](int64_t first) {
    std::vector<StepRecord> window;
    for (const auto& r : records)
      if (r.step >= first && r.step <= 60) window.push_back(r);
    return judge(window);
  };
  ASSERT_NO_FATAL_FAILURE(expect_one(window_from(60 - history), "loss_spike", 60, 0));
  EXPECT_TRUE(window_from(60).empty());
  EXPECT_EQ(history_needed(FailureKind::Nonfinite, Thresholds{}), 0);
}

TEST(DetectorsAlone, ARiseBelowTheAbsoluteFloorIsNotASpike) {
  auto records = synthetic_run();
  for (auto& r : records)
    if (r.step == 40) r.loss += 0.8;  // many MADs, but under min_rise (1 nat)
  EXPECT_TRUE(judge(records).empty()) << describe(judge(records));
}

TEST(DetectorsAlone, BadInitIsAWarningFromTheFirstLossAgainstLnVocab) {
  auto records = synthetic_run();  // first loss ~5.5 = ln(256) + 0
  RunContext tiny{1, 10, 256};
  EXPECT_TRUE(judge(records, tiny).empty()) << describe(judge(records, tiny));
  // A vocabulary of 16 (ln 2.77): starting at 5.5 is 2.7 nats above it.
  auto failures = judge(records, {1, 10, 16});
  ASSERT_NO_FATAL_FAILURE(expect_one(failures, "bad_init", 1, 0));
  EXPECT_EQ(severity(failures[0].kind), Severity::Warning);
  EXPECT_NE(failures[0].detail.find("ln(vocab_size 16)"), std::string::npos) << failures[0].detail;
  EXPECT_FALSE(any_failing(failures));
  // Unknown vocabulary: not judged.
  EXPECT_TRUE(judge(records, {1, 10, 0}).empty());
}

}  // namespace
}  // namespace faultline::detectors
