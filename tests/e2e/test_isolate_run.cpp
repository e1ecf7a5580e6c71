// End-to-end: `isolate --run` starts from a stored or imported failing run's own checkpoints
// and localizes the fault at the cost of one checkpoint interval, not a re-run from step 0;
// `faultline import` stores a run faultline did not launch, and refuses broken directories.
#include <fmt/core.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "store/store.hpp"
#include "support/cli.hpp"
#include "trainer/sampler.hpp"

using namespace faultline::testing;
using ::testing::AllOf;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

namespace {

const std::string kMicro = FAULTLINE_SOURCE_DIR "/tests/e2e/recipes/micro.toml";
constexpr int64_t kEvery = 50;  // checkpoint interval of the failing runs
const std::vector<std::string> kLongRun = {"train.steps=400",
                                           "train.checkpoint_every=" + std::to_string(kEvery)};

std::vector<std::string> long_run_with_sets(std::vector<std::string> args,
                                            const std::vector<std::string>& overrides) {
  return with_sets(with_sets(std::move(args), kLongRun), overrides);
}

// A stored failing run of `faultline train`.
int64_t stored_failing_run(const std::string& dir, const std::vector<std::string>& overrides) {
  auto train =
      faultline_cli(long_run_with_sets({"train", "-c", kMicro, "--json"}, overrides), dir, 300);
  EXPECT_EQ(train.result.exit_code, 1) << train.result.output;
  return train.doc.value("run_id", int64_t{0});
}

// A plain faultline-train run (not launched by faultline) into `out`.
void plain_run(const std::string& out, const std::vector<std::string>& overrides) {
  auto run = run_process(
      {long_run_with_sets({FAULTLINE_TRAIN_BIN, "-c", kMicro, "--out", out}, overrides), {}, 300});
  ASSERT_EQ(run.exit_code, 3) << run.output;  // halted on the non-finite value
}

// The ranks of a plain faultline-train job of `world` ranks into `out`, as a cluster's job script
// starts them (torchrun's variables; FAULTLINE_HOST from `hosts`, by rank, when given).
std::vector<ProcessSpec> job_ranks(const std::string& out, int world,
                                   const std::vector<std::string>& overrides,
                                   const std::vector<std::string>& hosts = {}) {
  const int port = free_port();
  std::vector<ProcessSpec> ranks;
  for (int rank = 0; rank < world; ++rank) {
    ranks.push_back(
        {long_run_with_sets({FAULTLINE_TRAIN_BIN, "-c", kMicro, "--out", out}, overrides),
         {{"RANK", std::to_string(rank)},
          {"WORLD_SIZE", std::to_string(world)},
          {"LOCAL_RANK", std::to_string(rank)},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", std::to_string(port)}},
         300});
    if (static_cast<size_t>(rank) < hosts.size())
      ranks.back().env["FAULTLINE_HOST"] = hosts[static_cast<size_t>(rank)];
  }
  return ranks;
}

// The first step of a micro run whose batch holds `sample`, and a sample first drawn in
// (from, to]: a poisoned sample there fails between two checkpoints.
int64_t first_step_drawing(uint64_t sample) {
  faultline::trainer::BatchSampler sampler(7, 1022, 8);  // micro.toml: seed 7, 1022 samples
  for (int64_t step = 1;; ++step) {
    auto batch = sampler.global_batch(step);
    if (std::find(batch.begin(), batch.end(), sample) != batch.end()) return step;
  }
}
uint64_t sample_first_drawn_in(int64_t from, int64_t to) {
  faultline::trainer::BatchSampler sampler(7, 1022, 8);
  for (int64_t step = to; step > from; --step)
    for (uint64_t sample : sampler.global_batch(step))
      if (first_step_drawing(sample) > from) return sample;
  ADD_FAILURE() << "no sample first drawn in (" << from << ", " << to << "]";
  return 0;
}

void expect_one_interval(const nlohmann::json& doc) {
  // One replay of the interval, then at most 16 one-step replays of the failing step.
  EXPECT_LE(doc.at("steps_executed").get<int64_t>(), kEvery + 16) << doc.dump();
  EXPECT_GT(doc.at("steps_executed").get<int64_t>(), 0);
}

}  // namespace

TEST(IsolateRun, NanBetweenCheckpointsOnTwoRanksIsReplayedOnOneRankFromTheLastCheckpoint) {
  const std::string dir = make_temp_dir("isolate-run-nan");
  const int64_t run = stored_failing_run(
      dir, {"dist.ranks=2", "fault.nan_step=234", "fault.nan_layer=blocks.1.mlp"});
  ASSERT_GT(run, 0);
  auto cli = faultline_cli({"isolate", "--run", std::to_string(run), "--json"}, dir, 300);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  const auto& doc = cli.doc;
  EXPECT_EQ(doc.at("kind"), "nonfinite");
  EXPECT_EQ(doc.at("step"), 234);
  EXPECT_EQ(doc.at("phase"), "forward");
  EXPECT_EQ(doc.at("where"), "blocks.1.mlp");
  EXPECT_EQ(doc.at("min_scale").at("ranks"), 1);
  EXPECT_EQ(doc.at("min_scale").at("from_step"), 200);
  EXPECT_EQ(doc.at("min_scale").at("to_step"), 234);
  EXPECT_EQ(doc.at("failing_run"), run);
  expect_one_interval(doc);
  EXPECT_THAT(cli.result.output, HasSubstr("replay steps 201..234 of run"));
}

// The crash comes in the first step after a checkpoint: the replay from it dies before writing a
// step record, and its crash is still in step 201 (the resume event says where it began), not
// in step 1; the finding's repro, which writes no step record either, reproduces it.
TEST(IsolateRun, ACrashInTheFirstStepAfterACheckpointKeepsItsStepAndItsReproReproduces) {
  const std::string dir = make_temp_dir("isolate-run-first");
  const int64_t run =
      stored_failing_run(dir, {"dist.ranks=2", "fault.crash_rank=1", "fault.crash_step=201"});
  ASSERT_GT(run, 0);
  auto cli = faultline_cli({"isolate", "--run", std::to_string(run), "--json"}, dir, 300);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("kind"), "crash");
  EXPECT_EQ(cli.doc.at("step"), 201);
  EXPECT_EQ(cli.doc.at("rank"), 1);
  EXPECT_EQ(cli.doc.at("min_scale").at("from_step"), 200);
  EXPECT_EQ(cli.doc.at("min_scale").at("to_step"), 201);
  const std::string id = fmt::format("F{}", cli.doc.at("finding_id").get<int64_t>());
  auto repro = faultline_cli({"repro", id, "--json"}, dir, 300);
  EXPECT_EQ(repro.result.exit_code, 0) << repro.result.output;
  EXPECT_EQ(repro.doc.at("failure_step"), 201);
  EXPECT_EQ(repro.doc.at("records_compared"), 0);
  // The checkpoint removed since (a clean-up): the replay cannot run, exit 4 saying so. It died
  // loading it, and a crash was "reproduced", a NaN "NOT reproduced", as a CI re-check reads.
  const std::string checkpoint =
      fmt::format("{}/runs/run-{}/checkpoints/step-00000200.ckpt", dir, run);
  ASSERT_TRUE(std::filesystem::remove(checkpoint)) << checkpoint;
  auto gone = faultline_cli({"repro", id}, dir, 300);
  EXPECT_EQ(gone.result.exit_code, 4) << gone.result.output;
  EXPECT_THAT(gone.result.output,
              HasSubstr("the checkpoint to resume from, " + checkpoint + ", no longer exists"));
}

