// The fused attention's causal softmax. ATen's softmax ran over whole rows, the masked half
// included, as a separate pass after the scores were written; here each row block is normalized
// right after its scores, while they are in cache, and only up to the diagonal. The exp is pure
// multiply-add and bit arithmetic on eight-float vectors (lanes.hpp).
#include "trainer/softmax_kernel.hpp"

#include <algorithm>
#include <cmath>

#include "trainer/lanes.hpp"
#include "trainer/simd_path.hpp"

namespace faultline::trainer {

namespace {

using lanes::IntVec;
using lanes::Vec;

// Cephes' expf: n = round(x / ln 2), r = x − n·ln 2 (in two parts, Cody–Waite), a degree-5
// polynomial for e^r, and 2^n from exponent bits.
[[gnu::always_inline]] inline Vec exp_vec(Vec x) {
  // Clamped so that 2^n stays a normal float, or exactly 0 from n = −127 (x below about −87.7).
  // Written so that NaN fails both tests and passes through.
  x = x > 88.0f ? lanes::broadcast(88.0f) : x;
  x = x < -87.9f ? lanes::broadcast(-87.9f) : x;
  // Adding 1.5·2^23 rounds to an integer and leaves it in the low mantissa bits: no
  // float-to-int conversion, which would be undefined for NaN.
  const Vec shifted = x * 1.44269504088896341f + 12582912.0f;
  const Vec n = shifted - 12582912.0f;
  Vec r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  Vec p = lanes::broadcast(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // A cast between vector types of one size reinterprets the bits (GCC's vector extension).
  const IntVec exponent = ((IntVec)shifted - 0x4B400000 + 127) << 23;
  return p * (Vec)exponent;
}

[[gnu::always_inline]] inline void store_first(float* row, int64_t j, int64_t valid, Vec v) {
  if (valid == lanes::kWidth) return lanes::store(row + j, v);
  for (int l = 0; l < valid; ++l) row[j + l] = v[l];
}

[[gnu::always_inline]] inline void forward_rows(float* scores, int64_t ld, int64_t first,
                                                int64_t count, int64_t zero_to) {
  for (int64_t i = first; i < first + count; ++i) {
    float* row = scores + i * ld;
    const int64_t kept = i + 1;
    // NaN never wins a comparison, so a NaN row keeps a finite maximum; exp(NaN − max) then
    // carries the NaN into the sum and every entry.
    Vec best = lanes::broadcast(-INFINITY);
    lanes::for_each_vector(kept, [&](int64_t j, int64_t valid) {
      const Vec v = lanes::load_first(row + j, valid, -INFINITY);
      best = v > best ? v : best;
    });
    float max = best[0];
    for (int l = 1; l < lanes::kWidth; ++l) max = best[l] > max ? best[l] : max;
    // exp(−inf − max) is exactly 0, so the padding lanes add nothing.
    Vec total = {};
    lanes::for_each_vector(kept, [&](int64_t j, int64_t valid) {
      const Vec e = exp_vec(lanes::load_first(row + j, valid, -INFINITY) - max);
      store_first(row, j, valid, e);
      total += e;
    });
    const float inverse = 1.0f / lanes::sum(total);
    for (int64_t j = 0; j < kept; ++j) row[j] *= inverse;
    if (zero_to > kept) std::fill(row + kept, row + zero_to, 0.0f);
  }
}

[[gnu::always_inline]] inline void backward_rows(const float* probs, float* grad, int64_t ld,
                                                 int64_t first, int64_t count, int64_t zero_to) {
  for (int64_t i = first; i < first + count; ++i) {
    const float* p = probs + i * ld;
    float* g = grad + i * ld;
    const int64_t kept = i + 1;
    const float dot = lanes::row_sum(kept, [&](int64_t j, int64_t valid) {
      return lanes::load_first(p + j, valid, 0) * lanes::load_first(g + j, valid, 0);
    });
    for (int64_t j = 0; j < kept; ++j) g[j] = p[j] * (g[j] - dot);
    if (zero_to > kept) std::fill(g + kept, g + zero_to, 0.0f);
  }
}

// The same loops compiled for wider vectors, chosen at run time (simd_path.hpp).
#ifdef FAULTLINE_SIMD_CLONES
FAULTLINE_TARGET_AVX2 void forward_avx2(float* scores, int64_t ld, int64_t first, int64_t count,
                                        int64_t zero_to) {
  forward_rows(scores, ld, first, count, zero_to);
}
FAULTLINE_TARGET_AVX512 void forward_avx512(float* scores, int64_t ld, int64_t first, int64_t count,
                                            int64_t zero_to) {
  forward_rows(scores, ld, first, count, zero_to);
}
FAULTLINE_TARGET_AVX2 void backward_avx2(const float* probs, float* grad, int64_t ld, int64_t first,
                                         int64_t count, int64_t zero_to) {
  backward_rows(probs, grad, ld, first, count, zero_to);
}
FAULTLINE_TARGET_AVX512 void backward_avx512(const float* probs, float* grad, int64_t ld,
                                             int64_t first, int64_t count, int64_t zero_to) {
  backward_rows(probs, grad, ld, first, count, zero_to);
}
#endif

}  // namespace

float fast_exp(float x) {
  return exp_vec(lanes::broadcast(x))[0];
}

void causal_softmax_rows(float* scores, int64_t ld, int64_t first, int64_t count, int64_t zero_to,
                         SimdPath path) {
#ifdef FAULTLINE_SIMD_CLONES
  if (path == SimdPath::Avx512) return forward_avx512(scores, ld, first, count, zero_to);
  if (path == SimdPath::Avx2) return forward_avx2(scores, ld, first, count, zero_to);
#endif
  forward_rows(scores, ld, first, count, zero_to);
}

void causal_softmax_backward_rows(const float* probs, float* grad, int64_t ld, int64_t first,
                                  int64_t count, int64_t zero_to, SimdPath path) {
#ifdef FAULTLINE_SIMD_CLONES
  if (path == SimdPath::Avx512) return backward_avx512(probs, grad, ld, first, count, zero_to);
  if (path == SimdPath::Avx2) return backward_avx2(probs, grad, ld, first, count, zero_to);
#endif
  backward_rows(probs, grad, ld, first, count, zero_to);
}

}  // namespace faultline::trainer
