// Tests for src/trainer/linear.cpp and causal_attention.cpp: the fused kernels against LibTorch's
// ops in double precision, forward and backward, at context lengths that do and do not fill the
// last row block; causality; NaN stays in its sample; the fallbacks.
#include "trainer/cpu_kernels.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>

namespace faultline::trainer {
namespace {

double max_error(const torch::Tensor& value, const torch::Tensor& exact) {
  return (value.to(torch::kDouble) - exact).abs().max().item<double>();
}

torch::Tensor causal_mask(int64_t time, torch::Dtype dtype) {
  return torch::full({time, time}, -std::numeric_limits<double>::infinity(), dtype).triu(1);
}

// Output and gradient of `fn` at `input` (upstream gradient `upstream`), in the input's dtype.
template <typename Fn>
std::pair<torch::Tensor, torch::Tensor> value_and_grad(Fn fn, const torch::Tensor& input,
                                                       const torch::Tensor& upstream) {
  auto leaf = input.detach().clone().requires_grad_(true);
  auto out = fn(leaf);
  out.backward(upstream.to(input.dtype()));
  return {out.detach(), leaf.grad()};
}

TEST(Linear, ForwardAndBackwardMatchAtenInDouble) {
  torch::manual_seed(11);
  auto x = torch::randn({3, 7, 24}), upstream = torch::randn({3, 7, 40});
  auto weight = (torch::randn({40, 24}) * 0.2).requires_grad_(true);
  auto bias = torch::randn({40}).requires_grad_(true);
  for (bool with_bias : {true, false}) {
    auto fused = [&](const torch::Tensor& in) {
      return linear(in, weight, with_bias ? bias : torch::Tensor(), CpuKernels::Fused);
    };
    auto [y, dx] = value_and_grad(fused, x, upstream);
    auto dw = weight.grad().clone();
    weight.mutable_grad().reset();
    auto wd = weight.detach().to(torch::kDouble).requires_grad_(true);
    auto bd = bias.detach().to(torch::kDouble).requires_grad_(true);
    auto exact = [&](const torch::Tensor& in) {
      return torch::nn::functional::linear(in, wd, with_bias ? bd : torch::Tensor());
    };
    auto [y_exact, dx_exact] = value_and_grad(exact, x.to(torch::kDouble), upstream);
    EXPECT_EQ(y.sizes(), y_exact.sizes());
    EXPECT_LT(max_error(y, y_exact), 1e-5);
    EXPECT_LT(max_error(dx, dx_exact), 1e-5);
    EXPECT_LT(max_error(dw, wd.grad()), 1e-4);
    if (with_bias) {
      EXPECT_LT(max_error(bias.grad(), bd.grad()), 1e-4);
      bias.mutable_grad().reset();
    }
  }
}

TEST(Linear, FallsBackToAtenForOtherDtypesAndWhenAsked) {
  auto x = torch::randn({4, 6}, torch::kDouble), w = torch::randn({3, 6}, torch::kDouble);
  EXPECT_TRUE(torch::equal(linear(x, w, {}, CpuKernels::Fused), torch::mm(x, w.t())));
  EXPECT_FALSE(fused_kernels_apply(CpuKernels::Aten, torch::randn({2})));
  EXPECT_FALSE(fused_kernels_apply(CpuKernels::Fused, x));
  EXPECT_TRUE(fused_kernels_apply(CpuKernels::Fused, torch::randn({2})));
}

// [B, T, 3C] activations of a size that makes softmax neither flat nor saturated.
torch::Tensor sample_qkv(int64_t batch, int64_t time, int64_t width, uint64_t seed) {
  torch::manual_seed(seed);
  return torch::randn({batch, time, 3 * width}) * 0.8;
}

class CausalAttention : public ::testing::TestWithParam<int64_t> {};

TEST_P(CausalAttention, ForwardAndBackwardAreAsCloseToExactAsAten) {
  const int64_t time = GetParam(), batch = 2, n_head = 3, width = 24;
  auto qkv = sample_qkv(batch, time, width, 5 + time);
  auto upstream = torch::randn({batch, time, width});
  auto run = [&](CpuKernels kernels, torch::Dtype dtype) {
    auto mask = causal_mask(time, dtype);
    return value_and_grad(
        [&](const torch::Tensor& in) { return causal_attention(in, n_head, mask, kernels); },
        qkv.to(dtype), upstream);
  };
  auto [y_exact, grad_exact] = run(CpuKernels::Aten, torch::kDouble);
  auto [y_aten, grad_aten] = run(CpuKernels::Aten, torch::kFloat);
  auto [y, grad] = run(CpuKernels::Fused, torch::kFloat);
  const double forward = max_error(y, y_exact), backward = max_error(grad, grad_exact);
  std::printf("T %lld: forward error %.3g (ATen %.3g), backward %.3g (ATen %.3g)\n",
              static_cast<long long>(time), forward, max_error(y_aten, y_exact), backward,
              max_error(grad_aten, grad_exact));
  EXPECT_LT(forward, 4 * max_error(y_aten, y_exact) + 1e-6);
  EXPECT_LT(backward, 4 * max_error(grad_aten, grad_exact) + 1e-6);
}

// 1 and 31: one partial block; 32: one full; 45: a full and a partial; 64 and 128: as the
// bundled recipes.
INSTANTIATE_TEST_SUITE_P(ContextLengths, CausalAttention,
                         ::testing::Values(1, 31, 32, 45, 64, 128));

TEST(CausalAttentionKernel, AnOutputDoesNotDependOnLaterPositions) {
  auto qkv = sample_qkv(1, 50, 16, 9);
  auto mask = causal_mask(50, torch::kFloat);
  auto before = causal_attention(qkv, 2, mask, CpuKernels::Fused);
  auto changed = qkv.clone();
  changed.narrow(1, 40, 10).normal_();
  auto after = causal_attention(changed, 2, mask, CpuKernels::Fused);
  EXPECT_TRUE(torch::equal(before.narrow(1, 0, 40), after.narrow(1, 0, 40)));
  EXPECT_FALSE(torch::equal(before.narrow(1, 40, 10), after.narrow(1, 40, 10)));
}

// The finiteness probes name the samples whose activations are not finite: a NaN in one sample
// must reach that sample's output and its gradient, and no other sample's.
TEST(CausalAttentionKernel, NanStaysInItsSample) {
  auto qkv = sample_qkv(3, 40, 16, 10);
  qkv[1][20][5] = std::numeric_limits<float>::quiet_NaN();
  auto mask = causal_mask(40, torch::kFloat);
  auto [y, grad] = value_and_grad(
      [&](const torch::Tensor& in) { return causal_attention(in, 2, mask, CpuKernels::Fused); },
      qkv, torch::ones({3, 40, 16}));
  EXPECT_TRUE(y[1].isnan().any().item<bool>());
  EXPECT_TRUE(grad[1].isnan().any().item<bool>());
  for (int sample : {0, 2}) {
    EXPECT_TRUE(y[sample].isfinite().all().item<bool>());
    EXPECT_TRUE(grad[sample].isfinite().all().item<bool>());
  }
}

TEST(CausalAttentionKernel, ResultIsBitwiseTheSameAtAnyThreadCount) {
  auto qkv = sample_qkv(2, 70, 24, 12);
  auto mask = causal_mask(70, torch::kFloat);
  auto upstream = torch::randn({2, 70, 24});
  auto run = [&](int threads) {
    at::set_num_threads(threads);
    return value_and_grad(
        [&](const torch::Tensor& in) { return causal_attention(in, 3, mask, CpuKernels::Fused); },
        qkv, upstream);
  };
  auto [y1, g1] = run(1);
  auto [y2, g2] = run(2);
  at::set_num_threads(1);
  EXPECT_TRUE(torch::equal(y1, y2));
  EXPECT_TRUE(torch::equal(g1, g2));
}

}  // namespace
}  // namespace faultline::trainer
