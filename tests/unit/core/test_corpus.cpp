// Tests for src/data/corpus.cpp: the sample indexing rule and load_corpus's checks.
#include "data/corpus.hpp"

#include <gtest/gtest.h>

#include <numeric>
#include <stdexcept>

#include "test_support.hpp"

namespace faultline::data {
namespace {

using faultline::testing::ScratchDir;
using faultline::testing::user_error;
using faultline::testing::user_errors;

// A shard whose token i is base + i, so a sample's tokens tell where it came from.
Shard counting_shard(const std::string& name, size_t length, uint16_t base,
                     const std::string& tokenizer = "byte", uint32_t version = 1) {
  Shard shard;
  shard.name = name;
  shard.header.tokenizer = tokenizer;
  shard.header.tokenizer_version = version;
  shard.header.vocab_size = 65535;
  shard.tokens.resize(length);
  std::iota(shard.tokens.begin(), shard.tokens.end(), base);
  return shard;
}

TEST(Corpus, SamplesFollowTheIndexingRule) {
  // sample_tokens 4 → stride 3: 10 tokens → 3 samples, 5 → 1, 1 → 0, 7 → 2.
  Corpus corpus({counting_shard("a", 10, 0), counting_shard("b", 5, 100),
                 counting_shard("c", 1, 200), counting_shard("d", 7, 300)},
                4);
  EXPECT_EQ(corpus.num_samples(), 6u);
  EXPECT_EQ(corpus.sample_tokens(), 4u);
  struct Expected {
    uint32_t shard;
    uint64_t offset;
  };
  std::vector<Expected> expected = {{0, 0}, {0, 3}, {0, 6}, {1, 0}, {3, 0}, {3, 3}};
  for (uint64_t i = 0; i < expected.size(); ++i) {
    SampleLocation where = corpus.locate(i);
    EXPECT_EQ(where.shard_id, expected[i].shard) << "sample " << i;
    EXPECT_EQ(where.offset, expected[i].offset) << "sample " << i;
  }
}

TEST(Corpus, ReadCopiesOverlappingWindows) {
  Corpus corpus({counting_shard("a", 10, 0), counting_shard("b", 5, 100)}, 4);
  std::vector<int64_t> out(4);
  corpus.read(1, out.data());
  EXPECT_EQ(out, (std::vector<int64_t>{3, 4, 5, 6}));
  corpus.read(2, out.data());
  EXPECT_EQ(out, (std::vector<int64_t>{6, 7, 8, 9}));  // ends on the shard's last token
  corpus.read(3, out.data());
  EXPECT_EQ(out, (std::vector<int64_t>{100, 101, 102, 103}));
}

TEST(Corpus, IndicesOfEarlierShardsDoNotDependOnLaterOnes) {
  Corpus small({counting_shard("a", 10, 0)}, 3);
  Corpus large({counting_shard("a", 10, 0), counting_shard("b", 50, 100)}, 3);
  for (uint64_t i = 0; i < small.num_samples(); ++i) {
    EXPECT_EQ(small.locate(i).shard_id, large.locate(i).shard_id);
    EXPECT_EQ(small.locate(i).offset, large.locate(i).offset);
  }
}

TEST(Corpus, LocatePastTheEndThrows) {
  Corpus corpus({counting_shard("a", 10, 0)}, 4);
  EXPECT_THROW(corpus.locate(3), std::out_of_range);
}

TEST(Corpus, RejectsSamplesShorterThanTwoTokens) {
  for (uint32_t length : {0u, 1u}) {
    ErrorItem error = user_error([&] { Corpus({counting_shard("a", 10, 0)}, length); });
    EXPECT_NE(error.what.find("too short"), std::string::npos) << error.what;
    EXPECT_NE(error.hint.find("at least 2"), std::string::npos) << error.hint;
  }
}

TEST(Corpus, RejectsACorpusWithoutSamples) {
  ErrorItem error = user_error([&] {
    Corpus({counting_shard("long", 8, 0), counting_shard("tiny", 3, 0)}, 16);
  });
  EXPECT_NE(error.what.find("no samples of 16 tokens"), std::string::npos) << error.what;
  EXPECT_NE(error.what.find("shortest shard 'tiny' has 3 tokens"), std::string::npos) << error.what;
  EXPECT_FALSE(error.hint.empty());
}

TEST(LoadCorpus, LoadsEveryShardOfADirectoryInNameOrder) {
  ScratchDir dir;
  write_shard(dir.file("b.flshard"), counting_shard("ignored", 9, 100));
  write_shard(dir.file("a.flshard"), counting_shard("ignored", 5, 0));
  Corpus corpus = load_corpus(dir.path(), "byte", 1, 5);
  ASSERT_EQ(corpus.shards().size(), 2u);
  EXPECT_EQ(corpus.shards()[0].name, "a");
  EXPECT_EQ(corpus.shards()[1].name, "b");
  EXPECT_EQ(corpus.num_samples(), 1u + 2u);
  std::vector<int64_t> out(5);
  corpus.read(1, out.data());
  EXPECT_EQ(out, (std::vector<int64_t>{100, 101, 102, 103, 104}));
}

TEST(LoadCorpus, ReportsEveryTokenizerMismatchAtOnce) {
  ScratchDir dir;
  write_shard(dir.file("a.flshard"), counting_shard("a", 50, 0, "byte", 1));
  write_shard(dir.file("b.flshard"), counting_shard("b", 50, 0, "synth-ngram", 1));
  write_shard(dir.file("c.flshard"), counting_shard("c", 50, 0, "synth-ngram", 2));
  std::vector<ErrorItem> errors =
      user_errors([&] { load_corpus(dir.path(), "synth-ngram", 1, 8); });
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].what,
            "shard tokenizer 'byte' v1 does not match the config's data.tokenizer "
            "'synth-ngram' v1");
  EXPECT_EQ(errors[0].where, dir.file("a.flshard"));
  EXPECT_NE(errors[0].hint.find("data.tokenizer"), std::string::npos);
  EXPECT_NE(errors[1].what.find("'synth-ngram' v2 does not match"), std::string::npos);
  EXPECT_EQ(errors[1].where, dir.file("c.flshard"));
}

