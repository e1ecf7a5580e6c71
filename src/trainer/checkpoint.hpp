// Checkpoints: everything bitwise-identical resumption needs — parameters, AdamW moments and step
// counter, the global step, the default CPU generator, the sampler's position, and the facts the
// bits depend on (config, BLAS, threads) — in a versioned, checksummed file.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "trainer/flat_params.hpp"

namespace faultline::trainer {

constexpr uint32_t kCheckpointFormatVersion = 1;

struct CheckpointMeta {
  int64_t step = 0;                // steps completed
  std::string config_hash;         // of the whole resolved config
  std::string trajectory_hash;     // of the keys that change the training trajectory
  std::string blas;                // library and kernel
  std::string blas_kernel_source;  // how the kernel was chosen ("" in older checkpoints)
  int64_t threads = 1;
  int world_size = 1;
  uint64_t sampler_seed = 0;
  uint64_t sampler_epoch = 0;
  std::string torch_version;
};

struct TrainingState {
  FlatParams& params;
  FlatAdamW& optimizer;
};

// Writes atomically (temporary file, then rename). Throws UserError on I/O failure.
void save_checkpoint(const std::string& path, const CheckpointMeta& meta, TrainingState state);

// Verifies magic, version, checksum and that the parameter layout (by position: count and sizes)
// matches the model; refuses with a UserError naming the file and what differs. Restores the
// state and the default CPU generator and returns the stored meta.
CheckpointMeta load_checkpoint(const std::string& path, TrainingState state);

// Path of the checkpoint of `step` inside `dir`.
std::string checkpoint_path(const std::string& dir, int64_t step);

}  // namespace faultline::trainer
