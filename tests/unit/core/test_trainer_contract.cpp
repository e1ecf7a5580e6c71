// Tests for harness/trainer_contract.cpp: the bundled trainer's keys for each request, and
// checkpoints known from a stored run's events (not from file names), missing files left out.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "harness/contract/trainer_contract.hpp"
#include "store/store.hpp"
#include "test_support.hpp"

namespace faultline::harness::contract {
namespace {
using faultline::testing::ScratchDir;

EventRecord event(const std::string& name, int64_t step, const std::string& path) {
  EventRecord record;
  record.name = name;
  record.step = step;
  const nlohmann::json fields = {{"type", "event"}, {"name", name}, {"step", step}, {"path", path}};
  record.json = fields.dump();
  return record;
}

TEST(TrainerContract, BundledTrainerIsAskedThroughItsKeys) {
  const auto& trainer = TrainerContract::bundled();
  TrialSpec spec;
  spec.ranks = 4;
  spec.hosts = {"a", "b", "c", "d"};
  spec = trainer.accumulate(spec, 1, 8);
  EXPECT_EQ(spec.ranks, 1);
  EXPECT_TRUE(spec.hosts.empty());
  spec = trainer.replay(trainer.full_probes_from(spec, 12), 13, {3, 17});
  spec = trainer.prefix(trainer.resume(spec, Checkpoint{12, "/c/12.ckpt"}), 13);
  EXPECT_EQ(spec.overrides, (std::vector<std::string>{
                                "train.grad_accum=8", "probe.level=full", "probe.full_from_step=12",
                                "probe.replay_step=13", "probe.replay_samples=3,17"}));
  EXPECT_EQ(spec.resume, "/c/12.ckpt");
  EXPECT_EQ(spec.stop_after, 13);
  EXPECT_EQ(trainer.resume(spec, std::nullopt).resume, "");
}

// The pasted reproduction runs each rank on its host label, as the host search did: a host's
// fault fires only where FAULTLINE_HOST names it. Run through sh with a trainer that reports.
TEST(TrainerContract, ThePastedCommandGivesEachRankItsHostLabel) {
  ScratchDir dir;
  const std::string trainer = dir.path() + "/report.sh";
  std::ofstream(trainer) << "#!/bin/sh\necho \"$RANK $FAULTLINE_HOST\" >> " << dir.path()
                         << "/seen\n";
  std::filesystem::permissions(trainer, std::filesystem::perms::owner_all);
  TrialSpec spec;
  spec.config_path = dir.path() + "/recipe.toml";
  spec.ranks = 2;
  spec.hosts = {"node b", "c", "spare"};
  const std::string pasted = TrainerContract::bundled().pasted_command(spec, trainer);
  ASSERT_EQ(std::system(("cd " + dir.path() + " && " + pasted).c_str()), 0) << pasted;
  std::ifstream in(dir.path() + "/seen");
  std::set<std::string> seen;
  for (std::string line; std::getline(in, line);) seen.insert(line);
  EXPECT_EQ(seen, (std::set<std::string>{"0 node b", "1 c"})) << pasted;
}

// A command trainer's paste makes the folder FAULTLINE_OUT names and names each rank's metrics
// file, as a trial has them: a script that writes there stopped at "Parent directory ... does not
// exist", or recorded nothing.
TEST(TrainerContract, APastedCommandTrainerRunHasItsOutFolderAndEachRanksMetricsFile) {
  ScratchDir dir;
  std::ofstream(dir.path() + "/report.sh") << "echo \"$RANK\" > \"$FAULTLINE_OUT/rank$RANK.txt\" "
                                              "&& echo '{}' > \"$FAULTLINE_METRICS\"\n";
  std::ofstream(dir.path() + "/recipe.toml")
      << "[trainer]\ncommand = [\"/bin/sh\", \"report.sh\"]\n[train]\nsteps = 3\n";
  TrialSpec spec;
  spec.config_path = dir.path() + "/recipe.toml";
  for (int ranks : {1, 2}) {
    spec.ranks = ranks;
    const std::string pasted = TrainerContract::of(spec.config_path).pasted_command(spec, "");
    ASSERT_EQ(std::system(pasted.c_str()), 0) << pasted;
    for (int rank = 0; rank < ranks; ++rank) {
      const std::string out = dir.path() + "/faultline-repro/";
      EXPECT_TRUE(
          std::filesystem::exists(out + "rank" + (ranks == 1 ? "" : std::to_string(rank)) + ".txt"))
          << pasted;
      EXPECT_TRUE(std::filesystem::exists(out + "metrics.rank" + std::to_string(rank) + ".jsonl"))
          << pasted;
    }
  }
}

// A pasted multi-rank run exits with a failing rank's status: a bare `wait` made a reproduced
// crash exit 0, which a script checking the status reads as "did not reproduce".
TEST(TrainerContract, APastedMultiRankRunExitsWithAFailingRanksStatus) {
  ScratchDir dir;
  std::ofstream(dir.path() + "/dies.sh") << "[ \"$RANK\" = 1 ] && exit 3\nexit 0\n";
  std::ofstream(dir.path() + "/recipe.toml")
      << "[trainer]\ncommand = [\"/bin/sh\", \"dies.sh\"]\n[train]\nsteps = 3\n";
  TrialSpec spec;
  spec.config_path = dir.path() + "/recipe.toml";
  spec.ranks = 2;
  const std::string pasted = TrainerContract::of(spec.config_path).pasted_command(spec, "");
  const int status = std::system(pasted.c_str());
  ASSERT_TRUE(WIFEXITED(status)) << pasted;
  EXPECT_EQ(WEXITSTATUS(status), 3) << pasted;
}

TEST(TrainerContract, ATrialsScaleAndTheKeysThatOnlyWatchARun) {
  const auto& trainer = TrainerContract::bundled();
  TrialSpec spec;
  spec.ranks = 2;
  EXPECT_EQ(trainer.scale_overrides(spec), (std::vector<std::string>{"dist.ranks=2"}));
  spec.stop_after = 40;
  spec.data_fraction = 0.25;
  EXPECT_EQ(
      trainer.scale_overrides(spec),
      (std::vector<std::string>{"train.stop_after=40", "data.fraction=0.25", "dist.ranks=2"}));
  for (const char* key : {"probe.level", "train.checkpoint_every", "dist.ranks", "data.fraction"})
    EXPECT_TRUE(trainer.watches_only(key)) << key;
  for (const char* key : {"optim.lr", "train.grad_accum", "model.n_embd", "train.seed"})
    EXPECT_FALSE(trainer.watches_only(key)) << key;
}

TEST(TrainerContract, ExitCodesHaveOneMeaningEach) {
  const auto& trainer = TrainerContract::bundled();
  EXPECT_EQ(trainer.exit_meaning(0), ExitMeaning::Finished);
  EXPECT_EQ(trainer.exit_meaning(2), ExitMeaning::BadUsage);
  EXPECT_EQ(trainer.exit_meaning(3), ExitMeaning::HaltedNonfinite);
  EXPECT_EQ(trainer.exit_meaning(4), ExitMeaning::HaltedData);
  EXPECT_EQ(trainer.exit_meaning(5), ExitMeaning::OutOfMemory);
  EXPECT_EQ(trainer.exit_meaning(127), ExitMeaning::NotRunnable);
  EXPECT_EQ(trainer.exit_meaning(1), ExitMeaning::Failed);
}

TEST(TrainerContract, BundledTrainerDeclaresEverythingButCheaperData) {
  const auto& trainer = TrainerContract::bundled();
  EXPECT_TRUE(trainer.can(Capability::Resume));
  EXPECT_TRUE(trainer.can(Capability::Accumulate));
  EXPECT_FALSE(trainer.can(Capability::CheaperWithLessData));
  EXPECT_EQ(trainer.skipped("scale: data", Capability::CheaperWithLessData),
            "skipped scale: data: it needs the trainer capability 'cheaper_with_less_data', "
            "which faultline-train does not declare");
}

TEST(TrainerContract, ACommandTrainersCopyNamesTheRecipeToEditAndItsCheckpointKey) {
  ScratchDir dir;
  const std::string copy = dir.file("copy.toml");
  std::ofstream(copy) << "[trainer]\ncommand = [\"python3\", \"train.py\"]\nrecords = \"log\"\n"
                         "log_regex = 'step (?P<step>\\d+) loss (?P<loss>\\S+)'\n";
  const auto trainer = TrainerContract::of(copy);
  EXPECT_EQ(trainer.checkpoint_every_key(), "faultline.checkpoint_every");
  EXPECT_EQ(TrainerContract::bundled().checkpoint_every_key(), "train.checkpoint_every");
  // Each note names the key that would give the capability, in the recipe to edit.
  const std::string tail =
      "which the trainer 'python3 train.py' does not declare (trainer.resume in ";
  EXPECT_NE(trainer.skipped("x", Capability::Resume).find(tail + copy + ")"), std::string::npos);
  const auto named = trainer.declared_in("/jobs/my.toml");
  EXPECT_NE(named.skipped("x", Capability::Resume).find(tail + "/jobs/my.toml)"), std::string::npos)
      << named.skipped("x", Capability::Resume);
  EXPECT_EQ(named.skipped("scale: data", Capability::DataFraction),
            "skipped scale: data: it needs the trainer capability 'data_fraction', which the "
            "trainer 'python3 train.py' does not declare (trainer.data_fraction_key in "
            "/jobs/my.toml)");
  EXPECT_NE(named.skipped("x", Capability::Checkpoints)
                .find("(trainer.checkpoint_every and trainer.checkpoint_regex in /jobs/my.toml)"),
            std::string::npos);
  // A log-only trainer cannot declare probes at all: the note says what would give them.
  EXPECT_EQ(named.skipped("samples", Capability::ReplaySamples),
            "skipped samples: it needs the trainer capability 'replay_samples', which the trainer "
            "'python3 train.py' cannot have: a log-only trainer's records are the lines it prints "
            "(records = \"protocol\" with probes/python/faultline_probe.py gives it, in "
            "/jobs/my.toml)");
  EXPECT_EQ(named.checkpoint_every(TrialSpec{}, 5).overrides,
            std::vector<std::string>{"faultline.checkpoint_every=5"});
}

TEST(TrainerContract, CheckpointsComeFromEventsWhoseFilesExist) {
  ScratchDir dir;
  auto store = store::Store::open(dir.file("f.db"));
  const int64_t run = store.create_run(store::RunInfo{});
  // Named unlike the bundled trainer's files: the events, not the names, say the step.
  const std::string resumed = dir.file("base.pt"), later = dir.file("after-twenty.pt");
  std::ofstream(resumed) << "x";
  std::ofstream(later) << "x";
  store.add_events(
      run, {event("resume", 10, resumed), event("start", 11, ""), event("checkpoint", 20, later),
            event("checkpoint", 30, dir.file("deleted.pt"))});
  const auto found = checkpoints(store, run);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].step, 10);
  EXPECT_EQ(found[0].path, resumed);
  EXPECT_EQ(found[1].step, 20);
  EXPECT_EQ(last_before(found, 20)->step, 10);
  EXPECT_EQ(last_before(found, 21)->step, 20);
  EXPECT_FALSE(last_before(found, 10));
  EXPECT_EQ(at_step(found, 20)->path, later);
  EXPECT_FALSE(at_step(found, 30));
}

