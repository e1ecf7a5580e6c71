// The corpus a recipe trains on (its shards, or the synthetic language made in memory) and the
// samples it uses. LibTorch-free: the harness names the shards of samples it searched.
#pragma once

#include <cstdint>

#include "data/corpus.hpp"
#include "trainer/train_config.hpp"

namespace faultline::trainer {

data::Corpus recipe_corpus(const TrainConfig& config);

// The first ceil(data.fraction × samples) samples, at least 1.
uint64_t used_samples(const data::Corpus& corpus, double fraction);

}  // namespace faultline::trainer
