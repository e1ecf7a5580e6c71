// The fused GELU's loops. ATen's tanh-GELU calls an accurate (1-ulp) vector tanh in forward and
// again in backward; on the bundled models that was a sixth to a quarter of a step. A rational
// tanh is pure multiply-add and one divide, so the loops vectorize and run several times faster.
#include "trainer/gelu_kernel.hpp"

#include <algorithm>
#include <cmath>

#include "trainer/simd_path.hpp"

namespace faultline::trainer {

namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

// Eigen's float tanh (generic_fast_tanh_float): odd degree-13 over even degree-6 polynomial,
// with the input clamped to ±7.905, where the ratio reaches 1 (beyond it, it drifts: 0.96 at 20).
[[gnu::always_inline]] inline float rational_tanh(float u) {
  const float clamped = std::min(std::max(u, -7.90531110763549805f), 7.90531110763549805f);
  const float u2 = clamped * clamped;
  float p = u2 * -2.76076847742355e-16f + 2.00018790482477e-13f;
  p = u2 * p + -8.60467152213735e-11f;
  p = u2 * p + 5.12229709037114e-08f;
  p = u2 * p + 1.48572235717979e-05f;
  p = u2 * p + 6.37261928875436e-04f;
  p = u2 * p + 4.89352455891786e-03f;
  p = clamped * p;
  float q = u2 * 1.19825839466702e-06f + 1.18534705686654e-04f;
  q = u2 * q + 2.26843463243900e-03f;
  q = u2 * q + 4.89352518554385e-03f;
  // Near zero tanh(u) = u to float precision; the ratio alone would be off by an ulp or two.
  // Both sides are computed, so the select compiles to a blend, not a branch.
  const float ratio = p / q;
  return std::fabs(u) < 0.0004f ? u : ratio;
}

[[gnu::always_inline]] inline void forward_loop(const float* x, float* y, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const float v = x[i];
    const float t = rational_tanh(kSqrt2OverPi * (v + kCubic * v * v * v));
    y[i] = 0.5f * v * (1.0f + t);
  }
}

[[gnu::always_inline]] inline void backward_loop(const float* x, const float* dy, float* dx,
                                                 int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const float v = x[i];
    const float v2 = v * v;
    const float t = rational_tanh(kSqrt2OverPi * (v + kCubic * v2 * v));
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * v2);
    dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
  }
}

// The same loops compiled for wider vectors, chosen at run time (simd_path.hpp).
#ifdef FAULTLINE_SIMD_CLONES
FAULTLINE_TARGET_AVX2 void forward_avx2(const float* x, float* y, int64_t count) {
  forward_loop(x, y, count);
}
FAULTLINE_TARGET_AVX512 void forward_avx512(const float* x, float* y, int64_t count) {
  forward_loop(x, y, count);
}
FAULTLINE_TARGET_AVX2 void backward_avx2(const float* x, const float* dy, float* dx,
                                         int64_t count) {
  backward_loop(x, dy, dx, count);
}
FAULTLINE_TARGET_AVX512 void backward_avx512(const float* x, const float* dy, float* dx,
                                             int64_t count) {
  backward_loop(x, dy, dx, count);
}
#endif

}  // namespace

float fast_tanh(float u) {
  return rational_tanh(u);
}

void gelu_tanh_forward(const float* x, float* y, int64_t count, SimdPath path) {
#ifdef FAULTLINE_SIMD_CLONES
  if (path == SimdPath::Avx512) return forward_avx512(x, y, count);
  if (path == SimdPath::Avx2) return forward_avx2(x, y, count);
#endif
  forward_loop(x, y, count);
}

void gelu_tanh_backward(const float* x, const float* dy, float* dx, int64_t count, SimdPath path) {
#ifdef FAULTLINE_SIMD_CLONES
  if (path == SimdPath::Avx512) return backward_avx512(x, dy, dx, count);
  if (path == SimdPath::Avx2) return backward_avx2(x, dy, dx, count);
#endif
  backward_loop(x, dy, dx, count);
}

}  // namespace faultline::trainer
