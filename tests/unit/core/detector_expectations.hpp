// Test support for the detector tests: readable failure lists and the "exactly one failure of
// this kind, step and rank" expectation.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "probes/detectors/failure.hpp"

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

}  // namespace faultline::testing
