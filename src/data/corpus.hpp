// A corpus: shards in memory, cut into fixed-length samples with stable global indices.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/shard.hpp"

namespace faultline::data {

struct SampleLocation {
  uint32_t shard_id = 0;  // index into shards(), in list_shards() order
  uint64_t offset = 0;    // first token of the sample inside its shard
};

// Sample i of a corpus is a window of `sample_tokens` consecutive tokens (block_size + 1 for
// next-token prediction). Windows never cross shards: shard k contributes
// floor((token_count - 1) / (sample_tokens - 1)) samples at stride sample_tokens - 1, and its
// samples come after those of shards 0..k-1. So global sample indices depend only on the shards.
class Corpus {
 public:
  Corpus(std::vector<Shard> shards, uint32_t sample_tokens);

  uint64_t num_samples() const { return total_samples_; }
  uint32_t sample_tokens() const { return sample_tokens_; }
  const std::vector<Shard>& shards() const { return shards_; }

  SampleLocation locate(uint64_t sample) const;
  // Copies sample `sample` into out[0..sample_tokens).
  void read(uint64_t sample, int64_t* out) const;

 private:
  std::vector<Shard> shards_;
  uint32_t sample_tokens_;
  std::vector<uint64_t> first_sample_;  // first global sample index of each shard
  uint64_t total_samples_ = 0;
};

// Loads every shard of `path` (see list_shards) and checks that each matches the expected
// tokenizer name and version; a mismatch is a UserError naming the shard and both values.
Corpus load_corpus(const std::string& path, const std::string& tokenizer,
                   uint32_t tokenizer_version, uint32_t sample_tokens);

}  // namespace faultline::data
