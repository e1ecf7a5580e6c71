// Turns (step, rank) into token tensors: the corpus (shards or the synthetic language), the data
// fraction, the sampler, and the check that every token id fits the model's vocabulary.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

#include "data/corpus.hpp"
#include "trainer/sampler.hpp"
#include "trainer/train_config.hpp"

namespace faultline::trainer {

struct MicroBatch {
  torch::Tensor tokens;           // [rows, block_size + 1] int64
  std::vector<uint64_t> samples;  // global sample index of each row
};

// A token id outside the vocabulary: a data anomaly naming the shard and the sample.
struct TokenAnomaly {
  uint64_t sample = 0;
  std::string shard;
  uint64_t offset = 0;  // of the bad token inside its shard
  int64_t token = 0;
};

struct StepBatch {
  std::vector<MicroBatch> micro_batches;
  std::optional<TokenAnomaly> anomaly;
};

class BatchLoader {
 public:
  explicit BatchLoader(const TrainConfig& config);

  // This rank's micro-batches of `step` (at probe.replay_step: one, of the replayed samples).
  StepBatch load(int64_t step, int rank, int world_size) const;

  const data::Corpus& corpus() const { return corpus_; }
  const BatchSampler& sampler() const { return sampler_; }
  uint64_t samples_used() const { return samples_used_; }
  std::string shard_of(uint64_t sample) const;

 private:
  std::vector<uint64_t> replayed(int64_t step, const std::vector<uint64_t>& mine,
                                 const std::vector<uint64_t>& global) const;
  TrainConfig config_;
  data::Corpus corpus_;
  uint64_t samples_used_;
  BatchSampler sampler_;
};

}  // namespace faultline::trainer
