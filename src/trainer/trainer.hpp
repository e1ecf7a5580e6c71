// The training loop of faultline-train: one rank of a data-parallel run.
#pragma once

#include <string>

#include "trainer/exit_codes.hpp"
#include "trainer/train_config.hpp"

namespace faultline::trainer {

struct TrainerOptions {
  TrainConfig config;
  std::string out_dir;      // checkpoints and (by default) metrics go here
  std::string resume_path;  // a checkpoint to continue from; empty: start at step 1
};

TrainExit run_trainer(const TrainerOptions& options);

}  // namespace faultline::trainer
