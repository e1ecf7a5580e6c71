// Unit tests of report/headline: one phrase per failure kind, a loss scaler's collapse told
// apart from a NaN the model made.
#include "report/headline.hpp"

#include <gtest/gtest.h>

#include "probes/detectors/failure_kind.hpp"

namespace faultline::report {
namespace {

TEST(Headline, ANonfiniteStepIsANanAndASpanOfSkippedStepsIsTheLossScale) {
  const store::RunFailure nan{"nonfinite", 12, 0, "loss is NaN"};
  const store::RunFailure skips{"nonfinite", 40, 0, "the loss scaler skipped 8 steps in a row", 47};
  EXPECT_EQ(span_of(nan), FailureSpan::OneStep);
  EXPECT_EQ(span_of(skips), FailureSpan::Steps);
  EXPECT_EQ(what_happened("nonfinite", span_of(nan)), "Training went non-finite (NaN/Inf)");
  EXPECT_EQ(what_happened("nonfinite", span_of(skips)), "The fp16 loss scale collapsed");
}

TEST(Headline, EveryKindHasItsOwnPhrase) {
  for (const auto& name : detectors::failure_kind_names()) {
    EXPECT_NE(what_happened(name), name) << name;
    EXPECT_EQ(what_happened(name).find("Failure '"), std::string::npos) << name;
  }
}

TEST(Headline, AnUnknownKindIsNamedAsStored) {
  EXPECT_EQ(what_happened("gremlins"), "Failure 'gremlins'");
}

}  // namespace
}  // namespace faultline::report
