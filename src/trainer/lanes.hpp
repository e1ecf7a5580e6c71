// Eight-float vectors (GCC's vector extension) for the trainer's row kernels: sums over a row run
// in eight lanes, element j in lane j mod 8, and the lanes are added 0..7, so every SIMD path
// (simd_path.hpp) adds the same numbers in the same order. Written out rather than left to the
// auto-vectorizer, which turned such lane loops into shuffles.
#pragma once

#include <cstdint>
#include <cstring>

namespace faultline::trainer::lanes {

constexpr int kWidth = 8;
typedef float Vec __attribute__((vector_size(kWidth * sizeof(float))));
typedef int32_t IntVec __attribute__((vector_size(kWidth * sizeof(int32_t))));

[[gnu::always_inline]] inline Vec broadcast(float value) {
  return Vec{} + value;
}

[[gnu::always_inline]] inline Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

[[gnu::always_inline]] inline void store(float* p, Vec v) {
  std::memcpy(p, &v, sizeof v);
}

// The first `count` (< kWidth) floats at p; the other lanes hold `fill`.
[[gnu::always_inline]] inline Vec load_partial(const float* p, int64_t count, float fill) {
  Vec v;
  for (int l = 0; l < kWidth; ++l) v[l] = l < count ? p[l] : fill;
  return v;
}

[[gnu::always_inline]] inline float sum(Vec v) {
  float total = v[0];
  for (int l = 1; l < kWidth; ++l) total += v[l];
  return total;
}

// Σ term over a row of `count` elements. term(j, valid) gives the vector for elements j..j+7;
// in the last, partial vector only the first `valid` lanes count, and the rest are zeroed here.
template <typename Term>
[[gnu::always_inline]] inline float row_sum(int64_t count, Term term) {
  Vec acc = {};
  int64_t j = 0;
  for (; j + kWidth <= count; j += kWidth) acc += term(j, kWidth);
  if (j < count) {
    Vec tail = term(j, count - j);
    for (int l = static_cast<int>(count - j); l < kWidth; ++l) tail[l] = 0.0f;
    acc += tail;
  }
  return sum(acc);
}

}  // namespace faultline::trainer::lanes
