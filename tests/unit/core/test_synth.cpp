// Tests for src/data/synth.cpp: determinism (pinned by a golden checksum), shard independence,
// reachability of every token, and the entropy estimate against counted text.
#include "data/synth.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "common/hash.hpp"
#include "test_support.hpp"

namespace faultline::data {
namespace {

using faultline::testing::user_errors;

SynthOptions small_options() {
  SynthOptions options;
  options.seed = 7;
  options.vocab_size = 64;
  options.shards = 3;
  options.tokens_per_shard = 5000;
  options.order = 2;
  options.branching = 4;
  return options;
}

TEST(Synth, SameOptionsGiveTheSameTokens) {
  std::vector<Shard> a = synth_corpus(small_options());
  std::vector<Shard> b = synth_corpus(small_options());
  ASSERT_EQ(a.size(), 3u);
  for (size_t k = 0; k < a.size(); ++k) EXPECT_EQ(a[k].tokens, b[k].tokens);
}

TEST(Synth, GoldenChecksumsPinTheLanguage) {
  // A change here changes every synthetic corpus: bump kSynthTokenizerVersion with it.
  std::vector<Shard> shards = synth_corpus(small_options());
  EXPECT_EQ(hex64(shards[0].header.checksum), "ca2ed74669f40927");
  EXPECT_EQ(hex64(shards[2].header.checksum), "2dca6a57176e71f0");
}

TEST(Synth, SeedChangesTheText) {
  SynthOptions other = small_options();
  other.seed = 8;
  EXPECT_NE(synth_corpus(small_options())[0].tokens, synth_corpus(other)[0].tokens);
}

TEST(Synth, ShardsAreIndependentAndDistinct) {
  SynthOptions options = small_options();
  std::vector<Shard> three = synth_corpus(options);
  options.shards = 5;
  std::vector<Shard> five = synth_corpus(options);
  for (uint32_t k = 0; k < 3; ++k) {
    EXPECT_EQ(three[k].tokens, five[k].tokens);
    EXPECT_EQ(synth_shard(options, k).tokens, three[k].tokens);
  }
  EXPECT_NE(three[0].tokens, three[1].tokens);
}

TEST(Synth, HeadersDescribeTheShards) {
  std::vector<Shard> shards = synth_corpus(small_options());
  for (uint32_t k = 0; k < shards.size(); ++k) {
    const Shard& shard = shards[k];
    EXPECT_EQ(shard.name, numbered_shard_name("synth", k));
    EXPECT_EQ(shard.header.format_version, kShardFormatVersion);
    EXPECT_EQ(shard.header.tokenizer, kSynthTokenizer);
    EXPECT_EQ(shard.header.tokenizer_version, kSynthTokenizerVersion);
    EXPECT_EQ(shard.header.vocab_size, 64u);
    EXPECT_EQ(shard.header.token_count, 5000u);
    EXPECT_EQ(shard.tokens.size(), 5000u);
    EXPECT_EQ(shard.header.checksum, token_checksum(shard.tokens));
  }
}

TEST(Synth, EveryTokenIsInRangeAndReachable) {
  SynthOptions options = small_options();
  options.shards = 1;
  options.tokens_per_shard = 100000;
  std::set<uint16_t> seen;
  for (uint16_t token : synth_shard(options, 0).tokens) {
    ASSERT_LT(token, options.vocab_size);
    seen.insert(token);
  }
  EXPECT_EQ(seen.size(), options.vocab_size);
}

// Conditional entropy of the next token given the previous `order` tokens, from counts.
double counted_entropy(const std::vector<uint16_t>& tokens, uint32_t order) {
  std::map<std::vector<uint16_t>, std::map<uint16_t, double>> counts;
  for (size_t i = order; i < tokens.size(); ++i) {
    std::vector<uint16_t> context(tokens.begin() + static_cast<long>(i - order),
                                  tokens.begin() + static_cast<long>(i));
    counts[context][tokens[i]] += 1;
  }
  double total = static_cast<double>(tokens.size() - order);
  double h = 0;
  for (const auto& [context, next] : counts) {
    double n = 0;
    for (const auto& [token, c] : next) n += c;
    for (const auto& [token, c] : next) h -= c / total * std::log(c / n);
  }
  return h;
}

TEST(Synth, EntropyEstimateMatchesCountedText) {
  // Few contexts (16 for order 1, vocab 16) and many tokens keep the counted estimate's bias small.
  SynthOptions options;
  options.seed = 3;
  options.vocab_size = 16;
  options.order = 1;
  options.branching = 3;
  options.tokens_per_shard = 400000;
  double estimate = synth_entropy(options);
  double counted = counted_entropy(synth_shard(options, 0).tokens, options.order);
  EXPECT_NEAR(estimate, counted, 0.03);
  EXPECT_LT(estimate, std::log(16.0) - 0.5);
}

TEST(Synth, EntropyIsFarBelowUniformAndGrowsWithBranching) {
  SynthOptions options;  // the defaults: vocab 256, order 1, branching 4
  double h4 = synth_entropy(options);
  EXPECT_GT(h4, 0.5);
  EXPECT_LT(h4, 2.0);
  options.branching = 1;
  double h1 = synth_entropy(options);
  EXPECT_LT(h1, h4);
  EXPECT_GT(h1, 0.0);  // the uniform 2 % keeps even a deterministic table uncertain
  EXPECT_EQ(synth_entropy(options), h1);
}

TEST(Synth, OrderZeroIsAUnigramLanguage) {
  SynthOptions options = small_options();
  options.order = 0;
  options.branching = 2;
  std::map<uint16_t, int> counts;
  for (uint16_t token : synth_shard(options, 0).tokens) ++counts[token];
  int top_two = 0;
  std::vector<int> values;
  for (const auto& [token, count] : counts) values.push_back(count);
  std::sort(values.rbegin(), values.rend());
  top_two = values[0] + values[1];
  EXPECT_GT(top_two, 5000 * 9 / 10);
}

TEST(Synth, ReportsEveryBadOptionAtOnce) {
  SynthOptions options;
  options.vocab_size = 1;
  options.shards = 0;
  options.order = 17;
  options.branching = 0;
  options.tokens_per_shard = 0;
  std::vector<ErrorItem> errors = user_errors([&] { synth_corpus(options); });
  ASSERT_EQ(errors.size(), 5u);
  EXPECT_EQ(errors[0].where, "vocab_size");
  EXPECT_NE(errors[0].hint.find("65536"), std::string::npos);

  SynthOptions wide;
  wide.vocab_size = 8;
  wide.branching = 9;
  std::vector<ErrorItem> branching = user_errors([&] { synth_entropy(wide); });
  ASSERT_EQ(branching.size(), 1u);
  EXPECT_EQ(branching[0].where, "branching");
}

TEST(Synth, LargestVocabularyFitsUint16) {
  SynthOptions options;
  options.vocab_size = 65536;
  options.tokens_per_shard = 1000;
  Shard shard = synth_shard(options, 0);
  EXPECT_EQ(shard.tokens.size(), 1000u);
}

}  // namespace
}  // namespace faultline::data
