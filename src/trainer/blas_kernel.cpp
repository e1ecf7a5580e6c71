// OpenBLAS kernel choice (docs/trainer.md, "BLAS kernel"). OpenBLAS 0.3.21's DYNAMIC_ARCH
// detection falls back to the generic Prescott kernel on CPUs newer than it knows.
#include "trainer/blas_kernel.hpp"

#include <dlfcn.h>
#include <strings.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace faultline::trainer {

namespace {

constexpr const char* kCoretypeVar = "OPENBLAS_CORETYPE";
constexpr const char* kGuardVar = "FAULTLINE_BLAS_AUTO_CORETYPE";

// Ordered: a kernel of a lower level leaves vector units of a higher-level CPU idle.
enum class IsaLevel { Unknown, Sse, Avx, Avx2, Avx512 };

struct KernelLevel {
  const char* name;
  IsaLevel level;
};

// OpenBLAS 0.3.21's x86-64 core names (driver/others/dynamic.c), by the widest vectors they use.
constexpr std::array<KernelLevel, 26> kKernels = {{
    {"Katmai", IsaLevel::Sse},        {"Coppermine", IsaLevel::Sse},
    {"Northwood", IsaLevel::Sse},     {"Prescott", IsaLevel::Sse},
    {"Banias", IsaLevel::Sse},        {"Atom", IsaLevel::Sse},
    {"Core2", IsaLevel::Sse},         {"Penryn", IsaLevel::Sse},
    {"Dunnington", IsaLevel::Sse},    {"Nehalem", IsaLevel::Sse},
    {"Athlon", IsaLevel::Sse},        {"Opteron", IsaLevel::Sse},
    {"Opteron_SSE3", IsaLevel::Sse},  {"Barcelona", IsaLevel::Sse},
    {"Nano", IsaLevel::Sse},          {"Bobcat", IsaLevel::Sse},
    {"Sandybridge", IsaLevel::Avx},   {"Bulldozer", IsaLevel::Avx},
    {"Piledriver", IsaLevel::Avx},    {"Steamroller", IsaLevel::Avx},
    {"Excavator", IsaLevel::Avx2},    {"Haswell", IsaLevel::Avx2},
    {"Zen", IsaLevel::Avx2},          {"SkylakeX", IsaLevel::Avx512},
    {"Cooperlake", IsaLevel::Avx512}, {"SapphireRapids", IsaLevel::Avx512},
}};

IsaLevel level_of(std::string_view kernel) {
  for (const auto& entry : kKernels)
    if (kernel.size() == std::strlen(entry.name) &&
        strncasecmp(kernel.data(), entry.name, kernel.size()) == 0)
      return entry.level;
  return IsaLevel::Unknown;  // a name we do not know: trust OpenBLAS
}

// The kernel for the CPU's best level; see docs/trainer.md for the measurements behind it.
std::string best_kernel(const CpuFeatures& cpu) {
  if (cpu.avx512) return cpu.avx512_bf16 ? "Cooperlake" : "SkylakeX";
  if (cpu.avx2_fma) return "Haswell";
  return "";
}

std::optional<std::string> env_value(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

}  // namespace

std::string_view to_string(KernelSource source) {
  switch (source) {
    case KernelSource::User:
      return "user";
    case KernelSource::Auto:
      return "auto";
    case KernelSource::OpenBlas:
      break;
  }
  return "openblas";
}

CpuFeatures read_cpu_features() {
  CpuFeatures cpu;
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return cpu;
  const bool fma = ecx & (1u << 12), osxsave = ecx & (1u << 27), avx = ecx & (1u << 28);
  if (!osxsave || !avx) return cpu;
  unsigned xcr0_low = 0, xcr0_high = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
  const bool os_ymm = (xcr0_low & 0x6u) == 0x6u;    // XMM and YMM state
  const bool os_zmm = (xcr0_low & 0xe6u) == 0xe6u;  // plus opmask and both ZMM halves
  if (!os_ymm || !__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return cpu;
  const bool avx2 = ebx & (1u << 5);
  const bool avx512f = ebx & (1u << 16), avx512dq = ebx & (1u << 17);
  const bool avx512bw = ebx & (1u << 30), avx512vl = ebx & (1u << 31);
  cpu.avx2_fma = avx2 && fma;
  cpu.avx512 = os_zmm && avx512f && avx512dq && avx512bw && avx512vl;
  if (cpu.avx512 && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx))
    cpu.avx512_bf16 = eax & (1u << 5);
#endif
  return cpu;
}

KernelEnv read_kernel_env() {
  return {env_value(kCoretypeVar), env_value(kGuardVar)};
}

KernelDecision decide_blas_kernel(std::string_view reported, const CpuFeatures& cpu,
                                  const KernelEnv& env) {
  if (env.auto_guard) {
    // Re-execed by us, unless the variable was changed since: then it is someone's choice.
    if (env.user_coretype == env.auto_guard) return {KernelSource::Auto, ""};
    return {env.user_coretype ? KernelSource::User : KernelSource::OpenBlas, ""};
  }
  if (env.user_coretype) return {KernelSource::User, ""};
  const IsaLevel have = level_of(reported);
  const std::string best = best_kernel(cpu);
  if (have == IsaLevel::Unknown || best.empty() || have >= level_of(best))
    return {KernelSource::OpenBlas, ""};
  return {KernelSource::Auto, best};
}

std::string loaded_blas_kernel() {
  auto corename = reinterpret_cast<char* (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  return corename ? corename() : "";
}

void reexec_with_best_blas_kernel(char** argv) {
  const KernelDecision decision =
      decide_blas_kernel(loaded_blas_kernel(), read_cpu_features(), read_kernel_env());
  if (decision.force.empty()) return;
  setenv(kCoretypeVar, decision.force.c_str(), 1);
  setenv(kGuardVar, decision.force.c_str(), 1);
  std::fflush(nullptr);
  execv("/proc/self/exe", argv);
  const int error = errno;
  unsetenv(kCoretypeVar);
  unsetenv(kGuardVar);
  std::fprintf(stderr,
               "faultline-train: warning: cannot re-execute with OPENBLAS_CORETYPE=%s (%s); "
               "running on OpenBLAS's kernel %s\n",
               decision.force.c_str(), std::strerror(error), loaded_blas_kernel().c_str());
}

}  // namespace faultline::trainer
