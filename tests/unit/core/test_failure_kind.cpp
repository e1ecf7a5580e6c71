// Tests for probes/detectors/failure_kind.cpp: every kind round-trips through its one name,
// unknown names are refused, and the data kind ranks with nonfinite (it was once misspelled).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "probes/detectors/failure.hpp"
#include "probes/detectors/failure_kind.hpp"

namespace faultline::detectors {
namespace {

TEST(FailureKind, EveryNameParsesBackToItsKindAndNamesAreUnique) {
  const auto names = failure_kind_names();
  EXPECT_EQ(names.size(), 21u);
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
  for (const auto& name : names) {
    auto kind = parse_failure_kind(name);
    ASSERT_TRUE(kind) << name;
    EXPECT_EQ(to_string(*kind), name);
  }
}

TEST(FailureKind, UnknownNamesAreRefused) {
  EXPECT_FALSE(parse_failure_kind("data_anomaly"));
  EXPECT_FALSE(parse_failure_kind("NONFINITE"));
  EXPECT_FALSE(parse_failure_kind(""));
  EXPECT_THROW(nlohmann::json("sloww").get<FailureKind>(), std::invalid_argument);
}

TEST(FailureKind, JsonUsesTheName) {
  EXPECT_EQ(nlohmann::json(FailureKind::LossSpike), "loss_spike");
  EXPECT_EQ(nlohmann::json("data").get<FailureKind>(), FailureKind::Data);
}

TEST(FailureKind, DataIsAsWellLocalizedAsNonfiniteAndTimingKindsAreTiming) {
  EXPECT_EQ(localization_rank(FailureKind::Data), localization_rank(FailureKind::Nonfinite));
  EXPECT_LT(localization_rank(FailureKind::Data), localization_rank(FailureKind::LossSpike));
  for (auto kind : {FailureKind::Straggler, FailureKind::DataStall, FailureKind::Slow})
    EXPECT_TRUE(is_timing(kind)) << to_string(kind);
  EXPECT_FALSE(is_timing(FailureKind::Nonfinite));
  EXPECT_FALSE(is_timing(FailureKind::Hang));
  EXPECT_TRUE(is_seen_at_its_step(FailureKind::Nonfinite));
  EXPECT_TRUE(is_seen_at_its_step(FailureKind::Crash));
  EXPECT_FALSE(is_seen_at_its_step(FailureKind::GradExplode));  // a streak: shown by its end
  EXPECT_FALSE(is_seen_at_its_step(FailureKind::Memory));       // a leak: shown by its fit
  EXPECT_FALSE(is_seen_at_its_step(FailureKind::Straggler));    // no step at all
  EXPECT_TRUE(is_curve(FailureKind::LossRegression));
  EXPECT_FALSE(is_curve(FailureKind::Stalled));  // judged alone, on the run's own start
  EXPECT_FALSE(is_curve(FailureKind::LossSpike));
}

TEST(FailureKind, BadInitIsAWarningWithAHintAndFailsNoRunAlone) {
  EXPECT_EQ(severity(FailureKind::BadInit), Severity::Warning);
  EXPECT_EQ(severity(FailureKind::LossRegression), Severity::Failure);
  EXPECT_NE(std::string(hint(FailureKind::BadInit)).find("init_std"), std::string::npos);
  EXPECT_FALSE(any_failing({{FailureKind::BadInit, 1, 0, "first loss 9"}}));
  EXPECT_TRUE(any_failing({{FailureKind::BadInit, 1, 0, ""}, {FailureKind::Stalled, 100, 0, ""}}));
  EXPECT_EQ(parse_failure_kind("loss_regression"), FailureKind::LossRegression);
}

TEST(FailureKind, AHintByTheKindsStoredNameIsItsHintAndNoneForANameThatIsNoKind) {
  EXPECT_STREQ(hint("loss_spike"), hint(FailureKind::LossSpike));
  EXPECT_STRNE(hint("loss_spike"), "");
  EXPECT_STREQ(hint("crash"), "");
  EXPECT_STREQ(hint("no_such_kind"), "");
}

}  // namespace
}  // namespace faultline::detectors
