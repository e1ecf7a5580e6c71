// Tests for probes/detectors (training dynamics and the LR): the synthetic healthy run judges
// clean, and each planted fault is caught with the right kind, step and rank.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>

#include "detector_expectations.hpp"
#include "probes/detectors/run_judge.hpp"
#include "probes/detectors/synthetic.hpp"

namespace faultline::detectors {
namespace {
using faultline::testing::describe;
using faultline::testing::expect_one;

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

using faultline::testing::record_at;

// The context first: most tests here give one.
std::vector<Failure> judge(const std::vector<StepRecord>& records, RunContext context = {},
                           Thresholds thresholds = {}) {
  return faultline::testing::judge(records, thresholds, context);
}

TEST(Detectors, SyntheticHealthyRunsJudgeClean) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    EXPECT_TRUE(judge(synthetic_run({100, 1, seed})).empty())
        << describe(judge(synthetic_run({100, 1, seed})));
    auto four_ranks = synthetic_run({300, 4, seed, 30});
    EXPECT_TRUE(judge(four_ranks).empty()) << describe(judge(four_ranks));
    EXPECT_TRUE(judge(four_ranks, {4, 30}).empty()) << describe(judge(four_ranks, {4, 30}));
  }
}

TEST(Detectors, ARunWithNoRecordsJudgesNothing) {
  RunJudge judge;
  EXPECT_TRUE(judge.failures_so_far().empty());
  EXPECT_TRUE(judge.finish().empty());
  EXPECT_FALSE(judge.fatal());
}

TEST(Detectors, NonfiniteLossIsFatalAtItsStep) {
  auto records = synthetic_run();
  record_at(records, 37).loss = kNan;
  RunJudge judge;
  for (const auto& record : records) {
    judge.observe(record);
    // Streaming: nothing before step 37, the failure as soon as its record arrives.
    EXPECT_EQ(judge.fatal(), record.step >= 37) << "at step " << record.step;
  }
  ASSERT_NO_FATAL_FAILURE(expect_one(judge.finish(), "nonfinite", 37, 0));
  EXPECT_NE(judge.finish()[0].detail.find("loss nan"), std::string::npos);
  EXPECT_TRUE(is_fatal(judge.finish()[0]));
}

TEST(Detectors, NonfiniteGradNormParamNormOrCountIsCaught) {
  auto records = synthetic_run();
  record_at(records, 12).grad_norm = std::numeric_limits<double>::infinity();
  expect_one(judge(records), "nonfinite", 12, 0);
  records = synthetic_run();
  record_at(records, 13).param_norm = kNan;
  expect_one(judge(records), "nonfinite", 13, 0);
  records = synthetic_run();
  record_at(records, 14).nonfinite = 3;
  expect_one(judge(records), "nonfinite", 14, 0);
}

TEST(Detectors, NonfiniteAnomalyThatNamesTheModuleWins) {
  auto records = synthetic_run({50, 4});
  for (int rank = 0; rank < 4; ++rank) record_at(records, 20, rank).loss = kNan;
  RunJudge judge;
  for (const auto& record : records) judge.observe(record);
  AnomalyRecord loss_only{0, 1.0, 20, "nonfinite", "loss", "loss", "loss is nan", {}, {}, ""};
  AnomalyRecord forward{2,
                        1.0,
                        20,
                        "nonfinite",
                        "forward",
                        "blocks.1.mlp",
                        "7 non-finite values in output",
                        {4242},
                        {"shard-0003"},
                        ""};
  judge.observe(loss_only);
  judge.observe(forward);
  auto failures = judge.finish();
  ASSERT_NO_FATAL_FAILURE(expect_one(failures, "nonfinite", 20, 2));
  const std::string& detail = failures[0].detail;
  for (const char* part :
       {"forward at blocks.1.mlp", "7 non-finite", "4242", "shard-0003", "loss nan"})
    EXPECT_NE(detail.find(part), std::string::npos) << part << " in " << detail;
}

TEST(Detectors, ALossAnomalyNamesItsPhaseOnceWhenItsPlaceIsThePhase) {
  auto records = synthetic_run({30, 1});
  record_at(records, 20, 0).loss = kNan;
  RunJudge judge;
  for (const auto& record : records) judge.observe(record);
  judge.observe(AnomalyRecord{0, 1.0, 20, "nonfinite", "loss", "loss", "loss is nan", {}, {}, ""});
  auto failures = judge.finish();
  ASSERT_NO_FATAL_FAILURE(expect_one(failures, "nonfinite", 20, 0));
  EXPECT_EQ(failures[0].detail.rfind("loss: loss is nan", 0), 0u) << failures[0].detail;
}

