// Cutting shards into fixed-length samples with global indices that depend only on the shards,
// and loading a corpus with every tokenizer mismatch reported at once.
#include "data/corpus.hpp"

#include <algorithm>
#include <stdexcept>

#include "common/error.hpp"

namespace faultline::data {

namespace {

uint64_t samples_in(uint64_t token_count, uint32_t sample_tokens) {
  // Consecutive samples share one token: the last target of one is the first input of the next.
  if (token_count == 0) return 0;
  return (token_count - 1) / (sample_tokens - 1);
}

void check_sample_tokens(uint32_t sample_tokens) {
  if (sample_tokens < 2)
    throw UserError("sample length " + std::to_string(sample_tokens) + " is too short",
                    "sample_tokens",
                    "a sample is block_size + 1 tokens, so it needs at least 2 (block_size >= 1)");
}

// The shard with the fewest tokens: the one to name when no shard is long enough.
const Shard& shortest(const std::vector<Shard>& shards) {
  return *std::min_element(shards.begin(), shards.end(), [](const Shard& a, const Shard& b) {
    return a.tokens.size() < b.tokens.size();
  });
}

std::string no_samples_what(const std::vector<Shard>& shards, uint32_t sample_tokens) {
  std::string what = "corpus has no samples of " + std::to_string(sample_tokens) + " tokens";
  if (!shards.empty()) {
    const Shard& s = shortest(shards);
    what +=
        "; the shortest shard '" + s.name + "' has " + std::to_string(s.tokens.size()) + " tokens";
  }
  return what;
}

const char kNoSamplesHint[] =
    "use a smaller block_size, or longer shards (--tokens-per-shard / --shard-tokens)";

}  // namespace

Corpus::Corpus(std::vector<Shard> shards, uint32_t sample_tokens)
    : shards_(std::move(shards)), sample_tokens_(sample_tokens) {
  check_sample_tokens(sample_tokens_);
  first_sample_.reserve(shards_.size());
  for (const Shard& shard : shards_) {
    first_sample_.push_back(total_samples_);
    total_samples_ += samples_in(shard.tokens.size(), sample_tokens_);
  }
  if (total_samples_ == 0)
    throw UserError(no_samples_what(shards_, sample_tokens_),
                    shards_.empty() ? std::string("corpus") : shortest(shards_).name,
                    kNoSamplesHint);
}

SampleLocation Corpus::locate(uint64_t sample) const {
  if (sample >= total_samples_)
    throw std::out_of_range("sample " + std::to_string(sample) + " out of range (corpus has " +
                            std::to_string(total_samples_) + ")");
  // Shards with no samples share a first index with their successor; upper_bound skips them.
  auto it = std::upper_bound(first_sample_.begin(), first_sample_.end(), sample);
  auto shard_id = static_cast<uint32_t>(it - first_sample_.begin() - 1);
  return {shard_id, (sample - first_sample_[shard_id]) * (sample_tokens_ - 1)};
}

void Corpus::read(uint64_t sample, int64_t* out) const {
  SampleLocation where = locate(sample);
  const uint16_t* tokens = shards_[where.shard_id].tokens.data() + where.offset;
  for (uint32_t i = 0; i < sample_tokens_; ++i) out[i] = tokens[i];
}

Corpus load_corpus(const std::string& path, const std::string& tokenizer,
                   uint32_t tokenizer_version, uint32_t sample_tokens) {
  check_sample_tokens(sample_tokens);
  std::vector<std::string> files = list_shards(path);

  // Read every shard before failing so a user sees each damaged or mismatched file in one go.
  ErrorList errors;
  std::vector<Shard> shards;
  shards.reserve(files.size());
  for (const std::string& file : files) {
    try {
      shards.push_back(read_shard(file));
    } catch (const UserError& error) {
      for (const ErrorItem& item : error.items()) errors.add(item.what, item.where, item.hint);
      continue;
    }
    const ShardHeader& header = shards.back().header;
    if (header.tokenizer != tokenizer || header.tokenizer_version != tokenizer_version)
      errors.add("shard tokenizer '" + header.tokenizer + "' v" +
                     std::to_string(header.tokenizer_version) +
                     " does not match the config's data.tokenizer '" + tokenizer + "' v" +
                     std::to_string(tokenizer_version),
                 file,
                 "set data.tokenizer to match the shards, or re-create the shards with the "
                 "configured tokenizer");
  }
  errors.throw_if_any();

  uint64_t total = 0;
  for (const Shard& shard : shards) total += samples_in(shard.tokens.size(), sample_tokens);
  if (total == 0) throw UserError(no_samples_what(shards, sample_tokens), path, kNoSamplesHint);
  return Corpus(std::move(shards), sample_tokens);
}

}  // namespace faultline::data
