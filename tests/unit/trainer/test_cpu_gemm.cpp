// Tests for src/trainer/cpu_gemm.cpp: sgemm against torch::mm in double for every transpose,
// on strided sub-matrices; beta = 0 never reads C (NaN there stays out); beta = 1 accumulates;
// linear_gemm is a linear layer's forward.
#include "trainer/cpu_gemm.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>
#include <tuple>

#include "common/text.hpp"
#include "trainer/simd_path.hpp"

namespace faultline::trainer {
namespace {

// The stored matrix behind op(X) = `logical` (m × k) for the given op, inside a wider buffer
// (leading dimension = stored columns + 3), so ld is exercised.
struct Stored {
  torch::Tensor buffer, view;
  int64_t ld;
};
Stored store(const torch::Tensor& logical, Transpose op) {
  auto stored = op == Transpose::Yes ? logical.t().contiguous() : logical.contiguous();
  const int64_t ld = stored.size(1) + 3;
  auto buffer = torch::full({stored.size(0), ld}, 7.0f);
  buffer.narrow(1, 0, stored.size(1)).copy_(stored);
  return {buffer, buffer.narrow(1, 0, stored.size(1)), ld};
}

TEST(CpuGemm, MatchesMmForEveryTransposeAndLeadingDimension) {
  torch::manual_seed(3);
  const int64_t m = 37, n = 29, k = 53;
  auto a = torch::randn({m, k}), b = torch::randn({k, n});
  auto exact = torch::mm(a.to(torch::kDouble), b.to(torch::kDouble));
  for (Transpose ta : {Transpose::No, Transpose::Yes})
    for (Transpose tb : {Transpose::No, Transpose::Yes}) {
      auto sa = store(a, ta), sb = store(b, tb);
      auto c = torch::full({m, n + 5}, std::numeric_limits<float>::quiet_NaN());
      sgemm(m, n, k, 0.5f, {sa.buffer.data_ptr<float>(), sa.ld, ta},
            {sb.buffer.data_ptr<float>(), sb.ld, tb}, 0.0f, c.data_ptr<float>(), n + 5);
      auto result = c.narrow(1, 0, n).to(torch::kDouble);
      EXPECT_LT((result - 0.5 * exact).abs().max().item<double>(), 1e-4)
          << "transposes " << int(ta) << int(tb);
      // The columns past n are outside C: untouched.
      EXPECT_TRUE(c.narrow(1, n, 5).isnan().all().item<bool>());
    }
}

TEST(CpuGemm, BetaOneAddsToC) {
  torch::manual_seed(4);
  auto a = torch::randn({8, 5}), b = torch::randn({5, 6}), c = torch::randn({8, 6});
  auto expected = c + torch::mm(a, b);
  sgemm(8, 6, 5, 1.0f, {a.data_ptr<float>(), 5}, {b.data_ptr<float>(), 6}, 1.0f,
        c.data_ptr<float>(), 6);
  EXPECT_TRUE(torch::allclose(c, expected, 1e-5, 1e-5));
}

TEST(CpuGemm, NanInAnInputReachesTheOutput) {
  auto a = torch::ones({4, 4}), b = torch::ones({4, 4}), c = torch::zeros({4, 4});
  a[2][1] = std::numeric_limits<float>::quiet_NaN();
  sgemm(4, 4, 4, 1.0f, {a.data_ptr<float>(), 4}, {b.data_ptr<float>(), 4}, 0.0f,
        c.data_ptr<float>(), 4);
  EXPECT_TRUE(c[2].isnan().all().item<bool>());
  EXPECT_TRUE(c[0].isfinite().all().item<bool>());
}

// A linear layer's forward, with and without bias, at two shapes and twice each (the second call
// of a shape runs the cached primitive); a NaN in one row of x stays in that row of y.
TEST(CpuGemm, LinearGemmIsXTimesWTransposedPlusBias) {
  torch::manual_seed(5);
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{37, 29, 53}, {64, 48, 16}})
    for (bool with_bias : {true, false})
      for (int repeat = 0; repeat < 2; ++repeat) {
        auto x = torch::randn({m, k}), w = torch::randn({n, k}), bias = torch::randn({n});
        x[3][1] = std::numeric_limits<float>::quiet_NaN();
        auto y = torch::full({m, n}, 7.0f);
        linear_gemm(m, n, k, x.data_ptr<float>(), w.data_ptr<float>(),
                    with_bias ? bias.data_ptr<float>() : nullptr, y.data_ptr<float>());
        auto exact = torch::mm(x.to(torch::kDouble), w.to(torch::kDouble).t());
        if (with_bias) exact += bias.to(torch::kDouble);
        auto finite = torch::ones({m}, torch::kBool);
        finite[3] = false;
        EXPECT_LT((y.to(torch::kDouble) - exact).index({finite}).abs().max().item<double>(), 1e-4)
            << m << "x" << n << "x" << k << (with_bias ? " with bias" : "");
        EXPECT_TRUE(y[3].isnan().all().item<bool>());
      }
}

TEST(CpuGemm, DescriptionNamesTheImplementation) {
  const std::string text = sgemm_description();
  EXPECT_TRUE(starts_with(text, "oneDNN ") || text == "LibTorch mm") << text;
  EXPECT_EQ(fused_kernels_description(), text + ", loops " + to_string(simd_path()));
}

}  // namespace
}  // namespace faultline::trainer
