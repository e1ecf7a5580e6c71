// A seeded, learnable synthetic language: a random sparse n-gram model whose text a small GPT can
// learn, so loss really falls (from ln(vocab) toward the model's entropy).
#pragma once

#include <cstdint>
#include <vector>

#include "data/shard.hpp"

namespace faultline::data {

constexpr char kSynthTokenizer[] = "synth-ngram";
constexpr uint32_t kSynthTokenizerVersion = 1;

struct SynthOptions {
  uint64_t seed = 1;
  uint32_t vocab_size = 256;
  uint32_t shards = 4;
  uint64_t tokens_per_shard = 1 << 18;
  uint32_t order = 1;      // context length of the n-gram model (1: bigram, learnable fast)
  uint32_t branching = 4;  // next-token candidates per context
};

// Pure function of the options: same options ⇒ the same tokens, bit for bit, on every machine.
std::vector<Shard> synth_corpus(const SynthOptions& options);

// Shard `index` of synth_corpus(options) alone: each shard has its own random stream, so one can
// be made (or remade) without generating the others. `options.shards` is not consulted.
Shard synth_shard(const SynthOptions& options, uint32_t index);

// Throws UserError listing every option out of range (vocab_size, branching, order, ...).
void validate_synth_options(const SynthOptions& options);

// Entropy (nats/token) of the generating process, estimated from the transition table: the loss
// floor a perfect model reaches.
double synth_entropy(const SynthOptions& options);

}  // namespace faultline::data
