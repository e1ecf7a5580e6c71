// The causal softmax of the trainer's fused attention, forward and backward, as plain loops over
// rows of float scores. Free of LibTorch so it can be tested and timed alone. `path` must be one
// the CPU supports (simd_path.hpp); the default is the widest.
#pragma once

#include <cstdint>

#include "trainer/simd_path.hpp"

namespace faultline::trainer {

// Rows [first, first + count) of a row-major score matrix (leading dimension ld): row i becomes
// the softmax of its entries 0..i, and its entries i+1..zero_to-1 become 0. Entries past i are
// never read, so the scores there may be anything. NaN in a row's kept entries makes the whole
// row NaN, as ATen's softmax does.
void causal_softmax_rows(float* scores, int64_t ld, int64_t first, int64_t count, int64_t zero_to,
                         SimdPath path = simd_path());

// The softmax's backward for the same rows: grad ← p ⊙ (grad − Σ_j p_j·grad_j) over j ≤ i,
// and 0 for i < j < zero_to. grad holds dL/dp on entry and dL/dscores on return.
void causal_softmax_backward_rows(const float* probs, float* grad, int64_t ld, int64_t first,
                                  int64_t count, int64_t zero_to, SimdPath path = simd_path());

// The exp that the softmax uses: Cephes' polynomial after reducing by ln 2, within 2 float ulps
// of std::exp on [-87, 88]; below about -87.7 it returns exactly 0, and NaN stays NaN.
float fast_exp(float x);

}  // namespace faultline::trainer
