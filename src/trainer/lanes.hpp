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

// The `valid` floats at p (kWidth of them but at a row's end) as a vector; the lanes past
// `valid` hold `fill`, and nothing past them is read.
[[gnu::always_inline]] inline Vec load_first(const float* p, int64_t valid, float fill) {
  if (valid == kWidth) return load(p);
  Vec v;
  for (int l = 0; l < kWidth; ++l) v[l] = l < valid ? p[l] : fill;
  return v;
}

// Calls body(j, valid) for each vector of a row of `count` elements: elements j..j+valid-1,
// valid = kWidth but in the last.
template <typename Body>
[[gnu::always_inline]] inline void for_each_vector(int64_t count, Body body) {
  for (int64_t j = 0; j < count; j += kWidth) body(j, count - j < kWidth ? count - j : kWidth);
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
  for_each_vector(count, [&](int64_t j, int64_t valid) {
    Vec part = term(j, valid);
    for (int l = static_cast<int>(valid); l < kWidth; ++l) part[l] = 0.0f;
    acc += part;
  });
  return sum(acc);
}

}  // namespace faultline::trainer::lanes