TEST(IsolateRun, PoisonedSampleIsNamedFromTheStoredRunsCheckpoint) {
  const std::string dir = make_temp_dir("isolate-run-poison");
  const uint64_t poison = sample_first_drawn_in(100, 120);
  const int64_t step = first_step_drawing(poison);
  const int64_t run = stored_failing_run(dir, {"fault.poison_sample=" + std::to_string(poison)});
  ASSERT_GT(run, 0);
  auto cli = faultline_cli({"isolate", "--run", std::to_string(run), "--json"}, dir, 300);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("step"), step);
  EXPECT_EQ(cli.doc.at("where"), "wte");
  EXPECT_EQ(cli.doc.at("samples"), nlohmann::json::array({poison}));
  EXPECT_EQ(cli.doc.at("shards"),
            nlohmann::json::array({poison < 511 ? "synth-000" : "synth-001"}));
  EXPECT_EQ(cli.doc.at("min_scale").at("from_step"), 100);
  expect_one_interval(cli.doc);
}

// A straggler is a rate over the whole run, not a step: its last checkpoint interval shows it
// again at the run's two ranks (400 steps: it was the whole run, three times, before).
TEST(IsolateRun, AStragglerOfAStoredRunIsReplayedOverItsLastIntervalNotTheWholeRun) {
  const std::string dir = make_temp_dir("isolate-run-straggler");
  auto train =
      faultline_cli(long_run_with_sets({"train", "-c", kMicro, "--json"},
                                       {"dist.ranks=2", "fault.slow_rank=1", "fault.slow_ms=20"}),
                    dir, 300, {}, TimingDetectors::On);
  ASSERT_EQ(train.result.exit_code, 1) << train.result.output;
  const int64_t run = train.doc.at("run_id");
  auto cli = faultline_cli({"isolate", "--run", std::to_string(run), "--json"}, dir, 300, {},
                           TimingDetectors::On);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("kind"), "straggler") << cli.doc.dump();
  EXPECT_EQ(cli.doc.at("rank"), 1);
  EXPECT_EQ(cli.doc.at("min_scale").at("from_step"), 350);
  EXPECT_EQ(cli.doc.at("min_scale").at("ranks"), 2);
  // The replay, two confirming ones and a 1-rank try of the ranks scale: 4 intervals.
  EXPECT_LE(cli.doc.at("steps_executed").get<int64_t>(), 4 * kEvery + 10) << cli.doc.dump();
}

