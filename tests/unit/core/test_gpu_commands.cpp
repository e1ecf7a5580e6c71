// Tests for src/cli/gpu_commands.cpp through the built binary: `faultline check nccl` passes the
// check's exit code and message through (or says the GPU module is missing), and `--cupti`
// names a missing probe library as a user error.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>

#include "test_support.hpp"

namespace faultline::cli {
namespace {

const std::string kBinary = FAULTLINE_BINARY_DIR "/src/cli/faultline";
const std::string kNcclCheck = FAULTLINE_BINARY_DIR "/src/cli/faultline-nccl-check";

struct Result {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

Result run(const std::string& command) {
  Result result;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

TEST(GpuCommands, CheckNcclWithoutAGpuIsAnInfrastructureError) {
  if (!std::filesystem::exists(kNcclCheck)) GTEST_SKIP() << "built without FAULTLINE_CUDA";
  // CUDA_VISIBLE_DEVICES= hides any GPU, so this runs the same on a GPU machine.
  const Result r = run("CUDA_VISIBLE_DEVICES= " + kBinary + " check nccl --ranks 1");
  EXPECT_EQ(r.exit_code, 4) << r.output;
  EXPECT_NE(r.output.find("no CUDA device here; the NCCL check needs at least one GPU"),
            std::string::npos)
      << r.output;
}

TEST(GpuCommands, CheckNcclWithoutTheCheckerSaysWhy) {
  const Result r = run("FAULTLINE_NCCL_CHECK=/nonexistent/checker " + kBinary + " check nccl");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("faultline: error: faultline-nccl-check does not exist "
                          "(/nonexistent/checker); check FAULTLINE_NCCL_CHECK"),
            std::string::npos)
      << r.output;
}

TEST(GpuCommands, CheckNeedsItsSubcommandAndValidRanks) {
  EXPECT_EQ(run(kBinary + " check").exit_code, 2);
  const Result r = run(kBinary + " check nccl --ranks -2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--ranks"), std::string::npos) << r.output;
}

TEST(GpuCommands, CuptiWithoutTheProbeLibraryIsAUserError) {
  faultline::testing::ScratchDir dir;
  const Result r = run("FAULTLINE_CUPTI_LIB=/nonexistent/libfaultline_cupti.so " + kBinary +
                       " train -c tiny --cupti --steps 1 --trainer /bin/true --db " +
                       dir.file("f.db") + " --work-dir " + dir.file("runs"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("libfaultline_cupti.so does not exist "
                          "(/nonexistent/libfaultline_cupti.so); check FAULTLINE_CUPTI_LIB"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace faultline::cli
