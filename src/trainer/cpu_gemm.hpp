// Row-major float32 matrix products on the CPU for the trainer's fused kernels: oneDNN's sgemm
// where the build found oneDNN (about 10 % faster than OpenBLAS on AVX-512 at 1 thread,
// docs/benchmarks.md), LibTorch's mm otherwise. The only file that includes oneDNN.
#pragma once

#include <cstdint>
#include <string>

namespace faultline::trainer {

enum class Transpose { No, Yes };

// A row-major matrix in memory: element (i, j) of the stored matrix is data[i * ld + j].
struct ConstMatrix {
  const float* data;
  int64_t ld;
  Transpose op = Transpose::No;  // use the stored matrix or its transpose
};

// C (m × n, leading dimension ldc) = alpha · op(A) · op(B) + beta · C, where op(A) is m × k and
// op(B) is k × n. With beta = 0, C's old contents are never read (NaN included).
void sgemm(int64_t m, int64_t n, int64_t k, float alpha, ConstMatrix a, ConstMatrix b, float beta,
           float* c, int64_t ldc);

// y [m, n] = x [m, k] · wᵀ + bias: a linear layer's forward, with w stored [n, k] as torch's
// Linear keeps its weight, bias [n] or null, all dense. Over oneDNN it is one matmul primitive
// (cached per shape) that adds the bias as it writes y: no separate pass fills y with the bias
// first, and it runs this operand layout faster than sgemm's transposed B.
void linear_gemm(int64_t m, int64_t n, int64_t k, const float* x, const float* w, const float* bias,
                 float* y);

// "oneDNN 2.6.3 (avx512_core)" or "LibTorch mm": which implementation sgemm runs, for the start
// event and checkpoints (loss bits depend on it, as on the BLAS kernel).
std::string sgemm_description();

// What decides the fused kernels' low bits: the GEMM and the SIMD path of their element-wise
// loops (simd_path.hpp), e.g. "oneDNN 2.6.3 (avx512_core_bf16), loops avx512". The start
// event's `gemm`.
std::string fused_kernels_description();

}  // namespace faultline::trainer
