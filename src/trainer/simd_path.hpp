// Which compiled copy of the trainer's element-wise loops (GELU, softmax, LayerNorm) this CPU
// runs. Each loop is compiled for plain x86-64, AVX2+FMA and AVX-512, and the widest the CPU
// supports is chosen once per process: one machine always takes the same path, so its runs stay
// bitwise repeatable; another CPU may take another path and round differently.
#pragma once

namespace faultline::trainer {

enum class SimdPath { Generic, Avx2, Avx512 };

// The widest path this CPU supports: the one the kernels run.
SimdPath simd_path();
// Whether this CPU can run `path` (every path up to simd_path()); tests run each one.
bool simd_path_supported(SimdPath path);
const char* to_string(SimdPath path);

}  // namespace faultline::trainer

// Function attributes for the clones. GCC 12's target_clones left these loops scalar; explicit
// targets do not.
#if defined(__x86_64__) && defined(__GNUC__)
#define FAULTLINE_SIMD_CLONES 1
#define FAULTLINE_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define FAULTLINE_TARGET_AVX512 \
  __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))
#endif
