// Data-parallel communication: c10d Gloo (or NCCL, in a CUDA LibTorch that has it) over a
// TCPStore rendezvous from torchrun-style environment variables. One rank (WORLD_SIZE unset or 1)
// needs no process group at all.
#pragma once

#include <torch/torch.h>
#include <torch/version.h>

#include <memory>
#include <string>

#include "trainer/train_config.hpp"

namespace c10d {
class ProcessGroup;
#if TORCH_VERSION_MAJOR >= 2
class Backend;
#endif
}  // namespace c10d

namespace faultline::trainer {

struct RankEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string host;  // FAULTLINE_HOST or the machine's hostname: which host a finding names
};

// Reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT; a bad value is a UserError.
RankEnv read_rank_env();

class Communicator {
 public:
  // NCCL (dist.backend "nccl", or "auto" on CUDA) needs a LibTorch built with it; `device` is
  // where the tensors to reduce live.
  Communicator(const RankEnv& env, const DistConfig& config, const torch::Device& device);
  ~Communicator();

  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }
  const RankEnv& env() const { return env_; }

  // In-place sum over ranks (Gloo has no AVG: the caller divides).
  void allreduce_sum(torch::Tensor& tensor);
  void barrier();

  // Collectives this rank has entered: on a hang the rank that stopped short is the culprit.
  int64_t collectives_entered() const { return collectives_entered_; }
  const char* backend_name() const;

 private:
  RankEnv env_;
  // LibTorch 2 split the process group from its backends (Gloo, NCCL).
#if TORCH_VERSION_MAJOR >= 2
  c10::intrusive_ptr<c10d::Backend> group_;
#else
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
#endif
  const char* backend_ = "none";
  int64_t collectives_entered_ = 0;
};

}  // namespace faultline::trainer
