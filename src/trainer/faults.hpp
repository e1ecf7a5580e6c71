// Planted faults (`[fault]`, all off by default): the trainer's hooks where each one strikes.
// docs/trainer.md lists what each fault does and how it shows in the metrics.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "trainer/train_config.hpp"

namespace faultline::trainer {

class FaultPlan {
 public:
  FaultPlan(const FaultConfig& config, int rank, std::string host);

  // Checks names against the model (a typo in fault.nan_layer would silently plant nothing).
  void validate(const std::vector<std::string>& module_names) const;

  // Called with the global sample indices of the micro-batch about to run.
  void begin_micro_batch(int64_t step, const std::vector<uint64_t>& samples);

  // nan_layer at nan_step; poison_sample turns its batch row of the embedding output NaN.
  torch::Tensor on_output(const std::string& module, torch::Tensor output) const;

  double lr_factor(int64_t step) const;
  void at_step_start(int64_t step);                               // crash, hang, leak
  void during_compute(int64_t step) const;                        // slow rank
  void during_data(int64_t step) const;                           // data delay
  void on_local_grads(int64_t step, torch::Tensor& grads) const;  // corruption, noise

 private:
  FaultConfig config_;
  int rank_;
  std::string host_;
  int64_t step_ = 0;
  std::vector<int64_t> poisoned_rows_;
  std::vector<std::vector<char>> leaked_;
};

}  // namespace faultline::trainer
