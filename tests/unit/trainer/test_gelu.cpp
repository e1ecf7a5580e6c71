// Tests for src/trainer/gelu.cpp and gelu_kernel.cpp: the fused GELU against ATen's tanh GELU,
// forward and backward; NaN and infinity pass through as ATen's do (the probes rely on it); the
// result does not depend on the thread count; every SIMD path the CPU runs is as accurate;
// non-float input falls back to ATen.
#include "trainer/gelu.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "trainer/gelu_kernel.hpp"

namespace faultline::trainer {
namespace {

torch::Tensor sample_input(int64_t count) {
  torch::manual_seed(7);
  // Wide enough to reach both tails of the tanh (|u| > 7.9 clamps) and its linear middle.
  return torch::randn({count}) * 4;
}

TEST(GeluKernel, TanhIsWithinAFewUlpsAcrossTheRange) {
  double worst_absolute = 0;
  for (float u = -12.0f; u <= 12.0f; u += 1.0f / 1024) {
    worst_absolute =
        std::max(worst_absolute, std::fabs(double(fast_tanh(u)) - std::tanh(double(u))));
  }
  EXPECT_LT(worst_absolute, 5e-7);
  for (float u : {1e-8f, -3e-5f, 2e-4f, 3.9e-4f, 4.1e-4f, 1e-3f})
    EXPECT_NEAR(fast_tanh(u) / std::tanh(double(u)), 1.0, 1e-6) << "u = " << u;
  EXPECT_EQ(fast_tanh(0.0f), 0.0f);
  EXPECT_EQ(fast_tanh(50.0f), -fast_tanh(-50.0f));
}

// Both float versions against ATen's in double precision: the fused one is no more than a few
// times further from it than ATen's own float kernel (the error of both is the cancellation in
// 1 + tanh where tanh is near -1).
TEST(Gelu, ForwardIsAsCloseToExactAsAtenFloat) {
  auto x = sample_input(100003);  // odd length: the vector loops' scalar tail runs too
  auto exact = torch::gelu(x.to(torch::kDouble), "tanh");
  const double ours = (gelu_tanh(x).to(torch::kDouble) - exact).abs().max().item<double>();
  const double aten =
      (torch::gelu(x, "tanh").to(torch::kDouble) - exact).abs().max().item<double>();
  EXPECT_LT(ours, 2e-6);
  EXPECT_LT(ours, 8 * aten + 1e-7);
  std::printf("max abs error vs double: ours %.3g, ATen float %.3g\n", ours, aten);
}

TEST(Gelu, BackwardIsAsCloseToExactAsAtenFloat) {
  auto x = sample_input(50001);
  auto upstream = torch::randn({50001});
  auto gradient = [&](const torch::Tensor& input, bool fused) {
    auto leaf = input.clone().requires_grad_(true);
    (fused ? gelu_tanh(leaf) : torch::gelu(leaf, "tanh")).backward(upstream.to(input.dtype()));
    return leaf.grad().to(torch::kDouble);
  };
  auto exact = gradient(x.to(torch::kDouble), false);
  const double ours = (gradient(x, true) - exact).abs().max().item<double>();
  const double aten = (gradient(x, false) - exact).abs().max().item<double>();
  EXPECT_LT(ours, 2e-5);
  EXPECT_LT(ours, 8 * aten + 1e-6);
  std::printf("max abs error vs double: ours %.3g, ATen float %.3g\n", ours, aten);
}

// The same loops compiled for each SIMD path this CPU can run (a CI machine may run another):
// each is as close to the double-precision GELU and its derivative as the default path's bound,
// and NaN and infinity pass through every one.
TEST(GeluKernel, EverySupportedSimdPathIsAsAccurate) {
  auto x = sample_input(10007);
  auto upstream = torch::randn({10007});
  auto leaf = x.to(torch::kDouble).requires_grad_(true);
  auto exact = torch::gelu(leaf, "tanh");
  exact.backward(upstream.to(torch::kDouble));
  for (SimdPath path : {SimdPath::Generic, SimdPath::Avx2, SimdPath::Avx512}) {
    if (!simd_path_supported(path)) continue;
    auto y = torch::empty_like(x), dx = torch::empty_like(x);
    gelu_tanh_forward(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), path);
    gelu_tanh_backward(x.data_ptr<float>(), upstream.data_ptr<float>(), dx.data_ptr<float>(),
                       x.numel(), path);
    EXPECT_LT((y.to(torch::kDouble) - exact.detach()).abs().max().item<double>(), 2e-6)
        << to_string(path);
    EXPECT_LT((dx.to(torch::kDouble) - leaf.grad()).abs().max().item<double>(), 2e-5)
        << to_string(path);
    const float special[] = {std::nanf(""), std::numeric_limits<float>::infinity()};
    float out[2];
    gelu_tanh_forward(special, out, 2, path);
    EXPECT_TRUE(std::isnan(out[0])) << to_string(path);
    EXPECT_EQ(out[1], std::numeric_limits<float>::infinity()) << to_string(path);
  }
}

TEST(Gelu, NonContiguousInputAndGradientAreHandled) {
  auto x = sample_input(64 * 48).view({64, 48}).t().requires_grad_(true);
  auto y = gelu_tanh(x);
  EXPECT_TRUE(torch::allclose(y, torch::gelu(x.detach(), "tanh"), 1e-5, 4e-6));
  y.sum().backward();
  auto reference = x.detach().clone().requires_grad_(true);
  torch::gelu(reference, "tanh").sum().backward();
  EXPECT_TRUE(torch::allclose(x.grad(), reference.grad(), 1e-5, 1e-5));
}

TEST(Gelu, NonFiniteValuesPropagateAsInAten) {
  const float inf = std::numeric_limits<float>::infinity();
  auto x = torch::tensor({std::nanf(""), inf, -inf, 0.0f, 1.0f});
  auto ours = gelu_tanh(x);
  auto aten = torch::gelu(x, "tanh");
  EXPECT_TRUE(std::isnan(ours[0].item<float>()));
  EXPECT_EQ(ours[1].item<float>(), inf);
  EXPECT_EQ(std::isnan(ours[2].item<float>()), std::isnan(aten[2].item<float>()));
  EXPECT_EQ(ours[3].item<float>(), 0.0f);
  EXPECT_NEAR(ours[4].item<float>(), aten[4].item<float>(), 1e-6);

  auto x_nan = torch::tensor({std::nanf(""), 1.0f}).requires_grad_(true);
  gelu_tanh(x_nan).sum().backward();
  EXPECT_TRUE(std::isnan(x_nan.grad()[0].item<float>()));
  EXPECT_TRUE(std::isfinite(x_nan.grad()[1].item<float>()));
}

TEST(Gelu, ResultIsBitwiseTheSameAtAnyThreadCount) {
  auto x = sample_input(300007).requires_grad_(true);
  const int threads_before = torch::get_num_threads();
  torch::set_num_threads(1);
  auto one = gelu_tanh(x);
  one.sum().backward();
  auto one_grad = x.grad().clone();
  x.mutable_grad().reset();
  torch::set_num_threads(2);
  auto two = gelu_tanh(x);
  two.sum().backward();
  torch::set_num_threads(threads_before);
  EXPECT_TRUE(torch::equal(one, two));
  EXPECT_TRUE(torch::equal(one_grad, x.grad()));
}

TEST(Gelu, DoubleInputFallsBackToAten) {
  auto x = sample_input(1000).to(torch::kDouble);
  EXPECT_TRUE(torch::equal(gelu_tanh(x), torch::gelu(x, "tanh")));
}

}  // namespace
}  // namespace faultline::trainer
