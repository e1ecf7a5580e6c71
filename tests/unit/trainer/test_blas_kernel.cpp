// Tests for src/trainer/blas_kernel.cpp: which OpenBLAS kernel faultline-train forces, from the
// kernel OpenBLAS reports, the CPU's features and the user's environment.
#include "trainer/blas_kernel.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace faultline::trainer {
namespace {

const CpuFeatures kSse{};                         // neither AVX2 nor AVX-512
const CpuFeatures kAvx2{true, false, false};      // e.g. Zen 2, Haswell
const CpuFeatures kAvx512{true, true, false};     // e.g. Skylake-SP, Ice Lake
const CpuFeatures kAvx512Bf16{true, true, true};  // e.g. Zen 4, Sapphire Rapids

struct Case {
  const char* reported;
  CpuFeatures cpu;
  KernelEnv env;
  KernelSource source;
  const char* force;
};

std::string describe(const Case& c) {
  return std::string("reported '") + c.reported + "', avx2_fma " + std::to_string(c.cpu.avx2_fma) +
         ", avx512 " + std::to_string(c.cpu.avx512) + ", bf16 " +
         std::to_string(c.cpu.avx512_bf16) + ", OPENBLAS_CORETYPE '" +
         c.env.user_coretype.value_or("") + "', guard '" + c.env.auto_guard.value_or("") + "'";
}

TEST(BlasKernel, DecisionTable) {
  const KernelEnv none{};
  const std::vector<Case> cases = {
      // A generic kernel the CPU outgrows is replaced by the CPU's best.
      {"Prescott", kAvx512, none, KernelSource::Auto, "SkylakeX"},
      {"Prescott", kAvx512Bf16, none, KernelSource::Auto, "Cooperlake"},
      {"Prescott", kAvx2, none, KernelSource::Auto, "Haswell"},
      {"Nehalem", kAvx2, none, KernelSource::Auto, "Haswell"},
      {"Sandybridge", kAvx2, none, KernelSource::Auto, "Haswell"},
      {"Haswell", kAvx512, none, KernelSource::Auto, "SkylakeX"},
      {"Zen", kAvx512Bf16, none, KernelSource::Auto, "Cooperlake"},
      {"zen", kAvx512, none, KernelSource::Auto, "SkylakeX"},  // names match in any case
      // A kernel of the CPU's own level stays, whichever of that level OpenBLAS picked.
      {"Haswell", kAvx2, none, KernelSource::OpenBlas, ""},
      {"Zen", kAvx2, none, KernelSource::OpenBlas, ""},
      {"SkylakeX", kAvx512Bf16, none, KernelSource::OpenBlas, ""},
      {"Cooperlake", kAvx512Bf16, none, KernelSource::OpenBlas, ""},
      {"SapphireRapids", kAvx512Bf16, none, KernelSource::OpenBlas, ""},
      // Nothing better to offer: an old CPU, a name we do not know, a BLAS that is not OpenBLAS.
      {"Prescott", kSse, none, KernelSource::OpenBlas, ""},
      {"Armv8", kAvx512, none, KernelSource::OpenBlas, ""},
      {"", kAvx512, none, KernelSource::OpenBlas, ""},
      // A user-set value always wins, even a generic or an unknown one.
      {"Prescott", kAvx512, {"Prescott", {}}, KernelSource::User, ""},
      {"Cooperlake", kAvx512, {"Bogus", {}}, KernelSource::User, ""},
      {"Haswell", kAvx512, {"Haswell", {}}, KernelSource::User, ""},
      // After the re-exec: the guard names the kernel we set, so never a second exec.
      {"SkylakeX", kAvx512, {"SkylakeX", "SkylakeX"}, KernelSource::Auto, ""},
      {"Prescott", kAvx512, {"SkylakeX", "SkylakeX"}, KernelSource::Auto, ""},  // OpenBLAS refused
      {"Haswell", kAvx512, {"Haswell", "SkylakeX"}, KernelSource::User, ""},    // changed since
      {"Prescott", kAvx512, {{}, "SkylakeX"}, KernelSource::OpenBlas, ""},      // unset since
  };
  for (const auto& c : cases) {
    const KernelDecision decision = decide_blas_kernel(c.reported, c.cpu, c.env);
    EXPECT_EQ(to_string(decision.source), to_string(c.source)) << describe(c);
    EXPECT_EQ(decision.force, c.force) << describe(c);
  }
}

TEST(BlasKernel, SourcesHaveTheirRecordedNames) {
  EXPECT_EQ(to_string(KernelSource::OpenBlas), "openblas");
  EXPECT_EQ(to_string(KernelSource::User), "user");
  EXPECT_EQ(to_string(KernelSource::Auto), "auto");
}

TEST(BlasKernel, EmptyVariablesCountAsUnset) {
  setenv("OPENBLAS_CORETYPE", "", 1);
  setenv("FAULTLINE_BLAS_AUTO_CORETYPE", "", 1);
  const KernelEnv env = read_kernel_env();
  EXPECT_FALSE(env.user_coretype.has_value());
  EXPECT_FALSE(env.auto_guard.has_value());
  setenv("OPENBLAS_CORETYPE", "Haswell", 1);
  EXPECT_EQ(read_kernel_env().user_coretype.value_or(""), "Haswell");
  unsetenv("OPENBLAS_CORETYPE");
  unsetenv("FAULTLINE_BLAS_AUTO_CORETYPE");
}

// The kernel's view of the same cpuid bits (the flags it lists are the ones the OS enabled).
TEST(BlasKernel, CpuFeaturesAgreeWithProcCpuinfo) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line) && line.rfind("flags", 0) != 0) {
  }
  if (line.empty()) GTEST_SKIP() << "no flags line in /proc/cpuinfo";
  std::set<std::string> flags;
  std::istringstream words(line.substr(line.find(':') + 1));
  for (std::string word; words >> word;) flags.insert(word);
  auto has = [&](const char* flag) { return flags.count(flag) > 0; };
  const CpuFeatures cpu = read_cpu_features();
  EXPECT_EQ(cpu.avx2_fma, has("avx2") && has("fma"));
  EXPECT_EQ(cpu.avx512, has("avx512f") && has("avx512bw") && has("avx512vl") && has("avx512dq"));
  EXPECT_EQ(cpu.avx512_bf16, cpu.avx512 && has("avx512_bf16"));
}

}  // namespace
}  // namespace faultline::trainer
