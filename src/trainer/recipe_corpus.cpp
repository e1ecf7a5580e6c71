// The recipe's corpus: shards from data.path, or the synthetic language generated in memory.
#include "trainer/recipe_corpus.hpp"

#include <algorithm>
#include <cmath>

#include "common/error.hpp"
#include "data/synth.hpp"

namespace faultline::trainer {

data::Corpus recipe_corpus(const TrainConfig& config) {
  const auto sample_tokens = static_cast<uint32_t>(config.model.block_size + 1);
  if (!config.data.path.empty())
    return data::load_corpus(config.data.path, config.data.tokenizer,
                             static_cast<uint32_t>(config.data.tokenizer_version), sample_tokens);
  if (config.data.tokenizer != data::kSynthTokenizer)
    throw UserError(
        "data.path is empty, so the synthetic language is used, but data.tokenizer is '" +
            config.data.tokenizer + "'",
        "data.tokenizer",
        std::string("set data.tokenizer = \"") + data::kSynthTokenizer +
            "\" or point data.path at shards");
  data::SynthOptions options;
  options.seed = static_cast<uint64_t>(config.data.synth_seed);
  options.vocab_size = static_cast<uint32_t>(config.model.vocab_size);
  options.shards = static_cast<uint32_t>(config.data.synth_shards);
  options.tokens_per_shard = static_cast<uint64_t>(config.data.synth_tokens_per_shard);
  options.order = static_cast<uint32_t>(config.data.synth_order);
  options.branching = static_cast<uint32_t>(config.data.synth_branching);
  return data::Corpus(data::synth_corpus(options), sample_tokens);
}

uint64_t used_samples(const data::Corpus& corpus, double fraction) {
  auto used =
      static_cast<uint64_t>(std::ceil(fraction * static_cast<double>(corpus.num_samples())));
  return std::max<uint64_t>(1, std::min(used, corpus.num_samples()));
}

}  // namespace faultline::trainer
