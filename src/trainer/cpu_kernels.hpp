// The trainer's own CPU kernels for the GPT's heaviest ops: linear layers over cpu_gemm's sgemm,
// and causal self-attention that multiplies only the blocks the mask keeps. Each is one
// autograd function on float32 CPU tensors; other dtypes and devices, and train.cpu_kernels =
// "aten", take LibTorch's own ops. Attention's results do not depend on the thread count; a
// linear layer's, as with any BLAS, may.
#pragma once

#include <torch/torch.h>

#include "trainer/train_config.hpp"

namespace faultline::trainer {

// Whether `kernels` applies to a tensor like `example` (float32 on the CPU).
bool fused_kernels_apply(CpuKernels kernels, const torch::Tensor& example);

// x [..., in] · weightᵀ [in, out] + bias [out] (bias may be undefined): torch's linear.
torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                     CpuKernels kernels);

// Causal softmax attention over the heads of one fused projection: qkv is [B, T, 3·C] (queries,
// keys, values, each C = n_head · head_dim wide); the result is [B, T, C], heads side by side.
// mask_bias is [≥T, ≥T], 0 on and below the diagonal and -inf above: the ATen path adds it to
// the scores (one baddbmm), then takes softmax and bmm.
torch::Tensor causal_attention(const torch::Tensor& qkv, int64_t n_head,
                               const torch::Tensor& mask_bias, CpuKernels kernels);

}  // namespace faultline::trainer