TEST(Detectors, EarlierNonfiniteStepBeatsBetterEvidenceLater) {
  auto records = synthetic_run({50, 2});
  record_at(records, 19, 1).grad_norm = kNan;
  RunJudge judge;
  for (const auto& record : records) judge.observe(record);
  judge.observe(AnomalyRecord{0, 1.0, 20, "nonfinite", "forward", "wte", "x", {}, {}, ""});
  expect_one(judge.finish(), "nonfinite", 19, 1);
}

TEST(Detectors, DataAnomalyIsReportedAsData) {
  RunJudge judge;
  for (const auto& record : synthetic_run({8, 2})) judge.observe(record);
  judge.observe(AnomalyRecord{1,
                              1.0,
                              9,
                              "data",
                              "data",
                              "shard-0002",
                              "token id 300 at offset 17 of shard shard-0002 is not below "
                              "model.vocab_size 256",
                              {77},
                              {"shard-0002"},
                              ""});
  EXPECT_TRUE(judge.fatal());
  auto failures = judge.finish();
  ASSERT_NO_FATAL_FAILURE(expect_one(failures, "data", 9, 1));
  EXPECT_NE(failures[0].detail.find("token id 300"), std::string::npos);
  EXPECT_NE(failures[0].detail.find("samples 77"), std::string::npos);
}

TEST(Detectors, GradExplodeNeedsSustainedSteps) {
  auto records = synthetic_run();
  record_at(records, 40).grad_norm = 5e3;
  record_at(records, 41).grad_norm = 2e4;
  EXPECT_TRUE(judge(records).empty()) << "two steps are not sustained";
  record_at(records, 43).grad_norm = 5e3;  // a gap: still not three in a row
  EXPECT_TRUE(judge(records).empty());
  record_at(records, 42).grad_norm = 1.5e3;
  auto failures = judge(records);
  ASSERT_NO_FATAL_FAILURE(expect_one(failures, "grad_explode", 40, 0));
  EXPECT_NE(failures[0].detail.find("5000, 2e+04, 1500"), std::string::npos) << failures[0].detail;
}

TEST(Detectors, GradVanishNeedsSustainedSteps) {
  auto records = synthetic_run();
  for (int64_t step = 50; step <= 51; ++step) record_at(records, step).grad_norm = 1e-8;
  EXPECT_TRUE(judge(records).empty());
  record_at(records, 52).grad_norm = 0.0;
  expect_one(judge(records), "grad_vanish", 50, 0);
}

TEST(Detectors, LossSpikeAgainstTheRecentMedian) {
  auto records = synthetic_run();
  Thresholds no_rise;
  no_rise.loss_spike.min_rise = 1e9;                              // the factor rule alone
  record_at(records, 60).loss = 3 * record_at(records, 59).loss;  // a bump, not 10x
  EXPECT_TRUE(judge(records, {}, no_rise).empty()) << describe(judge(records, {}, no_rise));
  record_at(records, 60).loss = 30.0;
  auto failures = judge(records);
  ASSERT_NO_FATAL_FAILURE(expect_one(failures, "loss_spike", 60, 0));
  EXPECT_NE(failures[0].detail.find("median"), std::string::npos);
}

TEST(Detectors, LossSpikeInsideItsWarmupIsJudgedAgainstTheFirstLoss) {
  auto records = synthetic_run();
  const double first = record_at(records, 1).loss;  // ~5.5
  record_at(records, 5).loss = 1.4 * first;         // above the first loss, under 1.5x
  EXPECT_TRUE(judge(records).empty()) << describe(judge(records));
  record_at(records, 5).loss = 1.6 * first;  // a run diverging at once: 1.6x, ~3.3 nats above
  auto failures = judge(records);
  ASSERT_NO_FATAL_FAILURE(expect_one(failures, "loss_spike", 5, 0));
  EXPECT_NE(failures[0].detail.find("the first loss"), std::string::npos) << failures[0].detail;
}

// A replay from a checkpoint starts mid-curve: its first loss is one batch's draw. A lucky low
// one made a small batch's ordinary noise seven steps on a "loss_spike" (6x the first loss), and
// isolate then reported that step instead of the real spike after it.
TEST(Detectors, ARunResumedFromACheckpointIsNotJudgedAgainstItsFirstLoss) {
  std::vector<StepRecord> resumed;
  for (const auto& r : synthetic_run())
    if (r.step > 30) resumed.push_back(r);
  const double typical = record_at(resumed, 32).loss;
  record_at(resumed, 31).loss = typical / 6;  // a lucky batch
  record_at(resumed, 38).loss = typical;      // 6x the first loss: noise, not divergence
  EXPECT_TRUE(judge(resumed).empty()) << describe(judge(resumed));
  // Known from its resume event too, where its steps are numbered from 1 (a trainer's own count).
  std::vector<StepRecord> renumbered = synthetic_run();
  record_at(renumbered, 1).loss = record_at(renumbered, 2).loss / 6;
  RunJudge judge_resumed;
  judge_resumed.observe(EventRecord{0, 0.0, "resume", 30, R"({"name":"resume","step":30})"});
  for (const auto& r : renumbered) judge_resumed.observe(r);
  EXPECT_TRUE(judge_resumed.finish().empty()) << describe(judge_resumed.finish());
  // A fresh run with the same first steps is still held to its first loss.
  expect_one(judge(renumbered), "loss_spike", 2, 0);
  // The median rule still judges a resumed run's steps once it has seen enough of them.
  record_at(resumed, 60).loss = 30.0;
  expect_one(judge(resumed), "loss_spike", 60, 0);
}