TEST(TrainerContract, AFileSavedOverAtEachCheckpointCountsAsItsLastStepOnly) {
  ScratchDir dir;
  auto store = store::Store::open(dir.file("f.db"));
  const int64_t run = store.create_run(store::RunInfo{});
  // nanoGPT saves every checkpoint to out/ckpt.pt: after step 200 it holds step 200's state.
  const std::string over = dir.file("ckpt.pt");
  std::ofstream(over) << "x";
  std::filesystem::create_directories(dir.file("checkpoint-300"));  // a sharded one: a folder
  store.add_events(
      run, {event("checkpoint", 100, over), event("checkpoint", 150, over),
            event("checkpoint", 200, over), event("checkpoint", 300, dir.file("checkpoint-300"))});
  EXPECT_EQ(named_checkpoints(store, run).size(), 4u);
  const auto saved = saved_over(named_checkpoints(store, run));
  ASSERT_EQ(saved.size(), 1u);
  EXPECT_EQ(saved.at(over), (std::vector<int64_t>{100, 150, 200}));
  const auto found = checkpoints(store, run);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].step, 200);
  EXPECT_EQ(found[1].step, 300);
  // A failure at step 120 cannot start from "step 100": that state is gone.
  EXPECT_FALSE(last_before(found, 120));
  EXPECT_EQ(last_before(found, 250)->path, over);
}

}  // namespace
}  // namespace faultline::harness::contract
