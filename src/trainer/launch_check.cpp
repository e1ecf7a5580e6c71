// Launch-time checks of a bound recipe: reads only shard headers, so it costs milliseconds even
// on large corpora.
#include "trainer/launch_check.hpp"

#include <fmt/core.h>

#include "common/error.hpp"
#include "data/shard.hpp"

namespace faultline::trainer {

namespace {

void check_batch(const TrainConfig& config, int ranks, ErrorList& errors) {
  const int64_t shares = static_cast<int64_t>(ranks) * config.train.grad_accum;
  if (config.train.batch_size % shares == 0) return;
  errors.add(fmt::format("batch_size {} does not divide over {} rank(s) × grad_accum {}",
                         config.train.batch_size, ranks, config.train.grad_accum),
             config.where("train.batch_size"),
             fmt::format("make train.batch_size a multiple of {} (e.g. {}), or change the ranks",
                         shares, (config.train.batch_size / shares + 1) * shares));
}

void check_shards(const TrainConfig& config, ErrorList& errors) {
  if (config.data.path.empty()) return;  // the synthetic language is made to fit
  std::vector<std::string> shards;
  try {
    shards = data::list_shards(config.data.path);
  } catch (const UserError& error) {
    for (const auto& item : error.items())
      errors.add(item.what, config.where("data.path") + ": " + item.where, item.hint);
    return;
  }
  for (const auto& path : shards) {
    data::ShardHeader header;
    try {
      header = data::read_shard_header(path);
    } catch (const UserError& error) {
      for (const auto& item : error.items()) errors.add(item.what, item.where, item.hint);
      continue;
    }
    if (header.tokenizer != config.data.tokenizer ||
        static_cast<int64_t>(header.tokenizer_version) != config.data.tokenizer_version)
      errors.add(fmt::format("shard {} was made by tokenizer {} v{}, the recipe expects {} v{}",
                             path, header.tokenizer, header.tokenizer_version,
                             config.data.tokenizer, config.data.tokenizer_version),
                 config.where("data.tokenizer"),
                 fmt::format("set data.tokenizer = \"{}\" and data.tokenizer_version = {}, or "
                             "point data.path at shards of this tokenizer",
                             header.tokenizer, header.tokenizer_version));
    if (static_cast<int64_t>(header.vocab_size) > config.model.vocab_size)
      errors.add(fmt::format("shard {} has token ids up to {} but model.vocab_size is {}", path,
                             header.vocab_size - 1, config.model.vocab_size),
                 config.where("model.vocab_size"),
                 fmt::format("set model.vocab_size to at least {}", header.vocab_size));
  }
}

}  // namespace

void check_launchable(const TrainConfig& config, int ranks) {
  ErrorList errors;
  check_batch(config, ranks, errors);
  check_shards(config, errors);
  errors.throw_if_any();
}

}  // namespace faultline::trainer
