// Device choice, autocast and the deterministic settings. Autocast's C++ API changed in LibTorch
// 2.4 (per-device-type functions); both are spelled out below.
#include "trainer/device.hpp"

#include <ATen/autocast_mode.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <cstdlib>

#include "common/error.hpp"
#include "trainer/runtime_info.hpp"
#ifdef FAULTLINE_TORCH_CUDA
#include "trainer/cuda_device.hpp"
#endif

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define FAULTLINE_AUTOCAST_PER_DEVICE 1
#endif

namespace faultline::trainer {

namespace {
constexpr const char* kCublasWorkspace = "CUBLAS_WORKSPACE_CONFIG";

std::string no_cuda_hint() {
#ifdef FAULTLINE_TORCH_CUDA
  return std::string("this faultline-train's LibTorch ") + TORCH_VERSION +
         " has CUDA but sees no device (check the driver and CUDA_VISIBLE_DEVICES); use "
         "\"cpu\" or \"auto\"";
#else
  return std::string("this faultline-train's LibTorch ") + TORCH_VERSION +
         " is a CPU build; use \"cpu\" or \"auto\", or build against a CUDA LibTorch "
         "(docs/gpu.md)";
#endif
}

void set_autocast(torch::DeviceType type, bool enabled) {
#ifdef FAULTLINE_AUTOCAST_PER_DEVICE
  at::autocast::set_autocast_dtype(type, at::kBFloat16);
  at::autocast::set_autocast_enabled(type, enabled);
#else
  if (type == torch::kCUDA) {
    at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
    at::autocast::set_enabled(enabled);
  } else {
    at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
    at::autocast::set_cpu_enabled(enabled);
  }
#endif
}
}  // namespace

bool cpu_autocast_enabled() {
#ifdef FAULTLINE_AUTOCAST_PER_DEVICE
  return at::autocast::is_autocast_enabled(at::kCPU);
#else
  return at::autocast::is_cpu_enabled();
#endif
}

void set_cublas_workspace_default() {
  setenv(kCublasWorkspace, ":4096:8", /*overwrite=*/0);
}

int cuda_device_count() {
  return torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
}

torch::Device choose_device(const TrainConfig& config, int cuda_devices, int local_rank) {
  const DeviceKind kind = config.train.device;
  if (kind == DeviceKind::Cpu || (kind == DeviceKind::Auto && cuda_devices == 0))
    return torch::Device(torch::kCPU);
  if (cuda_devices == 0)
    throw UserError("train.device = \"cuda\" but no CUDA device is usable",
                    config.where("train.device"), no_cuda_hint());
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(local_rank % cuda_devices));
}

void make_current(const torch::Device& device) {
#ifdef FAULTLINE_TORCH_CUDA
  if (device.is_cuda()) make_cuda_device_current(device.index());
#else
  (void)device;
#endif
}

nlohmann::json make_deterministic(const torch::Device& device, int world_size,
                                  const std::string& backend) {
  const bool cuda = device.is_cuda();
  // On CUDA a few backward kernels have no deterministic variant; failing the whole run for one
  // would make the trainer unusable there, so LibTorch warns and the record says so.
  at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/cuda);
  at::globalContext().setDeterministicCuDNN(true);
  at::globalContext().setBenchmarkCuDNN(false);
  nlohmann::json nondeterministic = nlohmann::json::array();
  if (cuda)
    nondeterministic.push_back(
        "ops without a deterministic CUDA kernel (atomic adds in some backward kernels) run "
        "anyway; LibTorch warns once per op (warn_only)");
  if (cuda && world_size > 1 && backend == "nccl")
    nondeterministic.push_back(
        "NCCL allreduce: the summation order follows the algorithm NCCL picks for the topology "
        "and size (pin with NCCL_ALGO / NCCL_PROTO)");
  const char* workspace = std::getenv(kCublasWorkspace);
  return {{"device", device.str()},
          {"deterministic_algorithms", true},
          {"warn_only", cuda},
          {"cudnn_deterministic", true},
          {"cudnn_benchmark", false},
          {"cublas_workspace_config", workspace ? nlohmann::json(workspace) : nullptr},
          {"nondeterministic", nondeterministic}};
}

AutocastScope::AutocastScope(const torch::Device& device, Precision precision) {
  if (precision != Precision::Bf16) return;
  active_ = device.type();
  set_autocast(*active_, true);
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  set_autocast(*active_, false);
  at::autocast::clear_cache();
}

MemoryFigures memory_figures(const torch::Device& device) {
#ifdef FAULTLINE_TORCH_CUDA
  if (device.is_cuda()) return cuda_memory_figures(device.index());
#else
  (void)device;
#endif
  return {resident_bytes(), total_memory_bytes(), std::nullopt};
}

}  // namespace faultline::trainer
