// Data-parallel communication: c10d Gloo over a TCPStore rendezvous from torchrun-style
// environment variables. One rank (WORLD_SIZE unset or 1) needs no process group at all.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>

#include "trainer/train_config.hpp"

namespace c10d {
class ProcessGroup;
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
  Communicator(const RankEnv& env, const DistConfig& config);
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
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  int64_t collectives_entered_ = 0;
};

}  // namespace faultline::trainer
