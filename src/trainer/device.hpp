// Where and how precisely the trainer computes: the device train.device names, bf16 autocast,
// the deterministic settings (and what stays nondeterministic), and memory from the device's own
// figures. No CUDA runtime call here: those live in cuda_device.cpp, built for a CUDA LibTorch.
#pragma once

#include <torch/torch.h>

#include <nlohmann/json.hpp>
#include <optional>

#include "trainer/train_config.hpp"

namespace faultline::trainer {

// cuBLAS reads CUBLAS_WORKSPACE_CONFIG when CUDA initialises: main sets ":4096:8" (the setting
// deterministic cuBLAS needs) before anything else, unless the user set it.
void set_cublas_workspace_default();

// How many CUDA devices this LibTorch can use (0 for a CPU LibTorch or no device).
int cuda_device_count();

// The device of train.device: auto takes CUDA when a device exists. Rank r of a node takes
// device LOCAL_RANK mod count. CUDA without a device is a UserError naming the key.
torch::Device choose_device(const TrainConfig& config, int cuda_devices, int local_rank);

// Makes a CUDA device the process's current one (nothing for the CPU).
void make_current(const torch::Device& device);

// Deterministic algorithms everywhere; on CUDA also cuDNN deterministic and not benchmarking, and
// an op without a deterministic CUDA kernel warns instead of failing the run. Returns the start
// event's "determinism" object: what is on, and what stays nondeterministic.
nlohmann::json make_deterministic(const torch::Device& device, int world_size,
                                  const std::string& backend);

// Whether CPU autocast is on now (an AutocastScope under bf16): the fused CPU kernels step aside.
bool cpu_autocast_enabled();

// While alive, ops on `device` autocast to bfloat16 under train.precision = "bf16"; nothing under
// fp32. Wraps forward and loss; backward runs outside it, as autocast wants.
class AutocastScope {
 public:
  AutocastScope(const torch::Device& device, Precision precision);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  std::optional<torch::DeviceType> active_;
};

struct MemoryFigures {
  int64_t used_bytes = 0;   // CPU: this process's RSS; CUDA: device total - free (all processes)
  int64_t total_bytes = 0;  // CPU: the machine's memory; CUDA: the device's
  std::optional<int64_t> peak_allocated_bytes;  // CUDA: the caching allocator's peak
};

MemoryFigures memory_figures(const torch::Device& device);

}  // namespace faultline::trainer
