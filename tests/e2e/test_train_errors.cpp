// End-to-end: faultline-train refuses bad configs, shards and checkpoints with messages that name
// the file, key or value and say what would be valid — every config error at once.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "support/metrics.hpp"

using namespace faultline::testing;
using ::testing::HasSubstr;

namespace {
std::string write_file(const std::string& dir, const std::string& name, const std::string& text) {
  std::string path = dir + "/" + name;
  std::ofstream(path) << text;
  return path;
}

ProcessResult faultline_cli(std::vector<std::string> args) {
  args.insert(args.begin(), FAULTLINE_BIN);
  return run_process({args, {}, 60});
}
}  // namespace

TEST(TrainErrors, EveryConfigErrorIsReportedAtOnceWithFileLineAndHint) {
  std::string dir = make_temp_dir("cfg");
  std::string recipe = write_file(dir, "bad.toml",
                                  "[model]\nn_layr = 2\nn_embd = 30\nn_head = 4\n"
                                  "[optim]\nlr = \"fast\"\n[schedule]\nkind = \"cosin\"\n");
  auto run = run_trainer({.recipe = recipe, .overrides = {"train.bacth_size=4"}});
  const auto& out = run.rank0().output;
  EXPECT_EQ(run.rank0().exit_code, 2) << out;
  EXPECT_THAT(out, HasSubstr("faultline-train: error: unknown key 'model.n_layr' (" + recipe +
                             ":2); did you mean 'model.n_layer'?"));
  EXPECT_THAT(out, HasSubstr("unknown key 'train.bacth_size' (--set train.bacth_size); did you "
                             "mean 'train.batch_size'?"));
  EXPECT_THAT(out, HasSubstr("n_embd 30 is not divisible by n_head 4"));
  EXPECT_THAT(out,
              HasSubstr("expected a number, got string \"fast\" (optim.lr at " + recipe + ":6)"));
  EXPECT_THAT(out, HasSubstr("invalid value \"cosin\" (schedule.kind at " + recipe +
                             ":8); did you mean 'cosine'?"));
}

// CUDA_VISIBLE_DEVICES="" hides any GPU, so this holds on every machine and LibTorch.
TEST(TrainErrors, CudaWithoutADeviceIsAConfigErrorNamingTheKey) {
  auto run =
      run_trainer({.overrides = {"train.device=cuda"}, .env = {{"CUDA_VISIBLE_DEVICES", ""}}});
  EXPECT_EQ(run.rank0().exit_code, 2) << run.rank0().output;
  EXPECT_THAT(run.rank0().output,
              HasSubstr("faultline-train: error: train.device = \"cuda\" but no CUDA device is "
                        "usable (train.device at --set train.device); "));
  EXPECT_TRUE(run.steps().empty());
}

TEST(TrainErrors, NcclOnTheCpuIsAConfigErrorNamingTheKey) {
  auto run = run_trainer({.overrides = {"dist.backend=nccl", "train.device=cpu"}});
  EXPECT_EQ(run.rank0().exit_code, 2) << run.rank0().output;
  EXPECT_THAT(run.rank0().output, HasSubstr("faultline-train: error: dist.backend = \"nccl\""));
  EXPECT_THAT(run.rank0().output, HasSubstr("(dist.backend); "));
}

TEST(TrainErrors, MissingConfigFileIsNamed) {
  auto run = run_trainer({.recipe = "/nonexistent/recipe.toml"});
  EXPECT_EQ(run.rank0().exit_code, 2);
  EXPECT_THAT(run.rank0().output,
              HasSubstr("cannot read recipe file (/nonexistent/recipe.toml (-c))"));
}

TEST(TrainErrors, AnInstalledRecipeIsTakenByItsNameAndAMistypedOneGetsADidYouMean) {
  auto named = run_trainer({.recipe = "tiny", .overrides = {"train.stop_after=1"}});
  EXPECT_EQ(named.rank0().exit_code, 0) << named.rank0().output;
  EXPECT_THAT(named.rank0().output, HasSubstr("ok at step 1"));
  // One step is not timed (a process's first two pay one-time costs): no "0 tokens/s".
  EXPECT_THAT(named.rank0().output, HasSubstr("too few steps to time"));
  auto typo = run_trainer({.recipe = "tinyy"});
  EXPECT_EQ(typo.rank0().exit_code, 2);
  EXPECT_THAT(typo.rank0().output,
              HasSubstr("installed recipe named 'tinyy' (-c); did you mean 'tiny'?"));
}

TEST(TrainErrors, TypoInNanLayerSuggestsTheModule) {
  auto run = run_trainer({.overrides = {"fault.nan_step=3", "fault.nan_layer=blocks.1.mpl"}});
  EXPECT_EQ(run.rank0().exit_code, 2);
  EXPECT_THAT(
      run.rank0().output,
      HasSubstr("unknown module 'blocks.1.mpl' (fault.nan_layer); did you mean 'blocks.1.mlp'?"));
}

TEST(TrainErrors, FaultKeyWithoutItsPartner) {
  auto run = run_trainer({.overrides = {"fault.crash_rank=0"}});
  EXPECT_EQ(run.rank0().exit_code, 2);
  EXPECT_THAT(run.rank0().output, HasSubstr("fault.crash_rank needs fault.crash_step"));
}

