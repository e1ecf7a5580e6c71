// Tests for probes/detectors/resources.cpp and the judge's run facts: memory limit and leaks and
// data stalls on synthetic multi-rank runs; tokens/s and world size from events. Stragglers:
// test_detectors_straggler.cpp.
#include <gtest/gtest.h>

#include <stdexcept>

#include "detector_expectations.hpp"
#include "probes/detectors/run_judge.hpp"
#include "probes/detectors/synthetic.hpp"

namespace faultline::detectors {
namespace {
using faultline::testing::describe;
using faultline::testing::expect_one;

constexpr double kMiB = 1024.0 * 1024.0;

std::vector<Failure> judge(const std::vector<StepRecord>& records) {
  RunJudge judge;
  for (const auto& record : records) judge.observe(record);
  return judge.finish();
}

// Adds `mib_per_step` MiB per step to one rank's memory, as fault.leak_mb_per_step does.
void leak(std::vector<StepRecord>& records, int rank, double mib_per_step) {
  for (auto& record : records)
    if (record.rank == rank)
      *record.mem_bytes +=
          static_cast<int64_t>(mib_per_step * kMiB * static_cast<double>(record.step));
}

TEST(DetectorsResources, MemoryOverItsLimitIsCaughtWhileStreaming) {
  auto records = synthetic_run({100, 2});
  for (auto& record : records)
    if (record.rank == 1 && record.step >= 70)
      record.mem_bytes = static_cast<int64_t>(0.97 * static_cast<double>(*record.mem_total_bytes));
  RunJudge judge;
  for (const auto& record : records) judge.observe(record);
  ASSERT_EQ(judge.failures_so_far().size(), 1u) << describe(judge.failures_so_far());
  EXPECT_FALSE(judge.fatal());
  // The jump to 97 % is also steep growth; one failure per kind keeps the earliest step.
  auto failures = judge.finish();
  ASSERT_GE(failures.size(), 1u);
  EXPECT_STREQ(to_string(failures[0].kind), "memory");
  EXPECT_EQ(failures[0].rank, 1);
  EXPECT_LE(failures[0].step, 70);
}

TEST(DetectorsResources, PlantedLeakIsCaught) {
  auto records = synthetic_run({100, 1});
  leak(records, 0, 4.0);
  auto failures = judge(records);
  ASSERT_NO_FATAL_FAILURE(
      expect_one(failures, "memory", 6, 0));  // the first step after memory.skip_steps
  EXPECT_NE(failures[0].detail.find("4 MiB/step"), std::string::npos) << failures[0].detail;
  // Fitted from step 6, first a leak at step 25 (20 fitted steps), shown by a prefix of 25 + 20
  // steps: a prefix to step 6 would show nothing.
  EXPECT_EQ(failures[0].shown_by, 45);
  EXPECT_EQ(evidence_step(failures[0]), 45);

  auto prefix = synthetic_run({45, 1});
  leak(prefix, 0, 4.0);
  ASSERT_NO_FATAL_FAILURE(expect_one(judge(prefix), "memory", 6, 0));
}

TEST(DetectorsResources, LeakOnOneRankNamesIt) {
  auto records = synthetic_run({60, 4});
  leak(records, 2, 2.0);
  expect_one(judge(records), "memory", 6, 2);
}

TEST(DetectorsResources, FlatSlowOrOneOffMemoryIsHealthy) {
  auto slow = synthetic_run();
  leak(slow, 0, 0.5);  // under the 1 MiB/step limit
  EXPECT_TRUE(judge(slow).empty()) << describe(judge(slow));
  auto jump = synthetic_run();
  for (auto& record : jump)
    if (record.step >= 50) *record.mem_bytes += static_cast<int64_t>(300 * kMiB);  // a cache fills
  EXPECT_TRUE(judge(jump).empty()) << describe(judge(jump));
  auto short_run = synthetic_run({20, 1});
  leak(short_run, 0, 4.0);  // 15 fitted steps: too few to call
  EXPECT_TRUE(judge(short_run).empty()) << describe(judge(short_run));
}

TEST(DetectorsResources, DataStallOnOneRankNamesIt) {
  auto records = synthetic_run({50, 2});
  for (auto& record : records)
    if (record.rank == 1) {
      *record.data_ms += 200;  // fault.data_delay_ms on rank 1
      *record.step_ms += 200;
    } else {
      *record.comm_ms += 200;  // rank 0 waits for it in the all-reduce
      *record.step_ms += 200;
    }
  auto failures = judge(records);
  ASSERT_NO_FATAL_FAILURE(expect_one(failures, "data_stall", -1, 1));
  EXPECT_NE(failures[0].detail.find("rank 1"), std::string::npos);
}

TEST(DetectorsResources, DataStallOnEveryRankReportsTheWorst) {
  auto records = synthetic_run({50, 3});
  for (auto& record : records) {
    *record.data_ms += 100 + 50 * record.rank;
    *record.step_ms += 100 + 50 * record.rank;
  }
  auto failures = judge(records);
  ASSERT_EQ(failures.size(), 1u) << describe(failures);
  EXPECT_EQ(failures[0].rank, 2);
  EXPECT_NE(failures[0].detail.find("also ranks 0, 1"), std::string::npos) << failures[0].detail;
}

// The issue-19 case: a starved rank's peers wait for it in the all-reduce, and so, for a while,
// does the starved rank for them. Its data share of the whole step is 20 / 45 (under 0.5); of
// its own time outside the collective it is 20 / 23.
TEST(DetectorsResources, DataShareLeavesOutTheTimeInTheCollective) {
  auto records = synthetic_run({40, 4});
  for (auto& record : records) {
    const bool starved = record.rank == 1;
    record.data_ms = starved ? 20.0 : 0.1;
    record.comm_ms = starved ? 22.0 : 41.9;
    record.step_ms = 45.0;
  }
  auto failures = judge(records);
  ASSERT_NO_FATAL_FAILURE(expect_one(failures, "data_stall", -1, 1));
  EXPECT_NE(failures[0].detail.find("a median 86.96% of its step time outside the collective"),
            std::string::npos)
      << failures[0].detail;
}

TEST(DetectorsResources, DataStallNeedsEnoughSteps) {
  auto records = synthetic_run({4, 1});
  for (auto& record : records) {
    *record.data_ms += 500;
    *record.step_ms += 500;
  }
  EXPECT_TRUE(judge(records).empty());
}

TEST(DetectorsResources, TokensPerSecondAndWorldSizeComeFromEvents) {
  RunJudge judge;
  EXPECT_FALSE(judge.tokens_per_s().has_value());
  judge.observe(
      EventRecord{0, 0.0, "start", 1, R"({"type":"event","name":"start","world_size":4})"});
  judge.observe(EventRecord{0, 9.0, "end", 100, R"({"name":"end","tokens_per_s":1000.5})"});
  judge.observe(EventRecord{1, 9.0, "end", 100, R"({"name":"end","tokens_per_s":999.5})"});
  judge.observe(EventRecord{1, 9.0, "end", 100, "not json"});  // ignored, not fatal
  EXPECT_EQ(judge.world_size(), 4);
  ASSERT_TRUE(judge.tokens_per_s().has_value());
  EXPECT_DOUBLE_EQ(*judge.tokens_per_s(), 2000.0);
  EXPECT_TRUE(judge.finish().empty());
  RunJudge short_run;
  short_run.observe(EventRecord{0, 1.0, "end", 2, R"({"tokens_per_s":0})"});
  EXPECT_FALSE(short_run.tokens_per_s().has_value());  // under 3 steps: not measured
}

TEST(DetectorsResources, MetricsRecordVariantIsDispatched) {
  auto records = synthetic_run({30, 3});
  RunJudge judge;
  for (const auto& record : records) judge.observe(MetricsRecord{record});
  judge.observe(MetricsRecord{FingerprintRecord{0, 1.0, 10, "grads", "abcd", {}, {}}});
  EXPECT_EQ(judge.step_records(), 90);
  EXPECT_EQ(judge.world_size(), 3);
  EXPECT_TRUE(judge.finish().empty());
}

}  // namespace
}  // namespace faultline::detectors
