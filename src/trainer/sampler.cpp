// A stateless permutation per epoch: a Feistel network over the next power of two, cycle-walked
// into [0, N). O(1) per index and no table, so huge corpora cost nothing and any step is direct.
#include "trainer/sampler.hpp"

#include <cstddef>

namespace faultline::trainer {

namespace {
uint64_t mix(uint64_t x) {  // splitmix64 finalizer
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}
}  // namespace

BatchSampler::BatchSampler(uint64_t seed, uint64_t num_samples, uint64_t global_batch)
    : seed_(seed), num_samples_(num_samples), global_batch_(global_batch) {
  while ((uint64_t(1) << bits_) < num_samples_) ++bits_;
  if (bits_ % 2 == 1) ++bits_;  // balanced halves
}

uint64_t BatchSampler::permute(uint64_t index, uint64_t epoch) const {
  const int half = bits_ / 2;
  const uint64_t mask = (uint64_t(1) << half) - 1;
  const uint64_t key = mix(seed_ ^ mix(epoch + 1));
  uint64_t x = index;
  do {  // cycle walking: a value outside [0, N) is permuted again until it lands inside
    uint64_t left = x >> half, right = x & mask;
    for (int round = 0; round < 4; ++round) {
      uint64_t next = left ^ (mix(right ^ key ^ (uint64_t(round) << 56)) & mask);
      left = right;
      right = next;
    }
    x = (left << half) | right;
  } while (x >= num_samples_);
  return x;
}

std::vector<uint64_t> BatchSampler::global_batch(int64_t step) const {
  std::vector<uint64_t> batch(global_batch_);
  uint64_t position = static_cast<uint64_t>(step - 1) * global_batch_;
  for (uint64_t j = 0; j < global_batch_; ++j, ++position)
    batch[j] = permute(position % num_samples_, position / num_samples_);
  return batch;
}

std::vector<uint64_t> BatchSampler::rank_slice(const std::vector<uint64_t>& batch, int rank,
                                               int world_size) {
  std::size_t per_rank = batch.size() / world_size;
  return {batch.begin() + rank * per_rank, batch.begin() + (rank + 1) * per_rank};
}

uint64_t BatchSampler::epoch_of(int64_t step) const {
  return static_cast<uint64_t>(step - 1) * global_batch_ / num_samples_;
}

}  // namespace faultline::trainer
