// Tests for `faultline data ...` through the built binary: output, exit codes (0 ok, 2 bad
// input) and the one-line error format on stderr.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "data/shard.hpp"
#include "data/tokenizer.hpp"
#include "test_support.hpp"

namespace faultline::cli {
namespace {

using faultline::testing::read_file;
using faultline::testing::ScratchDir;
using faultline::testing::write_file;

const std::string kBinary = FAULTLINE_BINARY_DIR "/src/cli/faultline";

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string shell_quote(const std::string& text) {
  return "'" + text + "'";
}

// Runs `faultline <args>` through the shell, capturing stdout and (via a file) stderr.
Result run(const ScratchDir& dir, const std::string& args) {
  Result result;
  std::string err_path = dir.file("stderr.txt");
  std::string command = shell_quote(kBinary) + " " + args + " 2>" + shell_quote(err_path);
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) result.out.append(buffer, n);
  int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.err = read_file(err_path);
  return result;
}

class CliData : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kBinary))
      FAIL() << "the faultline binary is missing at " << kBinary << "; build everything first";
  }
  ScratchDir dir_;
};

TEST_F(CliData, SynthThenInspect) {
  std::string out = dir_.file("synth");
  Result synth = run(dir_, "data synth --out " + shell_quote(out) +
                               " --shards 2 --tokens-per-shard 3000 --vocab 50 --seed 9");
  ASSERT_EQ(synth.exit_code, 0) << synth.err;
  EXPECT_NE(synth.out.find("synth-000.flshard"), std::string::npos) << synth.out;
  EXPECT_NE(synth.out.find("synth-001.flshard"), std::string::npos) << synth.out;
  EXPECT_NE(synth.out.find("entropy estimate:"), std::string::npos) << synth.out;
  EXPECT_EQ(data::list_shards(out).size(), 2u);

  Result table = run(dir_, "data inspect " + shell_quote(out));
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("synth-001"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("synth-ngram v1"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(" ok "), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("2 shard(s), 6000 tokens"), std::string::npos) << table.out;

  Result json = run(dir_, "data inspect --json " + shell_quote(out));
  ASSERT_EQ(json.exit_code, 0) << json.err;
  nlohmann::json doc = nlohmann::json::parse(json.out);
  ASSERT_EQ(doc["shards"].size(), 2u);
  EXPECT_EQ(doc["total_tokens"], 6000);
  EXPECT_EQ(doc["shards"][0]["name"], "synth-000");
  EXPECT_EQ(doc["shards"][0]["vocab_size"], 50);
  EXPECT_EQ(doc["shards"][0]["checksum_ok"], true);
  EXPECT_LT(doc["shards"][0]["max_token"].get<int>(), 50);
  EXPECT_TRUE(doc["errors"].empty());
}

TEST_F(CliData, SynthMatchesTheLibrary) {
  std::string out = dir_.file("s");
  ASSERT_EQ(run(dir_, "data synth --out " + shell_quote(out) + " --shards 1 --tokens-per-shard 500")
                .exit_code,
            0);
  data::Shard shard = data::read_shard(out + "/synth-000.flshard");
  EXPECT_EQ(shard.tokens.size(), 500u);
  EXPECT_EQ(shard.header.vocab_size, 256u);
}

TEST_F(CliData, SynthRefusesToMixWithExistingShardsUnlessForced) {
  std::string out = dir_.file("s");
  std::string args = "data synth --out " + shell_quote(out) + " --tokens-per-shard 100";
  ASSERT_EQ(run(dir_, args + " --shards 3").exit_code, 0);
  Result again = run(dir_, args + " --shards 2");
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.err.find("faultline: error: output directory already holds 3 shard file(s) (" +
                           out + "); pass --force"),
            std::string::npos)
      << again.err;
  ASSERT_EQ(run(dir_, args + " --shards 2 --force").exit_code, 0);
  EXPECT_EQ(data::list_shards(out).size(), 2u);  // the stale third shard is gone
}

TEST_F(CliData, PrepareSplitsTextIntoByteShards) {
  write_file(dir_.file("a.txt"), "hello, ");
  write_file(dir_.file("b.txt"), "world of shards\n");
  std::string out = dir_.file("p");
  Result prepare =
      run(dir_, "data prepare --out " + shell_quote(out) + " --shard-tokens 10 " +
                    shell_quote(dir_.file("a.txt")) + " " + shell_quote(dir_.file("b.txt")));
  ASSERT_EQ(prepare.exit_code, 0) << prepare.err;
  std::vector<std::string> files = data::list_shards(out);
  ASSERT_EQ(files.size(), 3u);  // 23 bytes at 10 per shard
  EXPECT_EQ(std::filesystem::path(files[0]).filename(), "prepare-000.flshard");
  std::string text;
  for (const auto& file : files) {
    data::Shard shard = data::read_shard(file);
    EXPECT_EQ(shard.header.tokenizer, data::kByteTokenizer);
    EXPECT_EQ(shard.header.vocab_size, 256u);
    text += data::byte_decode(shard.tokens);
  }
  EXPECT_EQ(text, "hello, world of shards\n");
}

TEST_F(CliData, PrepareNamesEveryMissingInput) {
  Result result =
      run(dir_, "data prepare --out " + shell_quote(dir_.file("p")) + " " +
                    shell_quote(dir_.file("x.txt")) + " " + shell_quote(dir_.file("y.txt")));
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("(" + dir_.file("x.txt") + ")"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("(" + dir_.file("y.txt") + ")"), std::string::npos) << result.err;
  EXPECT_FALSE(std::filesystem::exists(dir_.file("p")));  // nothing written on bad input
}

