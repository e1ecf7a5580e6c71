// Which OpenBLAS kernel faultline-train runs with: the decision (a pure function, unit-tested) and
// the re-exec that applies it before OpenBLAS's constructor reads OPENBLAS_CORETYPE. LibTorch-free.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace faultline::trainer {

// How the kernel in effect was chosen: OpenBLAS's own detection, the user's OPENBLAS_CORETYPE,
// or faultline-train overriding a generic kernel that the CPU outgrows.
enum class KernelSource { OpenBlas, User, Auto };
std::string_view to_string(KernelSource source);  // "openblas", "user", "auto"

// The instruction sets OpenBLAS's kernels are built for, as the CPU and the OS both support them.
struct CpuFeatures {
  bool avx2_fma = false;
  bool avx512 = false;  // F, BW, VL and DQ, with the ZMM state enabled by the OS
  bool avx512_bf16 = false;
};
CpuFeatures read_cpu_features();  // cpuid + xgetbv; all false off x86

// The two variables the decision reads; unset and empty are the same (OpenBLAS ignores both).
struct KernelEnv {
  std::optional<std::string> user_coretype;  // OPENBLAS_CORETYPE
  std::optional<std::string> auto_guard;     // FAULTLINE_BLAS_AUTO_CORETYPE, set by the re-exec
};
KernelEnv read_kernel_env();

struct KernelDecision {
  KernelSource source = KernelSource::OpenBlas;
  std::string force;  // the OPENBLAS_CORETYPE to re-exec with; empty: keep the process as it is
};

// `reported` is what the loaded OpenBLAS says it runs (openblas_get_corename; empty when the BLAS
// is not OpenBLAS). Forces a kernel only when none is set and the reported one is of a lower
// instruction-set level than the CPU's best; never once the guard says this process was re-execed.
KernelDecision decide_blas_kernel(std::string_view reported, const CpuFeatures& cpu,
                                  const KernelEnv& env);

// The kernel name the loaded BLAS reports, or "" when it is not OpenBLAS.
std::string loaded_blas_kernel();

// Decides from the loaded library, the CPU and the environment; when a kernel must be forced,
// re-executes /proc/self/exe with the same argv and environment plus OPENBLAS_CORETYPE and the
// guard. Returns only when no re-exec was needed or it failed (then with a warning on stderr).
void reexec_with_best_blas_kernel(char** argv);

}  // namespace faultline::trainer
