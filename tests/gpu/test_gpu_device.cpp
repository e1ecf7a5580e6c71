// Device tests: faultline-nccl-check and libfaultline_cupti.so on a real GPU (skipped without
// one), and the check's clear no-GPU exit (everywhere: CUDA_VISIBLE_DEVICES hides the devices).
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace {

struct Ran {
  int exit_code = -1;
  std::string output;
};

Ran run(const std::string& command) {
  Ran ran;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return ran;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) ran.output.append(buffer, n);
  const int status = pclose(pipe);
  ran.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return ran;
}

// Why device tests cannot run here, or "" when a CUDA device is usable.
std::string no_gpu_reason() {
  int count = 0;
  const cudaError_t result = cudaGetDeviceCount(&count);
  if (result != cudaSuccess)
    return std::string("no usable CUDA device: ") + cudaGetErrorString(result);
  return count > 0 ? "" : "no CUDA device";
}

#define SKIP_WITHOUT_GPU()                                \
  do {                                                    \
    if (auto reason = no_gpu_reason(); !reason.empty()) { \
      GTEST_SKIP() << reason;                             \
    }                                                     \
  } while (0)

TEST(GpuDevice, NcclCheckWithoutAGpuSaysSoAndExits4) {
  const Ran ran = run(std::string("CUDA_VISIBLE_DEVICES= ") + NCCL_CHECK + " --ranks 1");
  EXPECT_EQ(ran.exit_code, 4) << ran.output;
  EXPECT_NE(ran.output.find("no CUDA device here"), std::string::npos) << ran.output;
}

TEST(GpuDevice, NcclCheckRejectsBadArguments) {
  const Ran ran = run(std::string(NCCL_CHECK) + " --ranks -1");
  EXPECT_EQ(ran.exit_code, 2) << ran.output;
  EXPECT_NE(ran.output.find("--ranks must be >= 0"), std::string::npos) << ran.output;
}

TEST(GpuDevice, NcclCheckOnOneGpuChecksCorrectnessOnly) {
  SKIP_WITHOUT_GPU();
  const Ran ran = run(std::string(NCCL_CHECK) + " --ranks 1 --bytes 1048576 --iters 3");
  EXPECT_EQ(ran.exit_code, 0) << ran.output;
  EXPECT_NE(ran.output.find("all ranks: correct"), std::string::npos) << ran.output;
  EXPECT_NE(ran.output.find("one GPU: correctness checked"), std::string::npos) << ran.output;
}

TEST(GpuDevice, CuptiProbeWritesGpuRecordsWithNcclKernels) {
  SKIP_WITHOUT_GPU();
  const std::string out = ::testing::TempDir() + "faultline_cupti_probe.gpu.jsonl";
  std::remove(out.c_str());
  const Ran ran = run(std::string("CUDA_INJECTION64_PATH=") + CUPTI_LIBRARY +
                      " FAULTLINE_CUPTI_OUT=" + out + " FAULTLINE_CUPTI_INTERVAL_MS=20 " +
                      NCCL_CHECK + " --ranks 1 --bytes 16777216 --iters 50");
  ASSERT_EQ(ran.exit_code, 0) << ran.output;
  std::ifstream in(out);
  std::string line;
  int records = 0, with_nccl = 0, with_memcpy = 0;
  while (std::getline(in, line)) {
    if (line.find("\"type\":\"gpu\"") == std::string::npos) continue;
    ++records;
    if (line.find("\"nccl_kernels\":0,") == std::string::npos) ++with_nccl;
    if (line.find("\"memcpys\":0,") == std::string::npos) ++with_memcpy;
  }
  EXPECT_GT(records, 0) << "no gpu records in " << out << "; output: " << ran.output;
  EXPECT_GT(with_nccl, 0) << "no interval saw an NCCL kernel";
  EXPECT_GT(with_memcpy, 0) << "no interval saw a memcpy";
}

}  // namespace
