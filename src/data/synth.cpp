// The synthetic language: a sparse n-gram model drawn from a counter-based RNG, so the same
// options give the same tokens on every compiler, library and machine.
#include "data/synth.hpp"

#include <algorithm>
#include <cmath>

#include "common/error.hpp"

namespace faultline::data {

namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;
// Salts keep the transition table and each shard's sampling stream apart for one seed.
constexpr uint64_t kTableSalt = 0x7461626C65ULL;  // "table"
constexpr uint64_t kShardSalt = 0x7368617264ULL;  // "shard"
constexpr uint64_t kEntropySalt = 0x656E74ULL;    // "ent"
// Share of tokens drawn uniformly from the whole vocabulary (out of 2^32): about 2 %, so every
// token is reachable and no context is perfectly predictable.
constexpr uint64_t kUniformThreshold = 85899346;  // round(0.02 * 2^32)
constexpr uint64_t kOne = 1ULL << 32;
// Contexts visited to estimate the entropy rate; enough for about 0.01 nat of noise.
constexpr uint64_t kEntropyTokens = 1 << 16;

uint64_t splitmix64(uint64_t x) {
  x += kGolden;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

uint64_t mix(uint64_t a, uint64_t b) {
  return splitmix64(a ^ splitmix64(b));
}

// A counter-based stream: value n is a pure function of (key, n), with no hidden state beyond it.
class Stream {
 public:
  explicit Stream(uint64_t key) : key_(key) {}
  uint64_t next() { return splitmix64(key_ + kGolden * counter_++); }

 private:
  uint64_t key_;
  uint64_t counter_ = 0;
};

// The language's fixed part: which tokens may follow a context and with what probability.
class Language {
 public:
  explicit Language(const SynthOptions& options)
      : options_(options), table_key_(mix(options.seed, kTableSalt)) {
    // Zipf-like weights 1/(i+1), quantized to 32-bit thresholds once so sampling is pure integers.
    double total = 0;
    for (uint32_t i = 0; i < options.branching; ++i) total += 1.0 / (i + 1);
    double partial = 0;
    for (uint32_t i = 0; i < options.branching; ++i) {
      partial += 1.0 / (i + 1);
      thresholds_.push_back(static_cast<uint64_t>(partial / total * static_cast<double>(kOne)));
    }
    thresholds_.back() = kOne;
  }

  uint64_t context_hash(const std::vector<uint16_t>& context) const {
    uint64_t h = table_key_;
    for (uint16_t token : context) h = splitmix64(h ^ token);
    return h;
  }

  uint16_t candidate(uint64_t context, uint32_t i) const {
    return static_cast<uint16_t>(mix(context, i) % options_.vocab_size);
  }

  uint16_t sample(uint64_t context, Stream& stream) const {
    uint64_t r = stream.next();
    if ((r >> 32) < kUniformThreshold)
      return static_cast<uint16_t>(stream.next() % options_.vocab_size);
    uint64_t u = r & (kOne - 1);
    uint32_t i = 0;
    while (u >= thresholds_[i]) ++i;
    return candidate(context, i);
  }

  // Exact entropy (nats) of the next-token distribution after one context, candidates that
  // happen to coincide merged.
  double entropy(uint64_t context) const {
    const double uniform = static_cast<double>(kUniformThreshold) / kOne;
    const double v = options_.vocab_size;
    std::vector<std::pair<uint16_t, double>> mass;  // token → candidate probability
    uint64_t previous = 0;
    for (uint32_t i = 0; i < options_.branching; ++i) {
      double p = static_cast<double>(thresholds_[i] - previous) / kOne * (1 - uniform);
      previous = thresholds_[i];
      uint16_t token = candidate(context, i);
      auto it = std::find_if(mass.begin(), mass.end(), [&](auto& m) { return m.first == token; });
      if (it == mass.end())
        mass.emplace_back(token, p);
      else
        it->second += p;
    }
    double h = 0;
    for (const auto& [token, p] : mass) {
      double q = p + uniform / v;
      h -= q * std::log(q);
    }
    double rest = v - static_cast<double>(mass.size());
    h -= rest * (uniform / v) * std::log(uniform / v);
    return h;
  }

  // Calls visit(context_hash, token) for `count` tokens of the stream keyed by `key`.
  template <typename Visit>
  void generate(uint64_t key, uint64_t count, Visit visit) const {
    Stream stream(key);
    // The first context is drawn uniformly and not emitted, so every position has a full context.
    std::vector<uint16_t> context(options_.order);
    for (auto& token : context) token = static_cast<uint16_t>(stream.next() % options_.vocab_size);
    for (uint64_t n = 0; n < count; ++n) {
      uint64_t h = context_hash(context);
      uint16_t token = sample(h, stream);
      visit(h, token);
      if (!context.empty()) {
        std::rotate(context.begin(), context.begin() + 1, context.end());
        context.back() = token;
      }
    }
  }

 private:
  SynthOptions options_;
  uint64_t table_key_;
  std::vector<uint64_t> thresholds_;  // cumulative candidate weights, last == 2^32
};

}  // namespace

void validate_synth_options(const SynthOptions& o, const SynthOptionNames& names) {
  ErrorList errors;
  auto check = [&](bool ok, const std::string& name, uint64_t value, const std::string& valid) {
    if (!ok) errors.add(name + " " + std::to_string(value) + " is out of range", name, valid);
  };
  check(o.vocab_size >= 2 && o.vocab_size <= 65536, names.vocab_size, o.vocab_size,
        "expected 2..65536 (token ids are stored as uint16)");
  check(o.shards >= 1 && o.shards <= kMaxSynthShards, names.shards, o.shards,
        "expected 1.." + std::to_string(kMaxSynthShards) + "; use longer shards instead");
  check(o.tokens_per_shard >= 1, names.tokens_per_shard, o.tokens_per_shard, "expected at least 1");
  check(o.order <= kMaxSynthOrder, names.order, o.order,
        "expected 0.." + std::to_string(kMaxSynthOrder));
  check(o.branching >= 1 && o.branching <= std::min(kMaxSynthBranching, o.vocab_size),
        names.branching, o.branching,
        "expected 1..min(" + std::to_string(kMaxSynthBranching) + ", " + names.vocab_size + ")");
  errors.throw_if_any();
}

Shard synth_shard(const SynthOptions& options, uint32_t index) {
  SynthOptions checked = options;
  checked.shards = 1;  // not consulted: a shard does not depend on how many others there are
  validate_synth_options(checked);
  if (index >= kMaxSynthShards)
    throw UserError("synthetic shard index " + std::to_string(index) + " is out of range", "shards",
                    "expected 0.." + std::to_string(kMaxSynthShards - 1));

  Shard shard;
  shard.name = numbered_shard_name("synth", index);
  shard.header.tokenizer = kSynthTokenizer;
  shard.header.tokenizer_version = kSynthTokenizerVersion;
  shard.header.vocab_size = options.vocab_size;
  shard.tokens.reserve(options.tokens_per_shard);
  Language language(options);
  language.generate(mix(options.seed, kShardSalt + index), options.tokens_per_shard,
                    [&](uint64_t, uint16_t token) { shard.tokens.push_back(token); });
  shard.header.token_count = shard.tokens.size();
  shard.header.checksum = token_checksum(shard.tokens);
  return shard;
}

std::vector<Shard> synth_corpus(const SynthOptions& options) {
  validate_synth_options(options);
  std::vector<Shard> shards;
  shards.reserve(options.shards);
  for (uint32_t k = 0; k < options.shards; ++k) shards.push_back(synth_shard(options, k));
  return shards;
}

double synth_entropy(const SynthOptions& options) {
  validate_synth_options(options);
  // The entropy rate of a Markov source is the per-context entropy averaged under the
  // stationary distribution of contexts; the contexts a long run visits sample that distribution.
  Language language(options);
  double sum = 0;
  language.generate(mix(options.seed, kEntropySalt), kEntropyTokens,
                    [&](uint64_t context, uint16_t) { sum += language.entropy(context); });
  return sum / static_cast<double>(kEntropyTokens);
}

}  // namespace faultline::data
