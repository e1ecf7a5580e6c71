// Tests for src/trainer/device.cpp: which device a config gets, the error without CUDA, bf16
// autocast on the CPU, the determinism record, and memory figures. CUDA cases run in
// tests/gpu (they skip without a device).
#include "trainer/device.hpp"

#include <gtest/gtest.h>
#include <torch/version.h>

#include <cstdlib>
#include <string>

#include "../core/test_support.hpp"

namespace faultline::trainer {
namespace {

using faultline::testing::user_error;

TrainConfig config_with(const std::vector<std::string>& overrides) {
  return parse_train_config("", "d.toml", overrides);
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(ChooseDevice, CpuAndAutoWithoutCudaGiveTheCpu) {
  EXPECT_EQ(choose_device(config_with({}), 0, 0), torch::Device(torch::kCPU));
  EXPECT_EQ(choose_device(config_with({"train.device=cpu"}), 0, 0), torch::Device(torch::kCPU));
  EXPECT_EQ(choose_device(config_with({"train.device=cpu"}), 8, 3), torch::Device(torch::kCPU));
}

TEST(ChooseDevice, AutoAndCudaTakeTheLocalRanksDevice) {
  EXPECT_EQ(choose_device(config_with({}), 2, 0), torch::Device(torch::kCUDA, 0));
  EXPECT_EQ(choose_device(config_with({"train.device=cuda"}), 2, 3),
            torch::Device(torch::kCUDA, 1));
}

TEST(ChooseDevice, CudaWithoutADeviceNamesTheKeyAndTheWayOut) {
  const auto error = user_error([] { choose_device(config_with({"train.device=cuda"}), 0, 0); });
  EXPECT_EQ(error.what, "train.device = \"cuda\" but no CUDA device is usable");
  EXPECT_EQ(error.where, "train.device at --set train.device");
  EXPECT_TRUE(contains(error.hint, "use \"cpu\" or \"auto\"")) << error.hint;
  EXPECT_TRUE(contains(error.hint, "this faultline-train's LibTorch " TORCH_VERSION)) << error.hint;
}

TEST(ChooseDevice, ThisLibTorchCountsItsDevices) {
  EXPECT_GE(cuda_device_count(), 0);
  if (!torch::cuda::is_available()) {
    EXPECT_EQ(cuda_device_count(), 0);
  }
}

TEST(AutocastScope, Bf16MakesMatmulsBfloat16OnlyInsideTheScope) {
  const auto a = torch::randn({4, 8}), b = torch::randn({8, 3});
  {
    AutocastScope scope(torch::Device(torch::kCPU), Precision::Bf16);
    EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kBFloat16);
  }
  EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kFloat);
}

TEST(AutocastScope, Fp32ChangesNothing) {
  const auto a = torch::randn({4, 8}), b = torch::randn({8, 3});
  const auto reference = torch::mm(a, b);
  AutocastScope scope(torch::Device(torch::kCPU), Precision::Fp32);
  const auto inside = torch::mm(a, b);
  EXPECT_EQ(inside.scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::equal(inside, reference));
}

TEST(AutocastScope, Bf16GradientsOfFloatWeightsStayFloat) {
  auto weight = torch::randn({8, 3}, torch::requires_grad());
  const auto input = torch::randn({4, 8});
  torch::Tensor loss;
  {
    AutocastScope scope(torch::Device(torch::kCPU), Precision::Bf16);
    loss = torch::mm(input, weight).sum();
  }
  loss.backward();
  ASSERT_TRUE(weight.grad().defined());
  EXPECT_EQ(weight.grad().scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::isfinite(weight.grad()).all().item<bool>());
}

TEST(MakeDeterministic, CpuIsStrictAndNamesNothingNondeterministic) {
  const auto record = make_deterministic(torch::Device(torch::kCPU), 1, "none");
  EXPECT_TRUE(at::globalContext().deterministicAlgorithms());
  EXPECT_FALSE(at::globalContext().deterministicAlgorithmsWarnOnly());
  EXPECT_TRUE(at::globalContext().deterministicCuDNN());
  EXPECT_FALSE(at::globalContext().benchmarkCuDNN());
  EXPECT_EQ(record.at("device"), "cpu");
  EXPECT_EQ(record.at("warn_only"), false);
  EXPECT_TRUE(record.at("nondeterministic").empty());
}

TEST(MakeDeterministic, CudaWithNcclRecordsWhatStaysNondeterministic) {
  const auto record = make_deterministic(torch::Device(torch::kCUDA, 0), 4, "nccl");
  EXPECT_TRUE(at::globalContext().deterministicAlgorithmsWarnOnly());
  EXPECT_EQ(record.at("device"), "cuda:0");
  EXPECT_EQ(record.at("warn_only"), true);
  ASSERT_EQ(record.at("nondeterministic").size(), 2u);
  EXPECT_TRUE(contains(record.at("nondeterministic")[1].get<std::string>(), "NCCL"));
  make_deterministic(torch::Device(torch::kCPU), 1, "none");  // back to the strict CPU setting
}

TEST(CublasWorkspace, DefaultIsSetAndAUsersValueKept) {
  unsetenv("CUBLAS_WORKSPACE_CONFIG");
  set_cublas_workspace_default();
  EXPECT_STREQ(std::getenv("CUBLAS_WORKSPACE_CONFIG"), ":4096:8");
  setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8", 1);
  set_cublas_workspace_default();
  EXPECT_STREQ(std::getenv("CUBLAS_WORKSPACE_CONFIG"), ":16:8");
  EXPECT_EQ(make_deterministic(torch::Device(torch::kCPU), 1, "none").at("cublas_workspace_config"),
            ":16:8");
}

TEST(MemoryFigures, CpuIsThisProcessAndTheMachine) {
  const auto figures = memory_figures(torch::Device(torch::kCPU));
  EXPECT_GT(figures.used_bytes, 0);
  EXPECT_GT(figures.total_bytes, figures.used_bytes);
  EXPECT_FALSE(figures.peak_allocated_bytes.has_value());
}

// Device tests: skipped without a CUDA device (and with Debian's CPU LibTorch).
TEST(MemoryFigures, CudaIsTheDevicesOwnWithTheAllocatorsPeak) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no usable CUDA device";
  const torch::Device cuda(torch::kCUDA, 0);
  auto big = torch::empty({64 << 20}, torch::dtype(torch::kFloat).device(cuda));  // 256 MiB
  const auto figures = memory_figures(cuda);
  EXPECT_GT(figures.total_bytes, int64_t(1) << 30);
  EXPECT_GE(figures.used_bytes, big.nbytes());
  ASSERT_TRUE(figures.peak_allocated_bytes.has_value());
  EXPECT_GE(*figures.peak_allocated_bytes, big.nbytes());
}

TEST(AutocastScope, Bf16OnCudaMakesMatmulsBfloat16) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no usable CUDA device";
  const torch::Device cuda(torch::kCUDA, 0);
  const auto a = torch::randn({4, 8}, torch::device(cuda)),
             b = torch::randn({8, 3}, torch::device(cuda));
  {
    AutocastScope scope(cuda, Precision::Bf16);
    EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kBFloat16);
  }
  EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kFloat);
}

}  // namespace
}  // namespace faultline::trainer
