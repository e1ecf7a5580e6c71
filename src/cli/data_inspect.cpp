// `faultline data inspect`: what each shard holds and whether its checksum still matches, as a
// table for people or one JSON document for scripts.
#include <fmt/core.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "cli/data_command.hpp"
#include "cli/run_commands.hpp"
#include "common/error.hpp"
#include "common/hash.hpp"
#include "data/shard.hpp"

namespace faultline::cli {

namespace {

enum class Checksum { Ok, Bad };

struct ShardReport {
  std::string file;
  data::Shard shard;
  Checksum checksum = Checksum::Ok;
  std::optional<uint16_t> min_token;  // empty for a shard without tokens
  std::optional<uint16_t> max_token;
  // The first token id at or above the header's vocab: the trainer halts on it as a data
  // anomaly, so a shard that passes its checksum is still not one to train on.
  std::optional<size_t> beyond_vocab_at;
  bool sound() const { return checksum == Checksum::Ok && !beyond_vocab_at; }
};

ShardReport examine(const std::string& file) {
  ShardReport report;
  report.file = file;
  // Ignore, then compare here: a damaged shard is still shown, marked BAD, not skipped.
  report.shard = data::read_shard(file, data::ChecksumPolicy::Ignore);
  const auto& tokens = report.shard.tokens;
  if (data::token_checksum(tokens) != report.shard.header.checksum) report.checksum = Checksum::Bad;
  if (!tokens.empty()) {
    auto [low, high] = std::minmax_element(tokens.begin(), tokens.end());
    report.min_token = *low;
    report.max_token = *high;
    if (*high >= report.shard.header.vocab_size) {
      const auto at = std::find_if(tokens.begin(), tokens.end(), [&](uint16_t token) {
        return token >= report.shard.header.vocab_size;
      });
      report.beyond_vocab_at = static_cast<size_t>(at - tokens.begin());
    }
  }
  return report;
}

std::string optional_text(const std::optional<uint16_t>& value) {
  return value ? std::to_string(*value) : "-";
}

void print_table(const std::vector<ShardReport>& reports) {
  size_t name_width = 5;
  size_t tokenizer_width = 9;
  for (const auto& r : reports) {
    name_width = std::max(name_width, r.shard.name.size());
    tokenizer_width = std::max(tokenizer_width, r.shard.header.tokenizer.size() + 4);
  }
  fmt::print("{:<{}}  {:>6}  {:<{}}  {:>6}  {:>12}  {:<16}  {:<8}  {:>5}  {:>5}\n", "shard",
             name_width, "format", "tokenizer", tokenizer_width, "vocab", "tokens", "checksum",
             "verified", "min", "max");
  uint64_t total = 0;
  for (const auto& r : reports) {
    const auto& h = r.shard.header;
    total += r.shard.tokens.size();
    fmt::print("{:<{}}  {:>6}  {:<{}}  {:>6}  {:>12}  {:<16}  {:<8}  {:>5}  {:>5}\n", r.shard.name,
               name_width, "v" + std::to_string(h.format_version),
               h.tokenizer + " v" + std::to_string(h.tokenizer_version), tokenizer_width,
               h.vocab_size, r.shard.tokens.size(), hex64(h.checksum), r.sound() ? "ok" : "BAD",
               optional_text(r.min_token), optional_text(r.max_token));
  }
  fmt::print("{} shard(s), {} tokens\n", reports.size(), total);
}

nlohmann::json to_json(const std::string& path, const std::vector<ShardReport>& reports,
                       const ErrorList& errors) {
  nlohmann::json shards = nlohmann::json::array();
  uint64_t total = 0;
  for (const auto& r : reports) {
    const auto& h = r.shard.header;
    total += r.shard.tokens.size();
    shards.push_back({{"name", r.shard.name},
                      {"file", r.file},
                      {"format_version", h.format_version},
                      {"tokenizer", h.tokenizer},
                      {"tokenizer_version", h.tokenizer_version},
                      {"vocab_size", h.vocab_size},
                      {"tokens", r.shard.tokens.size()},
                      {"checksum", hex64(h.checksum)},
                      {"checksum_ok", r.checksum == Checksum::Ok},
                      {"ids_below_vocab", !r.beyond_vocab_at},
                      {"min_token", r.min_token ? nlohmann::json(*r.min_token) : nullptr},
                      {"max_token", r.max_token ? nlohmann::json(*r.max_token) : nullptr}});
  }
  nlohmann::json problems = nlohmann::json::array();
  for (const auto& item : errors.items())
    problems.push_back({{"what", item.what}, {"where", item.where}, {"hint", item.hint}});
  return {{"path", path}, {"shards", shards}, {"total_tokens", total}, {"errors", problems}};
}

}  // namespace

int inspect_shards(const std::string& path, InspectFormat format) {
  std::vector<ShardReport> reports;
  ErrorList errors;
  for (const std::string& file : data::list_shards(path)) {
    try {
      reports.push_back(examine(file));
    } catch (const UserError& error) {
      // An unreadable shard is reported with the rest instead of hiding the shards after it.
      for (const auto& item : error.items()) errors.add(item.what, item.where, item.hint);
      continue;
    }
    const ShardReport& report = reports.back();
    if (report.checksum == Checksum::Bad)
      errors.add("shard checksum mismatch: stored " + hex64(report.shard.header.checksum) +
                     ", computed " + hex64(data::token_checksum(report.shard.tokens)),
                 file,
                 "the file is damaged; re-create it with `faultline data prepare` or "
                 "`faultline data synth`");
    if (report.beyond_vocab_at)
      errors.add(fmt::format("token id {} at offset {} is not below the shard's vocab size {}",
                             report.shard.tokens[*report.beyond_vocab_at], *report.beyond_vocab_at,
                             report.shard.header.vocab_size),
                 file,
                 "training halts on it as a data anomaly; re-create the shard with the "
                 "tokenizer its header names, or a header with the tokenizer's vocab size");
  }

  // A damaged corpus must fail scripts that only look at the exit code. With --json the
  // document already lists the errors, so they go to stderr here rather than as a second
  // document from main().
  if (format == InspectFormat::Table) {
    print_table(reports);
    std::fflush(stdout);
    errors.throw_if_any();
    return 0;
  }
  fmt::print("{}\n", to_json(path, reports, errors).dump(2));
  std::fflush(stdout);
  for (const auto& item : errors.items())
    fmt::print(stderr, "{}\n", format_error("faultline", item));
  return errors.empty() ? 0 : static_cast<int>(ExitCode::BadInput);
}

}  // namespace faultline::cli
