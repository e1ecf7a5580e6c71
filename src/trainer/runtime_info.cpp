// BLAS discovery through the dynamic linker: Debian's LibTorch calls whatever libblas.so.3 the
// alternatives system selects, so the only reliable answer is to ask the loaded library itself.
#include "trainer/runtime_info.hpp"

#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <malloc.h>
#include <torch/version.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <fstream>

#include "common/text.hpp"
#include "trainer/blas_kernel.hpp"

namespace faultline::trainer {

namespace {
template <typename Fn>
Fn blas_symbol(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

std::string read_cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (starts_with(line, "model name")) return line.substr(line.find(':') + 2);
  return "unknown";
}
}  // namespace

std::string RuntimeInfo::blas_summary() const {
  std::string text = blas_library;
  if (!blas_config.empty()) text += " (" + blas_config + "; kernel " + blas_kernel + ")";
  if (!gemm.empty()) text += "; gemm " + gemm;
  return text;
}

std::string RuntimeInfo::blas_kernel_how() const {
  if (blas_kernel_source == to_string(KernelSource::Auto)) return "chosen automatically";
  if (blas_kernel_source == to_string(KernelSource::User)) return "set by OPENBLAS_CORETYPE";
  return "OpenBLAS's own choice";
}

std::string RuntimeInfo::blas_description() const {
  std::string text = blas_library;
  if (!blas_config.empty())
    text += " (" + blas_config + "; kernel " + blas_kernel + ", " + blas_kernel_how() + ")";
  if (!gemm.empty()) text += "; gemm " + gemm;
  return text;
}

RuntimeInfo configure_runtime(int64_t threads) {
  // Activations of a few MB are freed and re-allocated every step. Above glibc's default mmap
  // threshold each one is a fresh mmap whose pages fault in zeroed: measured here at ~45 % of a
  // tiny-model step. Keeping them on the heap (and not trimming it) lets the pages be reused.
  mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
  mallopt(M_TRIM_THRESHOLD, 1024 * 1024 * 1024);
  at::set_num_threads(static_cast<int>(threads));
  if (auto set_threads = blas_symbol<void (*)(int)>("openblas_set_num_threads"))
    set_threads(static_cast<int>(threads));
  return describe_runtime();
}

RuntimeInfo describe_runtime() {
  RuntimeInfo info;
  info.torch_threads = at::get_num_threads();
  info.torch_version = TORCH_VERSION;
  info.cpu_model = read_cpu_model();
  Dl_info where{};
  if (void* gemm = dlsym(RTLD_DEFAULT, "sgemm_"); gemm && dladdr(gemm, &where) && where.dli_fname) {
    char resolved[PATH_MAX];
    info.blas_library = realpath(where.dli_fname, resolved) ? resolved : where.dli_fname;
  } else {
    info.blas_library = "unknown";
  }
  if (auto config = blas_symbol<char* (*)()>("openblas_get_config")) info.blas_config = config();
  info.blas_kernel = loaded_blas_kernel();
  // A decision that still wants a kernel forced means no re-exec happened: OpenBLAS chose.
  const KernelDecision kernel =
      decide_blas_kernel(info.blas_kernel, read_cpu_features(), read_kernel_env());
  info.blas_kernel_source =
      to_string(kernel.force.empty() ? kernel.source : KernelSource::OpenBlas);
  if (auto get_threads = blas_symbol<int (*)()>("openblas_get_num_threads"))
    info.blas_threads = get_threads();
  return info;
}

int64_t resident_bytes() {
  std::ifstream in("/proc/self/statm");
  int64_t pages_total = 0, pages_resident = 0;
  in >> pages_total >> pages_resident;
  return pages_resident * sysconf(_SC_PAGESIZE);
}

int64_t total_memory_bytes() {
  return static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
}

}  // namespace faultline::trainer