TEST(LoadCorpus, ReportsDamagedShardsWithMismatches) {
  ScratchDir dir;
  write_shard(dir.file("a.flshard"), counting_shard("a", 50, 0, "byte", 1));
  faultline::testing::write_file(dir.file("b.flshard"), "garbage");
  std::vector<ErrorItem> errors =
      user_errors([&] { load_corpus(dir.path(), "synth-ngram", 1, 8); });
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].where, dir.file("a.flshard"));
  EXPECT_NE(errors[1].what.find("not a faultline shard"), std::string::npos);
  EXPECT_EQ(errors[1].where, dir.file("b.flshard"));
}

TEST(LoadCorpus, NamesThePathAndShortestShardWhenThereAreNoSamples) {
  ScratchDir dir;
  write_shard(dir.file("a.flshard"), counting_shard("a", 20, 0));
  write_shard(dir.file("b.flshard"), counting_shard("b", 10, 0));
  ErrorItem error = user_error([&] { load_corpus(dir.path(), "byte", 1, 65); });
  EXPECT_EQ(error.where, dir.path());
  EXPECT_NE(error.what.find("shortest shard 'b' has 10 tokens"), std::string::npos) << error.what;
  EXPECT_NE(error.hint.find("block_size"), std::string::npos);
}

TEST(LoadCorpus, RejectsShortSamplesBeforeReading) {
  ScratchDir dir;
  ErrorItem error = user_error([&] { load_corpus(dir.file("missing"), "byte", 1, 1); });
  EXPECT_NE(error.what.find("too short"), std::string::npos);
}

TEST(LoadCorpus, MissingPathIsAnError) {
  ScratchDir dir;
  ErrorItem error = user_error([&] { load_corpus(dir.file("missing"), "byte", 1, 8); });
  EXPECT_EQ(error.where, dir.file("missing"));
}

}  // namespace
}  // namespace faultline::data
