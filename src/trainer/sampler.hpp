// Which samples make up each step's global batch: a pure function of (seed, step), independent
// of the world size, so an N-rank step can be replayed on one rank with gradient accumulation.
#pragma once

#include <cstdint>
#include <vector>

namespace faultline::trainer {

class BatchSampler {
 public:
  // Draws from samples [0, num_samples): epoch after epoch, each a seeded permutation.
  BatchSampler(uint64_t seed, uint64_t num_samples, uint64_t global_batch);

  // Global sample indices of step `step` (1-based), in batch order.
  std::vector<uint64_t> global_batch(int64_t step) const;

  // The slice of the global batch that `rank` of `world_size` trains on.
  static std::vector<uint64_t> rank_slice(const std::vector<uint64_t>& batch, int rank,
                                          int world_size);

  uint64_t epoch_of(int64_t step) const;
  uint64_t num_samples() const { return num_samples_; }

 private:
  uint64_t permute(uint64_t index, uint64_t epoch) const;

  uint64_t seed_;
  uint64_t num_samples_;
  uint64_t global_batch_;
  int bits_ = 1;  // Feistel domain: 2^bits ≥ num_samples
};

}  // namespace faultline::trainer
