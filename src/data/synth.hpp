// A seeded, learnable synthetic language: a random sparse n-gram model whose text a small GPT can
// learn, so loss really falls (from ln(vocab) toward the model's entropy).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/shard.hpp"

namespace faultline::data {

constexpr char kSynthTokenizer[] = "synth-ngram";
constexpr uint32_t kSynthTokenizerVersion = 1;
constexpr uint32_t kMaxSynthShards = 1000;  // names are synth-%03d; more would sort out of order
constexpr uint32_t kMaxSynthOrder = 16;
constexpr uint32_t kMaxSynthBranching = 256;

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

// What the caller calls each option, for its errors: `data synth`'s flags, a recipe's keys.
struct SynthOptionNames {
  std::string vocab_size = "vocab_size";
  std::string shards = "shards";
  std::string tokens_per_shard = "tokens_per_shard";
  std::string order = "order";
  std::string branching = "branching";
};

// Throws UserError listing every option out of range (vocab_size, branching, order, ...).
void validate_synth_options(const SynthOptions& options, const SynthOptionNames& names = {});

// Entropy (nats/token) of the generating process, estimated from the transition table: the loss
// floor a perfect model reaches.
double synth_entropy(const SynthOptions& options);

}  // namespace faultline::data
