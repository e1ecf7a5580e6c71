// The trainer's typed configuration: one struct per TOML section, bound with ConfigBinder.
// LibTorch-free so the harness can read and validate trainer recipes too.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace faultline::trainer {

struct ModelConfig {
  int64_t vocab_size = 256;
  int64_t block_size = 64;
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 192;
  bool tied_head = true;
  double init_std = 0.02;
};

struct DataConfig {
  std::string path;  // shard file or directory; empty: the synthetic language, made in memory
  std::string tokenizer = "synth-ngram";
  int64_t tokenizer_version = 1;
  double fraction = 1.0;  // use only the first ceil(fraction × samples) samples
  int64_t synth_seed = 1;
  int64_t synth_shards = 4;
  int64_t synth_tokens_per_shard = 1 << 18;
  int64_t synth_order = 1;  // bigram: a small model learns it within 100 steps
  int64_t synth_branching = 4;
};

struct OptimConfig {
  double lr = 3e-3;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
  double grad_clip = 1.0;  // max global grad norm; 0 disables clipping (the norm is still measured)
};

enum class ScheduleKind { Constant, Cosine, Wsd };

struct ScheduleConfig {
  ScheduleKind kind = ScheduleKind::Cosine;
  int64_t warmup_steps = 10;
  double min_lr_ratio = 0.1;    // final LR = lr × min_lr_ratio
  double decay_fraction = 0.2;  // wsd: share of total steps spent decaying
  int64_t total_steps = 0;      // horizon of the schedule; 0: train.steps
};

// Where the trainer runs: auto takes CUDA when LibTorch sees a device (docs/trainer.md, "Device").
enum class DeviceKind { Auto, Cpu, Cuda };
// fp32: every op in float32 (the reference bits). bf16: autocast (matmuls in bfloat16), weights,
// gradients and optimizer state stay float32.
enum class Precision { Fp32, Bf16 };

// Which kernels run the linear layers and attention on a float32 CPU: the trainer's own
// (oneDNN GEMMs, attention that skips the masked blocks: src/trainer/cpu_kernels.hpp) or
// LibTorch's ops throughout. Loss bits differ between them, as between BLAS kernels.
enum class CpuKernels { Fused, Aten };

struct TrainLoopConfig {
  int64_t steps = 100;      // the run's length
  int64_t stop_after = 0;   // stop after this step (a prefix of the same run); 0: run all
  int64_t batch_size = 16;  // global batch, in samples
  int64_t grad_accum = 1;   // micro-batches per rank and step
  int64_t seed = 1234;
  int64_t threads = 1;           // intra-op and BLAS threads; loss bits depend on it
  int64_t checkpoint_every = 0;  // 0: never
  int64_t log_every = 10;        // human progress lines on stdout; 0: none
  DeviceKind device = DeviceKind::Auto;
  Precision precision = Precision::Fp32;
  CpuKernels cpu_kernels = CpuKernels::Fused;
};

enum class DistBackend { Auto, Gloo, Nccl };

struct DistConfig {
  DistBackend backend = DistBackend::Auto;
  int64_t ranks =
      1;  // how many ranks `faultline` launches this recipe on; the trainer follows WORLD_SIZE
  int64_t timeout_s = 300;  // collective timeout
};

enum class ProbeLevel { Off, Cheap, Full };

// Whose samples a rank trains on at probe.replay_step: its own share of them, or all of them
// (a replica check: every rank computes the same batch, so their local gradients must agree).
enum class ReplayRanks { Own, All };

struct ProbeConfig {
  ProbeLevel level = ProbeLevel::Cheap;
  int64_t full_from_step = 0;      // with level = full: per-layer checks only from this step on
  int64_t fingerprint_every = 10;  // 0: never
  bool halt_on_nonfinite = true;
  bool checkpoint_on_nonfinite = false;  // write the last good state when halting
  // A diagnostic replay: at step `replay_step` train on only these global samples of that step's
  // batch (the others are dropped), so a search can split a batch. Changes the trajectory from
  // that step on; 0 / empty: off.
  int64_t replay_step = 0;
  std::vector<uint64_t> replay_samples;
  ReplayRanks replay_ranks = ReplayRanks::Own;
};

struct FaultConfig {
  int64_t nan_step = 0;
  std::string nan_layer;
  int64_t poison_sample = -1;
  int64_t lr_spike_step = 0;
  double lr_spike_factor = 1000.0;
  int64_t crash_rank = -1;
  int64_t crash_step = 0;
  std::string crash_signal = "SEGV";  // SEGV, ABRT, or an exit code such as "7"
  int64_t hang_rank = -1;
  int64_t hang_step = 0;
  int64_t slow_rank = -1;
  int64_t slow_ms = 0;
  int64_t corrupt_grad_rank = -1;
  int64_t corrupt_grad_step = 0;
  std::string corrupt_grad_host;  // instead of a rank: whichever rank runs on this host
  double leak_mb_per_step = 0;
  int64_t data_delay_ms = 0;
  int64_t data_delay_rank = -1;  // -1: every rank
  bool nondeterministic = false;
};

struct TrainConfig {
  ModelConfig model;
  DataConfig data;
  OptimConfig optim;
  ScheduleConfig schedule;
  TrainLoopConfig train;
  DistConfig dist;
  ProbeConfig probe;
  FaultConfig fault;

  std::string source;     // the file it came from
  std::string canonical;  // resolved config: every key with its value, sorted
  std::string hash;       // hex XXH64 of `canonical`
  // Hash of the keys that change the training trajectory (all but trajectory_free_keys()): a
  // checkpoint resumes only into a config with the same one.
  std::string trajectory_hash;
  std::map<std::string, std::string> origins;  // key → "file.toml:12" or "--set key", as given

  // "train.batch_size at x.toml:12" (or the bare key when it was not given): an error's where.
  std::string where(const std::string& key) const;
};

// Reads FILE, applies `--set` overrides, validates everything and throws one UserError listing
// every problem. `cli_options` are the options of the command that reads it, suggested for an
// unknown key that names one.
TrainConfig load_train_config(const std::string& path, const std::vector<std::string>& overrides,
                              const std::vector<std::string>& cli_options = {});

// `--set` assignments with every path key's relative value made absolute against the current
// directory, so a spec stored with a run or a finding means the same from any directory.
std::vector<std::string> absolute_path_overrides(const std::vector<std::string>& overrides);

// The same from TOML text (tests, recipes embedded in a store).
TrainConfig parse_train_config(const std::string& toml_text, const std::string& name,
                               const std::vector<std::string>& overrides);

const char* to_string(ScheduleKind kind);
const char* to_string(ProbeLevel level);
const char* to_string(DistBackend backend);
const char* to_string(DeviceKind device);
const char* to_string(Precision precision);
const char* to_string(CpuKernels kernels);

// The keys a resumed checkpoint's config may differ in ("probe.*": a whole section): they are
// left out of trajectory_hash.
const std::vector<std::string>& trajectory_free_keys();

}  // namespace faultline::trainer
