// The CPU's SIMD path, from the compiler's CPU-feature check (which also asks the OS whether it
// saves the wide registers).
#include "trainer/simd_path.hpp"

namespace faultline::trainer {

SimdPath simd_path() {
  static const SimdPath path = [] {
#ifdef FAULTLINE_SIMD_CLONES
    __builtin_cpu_init();  // may run before the compiler's own CPU-detection constructor
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq"))
      return SimdPath::Avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return SimdPath::Avx2;
#endif
    return SimdPath::Generic;
  }();
  return path;
}

bool simd_path_supported(SimdPath path) {
  return static_cast<int>(path) <= static_cast<int>(simd_path());
}

const char* to_string(SimdPath path) {
  switch (path) {
    case SimdPath::Avx512:
      return "avx512";
    case SimdPath::Avx2:
      return "avx2";
    case SimdPath::Generic:
      break;
  }
  return "generic";
}

}  // namespace faultline::trainer
