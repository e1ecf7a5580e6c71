// Tests for src/trainer/softmax_kernel.cpp (its use inside attention is tested with the fused
// attention, test_cpu_kernels.cpp): the exp against std::exp, and the causal softmax rows and
// their backward against a direct computation in double, with the entries past the diagonal
// zeroed and a NaN kept to its row; every SIMD path the CPU runs agrees.
#include "trainer/softmax_kernel.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace faultline::trainer {
namespace {

TEST(SoftmaxKernel, ExpIsWithinTwoUlpsOverTheRangeItServes) {
  double worst = 0;
  for (float x = -87.0f; x <= 88.0f; x += 1.0f / 256) {
    const double exact = std::exp(double(x));
    worst = std::max(worst, std::fabs(fast_exp(x) - exact) / exact);
  }
  EXPECT_LT(worst, 2.5e-7);  // two float ulps are 2.4e-7 relative at worst
  EXPECT_EQ(fast_exp(0.0f), 1.0f);
  EXPECT_EQ(fast_exp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(fast_exp(-100.0f), 0.0f);
  EXPECT_TRUE(std::isnan(fast_exp(std::numeric_limits<float>::quiet_NaN())));
}

// A [time, time] score matrix (leading dimension time + 3) with garbage past the diagonal.
std::vector<float> sample_scores(int64_t time, int64_t ld) {
  std::mt19937 gen(31);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> scores(time * ld);
  for (int64_t i = 0; i < time; ++i)
    for (int64_t j = 0; j < ld; ++j) scores[i * ld + j] = j <= i ? normal(gen) : 1e30f;
  return scores;
}

TEST(SoftmaxKernel, CausalRowsAreTheSoftmaxUpToTheDiagonalAndZeroAfter) {
  const int64_t time = 45, ld = 48;
  auto scores = sample_scores(time, ld);
  auto probs = scores;
  causal_softmax_rows(probs.data(), ld, 0, time, time);
  for (int64_t i = 0; i < time; ++i) {
    double max = -INFINITY, total = 0;
    for (int64_t j = 0; j <= i; ++j) max = std::max(max, double(scores[i * ld + j]));
    for (int64_t j = 0; j <= i; ++j) total += std::exp(scores[i * ld + j] - max);
    for (int64_t j = 0; j <= i; ++j)
      EXPECT_NEAR(probs[i * ld + j], std::exp(scores[i * ld + j] - max) / total, 3e-7)
          << i << "," << j;
    for (int64_t j = i + 1; j < time; ++j) EXPECT_EQ(probs[i * ld + j], 0.0f);
    EXPECT_EQ(probs[i * ld + time], 1e30f) << "past zero_to: untouched";
  }
}

TEST(SoftmaxKernel, BackwardIsTheSoftmaxJacobianTimesTheGradient) {
  const int64_t time = 37, ld = 40;
  auto probs = sample_scores(time, ld);
  causal_softmax_rows(probs.data(), ld, 0, time, time);
  std::mt19937 gen(32);
  std::normal_distribution<float> normal;
  std::vector<float> grad(time * ld);
  for (float& g : grad) g = normal(gen);
  auto result = grad;
  causal_softmax_backward_rows(probs.data(), result.data(), ld, 0, time, time);
  for (int64_t i = 0; i < time; ++i) {
    double dot = 0;
    for (int64_t j = 0; j <= i; ++j) dot += double(probs[i * ld + j]) * grad[i * ld + j];
    for (int64_t j = 0; j <= i; ++j)
      EXPECT_NEAR(result[i * ld + j], probs[i * ld + j] * (grad[i * ld + j] - dot), 1e-6);
    for (int64_t j = i + 1; j < time; ++j) EXPECT_EQ(result[i * ld + j], 0.0f);
  }
}

// Each SIMD path this CPU can run (a CI machine may run another) gives the softmax and its
// backward to within float rounding of the default path.
TEST(SoftmaxKernel, EverySupportedSimdPathAgrees) {
  const int64_t time = 45, ld = 48;
  const auto scores = sample_scores(time, ld);
  std::vector<float> grad(time * ld, 0.5f);
  for (size_t i = 0; i < grad.size(); ++i) grad[i] = std::sin(0.37f * i);
  auto run = [&](SimdPath path) {
    auto probs = scores;
    causal_softmax_rows(probs.data(), ld, 0, time, time, path);
    auto result = grad;
    causal_softmax_backward_rows(probs.data(), result.data(), ld, 0, time, time, path);
    return std::make_pair(probs, result);
  };
  const auto [probs, result] = run(simd_path());
  for (SimdPath path : {SimdPath::Generic, SimdPath::Avx2, SimdPath::Avx512}) {
    if (!simd_path_supported(path)) continue;
    const auto [other_probs, other_result] = run(path);
    for (int64_t i = 0; i < time; ++i)
      for (int64_t j = 0; j < time; ++j) {
        EXPECT_NEAR(other_probs[i * ld + j], probs[i * ld + j], 3e-7) << to_string(path);
        EXPECT_NEAR(other_result[i * ld + j], result[i * ld + j], 1e-6) << to_string(path);
      }
  }
}

TEST(SoftmaxKernel, NanMakesItsRowNanAndNoOther) {
  const int64_t time = 20;
  auto scores = sample_scores(time, time);
  scores[12 * time + 5] = std::numeric_limits<float>::quiet_NaN();
  causal_softmax_rows(scores.data(), time, 0, time, time);
  for (int64_t i = 0; i < time; ++i)
    for (int64_t j = 0; j <= i; ++j)
      EXPECT_EQ(std::isnan(scores[i * time + j]), i == 12) << i << "," << j;
}

}  // namespace
}  // namespace faultline::trainer
