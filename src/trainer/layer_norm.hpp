// The blocks' LayerNorm as one autograd function over layer_norm_kernel.cpp's loops. Same
// function as torch::layer_norm over the last dimension, to float rounding.
#pragma once

#include <torch/torch.h>

#include "trainer/train_config.hpp"

namespace faultline::trainer {

// x [..., C] normalized over C, then scaled by weight [C] and shifted by bias [C]. float32 CPU
// tensors with kernels = Fused take the fused path; anything else takes torch::layer_norm.
torch::Tensor layer_norm(const torch::Tensor& x, const torch::Tensor& weight,
                         const torch::Tensor& bias, double eps, CpuKernels kernels);

}  // namespace faultline::trainer
