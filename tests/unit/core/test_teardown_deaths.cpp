// harness/trial/teardown_deaths: which ranks died after their end event said how the run ended,
// and the warning each gets.
#include "harness/trial/teardown_deaths.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <csignal>

namespace faultline::harness {
namespace {

RankStatus signaled(int signal) {
  RankStatus status;
  status.kind = ExitKind::Signaled;
  status.signal = signal;
  return status;
}

RankStatus exited(int code) {
  RankStatus status;
  status.kind = ExitKind::Exited;
  status.exit_code = code;
  return status;
}

// Two ranks with these statuses and end events, after step 20.
SupervisedResult two_ranks(RankStatus first, std::optional<EndStatus> first_end, RankStatus second,
                           std::optional<EndStatus> second_end) {
  SupervisedResult result;
  result.ranks = {first, second};
  result.ends = {EndEvent{first_end, ""}, EndEvent{second_end, ""}};
  result.last_step = {20, 20};
  return result;
}

TEST(DiedAfterItsEnd, ASignalAfterOkOrAHaltIsADeathAfterTheEnd) {
  const auto result =
      two_ranks(exited(3), EndStatus::Nonfinite, signaled(SIGABRT), EndStatus::Nonfinite);
  EXPECT_FALSE(died_after_its_end(result, 0)) << "exit 3 is the halt's own code";
  EXPECT_TRUE(died_after_its_end(result, 1));
  for (auto status : {EndStatus::Ok, EndStatus::DataAnomaly, EndStatus::Oom})
    EXPECT_TRUE(
        died_after_its_end(two_ranks(exited(0), EndStatus::Ok, signaled(SIGSEGV), status), 1))
        << to_string(status);
}

TEST(DiedAfterItsEnd, ANonZeroExitCountsOnlyAfterOk) {
  EXPECT_TRUE(died_after_its_end(two_ranks(exited(0), EndStatus::Ok, exited(1), EndStatus::Ok), 1));
  EXPECT_FALSE(
      died_after_its_end(two_ranks(exited(0), EndStatus::Ok, exited(1), EndStatus::Error), 1));
}

TEST(DiedAfterItsEnd, NoEndEventAnErrorOrAKillByFaultlineIsNot) {
  EXPECT_FALSE(died_after_its_end(two_ranks(exited(0), EndStatus::Ok, signaled(SIGSEGV), {}), 1));
  EXPECT_FALSE(died_after_its_end(
      two_ranks(exited(0), EndStatus::Ok, signaled(SIGABRT), EndStatus::Error), 1));
  EXPECT_FALSE(died_after_its_end(
      two_ranks(exited(0), EndStatus::Ok, signaled(SIGTERM), EndStatus::Terminated), 1));
  auto killed = signaled(SIGKILL);
  killed.killed_by_harness = true;
  EXPECT_FALSE(died_after_its_end(two_ranks(exited(0), EndStatus::Ok, killed, EndStatus::Ok), 1));
}

TEST(TeardownWarnings, OneWarningPerRankSayingHowItEnded) {
  auto result =
      two_ranks(signaled(SIGABRT), EndStatus::Ok, signaled(SIGABRT), EndStatus::Nonfinite);
  const std::vector<RankLaunch> launches(2);
  const auto warnings = teardown_warnings(result, launches);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_EQ(warnings[0].kind, detectors::FailureKind::TeardownCrash);
  EXPECT_EQ(warnings[0].rank, 0);
  EXPECT_EQ(warnings[0].step, -1);
  EXPECT_EQ(warnings[0].detail,
            "rank 0 died of SIGABRT after its end event said training ended well (status ok, "
            "after step 20)");
  EXPECT_EQ(warnings[1].detail,
            "rank 1 died of SIGABRT after its end event said it halted (status nonfinite, after "
            "step 20)");
}

}  // namespace
}  // namespace faultline::harness
