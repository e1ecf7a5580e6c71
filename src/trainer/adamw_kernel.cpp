// The fused AdamW loop. Each element is computed by the same expression whatever the split;
// the chunks' sums of squares are added in chunk order.
#include "trainer/adamw_kernel.hpp"

#include <ATen/Parallel.h>

#include <cmath>
#include <vector>

namespace faultline::trainer {

namespace {

constexpr int64_t kChunk = 1 << 15;
constexpr int kLanes = 8;

// One element, in the order of FlatAdamW's LibTorch ops (lerp_, mul_ + addcmul_, sqrt, div,
// add eps, div, mul, add decay, sub).
[[gnu::always_inline]] inline float update_one(float& value, float grad, float& m, float& v,
                                               float decay, const AdamWConstants& c) {
  m = m + c.beta1_complement * (grad - m);
  v = v * c.beta2 + c.beta2_complement * grad * grad;
  const float denom = std::sqrt(v) * c.inv_sqrt_bias2 + c.eps;
  const float update = m / denom * c.step_size + decay * value;
  value -= update;
  return update;
}

AdamWSums chunk_step(float* values, const float* grads, float* m, float* v, int64_t begin,
                     int64_t end, float decay, const AdamWConstants& c) {
  double update_lanes[kLanes] = {}, value_lanes[kLanes] = {};
  int64_t i = begin;
  for (; i + kLanes <= end; i += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      const double u = update_one(values[i + l], grads[i + l], m[i + l], v[i + l], decay, c);
      update_lanes[l] += u * u;
      value_lanes[l] += double(values[i + l]) * values[i + l];
    }
  AdamWSums sums;
  for (; i < end; ++i) {
    const double u = update_one(values[i], grads[i], m[i], v[i], decay, c);
    sums.update_squares += u * u;
    sums.value_squares += double(values[i]) * values[i];
  }
  for (int l = 0; l < kLanes; ++l) {
    sums.update_squares += update_lanes[l];
    sums.value_squares += value_lanes[l];
  }
  return sums;
}

}  // namespace

AdamWSums adamw_fused_step(float* values, const float* grads, float* m, float* v, int64_t count,
                           int64_t decayed, const AdamWConstants& c) {
  // Chunks never straddle the decayed/undecayed boundary, so each chunk has one decay factor.
  std::vector<std::pair<int64_t, int64_t>> chunks;
  for (int64_t begin = 0; begin < count;) {
    const int64_t limit = begin < decayed ? decayed : count;
    const int64_t end = std::min(begin + kChunk, limit);
    chunks.emplace_back(begin, end);
    begin = end;
  }
  std::vector<AdamWSums> sums(chunks.size());
  at::parallel_for(0, static_cast<int64_t>(chunks.size()), 1, [&](int64_t first, int64_t last) {
    for (int64_t k = first; k < last; ++k) {
      const auto [begin, end] = chunks[k];
      sums[k] = chunk_step(values, grads, m, v, begin, end, begin < decayed ? c.decay : 0.0f, c);
    }
  });
  AdamWSums total;
  for (const AdamWSums& sum : sums) {
    total.update_squares += sum.update_squares;
    total.value_squares += sum.value_squares;
  }
  return total;
}

}  // namespace faultline::trainer
