// The fused LayerNorm's loops. ATen's CPU LayerNorm took about 0.8 ns an element on the bundled
// models' 192-wide rows, mostly per-row set-up; these loops are plain enough to vectorize whole.
#include "trainer/layer_norm_kernel.hpp"

#include <cmath>

#include "trainer/lanes.hpp"
#include "trainer/simd_path.hpp"

namespace faultline::trainer {

namespace {

using lanes::Vec;

// Elements j..j+valid-1 of a row as a vector (lanes past `valid` are 0).
[[gnu::always_inline]] inline Vec at(const float* row, int64_t j, int64_t valid) {
  return lanes::load_first(row + j, valid, 0.0f);
}

[[gnu::always_inline]] inline void forward_rows(const float* x, const float* gamma,
                                                const float* beta, float* y, float* mean,
                                                float* rstd, int64_t width, float eps,
                                                int64_t first, int64_t count) {
  const float inv_width = 1.0f / static_cast<float>(width);
  for (int64_t r = first; r < first + count; ++r) {
    const float* in = x + r * width;
    float* out = y + r * width;
    // Two passes (mean, then the squared deviations): no cancellation for rows far from zero.
    const float mu =
        lanes::row_sum(width, [&](int64_t j, int64_t valid) { return at(in, j, valid); }) *
        inv_width;
    const float var = lanes::row_sum(width,
                                     [&](int64_t j, int64_t valid) {
                                       const Vec deviation = at(in, j, valid) - mu;
                                       return deviation * deviation;
                                     }) *
                      inv_width;
    const float inv_std = 1.0f / std::sqrt(var + eps);
    const float shift = -mu * inv_std;
    for (int64_t j = 0; j < width; ++j) out[j] = (in[j] * inv_std + shift) * gamma[j] + beta[j];
    mean[r] = mu;
    rstd[r] = inv_std;
  }
}

// ATen's backward: with g = dy·gamma, dx = rstd·g + b·x + c, where
// b = (Σg·mean − Σg·x)·rstd³/width and c = −b·mean − Σg·rstd/width.
[[gnu::always_inline]] inline void backward_rows(const float* dy, const float* x, const float* mean,
                                                 const float* rstd, const float* gamma, float* dx,
                                                 float* dgamma, float* dbeta, int64_t width,
                                                 int64_t first, int64_t count) {
  const float inv_width = 1.0f / static_cast<float>(width);
  for (int64_t r = first; r < first + count; ++r) {
    const float* d = dy + r * width;
    const float* in = x + r * width;
    float* out = dx + r * width;
    const float mu = mean[r], s = rstd[r];
    const float sum_gx = lanes::row_sum(width, [&](int64_t j, int64_t valid) {
      return at(d, j, valid) * at(gamma, j, valid) * at(in, j, valid);
    });
    const float sum_g = lanes::row_sum(
        width, [&](int64_t j, int64_t valid) { return at(d, j, valid) * at(gamma, j, valid); });
    const float b = (sum_g * mu - sum_gx) * s * s * s * inv_width;
    const float c = -b * mu - sum_g * s * inv_width;
    for (int64_t j = 0; j < width; ++j) out[j] = s * d[j] * gamma[j] + b * in[j] + c;
    for (int64_t j = 0; j < width; ++j) {
      dgamma[j] += d[j] * (in[j] - mu) * s;
      dbeta[j] += d[j];
    }
  }
}

// The same loops compiled for wider vectors, chosen at run time (simd_path.hpp).
#ifdef FAULTLINE_SIMD_CLONES
FAULTLINE_TARGET_AVX2 void forward_avx2(const float* x, const float* gamma, const float* beta,
                                        float* y, float* mean, float* rstd, int64_t width,
                                        float eps, int64_t first, int64_t count) {
  forward_rows(x, gamma, beta, y, mean, rstd, width, eps, first, count);
}
FAULTLINE_TARGET_AVX512 void forward_avx512(const float* x, const float* gamma, const float* beta,
                                            float* y, float* mean, float* rstd, int64_t width,
                                            float eps, int64_t first, int64_t count) {
  forward_rows(x, gamma, beta, y, mean, rstd, width, eps, first, count);
}
FAULTLINE_TARGET_AVX2 void backward_avx2(const float* dy, const float* x, const float* mean,
                                         const float* rstd, const float* gamma, float* dx,
                                         float* dgamma, float* dbeta, int64_t width, int64_t first,
                                         int64_t count) {
  backward_rows(dy, x, mean, rstd, gamma, dx, dgamma, dbeta, width, first, count);
}
FAULTLINE_TARGET_AVX512 void backward_avx512(const float* dy, const float* x, const float* mean,
                                             const float* rstd, const float* gamma, float* dx,
                                             float* dgamma, float* dbeta, int64_t width,
                                             int64_t first, int64_t count) {
  backward_rows(dy, x, mean, rstd, gamma, dx, dgamma, dbeta, width, first, count);
}
#endif

}  // namespace

void layer_norm_forward(const float* x, const float* gamma, const float* beta, float* y,
                        float* mean, float* rstd, int64_t width, float eps, int64_t first,
                        int64_t count, SimdPath path) {
#ifdef FAULTLINE_SIMD_CLONES
  if (path == SimdPath::Avx512)
    return forward_avx512(x, gamma, beta, y, mean, rstd, width, eps, first, count);
  if (path == SimdPath::Avx2)
    return forward_avx2(x, gamma, beta, y, mean, rstd, width, eps, first, count);
#endif
  forward_rows(x, gamma, beta, y, mean, rstd, width, eps, first, count);
}

void layer_norm_backward(const float* dy, const float* x, const float* mean, const float* rstd,
                         const float* gamma, float* dx, float* dgamma, float* dbeta, int64_t width,
                         int64_t first, int64_t count, SimdPath path) {
#ifdef FAULTLINE_SIMD_CLONES
  if (path == SimdPath::Avx512)
    return backward_avx512(dy, x, mean, rstd, gamma, dx, dgamma, dbeta, width, first, count);
  if (path == SimdPath::Avx2)
    return backward_avx2(dy, x, mean, rstd, gamma, dx, dgamma, dbeta, width, first, count);
#endif
  backward_rows(dy, x, mean, rstd, gamma, dx, dgamma, dbeta, width, first, count);
}

}  // namespace faultline::trainer
