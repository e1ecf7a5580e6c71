// Facts the loss bits depend on besides the config: which BLAS library and kernel, how many
// threads, which LibTorch. Printed at start and recorded in metrics and checkpoints.
#pragma once

#include <cstdint>
#include <string>

namespace faultline::trainer {

struct RuntimeInfo {
  std::string blas_library;        // resolved path of the loaded libblas
  std::string blas_config;         // OpenBLAS's own description, when it is OpenBLAS
  std::string blas_kernel;         // the CPU kernel OpenBLAS runs (e.g. "Haswell")
  std::string blas_kernel_source;  // how it was chosen: "openblas", "user" or "auto"
  int blas_threads = 0;
  // The trainer's own GEMM when its fused CPU kernels run ("oneDNN 2.6.3 (avx512_core)"), else
  // empty: the linear layers and attention then go through LibTorch to the BLAS.
  std::string gemm;
  int torch_threads = 0;
  std::string torch_version;
  std::string cpu_model;

  // "openblas-openmp (OpenBLAS 0.3.21 ...; Haswell)", plus "; gemm oneDNN ..." when it runs.
  std::string blas_summary() const;
  std::string blas_kernel_how() const;  // "chosen automatically", "set by OPENBLAS_CORETYPE", ...
  // For people: blas_summary() with how the kernel was chosen ("...; kernel X, chosen
  // automatically)").
  std::string blas_description() const;
};

// What is loaded and in effect now, changing nothing (for --version).
RuntimeInfo describe_runtime();

// Sets LibTorch's and the BLAS's thread counts to `threads` and returns what is in effect.
RuntimeInfo configure_runtime(int64_t threads);

// Resident set size of this process, and the machine's total memory, in bytes.
int64_t resident_bytes();
int64_t total_memory_bytes();

}  // namespace faultline::trainer
