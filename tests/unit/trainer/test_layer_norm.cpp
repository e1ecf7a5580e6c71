// Tests for src/trainer/layer_norm.cpp and layer_norm_kernel.cpp: the fused LayerNorm against
// ATen's in double, forward and all three gradients, at widths that do and do not fill the last
// vector; every SIMD path the CPU runs agrees; a NaN stays in its row; the result does not depend
// on the thread count; the fallbacks.
#include "trainer/layer_norm.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <limits>
#include <vector>

#include "trainer/layer_norm_kernel.hpp"

namespace faultline::trainer {
namespace {

double max_error(const torch::Tensor& value, const torch::Tensor& exact) {
  return (value.to(torch::kDouble) - exact.to(torch::kDouble)).abs().max().item<double>();
}

struct Result {
  torch::Tensor y, dx, dgamma, dbeta;
};

// Forward and backward of LayerNorm over x's last dimension, in x's dtype.
Result run(const torch::Tensor& x, const torch::Tensor& gamma, const torch::Tensor& beta,
           const torch::Tensor& upstream, CpuKernels kernels) {
  auto xl = x.detach().clone().requires_grad_(true);
  auto gl = gamma.detach().clone().requires_grad_(true);
  auto bl = beta.detach().clone().requires_grad_(true);
  auto y = layer_norm(xl, gl, bl, 1e-5, kernels);
  y.backward(upstream.to(x.dtype()));
  return {y.detach(), xl.grad(), gl.grad(), bl.grad()};
}

class LayerNormWidths : public ::testing::TestWithParam<int64_t> {};

TEST_P(LayerNormWidths, ForwardAndGradientsAreAsCloseToExactAsAten) {
  const int64_t width = GetParam();
  torch::manual_seed(21 + width);
  // Rows off zero and of mixed scale: the mean and variance both matter.
  auto x = torch::randn({3, 70, width}) * 2 + 0.5;
  auto gamma = torch::randn({width}), beta = torch::randn({width});
  auto upstream = torch::randn({3, 70, width});
  auto exact = run(x.to(torch::kDouble), gamma.to(torch::kDouble), beta.to(torch::kDouble),
                   upstream, CpuKernels::Aten);
  auto aten = run(x, gamma, beta, upstream, CpuKernels::Aten);
  auto fused = run(x, gamma, beta, upstream, CpuKernels::Fused);
  auto check = [&](const char* what, const torch::Tensor& ours, const torch::Tensor& theirs,
                   const torch::Tensor& truth) {
    const double error = max_error(ours, truth), aten_error = max_error(theirs, truth);
    std::printf("width %lld %s: error %.3g (ATen %.3g)\n", static_cast<long long>(width), what,
                error, aten_error);
    EXPECT_LT(error, 4 * aten_error + 1e-6) << what;
  };
  check("y", fused.y, aten.y, exact.y);
  check("dx", fused.dx, aten.dx, exact.dx);
  check("dgamma", fused.dgamma, aten.dgamma, exact.dgamma);
  check("dbeta", fused.dbeta, aten.dbeta, exact.dbeta);
}

// 1: one partial vector; 8: one full; 13: a full and a partial; 192: as the bundled tiny model.
INSTANTIATE_TEST_SUITE_P(Widths, LayerNormWidths, ::testing::Values(1, 8, 13, 192));

// The kernel's loops on each SIMD path this CPU can run (a CI machine may run another): every
// output within float rounding of the default path.
TEST(LayerNormKernel, EverySupportedSimdPathAgrees) {
  torch::manual_seed(24);
  const int64_t rows = 70, width = 13;
  auto x = torch::randn({rows, width}) * 2 + 0.5, dy = torch::randn({rows, width});
  auto gamma = torch::randn({width}), beta = torch::randn({width});
  auto run = [&](SimdPath path) {
    auto y = torch::empty_like(x), dx = torch::empty_like(x);
    auto mean = torch::empty({rows}), rstd = torch::empty({rows});
    auto dgamma = torch::zeros({width}), dbeta = torch::zeros({width});
    layer_norm_forward(x.data_ptr<float>(), gamma.data_ptr<float>(), beta.data_ptr<float>(),
                       y.data_ptr<float>(), mean.data_ptr<float>(), rstd.data_ptr<float>(), width,
                       1e-5f, 0, rows, path);
    layer_norm_backward(dy.data_ptr<float>(), x.data_ptr<float>(), mean.data_ptr<float>(),
                        rstd.data_ptr<float>(), gamma.data_ptr<float>(), dx.data_ptr<float>(),
                        dgamma.data_ptr<float>(), dbeta.data_ptr<float>(), width, 0, rows, path);
    return std::vector<torch::Tensor>{y, dx, dgamma, dbeta};
  };
  const auto reference = run(simd_path());
  for (SimdPath path : {SimdPath::Generic, SimdPath::Avx2, SimdPath::Avx512}) {
    if (!simd_path_supported(path)) continue;
    const auto result = run(path);
    for (size_t i = 0; i < result.size(); ++i)
      EXPECT_TRUE(torch::allclose(result[i], reference[i], 1e-5, 1e-5))
          << to_string(path) << " output " << i;
  }
}

TEST(LayerNorm, NanStaysInItsRow) {
  torch::manual_seed(22);
  auto x = torch::randn({4, 5, 24});
  x[2][3][7] = std::numeric_limits<float>::quiet_NaN();
  auto result =
      run(x, torch::ones({24}), torch::zeros({24}), torch::ones({4, 5, 24}), CpuKernels::Fused);
  EXPECT_TRUE(result.y[2][3].isnan().all().item<bool>());
  EXPECT_TRUE(result.dx[2][3].isnan().all().item<bool>());
  auto others = torch::ones({4, 5}, torch::kBool);
  others[2][3] = false;
  EXPECT_TRUE(result.y.index({others}).isfinite().all().item<bool>());
  EXPECT_TRUE(result.dx.index({others}).isfinite().all().item<bool>());
}

TEST(LayerNorm, ResultIsBitwiseTheSameAtAnyThreadCount) {
  torch::manual_seed(23);
  // 300 rows: several row chunks, the last one partial.
  auto x = torch::randn({300, 40}), gamma = torch::randn({40}), beta = torch::randn({40});
  auto upstream = torch::randn({300, 40});
  at::set_num_threads(1);
  auto one = run(x, gamma, beta, upstream, CpuKernels::Fused);
  at::set_num_threads(2);
  auto two = run(x, gamma, beta, upstream, CpuKernels::Fused);
  at::set_num_threads(1);
  EXPECT_TRUE(torch::equal(one.y, two.y));
  EXPECT_TRUE(torch::equal(one.dx, two.dx));
  EXPECT_TRUE(torch::equal(one.dgamma, two.dgamma));
  EXPECT_TRUE(torch::equal(one.dbeta, two.dbeta));
}

TEST(LayerNorm, OtherDtypesAndAtenKernelsTakeTorchsLayerNorm) {
  auto x = torch::randn({4, 6}, torch::kDouble);
  auto gamma = torch::randn({6}, torch::kDouble), beta = torch::randn({6}, torch::kDouble);
  EXPECT_TRUE(torch::equal(layer_norm(x, gamma, beta, 1e-5, CpuKernels::Fused),
                           torch::layer_norm(x, {6}, gamma, beta, 1e-5)));
  auto xf = torch::randn({4, 6}), gf = torch::randn({6}), bf = torch::randn({6});
  EXPECT_TRUE(torch::equal(layer_norm(xf, gf, bf, 1e-5, CpuKernels::Aten),
                           torch::layer_norm(xf, {6}, gf, bf, 1e-5)));
}

}  // namespace
}  // namespace faultline::trainer
