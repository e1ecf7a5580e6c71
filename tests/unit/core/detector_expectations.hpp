// Test support for the detector tests: readable failure lists and the "exactly one failure of
// this kind, step and rank" expectation.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <stdexcept>

#include "probes/detectors/failure.hpp"
#include "probes/detectors/run_judge.hpp"

namespace faultline::testing {

inline std::string describe(const std::vector<detectors::Failure>& failures) {
  std::string text;
  for (const auto& f : failures)
    text += std::string(to_string(f.kind)) + " step " + std::to_string(f.step) + " rank " +
            std::to_string(f.rank) + ": " + f.detail + "\n";
  return text.empty() ? "no failures" : text;
}

// The run judged exactly one failure, of this kind, at this step and rank, with evidence.
inline void expect_one(const std::vector<detectors::Failure>& failures, const std::string& kind,
                       int64_t step, int rank) {
  ASSERT_EQ(failures.size(), 1u) << describe(failures);
  EXPECT_EQ(to_string(failures[0].kind), kind) << describe(failures);
  EXPECT_EQ(failures[0].step, step) << describe(failures);
  EXPECT_EQ(failures[0].rank, rank) << describe(failures);
  EXPECT_FALSE(failures[0].detail.empty());
}

// Every record through one RunJudge, in order; what it found.
inline std::vector<detectors::Failure> judge(const std::vector<StepRecord>& records,
                                             detectors::Thresholds thresholds = {},
                                             detectors::RunContext context = {}) {
  detectors::RunJudge judge(thresholds, context);
  for (const auto& record : records) judge.observe(record);
  return judge.finish();
}

// The record of `step` on `rank`, for a test to plant its fault in.
inline StepRecord& record_at(std::vector<StepRecord>& records, int64_t step, int rank = 0) {
  for (auto& record : records)
    if (record.step == step && record.rank == rank) return record;
  throw std::out_of_range("no record for step " + std::to_string(step));
}

}  // namespace faultline::testing
