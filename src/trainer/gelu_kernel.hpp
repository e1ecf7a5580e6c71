// GELU with the tanh approximation, as plain loops over float arrays: the forward and the
// backward that the trainer's fused GELU runs. Free of LibTorch so it can be tested and timed
// alone. `path` must be one the CPU supports (simd_path.hpp); the default is the widest.
#pragma once

#include <cstdint>

#include "trainer/simd_path.hpp"

namespace faultline::trainer {

// y[i] = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
void gelu_tanh_forward(const float* x, float* y, int64_t count, SimdPath path = simd_path());

// dx[i] = dy[i] · d/dx gelu(x[i]); recomputes the tanh from x, so forward need not keep a second
// activation-sized buffer for backward.
void gelu_tanh_backward(const float* x, const float* dy, float* dx, int64_t count,
                        SimdPath path = simd_path());

// The tanh that both use: a rational approximation, within a few float ulps of std::tanh.
float fast_tanh(float u);

}  // namespace faultline::trainer
