// LayerNorm over the last dimension as plain loops over float rows: the forward and backward
// that the trainer's fused LayerNorm runs, in ATen's own formulation. Free of LibTorch so it can
// be tested and timed alone. `path` must be one the CPU supports (simd_path.hpp); the default is
// the widest.
#pragma once

#include <cstdint>

#include "trainer/simd_path.hpp"

namespace faultline::trainer {

// Rows [first, first + count) of x [rows, width]: y = (x − mean)·rstd·gamma + beta, with
// rstd = 1/√(var + eps) (biased variance); mean and rstd are written per row for backward.
void layer_norm_forward(const float* x, const float* gamma, const float* beta, float* y,
                        float* mean, float* rstd, int64_t width, float eps, int64_t first,
                        int64_t count, SimdPath path = simd_path());

// The same rows' input gradient, and their contribution to gamma's and beta's gradients
// (dgamma += Σ dy·x̂, dbeta += Σ dy over the rows, in row order).
void layer_norm_backward(const float* dy, const float* x, const float* mean, const float* rstd,
                         const float* gamma, float* dx, float* dgamma, float* dbeta, int64_t width,
                         int64_t first, int64_t count, SimdPath path = simd_path());

}  // namespace faultline::trainer
