// Batch assembly. The sampler decides which samples; this file only copies tokens and checks them.
#include "trainer/batch_loader.hpp"

#include <algorithm>
#include <cmath>

#include "common/error.hpp"
#include "trainer/recipe_corpus.hpp"

namespace faultline::trainer {

BatchLoader::BatchLoader(const TrainConfig& config)
    : config_(config),
      corpus_(recipe_corpus(config)),
      samples_used_(used_samples(corpus_, config.data.fraction)),
      sampler_(static_cast<uint64_t>(config.train.seed), samples_used_,
               static_cast<uint64_t>(config.train.batch_size)) {}

std::string BatchLoader::shard_of(uint64_t sample) const {
  return corpus_.shards().at(corpus_.locate(sample).shard_id).name;
}

std::vector<uint64_t> BatchLoader::replayed(int64_t step, const std::vector<uint64_t>& mine,
                                            const std::vector<uint64_t>& global) const {
  std::vector<uint64_t> kept;
  for (uint64_t sample : mine) {
    const auto& wanted = config_.probe.replay_samples;
    if (std::find(wanted.begin(), wanted.end(), sample) != wanted.end()) kept.push_back(sample);
  }
  if (kept.empty()) {
    std::string batch;
    for (size_t i = 0; i < global.size() && i < 64; ++i) {
      if (i > 0) batch += ',';
      batch += std::to_string(global[i]);
    }
    throw UserError("none of the replayed samples is in this rank's part of step " +
                        std::to_string(step) + "'s batch",
                    "probe.replay_samples",
                    "choose samples of that step's global batch: " + batch +
                        (global.size() > 64 ? ",..." : ""));
  }
  return kept;
}

StepBatch BatchLoader::load(int64_t step, int rank, int world_size) const {
  const auto global = sampler_.global_batch(step);
  auto mine = BatchSampler::rank_slice(global, rank, world_size);
  int64_t accum = config_.train.grad_accum;
  if (config_.probe.replay_step == step) {  // one micro-batch of the samples kept
    // A replica check hands every rank the same samples, whichever rank owns them.
    const bool every_rank = config_.probe.replay_ranks == ReplayRanks::All;
    mine = replayed(step, every_rank ? global : mine, global);
    accum = 1;
  }
  const int64_t rows = static_cast<int64_t>(mine.size()) / accum;
  const int64_t width = corpus_.sample_tokens();
  StepBatch batch;
  for (int64_t m = 0; m < accum; ++m) {
    MicroBatch micro;
    micro.tokens = torch::empty({rows, width}, torch::kLong);
    micro.samples.assign(mine.begin() + m * rows, mine.begin() + (m + 1) * rows);
    int64_t* out = micro.tokens.data_ptr<int64_t>();
    for (int64_t r = 0; r < rows; ++r) {
      corpus_.read(micro.samples[r], out + r * width);
      for (int64_t i = 0; i < width && !batch.anomaly; ++i) {
        int64_t token = out[r * width + i];
        if (token < config_.model.vocab_size) continue;
        auto where = corpus_.locate(micro.samples[r]);
        batch.anomaly = TokenAnomaly{micro.samples[r], corpus_.shards().at(where.shard_id).name,
                                     where.offset + static_cast<uint64_t>(i), token};
      }
    }
    batch.micro_batches.push_back(std::move(micro));
  }
  return batch;
}

}  // namespace faultline::trainer