// A leak is dated by its first fitted step (6) but shown by a fit over 20 steps and more: the
// smallest run is the prefix that shows it, and its repro reproduces (it ran to step 6 before).
TEST(IsolateRun, ALeaksSmallestRunIsThePrefixThatShowsItAndItsReproReproduces) {
  const std::string dir = make_temp_dir("isolate-run-leak");
  const int64_t run = stored_failing_run(dir, {"fault.leak_mb_per_step=2"});
  ASSERT_GT(run, 0);
  auto cli = faultline_cli({"isolate", "--run", std::to_string(run), "--json"}, dir, 300);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("kind"), "memory") << cli.doc.dump();
  EXPECT_EQ(cli.doc.at("step"), 6);
  EXPECT_EQ(cli.doc.at("min_scale").at("to_step"), 45) << cli.doc.dump();
  // The run wrote checkpoints, all after step 6: it was asked to, so the note names its first
  // instead of the key that asks for them.
  EXPECT_THAT(cli.doc.at("skipped").dump(),
              HasSubstr("has no checkpoint before step 6 (its first is at step 50)"));
  std::string finding = "F";
  finding += std::to_string(cli.doc.at("finding_id").get<int64_t>());
  auto repro = faultline_cli({"repro", finding}, dir, 300);
  EXPECT_EQ(repro.result.exit_code, 0) << repro.result.output;
  EXPECT_THAT(repro.result.output, HasSubstr("reproduced"));
  EXPECT_THAT(repro.result.output, ::testing::Not(HasSubstr("NOT reproduced")));
}

