// What a recipe must satisfy to be launched on a given number of ranks, checked by the harness
// before anything is stored or started: the batch splits over the ranks, and the shards fit the
// model. LibTorch-free (part of faultline_trainer_config).
#pragma once

#include "trainer/train_config.hpp"

namespace faultline::trainer {

// Throws one UserError listing every problem, each naming the key and where it was set:
// train.batch_size not divisible by ranks × train.grad_accum; a shard of data.path made by
// another tokenizer (name or version) or with a vocabulary larger than model.vocab_size.
void check_launchable(const TrainConfig& config, int ranks);

}  // namespace faultline::trainer
