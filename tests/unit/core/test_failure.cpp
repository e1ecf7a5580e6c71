// Tests for probes/detectors/failure.cpp: the order a run's failures are stored and reported in.
#include "probes/detectors/failure.hpp"

#include <gtest/gtest.h>

namespace faultline::detectors {
namespace {

std::vector<FailureKind> kinds_of(const std::vector<Failure>& failures) {
  std::vector<FailureKind> kinds;
  for (const auto& failure : failures) kinds.push_back(failure.kind);
  return kinds;
}

TEST(Failure, ARunsFailuresAreReportedByStepWithWholeRunOnesAndWarningsLast) {
  // As an imported log gives them: how it ended first, then what the detectors saw.
  std::vector<Failure> failures = {{FailureKind::Crash, 151, 0, "its log ends at step 150"},
                                   {FailureKind::TeardownCrash, 1, 1, "died as it exited"},
                                   {FailureKind::Straggler, -1, 1, "rank 1 is slow"},
                                   {FailureKind::BadInit, 1, -1, "first loss high"},
                                   {FailureKind::Nonfinite, 150, 0, "loss nan"},
                                   {FailureKind::LossSpike, 150, 0, "loss x9"}};
  order_for_report(failures);
  EXPECT_EQ(kinds_of(failures),
            (std::vector<FailureKind>{FailureKind::Nonfinite, FailureKind::LossSpike,
                                      FailureKind::Crash, FailureKind::Straggler,
                                      FailureKind::BadInit, FailureKind::TeardownCrash}));
}

TEST(Failure, FailuresOfOneKindAndStepKeepTheirOrder) {
  std::vector<Failure> failures = {{FailureKind::Crash, 9, 3, "rank 3"},
                                   {FailureKind::Crash, 9, 1, "rank 1"}};
  order_for_report(failures);
  EXPECT_EQ(failures[0].rank, 3);
  EXPECT_EQ(failures[1].rank, 1);
}

}  // namespace
}  // namespace faultline::detectors
