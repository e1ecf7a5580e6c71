// AdamW's update of the flat buffers as one pass over memory (train.cpu_kernels = "fused" on a
// float32 CPU run): the same arithmetic as FlatAdamW's chain of LibTorch ops, which reads and
// writes the 4 buffers about 9 times.
#pragma once

#include <cstdint>

namespace faultline::trainer {

struct AdamWConstants {
  float beta1_complement;  // 1 − β1: m ← m + (1 − β1)·(g − m), as lerp
  float beta2, beta2_complement;
  float inv_sqrt_bias2;  // 1 / √(1 − β2^t)
  float eps;
  float step_size;  // lr / (1 − β1^t)
  float decay;      // lr · weight_decay, on indices below `decayed`
};

struct AdamWSums {
  double update_squares = 0;  // Σ update²
  double value_squares = 0;   // Σ value² after the update: the parameter norm, in the same pass
};

// values −= update for indices [0, count), updating m and v. The sums are taken in double over
// fixed chunks added in a fixed order, so they do not depend on the thread count.
AdamWSums adamw_fused_step(float* values, const float* grads, float* m, float* v, int64_t count,
                           int64_t decayed, const AdamWConstants& c);

}  // namespace faultline::trainer
