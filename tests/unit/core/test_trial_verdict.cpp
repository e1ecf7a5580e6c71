// Unit tests of the verdict names in harness/trial/trial (tests/e2e/test_trial runs trials):
// each verdict reads back from the text the store keeps; none from "" or other text.
#include "harness/trial/trial.hpp"

#include <gtest/gtest.h>

namespace faultline::harness {
namespace {

TEST(Trial, EachVerdictReadsBackFromItsStoredName) {
  for (Verdict verdict : {Verdict::Pass, Verdict::Fail, Verdict::Skip, Verdict::InfraError})
    EXPECT_EQ(parse_verdict(to_string(verdict)), verdict) << to_string(verdict);
  EXPECT_STREQ(to_string(Verdict::InfraError), "infra_error");
  EXPECT_FALSE(parse_verdict("").has_value()) << "the store's verdict of a run still running";
  EXPECT_FALSE(parse_verdict("failed").has_value());
  EXPECT_FALSE(parse_verdict("Fail").has_value());
}

}  // namespace
}  // namespace faultline::harness