// A loss spike is judged against the losses before it. Replayed from the checkpoint just before
// it, its first loss would be the spike itself and nothing to judge it by: the replay starts
// loss_spike.warmup_steps (10) steps earlier. (It went back to step 0 before: 37 steps, not 11.)
TEST(IsolateRun, ALossSpikeRightAfterACheckpointIsReplayedWithTheLossesItIsJudgedAgainst) {
  const std::string dir = make_temp_dir("isolate-run-spike");
  // The planted LR jump would be found first, as lr_anomaly: judged here is the loss it spikes.
  const std::string detectors = dir + "/detectors.toml";
  std::ofstream(detectors) << read_text(FAULTLINE_SOURCE_DIR
                                        "/tests/e2e/recipes/no_timing_detectors.toml")
                           << "\n[lr_anomaly]\nenabled = false\n";
  auto train = faultline_cli(with_sets({"train", "-c", kMicro, "--detectors", detectors, "--json"},
                                       {"train.checkpoint_every=5", "fault.lr_spike_step=25",
                                        "fault.lr_spike_factor=100"}),
                             dir, 300);
  ASSERT_EQ(train.result.exit_code, 1) << train.result.output;
  const int64_t run = train.doc.at("run_id");
  auto cli = faultline_cli(
      {"isolate", "--run", std::to_string(run), "--detectors", detectors, "--json"}, dir, 300);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("kind"), "loss_spike") << cli.doc.dump();
  EXPECT_EQ(cli.doc.at("step"), 26);
  EXPECT_EQ(cli.doc.at("min_scale").at("from_step"), 15) << cli.result.output;
  EXPECT_EQ(cli.doc.at("steps_executed"), 11) << cli.result.output;
  EXPECT_THAT(cli.result.output, HasSubstr("replay steps 16..26 of run"));
}

TEST(IsolateRun, ARunWithoutACheckpointBeforeTheFailureIsRunFromStepZero) {
  const std::string dir = make_temp_dir("isolate-run-early");
  const int64_t run = stored_failing_run(dir, {"fault.nan_step=20", "fault.nan_layer=wte"});
  auto cli = faultline_cli({"isolate", "--run", std::to_string(run), "--json"}, dir, 300);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("step"), 20);
  EXPECT_EQ(cli.doc.at("min_scale").at("from_step"), 0);
  // and says which key makes a run write them (here, more often than every 50 steps)
  EXPECT_THAT(cli.doc.at("skipped").dump(),
              HasSubstr("replayed from step 0: run 1 has no checkpoint before step 20 (--set "
                        "train.checkpoint_every=N makes a run write one every N steps)"));
  // The trials ran a copy of the run's config; the copy names the recipe to edit.
  EXPECT_THAT(read_text(dir + "/runs/recipes/run-1.toml"),
              HasSubstr("# (a copy: the run's recipe is " + kMicro + ")\n"));
}

TEST(IsolateRun, AnImportedPlainTrainerRunIsIsolatedFromItsCheckpoints) {
  const std::string dir = make_temp_dir("isolate-import");
  const std::string out = dir + "/plain-run";
  plain_run(out, {"fault.nan_step=234", "fault.nan_layer=blocks.0.attn"});
  auto imported = faultline_cli({"import", out, "--json"}, dir);
  ASSERT_EQ(imported.result.exit_code, 0) << imported.result.output;
  EXPECT_EQ(imported.doc.at("verdict"), "fail");
  EXPECT_EQ(imported.doc.at("checkpoints"), 4);  // steps 50, 100, 150 and 200
  EXPECT_EQ(imported.doc.at("trainer"), "faultline-train");
  const int64_t run = imported.doc.at("run_id");
  auto cli = faultline_cli({"isolate", "--run", std::to_string(run), "--json"}, dir, 300);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("step"), 234);
  EXPECT_EQ(cli.doc.at("where"), "blocks.0.attn");
  EXPECT_EQ(cli.doc.at("min_scale").at("from_step"), 200);
  expect_one_interval(cli.doc);
}

