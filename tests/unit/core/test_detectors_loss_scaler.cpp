// Tests for probes/detectors/loss_scaler.cpp: the steps fp16's loss scaler skips are no
// failure while it recovers; too many skips in a row, or a scale under the floor, is nonfinite
// dated by the first skip of the last run of them.
#include <gtest/gtest.h>

#include <limits>

#include "detector_expectations.hpp"
#include "probes/detectors/run_judge.hpp"
#include "probes/detectors/synthetic.hpp"

namespace faultline::detectors {
namespace {
using faultline::testing::describe;
using faultline::testing::expect_one;
using faultline::testing::judge;
using faultline::testing::record_at;

// fp16's loss scaler: steps with overflowing gradients, skipped and the scale halved each time.
void overflow(std::vector<StepRecord>& records, int64_t first, int64_t count, int rank = 0) {
  double scale = 65536;
  for (auto& record : records) {
    if (record.rank != rank) continue;
    const bool skipped = record.step >= first && record.step < first + count;
    record.skipped = skipped;
    record.loss_scale = scale;
    if (skipped) {
      record.grad_norm = std::numeric_limits<double>::infinity();
      scale /= 2;
    }
  }
}

TEST(LossScaler, StepsALossScalerSkippedAreNotAFailureWhenItRecovers) {
  auto records = synthetic_run({100, 2});
  overflow(records, 1, 6);  // finding its scale: 65536 -> 1024
  overflow(records, 40, 3, 1);
  EXPECT_TRUE(judge(records).empty()) << describe(judge(records));
  // The same non-finite norm on a step the scaler did not skip is the failure it always was.
  record_at(records, 41, 1).skipped = false;
  expect_one(judge(records), "nonfinite", 41, 1);
}

TEST(LossScaler, ALossScalerThatNeverStopsSkippingIsNonfiniteFromItsFirstSkip) {
  auto records = synthetic_run({100, 1});
  overflow(records, 30, 71);
  Thresholds thresholds;
  thresholds.nonfinite.min_loss_scale = 0;  // the streak rule alone
  RunJudge streaming(thresholds);
  for (const auto& record : records) {
    streaming.observe(record);
    // Fatal once the 32nd skip in a row arrives (step 61), dated by the first (step 30).
    EXPECT_EQ(streaming.fatal(), record.step >= 61) << "at step " << record.step;
  }
  auto failures = streaming.finish();
  ASSERT_NO_FATAL_FAILURE(expect_one(failures, "nonfinite", 30, 0));
  EXPECT_EQ(failures[0].shown_by, 61);
  EXPECT_NE(failures[0].detail.find("skipped 32 steps in a row from step 30"), std::string::npos)
      << failures[0].detail;
  // A good step between the skips starts the count again.
  record_at(records, 50).skipped = false;
  record_at(records, 50).grad_norm = 1;
  expect_one(judge(records, thresholds), "nonfinite", 51, 0);
  EXPECT_EQ(judge(records, thresholds)[0].shown_by, 82);
}

TEST(LossScaler, ALossScaleBelowTheFloorIsNonfiniteAtThatStep) {
  // Skips that never come 32 in a row still halve the scale below 1: every other step
  // overflows, and after the 17th skip (step 34) the scale is 65536 / 2^17 = 0.5 (step 35).
  auto records = synthetic_run({100, 1});
  double scale = 65536;
  for (auto& record : records) {
    record.loss_scale = scale;
    record.skipped = record.step % 2 == 0;
    if (record.skipped) {
      record.grad_norm = std::numeric_limits<double>::infinity();
      scale /= 2;
    }
  }
  auto failures = judge(records);
  ASSERT_NO_FATAL_FAILURE(expect_one(failures, "nonfinite", 34, 0));
  EXPECT_EQ(failures[0].shown_by, 35);
  EXPECT_NE(failures[0].detail.find("loss scale 0.5 at step 35 is below 1 after 17 skipped steps"),
            std::string::npos)
      << failures[0].detail;
  // Overflowing for good from step 30: under the floor at the 18th skip in a row (step 47), dated
  // by the first; the trial stops there, before the 32-in-a-row rule would show it (step 61).
  records = synthetic_run({100, 1});
  overflow(records, 30, 71);
  failures = judge(records);
  ASSERT_NO_FATAL_FAILURE(expect_one(failures, "nonfinite", 30, 0));
  EXPECT_EQ(failures[0].shown_by, 47);
}

}  // namespace
}  // namespace faultline::detectors