TEST_F(CliData, InspectMarksDamagedShardsBadAndFails) {
  std::string out = dir_.file("s");
  ASSERT_EQ(run(dir_, "data synth --out " + shell_quote(out) + " --shards 2 --tokens-per-shard 100")
                .exit_code,
            0);
  std::string victim = out + "/synth-001.flshard";
  std::string bytes = read_file(victim);
  bytes[bytes.size() - 1] ^= 1;
  write_file(victim, bytes);
  Result result = run(dir_, "data inspect " + shell_quote(out));
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.out.find("BAD"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("synth-000"), std::string::npos) << result.out;
  EXPECT_EQ(result.err.rfind("faultline: error: shard checksum mismatch: stored ", 0), 0u)
      << result.err;
  EXPECT_NE(result.err.find("(" + victim + "); the file is damaged"), std::string::npos)
      << result.err;

  Result json = run(dir_, "data inspect --json " + shell_quote(out));
  EXPECT_EQ(json.exit_code, 2);
  nlohmann::json doc = nlohmann::json::parse(json.out);
  EXPECT_EQ(doc["shards"][1]["checksum_ok"], false);
  EXPECT_EQ(doc["errors"][0]["where"], victim);
}

// A checksum covers what was written, not whether it is valid: an id at or above the header's
// vocab (a shard made by another tokenizer, a header edited by hand) halts training as a data
// anomaly, so inspect calls it BAD with its offset, checksum and all.
TEST_F(CliData, InspectCallsATokenIdBeyondTheVocabBadEvenWithAGoodChecksum) {
  std::string out = dir_.file("s");
  ASSERT_EQ(run(dir_, "data synth --out " + shell_quote(out) + " --shards 2 --tokens-per-shard 100")
                .exit_code,
            0);
  std::string victim = out + "/synth-001.flshard";
  data::Shard shard = data::read_shard(victim);
  shard.tokens.at(40) = 999;
  shard.header.checksum = data::token_checksum(shard.tokens);
  data::write_shard(victim, shard);
  Result result = run(dir_, "data inspect " + shell_quote(out));
  EXPECT_EQ(result.exit_code, 2) << result.out;
  EXPECT_NE(result.out.find("BAD"), std::string::npos) << result.out;
  EXPECT_EQ(result.err,
            "faultline: error: token id 999 at offset 40 is not below the shard's "
            "vocab size 256 (" +
                victim +
                "); training halts on it as a data anomaly; re-create the shard "
                "with the tokenizer its header names, or a header with the "
                "tokenizer's vocab size\n");
  Result json = run(dir_, "data inspect --json " + shell_quote(out));
  EXPECT_EQ(json.exit_code, 2);
  nlohmann::json doc = nlohmann::json::parse(json.out);
  EXPECT_EQ(doc["shards"][1]["checksum_ok"], true);
  EXPECT_EQ(doc["shards"][1]["ids_below_vocab"], false);
  EXPECT_EQ(doc["shards"][0]["ids_below_vocab"], true);
  EXPECT_EQ(doc["shards"][1]["max_token"], 999);
}

// Every option out of range at once, each by its flag (CLI11's checks stopped at the first); a
// negative seed is refused, not wrapped to 2^64 - 1.
TEST_F(CliData, SynthNamesEveryBadOptionAtOnce) {
  Result result =
      run(dir_, "data synth --out " + shell_quote(dir_.file("s")) +
                    " --shards 0 --tokens-per-shard 0 --vocab 1 --order 20 --branching 0");
  EXPECT_EQ(result.exit_code, 2);
  for (const char* flag :
       {"--vocab 1", "--shards 0", "--tokens-per-shard 0", "--order 20", "--branching 0"})
    EXPECT_NE(result.err.find(std::string("faultline: error: ") + flag + " is out of range"),
              std::string::npos)
        << flag << "\n"
        << result.err;
  Result seed = run(dir_, "data synth --out " + shell_quote(dir_.file("s")) + " --seed=-1");
  EXPECT_EQ(seed.exit_code, 2);
  EXPECT_NE(seed.err.find("--seed: -1 is not an integer >= 0"), std::string::npos) << seed.err;
  EXPECT_FALSE(std::filesystem::exists(dir_.file("s")));
}

TEST_F(CliData, InspectOfAMissingPathIsAUserError) {
  std::string missing = dir_.file("nowhere");
  Result result = run(dir_, "data inspect " + shell_quote(missing));
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.err, "faultline: error: data path does not exist (" + missing +
                            "); create shards with `faultline data synth --out DIR` or "
                            "`faultline data prepare --out DIR FILE...`\n");
  EXPECT_TRUE(result.out.empty());
}

TEST_F(CliData, UsageMistakesExitWithTwo) {
  EXPECT_EQ(run(dir_, "").exit_code, 2);
  EXPECT_EQ(run(dir_, "data").exit_code, 2);
  EXPECT_EQ(run(dir_, "data synth").exit_code, 2);  // --out is required
  Result range = run(dir_, "data synth --out " + shell_quote(dir_.file("s")) + " --vocab 1");
  EXPECT_EQ(range.exit_code, 2);
  EXPECT_NE(range.err.find("--vocab"), std::string::npos) << range.err;
  EXPECT_EQ(run(dir_, "data frobnicate").exit_code, 2);
}

TEST_F(CliData, HelpExitsWithZero) {
  Result help = run(dir_, "data synth --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--tokens-per-shard"), std::string::npos) << help.out;
}

}  // namespace
}  // namespace faultline::cli