TEST(IsolateRun, ImportOfABrokenDirectoryIsAClearErrorAndStoresNothing) {
  const std::string dir = make_temp_dir("import-broken");
  const std::string out = dir + "/plain-run";
  plain_run(out, {"fault.nan_step=120", "fault.nan_layer=wte"});
  const std::string metrics = out + "/metrics.rank0.jsonl";

  // A killed process's last record cut off mid-line is how that rank ended, not a broken file
  // (stored in its own store here: the rest of this test stores nothing).
  const std::string truncated = dir + "/truncated";
  fs::copy(out, truncated, fs::copy_options::recursive);
  fs::resize_file(truncated + "/metrics.rank0.jsonl", fs::file_size(metrics) - 7);
  const std::string elsewhere = dir + "/cut-store";
  fs::create_directories(elsewhere);
  auto cut = faultline_cli({"import", truncated, "--json"}, elsewhere);
  ASSERT_EQ(cut.result.exit_code, 0) << cut.result.output;
  EXPECT_EQ(cut.doc.at("verdict"), "fail");
  EXPECT_THAT(cut.doc.at("failures").dump(),
              AllOf(HasSubstr("wrote no end event after step 120"),
                    HasSubstr("is cut off mid-record: it was stopped while it wrote it")));

  // Rank 1's file is refused after rank 0's records went into the store's transaction: it
  // rolls back.
  const std::string headless = dir + "/headless";
  fs::copy(out, headless, fs::copy_options::recursive);
  {
    std::ifstream in(metrics);
    std::ofstream rank1(headless + "/metrics.rank1.jsonl");
    std::string line;
    for (std::getline(in, line); std::getline(in, line);) rank1 << line << "\n";
  }
  auto no_start = faultline_cli({"import", headless}, dir);
  EXPECT_EQ(no_start.result.exit_code, 2) << no_start.result.output;
  EXPECT_THAT(no_start.result.output, HasSubstr("no start event in the metrics file"));
  EXPECT_THAT(no_start.result.output, HasSubstr(headless + "/metrics.rank1.jsonl"));
  // Input refused before its files are read leaves no store behind where there was none.
  const std::string fresh = dir + "/fresh";
  fs::create_directories(fresh);
  auto one_missing = faultline_cli({"import", out, "--ranks", "3"}, fresh);
  EXPECT_EQ(one_missing.result.exit_code, 2) << one_missing.result.output;
  EXPECT_THAT(one_missing.result.output, HasSubstr("missing metrics file for rank 1"));

  fs::remove(out + "/checkpoints/step-00000100.ckpt");
  auto missing = faultline_cli({"import", out}, dir);
  EXPECT_EQ(missing.result.exit_code, 2) << missing.result.output;
  EXPECT_THAT(missing.result.output, HasSubstr("the checkpoint of step 100"));
  EXPECT_THAT(missing.result.output, HasSubstr("step-00000100.ckpt"));

  auto no_dir = faultline_cli({"import", dir + "/nowhere"}, fresh);
  EXPECT_EQ(no_dir.result.exit_code, 2);
  EXPECT_THAT(no_dir.result.output, HasSubstr("not a directory"));

  auto a_file = faultline_cli({"import", metrics}, fresh);
  EXPECT_EQ(a_file.result.exit_code, 2);
  EXPECT_THAT(a_file.result.output, HasSubstr("a file, not a run's directory"));
  EXPECT_THAT(a_file.result.output, HasSubstr("faultline import LOG -c RECIPE"));

  // -c is for a run of the user's own trainer: faultline-train's carries its config.
  auto own = faultline_cli({"import", truncated, "-c", kMicro}, fresh);
  EXPECT_EQ(own.result.exit_code, 2) << own.result.output;
  EXPECT_THAT(own.result.output, HasSubstr("the recipe has no [trainer] section"));
  EXPECT_FALSE(fs::exists(fresh + "/faultline.db"));

  EXPECT_TRUE(faultline::store::Store::open(dir + "/faultline.db").list_runs(-1).empty());
}