TEST(TrainErrors, BatchThatDoesNotSplitOverRanks) {
  auto run = run_trainer(
      {.overrides = {"train.batch_size=6", "train.grad_accum=2"}, .ranks = 2, .timeout_s = 30});
  EXPECT_EQ(run.rank0().exit_code, 2);
  EXPECT_THAT(run.rank0().output, HasSubstr("not divisible by WORLD_SIZE × train.grad_accum = 4"));
}

TEST(TrainErrors, ShardWithAnotherTokenizerIsRefused) {
  std::string dir = make_temp_dir("shards");
  write_file(dir, "text.txt", std::string(4096, 'a'));
  auto prepared = faultline_cli({"data", "prepare", "--out", dir + "/shards", dir + "/text.txt"});
  ASSERT_EQ(prepared.exit_code, 0) << prepared.output;
  auto run = run_trainer({.overrides = {"data.path=" + dir + "/shards"}});
  EXPECT_EQ(run.rank0().exit_code, 2);
  EXPECT_THAT(run.rank0().output, HasSubstr("shard tokenizer 'byte' v1 does not match"));
  EXPECT_THAT(run.rank0().output, HasSubstr(dir + "/shards/prepare-000.flshard"));
}

TEST(TrainErrors, TokenIdBeyondTheVocabularyIsADataAnomalyNamingShardAndSample) {
  std::string dir = make_temp_dir("vocab");
  auto made = faultline_cli({"data", "synth", "--out", dir, "--vocab", "256", "--shards", "2",
                             "--tokens-per-shard", "8192"});
  ASSERT_EQ(made.exit_code, 0) << made.output;
  auto run = run_trainer({.overrides = {"data.path=" + dir}});  // micro.toml: vocab 64
  EXPECT_EQ(run.rank0().exit_code, 4) << run.rank0().output;
  auto anomaly = run.anomalies().at(0);
  EXPECT_EQ(anomaly.at("kind"), "data");
  EXPECT_EQ(anomaly.at("step"), 1);
  EXPECT_EQ(anomaly.at("samples").size(), 1u);
  EXPECT_THAT(anomaly.at("detail").get<std::string>(),
              HasSubstr("is not below model.vocab_size 64"));
}

class CheckpointErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    auto run = run_trainer({.overrides = {"train.steps=10", "train.checkpoint_every=5"}});
    ASSERT_EQ(run.rank0().exit_code, 0) << run.rank0().output;
    checkpoint = run.out_dir + "/checkpoints/step-00000005.ckpt";
  }
  std::string checkpoint;
};

TEST_F(CheckpointErrors, FlippedByteFailsTheChecksum) {
  {
    std::fstream file(checkpoint, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(std::filesystem::file_size(checkpoint) / 2);
    file.put('\x5a');
  }
  auto run = run_trainer({.overrides = {"train.steps=10"}, .resume = checkpoint});
  EXPECT_EQ(run.rank0().exit_code, 2);
  EXPECT_THAT(run.rank0().output, HasSubstr("checkpoint checksum mismatch"));
  EXPECT_THAT(run.rank0().output, HasSubstr(checkpoint));
}

TEST_F(CheckpointErrors, TruncatedFileIsRefused) {
  std::filesystem::resize_file(checkpoint, 100);
  auto run = run_trainer({.overrides = {"train.steps=10"}, .resume = checkpoint});
  EXPECT_EQ(run.rank0().exit_code, 2);
  EXPECT_THAT(run.rank0().output, HasSubstr(checkpoint));
}

TEST_F(CheckpointErrors, OtherModelShapeIsRefused) {
  auto run =
      run_trainer({.overrides = {"train.steps=10", "model.n_embd=48"}, .resume = checkpoint});
  EXPECT_EQ(run.rank0().exit_code, 2);
  EXPECT_THAT(run.rank0().output, HasSubstr("elements in the checkpoint"));
}

TEST_F(CheckpointErrors, OtherTrainingConfigIsRefusedButProbeChangesAreFine) {
  auto other = run_trainer({.overrides = {"train.steps=10", "optim.lr=0.5"}, .resume = checkpoint});
  EXPECT_EQ(other.rank0().exit_code, 2);
  EXPECT_THAT(other.rank0().output, HasSubstr("different training config"));
  auto probes =
      run_trainer({.overrides = {"train.steps=10", "probe.level=full"}, .resume = checkpoint});
  EXPECT_EQ(probes.rank0().exit_code, 0) << probes.rank0().output;
}

TEST_F(CheckpointErrors, NotACheckpointAtAll) {
  std::string dir = make_temp_dir("notckpt");
  std::string path = write_file(dir, "x.ckpt", "hello, this is not a checkpoint at all......");
  auto run = run_trainer({.overrides = {"train.steps=10"}, .resume = path});
  EXPECT_EQ(run.rank0().exit_code, 2);
  EXPECT_THAT(run.rank0().output, HasSubstr("not a faultline checkpoint (" + path + ")"));
}
