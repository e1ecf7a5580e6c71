// Tests for probes/detectors/reference.cpp (loss_regression): healthy seeds stay inside the
// reference band, a slower-learning curve fails where it leaves it, a one-run reference uses the
// default margin, and bad references are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "probes/detectors/reference.hpp"
#include "probes/detectors/synthetic.hpp"

namespace faultline::detectors {
namespace {

const Thresholds::LossRegression kDefaults{};

std::vector<std::vector<StepRecord>> reference_of(std::initializer_list<uint64_t> seeds) {
  std::vector<std::vector<StepRecord>> runs;
  for (uint64_t seed : seeds) runs.push_back(synthetic_run({100, 1, seed}));
  return runs;
}

// The synthetic curve learning `slowdown` times slower: the loss at step s is the healthy
// curve's at s / slowdown (1.5 + 4 exp(-s / 25), with its noise).
std::vector<StepRecord> slower(double slowdown, uint64_t seed = 9) {
  auto records = synthetic_run({100, 1, seed});
  for (auto& r : records) {
    const double s = static_cast<double>(r.step);
    r.loss += 4.0 * (std::exp(-s / (25.0 * slowdown)) - std::exp(-s / 25.0));
  }
  return records;
}

TEST(LossRegression, HealthySeedsStayInsideTheBandOfOtherSeeds) {
  const auto reference = reference_of({1, 2, 3});
  for (uint64_t seed = 4; seed <= 23; ++seed) {
    auto failure = compare_to_reference(synthetic_run({100, 1, seed}), reference, kDefaults);
    EXPECT_FALSE(failure) << "seed " << seed << ": " << failure->detail;
  }
}

TEST(LossRegression, ATwiceSlowerCurveFailsWhereJudgingStarts) {
  auto failure = compare_to_reference(slower(2.0), reference_of({1, 2, 3}), kDefaults);
  ASSERT_TRUE(failure);
  EXPECT_EQ(failure->kind, FailureKind::LossRegression);
  // Steps 1..100: judged from step 1 + ceil(0.2 x 99) = 21, where the curves are ~0.9 apart.
  EXPECT_EQ(failure->step, 21);
  EXPECT_EQ(failure->shown_by, 25);  // five consecutive steps
  EXPECT_EQ(failure->rank, -1);
  for (const char* part : {"smoothed loss", "reference band", "tolerance", "3 run(s)"})
    EXPECT_NE(failure->detail.find(part), std::string::npos) << failure->detail;
}

TEST(LossRegression, AReferenceOfOneRunUsesTheDefaultMargin) {
  const auto reference = reference_of({1});
  EXPECT_FALSE(compare_to_reference(synthetic_run({100, 1, 5}), reference, kDefaults));
  // Without a spread the tolerance is 12 % of the one run's smoothed loss.
  auto failure = compare_to_reference(slower(2.0), reference, kDefaults);
  ASSERT_TRUE(failure);
  EXPECT_NE(failure->detail.find("single-run margin 12%"), std::string::npos) << failure->detail;
  Thresholds::LossRegression wide = kDefaults;
  wide.single_margin = 1.0;  // twice the reference's loss: nothing is that bad
  EXPECT_FALSE(compare_to_reference(slower(2.0), reference, wide));
}

TEST(LossRegression, TheDetailNamesTheRuleThatSetTheTolerance) {
  // The default 10 % floor is wider than 2x these seeds' spread...
  auto floor = compare_to_reference(slower(2.0), reference_of({1, 2, 3}), kDefaults);
  ASSERT_TRUE(floor);
  EXPECT_NE(floor->detail.find("(the floor of 10% of the band's mean"), std::string::npos)
      << floor->detail;
  EXPECT_EQ(floor->detail.find("(2x the seed spread)"), std::string::npos) << floor->detail;
  // ... and without it the spread sets it.
  Thresholds::LossRegression no_floor = kDefaults;
  no_floor.min_margin = 0;
  auto spread = compare_to_reference(slower(2.0), reference_of({1, 2, 3}), no_floor);
  ASSERT_TRUE(spread);
  EXPECT_NE(spread->detail.find("(2x the seed spread)"), std::string::npos) << spread->detail;
}

TEST(LossRegression, OneNoisyStepOrAShortStretchDoesNotFire) {
  auto run = synthetic_run({100, 1, 7});
  Thresholds::LossRegression raw = kDefaults;
  raw.window = 1;  // no smoothing: only the sustained rule protects
  for (auto& r : run)
    if (r.step >= 50 && r.step < 54) r.loss += 2.0;  // four bad steps, five needed
  EXPECT_FALSE(compare_to_reference(run, reference_of({1, 2, 3}), raw));
  for (auto& r : run)
    if (r.step == 54) r.loss += 2.0;
  auto failure = compare_to_reference(run, reference_of({1, 2, 3}), raw);
  ASSERT_TRUE(failure);
  EXPECT_EQ(failure->step, 50);
}

TEST(LossRegression, OnlyStepsBothHaveAreCompared) {
  // A 10-step rung against 100-step references: judged on its own steps only.
  auto rung = synthetic_run({100, 1, 8});
  rung.resize(10);
  for (auto& r : rung) r.loss += 0.2 * static_cast<double>(r.step);  // learning nothing
  auto failure = compare_to_reference(rung, reference_of({1, 2, 3}), kDefaults);
  ASSERT_TRUE(failure);
  EXPECT_GE(failure->step, 3);
  EXPECT_LE(failure->shown_by, 10);
  // Steps the reference never reached are not judged.
  auto late = synthetic_run({200, 1, 4});
  for (auto& r : late)
    if (r.step > 100) r.loss = 5.0;
  EXPECT_FALSE(compare_to_reference(late, reference_of({1, 2}), kDefaults));
}

TEST(LossRegression, BadReferencesAreRefused) {
  EXPECT_THROW(compare_to_reference(synthetic_run(), {}, kDefaults), std::invalid_argument);
  auto empty_run = reference_of({1, 2});
  for (auto& r : empty_run[1]) r.loss = std::nan("");
  try {
    compare_to_reference(synthetic_run(), empty_run, kDefaults);
    FAIL() << "a reference run without a finite loss was accepted";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("reference run 2 of 2"), std::string::npos);
  }
  EXPECT_FALSE(compare_to_reference({}, reference_of({1}), kDefaults));  // nothing to judge
}

}  // namespace
}  // namespace faultline::detectors