TEST(IsolateRun, ReproAfterTheRecipeWasEditedReplaysTheStoredConfigBitwiseAndSaysSo) {
  const std::string dir = make_temp_dir("repro-edited");
  const std::string recipe = dir + "/micro.toml";
  fs::copy_file(kMicro, recipe);
  auto found = faultline_cli({"isolate", "-c", recipe, "--json", "--set", "fault.nan_step=9",
                              "--set", "fault.nan_layer=blocks.0.attn"},
                             dir, 300);
  ASSERT_EQ(found.result.exit_code, 0) << found.result.output;
  std::string id = "F";  // not "F" + to_string(...): GCC 12 warns wrongly (-Wrestrict)
  id += std::to_string(found.doc.at("finding_id").get<int64_t>());
  {
    std::ofstream edit(recipe, std::ios::app);
    edit << "\n[model]\n";  // a second [model] table: the recipe no longer even loads
  }
  auto broken = faultline_cli({"repro", id, "--json"}, dir);
  ASSERT_EQ(broken.result.exit_code, 0) << broken.result.output;
  EXPECT_EQ(broken.doc.at("verdict"), "identical");
  EXPECT_THAT(broken.doc.at("recipe_changed").get<std::string>(), HasSubstr("no longer loads"));

  {
    const std::string text = read_text(kMicro);
    const auto at = text.find("lr = 1e-2");
    ASSERT_NE(at, std::string::npos);
    // A valid recipe that trains differently.
    std::ofstream(recipe) << text.substr(0, at) << "lr = 3e-2" << text.substr(at + 9);
  }
  auto edited = faultline_cli({"repro", id}, dir);
  ASSERT_EQ(edited.result.exit_code, 0) << edited.result.output;
  EXPECT_THAT(edited.result.output, HasSubstr("changed since the finding"));
  EXPECT_THAT(edited.result.output, HasSubstr("bitwise identical: yes"));
}

TEST(IsolateRun, KilledIsolateOfAStoredRunResumesWithoutRepeatingFinishedTrials) {
  const std::string dir = make_temp_dir("isolate-run-kill");
  const std::string db = dir + "/faultline.db";
  const uint64_t poison = sample_first_drawn_in(100, 120);
  const int64_t run = stored_failing_run(dir, {"fault.poison_sample=" + std::to_string(poison)});
  ASSERT_GT(run, 0);
  auto finished_runs = [&] {
    int finished = 0;
    for (const auto& stored : faultline::store::Store::open(db).list_runs(-1))
      finished += stored.status == faultline::store::RunStatus::Finished;
    return finished;
  };
  // SIGKILL once the replay from the checkpoint is stored (the failing run is the first).
  auto killed = faultline_cli({"isolate", "--run", std::to_string(run), "--json"}, dir, 300,
                              [&] { return finished_runs() >= 2; });
  ASSERT_EQ(killed.result.signal, SIGKILL) << killed.result.output;

  auto resumed = faultline_cli({"isolate", "--run", std::to_string(run), "--json"}, dir, 300);
  ASSERT_EQ(resumed.result.exit_code, 0) << resumed.result.output;
  EXPECT_EQ(resumed.doc.at("samples"), nlohmann::json::array({poison}));
  EXPECT_THAT(resumed.result.output, HasSubstr("stored trial reused"));
  // Each trial's run is stored once: the failing run plus one per trial.
  EXPECT_EQ(finished_runs(), 1 + resumed.doc.at("trials").get<int>());
}