TEST(Detectors, AnEarlyRiseUnderTheAbsoluteFloorIsNotASpikeUnlessItIsTenfold) {
  auto records = synthetic_run();
  for (auto& r : records) r.loss = 0.1;  // a loss near its floor (a fine-tune's, say)
  record_at(records, 4).loss = 0.5;      // 5x, but 0.4 nats
  EXPECT_TRUE(judge(records).empty()) << describe(judge(records));
  record_at(records, 4).loss = 1.05;  // 10.5x: Megatron's factor needs no floor
  expect_one(judge(records), "loss_spike", 4, 0);
}

TEST(Detectors, StalledLossIsCaughtOnceTheRunIsLongEnough) {
  auto records = synthetic_run();
  for (auto& record : records)
    record.loss = 5.5 + 0.01 * std::sin(static_cast<double>(record.step));
  expect_one(judge(records), "stalled", 100, 0);
  records.pop_back();  // 99 steps: not judged
  EXPECT_TRUE(judge(records).empty());
}

TEST(Detectors, StalledNeedsMoreThanAHalfPercentDrop) {
  auto records = synthetic_run();
  for (auto& record : records) record.loss = 5.5 - 0.0275 * static_cast<double>(record.step) / 100;
  expect_one(judge(records), "stalled", 100, 0);
}

TEST(Detectors, PlantedLrSpikeIsCaughtAtItsStep) {
  for (int64_t spike : {30, 5, 1, 100}) {
    auto records = synthetic_run({100, 2});
    for (int rank = 0; rank < 2; ++rank)
      record_at(records, spike, rank).lr *= 1000;  // fault.lr_spike_step
    auto failures = judge(records);
    ASSERT_FALSE(failures.empty()) << "spike at " << spike;
    EXPECT_STREQ(to_string(failures[0].kind), "lr_anomaly");
    EXPECT_EQ(failures[0].step, spike);
    EXPECT_EQ(failures[0].rank, 0);
    EXPECT_NE(failures[0].detail.find("(limit 10x)"), std::string::npos) << failures[0].detail;
  }
}

TEST(Detectors, LrGrowingAfterTheWarmupIsCaught) {
  auto records = synthetic_run();
  for (int64_t step = 40; step <= 100; ++step)
    record_at(records, step).lr = record_at(records, 39).lr * std::pow(1.05, step - 39);
  expect_one(judge(records), "lr_anomaly", 40, 0);
  expect_one(judge(records, {1, 10}), "lr_anomaly", 40, 0);
  // Dated by the streak's first step, shown by its 6th (max_growth_steps 5): a prefix of the run
  // must reach that one.
  EXPECT_EQ(evidence_step(judge(records)[0]), 45);
}

TEST(Detectors, LongWarmupsConstantAndFinalZeroLrAreHealthy) {
  EXPECT_TRUE(judge(synthetic_run({200, 1, 3, 60})).empty());  // growth inferred as warm-up
  auto constant = synthetic_run();
  for (auto& record : constant) record.lr = 1e-3;
  EXPECT_TRUE(judge(constant).empty());
  auto to_zero = synthetic_run();
  record_at(to_zero, 100).lr = 0;  // cosine to min_lr_ratio = 0 ends on one zero step
  EXPECT_TRUE(judge(to_zero).empty());
}

TEST(Detectors, LrStuckAtZeroIsCaught) {
  auto records = synthetic_run();
  for (int64_t step = 60; step <= 100; ++step) record_at(records, step).lr = 0;
  expect_one(judge(records), "lr_anomaly", 60, 0);
  EXPECT_EQ(evidence_step(judge(records)[0]), 64);  // zero_steps 5
  records = synthetic_run();
  record_at(records, 70).lr = kNan;
  expect_one(judge(records), "lr_anomaly", 70, 0);
}

TEST(Detectors, DisabledDetectorsStaySilent) {
  auto records = synthetic_run();
  record_at(records, 30).lr *= 1000;
  record_at(records, 40).loss = kNan;
  Thresholds thresholds;
  thresholds.lr_anomaly.enabled = false;
  thresholds.nonfinite.enabled = false;
  RunJudge judge(thresholds);
  for (const auto& record : records) judge.observe(record);
  EXPECT_TRUE(judge.finish().empty()) << describe(judge.finish());
}

}  // namespace
}  // namespace faultline::detectors
