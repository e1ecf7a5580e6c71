// Tests for probes/detectors/stats.cpp: the median and the binomial tail the sign tests use.
#include "probes/detectors/stats.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace faultline::detectors {
namespace {

TEST(DetectorsStats, MedianOfOddEvenAndEmpty) {
  EXPECT_EQ(median({3, 1, 2}), 2);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_TRUE(std::isnan(median({})));
}

TEST(DetectorsStats, BinomialUpperTail) {
  EXPECT_EQ(binomial_upper_tail(0, 10, 0.5), 1.0);
  EXPECT_EQ(binomial_upper_tail(11, 10, 0.5), 0.0);
  EXPECT_DOUBLE_EQ(binomial_upper_tail(10, 10, 0.5), 1.0 / 1024);
  EXPECT_NEAR(binomial_upper_tail(16, 18, 0.5), 172.0 / 262144, 1e-15);  // C(18,16)+18+1
  EXPECT_NEAR(binomial_upper_tail(5, 10, 0.5), 638.0 / 1024, 1e-12);
  EXPECT_NEAR(binomial_upper_tail(1, 3, 0.25), 1 - 0.75 * 0.75 * 0.75, 1e-12);
  // Long runs: no overflow, and half the steps is no evidence at all.
  EXPECT_NEAR(binomial_upper_tail(50000, 100000, 0.5), 0.5, 0.01);
  EXPECT_LT(binomial_upper_tail(51000, 100000, 0.5), 1e-9);
}

}  // namespace
}  // namespace faultline::detectors
