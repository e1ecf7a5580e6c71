// `faultline data synth` and `faultline data prepare`: write shard directories, one line per
// shard, refusing to mix new shards with stale ones from an earlier run.
#include "cli/data_command.hpp"

#include <fmt/core.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "cli/option_checks.hpp"
#include "cli/run_context.hpp"
#include "common/config.hpp"
#include "common/error.hpp"
#include "common/hash.hpp"
#include "common/text.hpp"
#include "data/shard.hpp"
#include "data/synth.hpp"
#include "data/tokenizer.hpp"

namespace faultline::cli {

namespace {

namespace fs = std::filesystem;

// Most shards a prepare run may write: names are prepare-%03d, and more would sort out of order.
constexpr uint64_t kMaxPreparedShards = 1000;

// What to do when the output directory already holds shards. A corpus is "every shard in the
// directory", so leftovers from a larger earlier run would silently join the new corpus.
enum class ExistingShards { Refuse, Replace };

void prepare_output_dir(const std::string& dir, ExistingShards policy) {
  std::error_code error;
  if (fs::exists(dir, error) && !fs::is_directory(dir, error))
    throw UserError("output path exists and is not a directory", dir, "choose another --out");
  fs::create_directories(dir, error);
  if (error) throw UserError("cannot create output directory: " + error.message(), dir);

  std::vector<fs::path> existing;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.path().extension() == data::kShardExtension)
      existing.push_back(entry.path());
  }
  if (existing.empty()) return;
  if (policy == ExistingShards::Refuse)
    throw UserError(
        "output directory already holds " + std::to_string(existing.size()) + " shard file(s)", dir,
        "pass --force to replace them, or choose another --out");
  for (const auto& path : existing) fs::remove(path);
}

std::string shard_path(const std::string& dir, const std::string& name) {
  return (fs::path(dir) / (name + data::kShardExtension)).string();
}

void print_shard_line(const std::string& path, const data::Shard& shard) {
  fmt::print("wrote {}  {} tokens  vocab {}  {} v{}  checksum {}\n", path, shard.tokens.size(),
             shard.header.vocab_size, shard.header.tokenizer, shard.header.tokenizer_version,
             hex64(data::token_checksum(shard.tokens)));
}

ConfigValue string_value(const std::string& text) {
  ConfigValue value;
  value.type = ConfigValue::Type::String;
  value.string = text;
  return value;
}

ConfigValue int_value(int64_t number) {
  ConfigValue value;
  value.type = ConfigValue::Type::Int;
  value.integer = number;
  return value;
}

// The recipe lines that train on the shards just written, to paste into a recipe.
void print_recipe_lines(const std::string& dir, const data::ShardHeader& header) {
  fmt::print(
      "in a recipe (a relative data.path there is relative to the recipe's folder):\n"
      "[model]\nvocab_size = {}  # at least\n[data]\npath = {}\ntokenizer = {}\n"
      "tokenizer_version = {}\n",
      int_value(header.vocab_size).toml(),
      string_value(fs::absolute(dir).lexically_normal().string()).toml(),
      string_value(header.tokenizer).toml(), int_value(header.tokenizer_version).toml());
}

struct SynthArgs {
  std::string out;
  data::SynthOptions options;
  bool force = false;
};

void run_synth(const SynthArgs& args) {
  data::validate_synth_options(
      args.options, {"--vocab", "--shards", "--tokens-per-shard", "--order", "--branching"});
  prepare_output_dir(args.out, args.force ? ExistingShards::Replace : ExistingShards::Refuse);
  // One shard at a time: each is independent, so memory stays at one shard however many.
  data::ShardHeader header;
  for (uint32_t k = 0; k < args.options.shards; ++k) {
    data::Shard shard = data::synth_shard(args.options, k);
    std::string path = shard_path(args.out, shard.name);
    data::write_shard(path, shard);
    print_shard_line(path, shard);
    header = shard.header;
  }
  fmt::print("entropy estimate: {:.4f} nats/token (uniform over the vocabulary: {:.4f})\n",
             data::synth_entropy(args.options), std::log(double(args.options.vocab_size)));
  print_recipe_lines(args.out, header);
}

struct PrepareArgs {
  std::string out;
  uint64_t shard_tokens = 1 << 20;
  std::vector<std::string> files;
  bool force = false;
};

// Checks every input up front, all problems at once, before anything is written.
uint64_t check_inputs(const PrepareArgs& args) {
  ErrorList errors;
  uint64_t total = 0;
  for (const auto& file : args.files) {
    std::error_code error;
    if (!fs::is_regular_file(file, error)) {
      errors.add("input file does not exist or is not a regular file", file,
                 "pass text files to tokenize");
      continue;
    }
    total += fs::file_size(file, error);
  }
  errors.throw_if_any();
  if (total == 0)
    throw UserError("input files hold no bytes", fmt::format("{}", fmt::join(args.files, ", ")),
                    "pass non-empty text files");
  uint64_t shards = (total + args.shard_tokens - 1) / args.shard_tokens;
  if (shards > kMaxPreparedShards)
    throw UserError(
        fmt::format("{} bytes at --shard-tokens {} would make {} shards", total, args.shard_tokens,
                    shards),
        args.out,
        fmt::format("at most {} shards; raise --shard-tokens to at least {}", kMaxPreparedShards,
                    (total + kMaxPreparedShards - 1) / kMaxPreparedShards));
  return total;
}