TEST(IsolateRun, SilentGradientCorruptionOnOneOfFourRanksIsNamedFromAPassingStoredRun) {
  const std::string dir = make_temp_dir("isolate-run-ranks");
  auto train = faultline_cli(long_run_with_sets({"train", "-c", kMicro, "--json"},
                                                {"dist.ranks=4", "fault.corrupt_grad_rank=2",
                                                 "fault.corrupt_grad_step=234"}),
                             dir, 300);
  ASSERT_EQ(train.result.exit_code, 0) << "silent: no detector fails it\n" << train.result.output;
  const int64_t run = train.doc.at("run_id");
  auto cli = faultline_cli({"isolate", "--run", std::to_string(run), "--json"}, dir, 600);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("kind"), "rank_divergence");
  EXPECT_EQ(cli.doc.at("step"), 234);
  EXPECT_EQ(cli.doc.at("ranks"), nlohmann::json::array({2}));
  EXPECT_EQ(cli.doc.at("failing_run"), run);
  // The whole run once on one rank (1/4 of its rank-steps), the window after the last agreeing
  // fingerprint at 4 ranks, the replica check from the same checkpoint, and its reference.
  EXPECT_LE(cli.doc.at("rank_steps_executed").get<int64_t>(), 400 + 2 * 4 * kEvery + 1)
      << cli.doc.dump();
}

TEST(IsolateRun, AnImportedPoisonedSampleRunIsNamedToItsSampleAndShard) {
  const std::string dir = make_temp_dir("isolate-import-poison");
  const uint64_t poison = sample_first_drawn_in(100, 120);
  const std::string out = dir + "/plain-run";
  plain_run(out, {"fault.poison_sample=" + std::to_string(poison)});
  auto imported = faultline_cli({"import", out, "--json"}, dir);
  ASSERT_EQ(imported.result.exit_code, 0) << imported.result.output;
  auto cli = faultline_cli(
      {"isolate", "--run", std::to_string(imported.doc.at("run_id").get<int64_t>()), "--json"}, dir,
      300);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("step"), first_step_drawing(poison));
  EXPECT_EQ(cli.doc.at("samples"), nlohmann::json::array({poison}));
  EXPECT_EQ(cli.doc.at("shards"),
            nlohmann::json::array({poison < 511 ? "synth-000" : "synth-001"}));
  expect_one_interval(cli.doc);
}

TEST(IsolateRun, AnImportedFourRankRunWithACorruptRankIsNamedToItsRank) {
  const std::string dir = make_temp_dir("isolate-import-ranks");
  const std::string out = dir + "/cluster-job";
  const auto ranks = job_ranks(
      out, 4, {"dist.ranks=4", "fault.corrupt_grad_rank=1", "fault.corrupt_grad_step=234"});
  for (const auto& result : run_processes(ranks)) ASSERT_EQ(result.exit_code, 0) << result.output;
  auto imported = faultline_cli({"import", out, "--ranks", "4", "--json"}, dir);
  ASSERT_EQ(imported.result.exit_code, 0) << imported.result.output;
  EXPECT_EQ(imported.doc.at("verdict"), "pass");
  auto cli = faultline_cli(
      {"isolate", "--run", std::to_string(imported.doc.at("run_id").get<int64_t>()), "--json"}, dir,
      600);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("kind"), "rank_divergence");
  EXPECT_EQ(cli.doc.at("step"), 234);
  EXPECT_EQ(cli.doc.at("ranks"), nlohmann::json::array({1}));
  // The replica check resumes from the run's last checkpoint before the step, and says so.
  EXPECT_EQ(cli.doc.at("min_scale").at("from_step"), 200) << cli.doc.dump();
}

// A job's rank crashed on host "y": the finding names y, where it failed, not the machine its
// replays ran on (on Slurm, whichever nodes were free; a bad-node hunt went to the wrong one).
TEST(IsolateRun, AnImportedCrashNamesTheHostTheRankRanOnNotTheReplays) {
  const std::string dir = make_temp_dir("isolate-import-host");
  const std::string out = dir + "/cluster-job";
  const auto ranks =
      job_ranks(out, 2, {"dist.ranks=2", "fault.crash_rank=1", "fault.crash_step=60"}, {"x", "y"});
  run_processes(ranks);  // rank 1 dies at step 60, rank 0 in the allreduce after it
  auto imported = faultline_cli({"import", out, "--ranks", "2", "--json"}, dir);
  ASSERT_EQ(imported.result.exit_code, 0) << imported.result.output;
  auto cli = faultline_cli(
      {"isolate", "--run", std::to_string(imported.doc.at("run_id").get<int64_t>()), "--json"}, dir,
      300);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("kind"), "crash");
  EXPECT_EQ(cli.doc.at("rank"), 1);
  EXPECT_EQ(cli.doc.at("host"), "y") << cli.doc.dump();
}

