// Tests for src/trainer/launch_check.cpp: the batch must split over ranks × accumulation, and
// shards must come from the recipe's tokenizer and fit its vocabulary; errors name key and file.
#include "trainer/launch_check.hpp"

#include <gtest/gtest.h>

#include "../core/test_support.hpp"
#include "data/shard.hpp"

namespace faultline::trainer {
namespace {

using faultline::testing::ScratchDir;
using faultline::testing::user_errors;
using faultline::testing::write_file;

void write_test_shard(const std::string& path, const std::string& tokenizer, uint32_t vocab) {
  data::Shard shard;
  shard.header.tokenizer = tokenizer;
  shard.header.vocab_size = vocab;
  shard.tokens.assign(256, 1);
  data::write_shard(path, shard);
}

TEST(LaunchCheck, ABatchThatSplitsOverRanksAndAccumulationPasses) {
  auto config = parse_train_config("[train]\nbatch_size = 8\ngrad_accum = 2\n", "t.toml", {});
  EXPECT_NO_THROW(check_launchable(config, 4));
  EXPECT_NO_THROW(check_launchable(config, 1));
}

TEST(LaunchCheck, ABatchThatDoesNotSplitNamesTheKeyItsLineAndAValidSize) {
  ScratchDir dir;
  write_file(dir.file("r.toml"), "[train]\nbatch_size = 8\ngrad_accum = 2\n");
  auto config = load_train_config(dir.file("r.toml"), {});
  auto items = user_errors([&] { check_launchable(config, 3); });
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].what, "batch_size 8 does not divide over 3 rank(s) × grad_accum 2");
  EXPECT_EQ(items[0].where, "train.batch_size at " + dir.file("r.toml") + ":2");
  EXPECT_EQ(items[0].hint, "make train.batch_size a multiple of 6 (e.g. 12), or change the ranks");
}

TEST(LaunchCheck, ShardsOfAnotherTokenizerAndALargerVocabularyAreBothReported) {
  ScratchDir dir;
  write_test_shard(dir.file("a.flshard"), "byte", 256);
  write_file(dir.file("r.toml"),
             "[model]\nvocab_size = 64\n[data]\npath = \".\"\ntokenizer = \"synth-ngram\"\n"
             "[train]\nbatch_size = 7\n");
  auto config = load_train_config(dir.file("r.toml"), {});
  auto items = user_errors([&] { check_launchable(config, 2); });
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(items[0].where, "train.batch_size at " + dir.file("r.toml") + ":7");
  EXPECT_EQ(items[1].what, "shard " + dir.file("a.flshard") +
                               " was made by tokenizer byte v1, the recipe expects synth-ngram v1");
  EXPECT_EQ(items[1].where, "data.tokenizer at " + dir.file("r.toml") + ":5");
  EXPECT_EQ(items[2].what, "shard " + dir.file("a.flshard") +
                               " has token ids up to 255 but model.vocab_size is 64");
  EXPECT_EQ(items[2].where, "model.vocab_size at " + dir.file("r.toml") + ":2");
  EXPECT_EQ(items[2].hint, "set model.vocab_size to at least 256");
}

TEST(LaunchCheck, MatchingShardsPass) {
  ScratchDir dir;
  write_test_shard(dir.file("a.flshard"), "byte", 256);
  auto config = parse_train_config("[model]\nvocab_size = 256\n[data]\ntokenizer = \"byte\"\n",
                                   "t.toml", {"data.path=" + dir.path()});
  EXPECT_NO_THROW(check_launchable(config, 1));
}

TEST(LaunchCheck, ADirectoryWithoutShardsNamesDataPath) {
  ScratchDir dir;
  auto config = parse_train_config("", "t.toml", {"data.path=" + dir.path()});
  auto items = user_errors([&] { check_launchable(config, 1); });
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].where.rfind("data.path at --set data.path: ", 0), 0u) << items[0].where;
}

}  // namespace
}  // namespace faultline::trainer