void run_prepare(const PrepareArgs& args) {
  uint64_t total = check_inputs(args);
  prepare_output_dir(args.out, args.force ? ExistingShards::Replace : ExistingShards::Refuse);

  // Files are one byte stream, concatenated in the order given, cut every shard_tokens bytes.
  data::Shard shard;
  shard.header.tokenizer = data::kByteTokenizer;
  shard.header.tokenizer_version = data::kByteTokenizerVersion;
  shard.header.vocab_size = data::kByteVocabSize;
  uint32_t written = 0;
  auto flush = [&] {
    shard.name = data::numbered_shard_name("prepare", written++);
    std::string path = shard_path(args.out, shard.name);
    data::write_shard(path, shard);
    print_shard_line(path, shard);
    shard.tokens.clear();
  };
  std::vector<char> buffer(1 << 16);
  for (const auto& file : args.files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw UserError("cannot read input file", file, "check its permissions");
    while (in.read(buffer.data(), static_cast<std::streamsize>(buffer.size())) || in.gcount() > 0) {
      std::string_view chunk(buffer.data(), static_cast<size_t>(in.gcount()));
      while (!chunk.empty()) {
        size_t room = static_cast<size_t>(args.shard_tokens - shard.tokens.size());
        std::vector<uint16_t> tokens = data::byte_encode(chunk.substr(0, room));
        shard.tokens.insert(shard.tokens.end(), tokens.begin(), tokens.end());
        chunk.remove_prefix(std::min(room, chunk.size()));
        if (shard.tokens.size() == args.shard_tokens) flush();
      }
    }
  }
  if (!shard.tokens.empty()) flush();
  fmt::print("{} bytes from {} file(s) into {} shard(s)\n", total, args.files.size(), written);
  print_recipe_lines(args.out, shard.header);
}

void add_synth(CLI::App& data) {
  auto args = std::make_shared<SynthArgs>();
  auto* cmd = data.add_subcommand("synth", "write shards of a seeded synthetic n-gram language");
  cmd->add_option("--out", args->out, "output directory")->required();
  // Ranges are checked together after parsing (every bad option at once), as
  // validate_synth_options states them; CLI11 only checks the type.
  cmd->add_option("--shards", args->options.shards, "number of shards (1..1000)")
      ->check(at_least(0))
      ->capture_default_str();
  cmd->add_option("--tokens-per-shard", args->options.tokens_per_shard, "tokens in each shard")
      ->check(at_least(0))
      ->capture_default_str();
  cmd->add_option("--vocab", args->options.vocab_size, "vocabulary size (2..65536)")
      ->check(at_least(0))
      ->capture_default_str();
  cmd->add_option("--order", args->options.order, "context length of the n-gram model (0..16)")
      ->check(at_least(0))
      ->capture_default_str();
  cmd->add_option("--branching", args->options.branching,
                  "next-token candidates per context (1..min(256, vocab))")
      ->check(at_least(0))
      ->capture_default_str();
  // A negative seed would wrap to a huge one without a word.
  cmd->add_option("--seed", args->options.seed, "seed of the language and its text")
      ->check(CLI::Validator(
          [](const std::string& text) {
            return text.rfind('-', 0) == 0 ? text + " is not an integer >= 0" : std::string();
          },
          "INT:>=0"))
      ->capture_default_str();
  cmd->add_flag("--force", args->force, "replace shards already in the output directory");
  cmd->callback([args] { run_synth(*args); });
}

void add_prepare(CLI::App& data) {
  auto args = std::make_shared<PrepareArgs>();
  auto* cmd = data.add_subcommand("prepare", "tokenize text files into byte-level shards");
  cmd->add_option("--out", args->out, "output directory")->required();
  cmd->add_option("--shard-tokens", args->shard_tokens, "tokens (bytes) per shard")
      ->check(between(2, 1LL << 40))
      ->capture_default_str();
  cmd->add_option("files", args->files, "text files, concatenated in this order")->required();
  cmd->add_flag("--force", args->force, "replace shards already in the output directory");
  cmd->callback([args] { run_prepare(*args); });
}

void add_inspect(CLI::App& data, int& exit_code) {
  struct InspectArgs {
    std::string path;
    bool json = false;
  };
  auto args = std::make_shared<InspectArgs>();
  auto* cmd = data.add_subcommand("inspect", "show and verify the shards of a file or directory");
  cmd->add_option("path", args->path, "a shard file or a directory of shards")->required();
  cmd->add_flag("--json", args->json, "print one JSON document instead of a table");
  cmd->callback([args, &exit_code] {
    exit_code =
        inspect_shards(args->path, args->json || shared_context().json ? InspectFormat::Json
                                                                       : InspectFormat::Table);
  });
}

}  // namespace

void add_data_commands(CLI::App& app, int& exit_code) {
  auto* data = app.add_subcommand("data", "make and inspect tokenized shard files");
  data->require_subcommand(1);
  add_synth(*data);
  add_prepare(*data);
  add_inspect(*data, exit_code);
}

}  // namespace faultline::cli