// A run made with another trainer build (a commit's worktree build, a wrapper) replays with it
// when no --trainer is given: with the installed one its failure "did not reproduce". Gone, it
// is named, and repro of its finding says so too.
TEST(IsolateRun, ARunsOwnTrainerBuildRunsItsReplays) {
  const std::string dir = make_temp_dir("isolate-run-trainer");
  const std::string build = dir + "/other-build";
  std::filesystem::copy_file(FAULTLINE_TRAIN_BIN, build);
  std::filesystem::permissions(build, std::filesystem::perms::owner_all);
  const std::vector<std::string> common = {
      "--db",        dir + "/faultline.db",
      "--work-dir",  dir + "/runs",
      "--detectors", FAULTLINE_SOURCE_DIR "/tests/e2e/recipes/no_timing_detectors.toml"};
  std::vector<std::string> trained =
      with_sets({FAULTLINE_BIN, "train", "-c", kMicro, "--json", "--trainer", build},
                {"fault.nan_step=20", "fault.nan_layer=wte", "train.checkpoint_every=10"});
  trained.insert(trained.end(), common.begin(), common.end());
  auto train = cli_of(run_process({trained, {}, 300}));
  ASSERT_EQ(train.result.exit_code, 1) << train.result.output;
  // No --trainer: as a user types it.
  std::vector<std::string> isolate = {FAULTLINE_BIN, "isolate", "--run", "1", "--json"};
  isolate.insert(isolate.end(), common.begin(), common.end());
  auto cli = cli_of(run_process({isolate, {}, 300}));
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_THAT(cli.result.output, HasSubstr("run 1 ran the trainer " + build + ": its replays do"));
  EXPECT_EQ(cli.doc.at("step"), 20);
  std::filesystem::remove(build);
  std::string finding = "F";  // appended, not `"F" + ...`: GCC 12 warns (-Wrestrict) on that
  finding += std::to_string(cli.doc.at("finding_id").get<int64_t>());
  std::vector<std::string> repro = {FAULTLINE_BIN, "repro", finding};
  repro.insert(repro.end(), common.begin(), common.end());
  auto gone = run_process({repro, {}, 300});
  EXPECT_EQ(gone.exit_code, 2) << gone.output;
  EXPECT_THAT(gone.output,
              HasSubstr("run 1 ran the trainer " + build + ", which is no longer there"));
}

// A stored run replays its own recipe and keys: -c or a --set beside --run was dropped without a
// word (the finding was not of the setup meant). Both are named at once; a launcher.* key, which
// places the replays, is taken.
TEST(IsolateRun, ARecipeOrSetBesideRunIsRefusedNotDropped) {
  const std::string dir = make_temp_dir("isolate-run-beside");
  auto cli = faultline_cli({"isolate", "--run", "4", "-c", kMicro, "--set", "optim.lr=5", "--set",
                            "launcher.nodes=1", "--json"},
                           dir);
  EXPECT_EQ(cli.result.exit_code, 2) << cli.result.output;
  const auto& items = cli.doc.at("error").at("items");
  ASSERT_EQ(items.size(), 2u) << cli.doc.dump();
  EXPECT_EQ(items[0].at("what"), "-c " + kMicro + " is not used with --run");
  EXPECT_EQ(items[1].at("what"), "--set optim.lr=5 would not change run 4's replays");
  EXPECT_FALSE(std::filesystem::exists(dir + "/faultline.db"));
}
