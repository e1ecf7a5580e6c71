// End-to-end: `faultline isolate` on real trainer runs localizes every planted fault and the
// organic ones to the right step, module, samples or config key; a killed isolate resumes
// without repeating finished trials; `repro` of a fresh finding is bitwise identical.
#include <fmt/core.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "store/store.hpp"
#include "support/cli.hpp"
#include "trainer/sampler.hpp"

using namespace faultline::testing;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

const std::string kMicro = FAULTLINE_SOURCE_DIR "/tests/e2e/recipes/micro.toml";
const std::string kTiny = FAULTLINE_SOURCE_DIR "/recipes/train/tiny.toml";

Cli isolate(const std::vector<std::string>& overrides, std::vector<std::string> extra = {},
            const std::string& dir = make_temp_dir("isolate"), const std::string& recipe = kMicro) {
  std::vector<std::string> args = with_sets({"isolate", "-c", recipe, "--json"}, overrides);
  args.insert(args.end(), extra.begin(), extra.end());
  return faultline_cli(args, dir, 300);
}

// micro.toml: seed 7, 1022 samples, batch 8.
faultline::trainer::BatchSampler micro_sampler() {
  return faultline::trainer::BatchSampler(7, 1022, 8);
}

int64_t first_step_drawing(uint64_t sample, int64_t last_step) {
  auto sampler = micro_sampler();
  for (int64_t step = 1; step <= last_step; ++step) {
    auto batch = sampler.global_batch(step);
    if (std::find(batch.begin(), batch.end(), sample) != batch.end()) return step;
  }
  return -1;
}

}  // namespace

TEST(Isolate, NanLayerIsLocalizedToItsStepAndModuleAtOneRank) {
  auto cli = isolate({"dist.ranks=2", "fault.nan_step=12", "fault.nan_layer=blocks.1.mlp"});
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  const auto& doc = cli.doc;
  EXPECT_EQ(doc.at("kind"), "nonfinite");
  EXPECT_EQ(doc.at("step"), 12);
  EXPECT_EQ(doc.at("phase"), "forward");
  EXPECT_EQ(doc.at("where"), "blocks.1.mlp");
  EXPECT_TRUE(doc.at("samples").is_null()) << "every sample shows a NaN layer: none is to blame";
  EXPECT_TRUE(doc.at("config_culprit").is_null());
  EXPECT_EQ(doc.at("min_scale").at("ranks"), 1);
  EXPECT_EQ(doc.at("min_scale").at("steps"), 12);
  EXPECT_LE(doc.at("min_scale").at("data_fraction").get<double>(), 1.0);
  EXPECT_GT(doc.at("trials").get<int>(), 2);
  EXPECT_GT(doc.at("steps_executed").get<int>(), 12);
  ASSERT_TRUE(doc.at("repro").is_array());
  EXPECT_EQ(doc.at("repro").at(0), FAULTLINE_TRAIN_BIN);
  EXPECT_THAT(cli.result.output, HasSubstr("faultline isolate: reproduce"));
}

TEST(Isolate, PoisonSampleIsNamedWithItsShard) {
  const uint64_t poison = micro_sampler().global_batch(9).at(5);
  const int64_t step = first_step_drawing(poison, 9);
  auto cli = isolate({"fault.poison_sample=" + std::to_string(poison)});
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("kind"), "nonfinite");
  EXPECT_EQ(cli.doc.at("step"), step);
  EXPECT_EQ(cli.doc.at("where"), "wte");
  EXPECT_EQ(cli.doc.at("samples"), nlohmann::json::array({poison}));
  EXPECT_EQ(cli.doc.at("shards"),
            nlohmann::json::array({poison < 511 ? "synth-000" : "synth-001"}));
  // The data shrinks only as far as the poisoned sample stays in it.
  EXPECT_GT(cli.doc.at("min_scale").at("data_fraction").get<double>() * 1022, poison);
}

TEST(Isolate, LrSpikeIsAnLrAnomalyAtItsStep) {
  auto cli = isolate({"fault.lr_spike_step=20"});
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("kind"), "lr_anomaly");
  EXPECT_EQ(cli.doc.at("step"), 20);
  EXPECT_EQ(cli.doc.at("phase"), "optimizer");
  EXPECT_EQ(cli.doc.at("where"), "lr");
}

TEST(Isolate, HighLearningRateIsTheConfigCulpritAgainstABaseline) {
  auto cli = isolate({"optim.lr=10", "optim.beta2=0.99"},
                     {"--baseline-set", "optim.lr=3e-3", "--baseline-set", "optim.beta2=0.95"});
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("kind"), "loss_spike");
  ASSERT_EQ(cli.doc.at("config_culprit").size(), 1u) << cli.doc.dump();
  EXPECT_EQ(cli.doc.at("config_culprit").at(0).at("key"), "optim.lr");
  EXPECT_EQ(cli.doc.at("config_culprit").at(0).at("failing"), "10.0");
}

// On micro a huge init only spikes; tiny keeps its gradient norm above 1e3 (see test_smoke).
TEST(Isolate, HugeInitIsTheConfigCulpritOnTiny) {
  auto cli = isolate(
      {"train.steps=20", "model.init_std=10", "schedule.warmup_steps=5"},
      {"--baseline-set", "model.init_std=0.02", "--baseline-set", "schedule.warmup_steps=10"},
      make_temp_dir("isolate-init"), kTiny);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("kind"), "grad_explode");
  ASSERT_EQ(cli.doc.at("config_culprit").size(), 1u) << cli.doc.dump();
  EXPECT_EQ(cli.doc.at("config_culprit").at(0).at("key"), "model.init_std");
}

TEST(Isolate, HealthyRecipeIsNotReproduced) {
  auto cli = isolate({});
  EXPECT_EQ(cli.result.exit_code, 3) << cli.result.output;
  EXPECT_EQ(cli.doc.at("reproduced"), false);
  EXPECT_THAT(cli.doc.at("message").get<std::string>(), HasSubstr("passed"));
}

TEST(Isolate, BadInputIsExitTwoWithTheReason) {
  const std::string dir = make_temp_dir("isolate-bad");
  auto jobs = isolate({"fault.nan_step=3"}, {"--jobs", "0"}, dir);
  EXPECT_EQ(jobs.result.exit_code, 2);
  EXPECT_THAT(jobs.result.output, HasSubstr("faultline: error: --jobs: 0 is not an integer >= 1"));
  auto key = isolate({"optim.lrr=3"}, {}, dir);
  EXPECT_EQ(key.result.exit_code, 2);
  EXPECT_THAT(key.result.output, HasSubstr("did you mean 'optim.lr'"));
  auto baseline = faultline_cli({"bisect", "config", "-c", kMicro, "--set", "optim.lr=10"}, dir);
  EXPECT_EQ(baseline.result.exit_code, 2);
  EXPECT_THAT(baseline.result.output, HasSubstr("needs a baseline"));
  auto same = isolate({"optim.lr=10"}, {"--baseline-set", "optim.lr=10"}, dir);
  EXPECT_EQ(same.result.exit_code, 2);
  EXPECT_THAT(same.result.output, HasSubstr("the baseline computes the same thing"));
  auto runs = faultline_cli({"runs", "--all", "--json"}, dir);
  EXPECT_EQ(runs.doc.at("runs"), nlohmann::json::array())
      << "a same baseline is refused before any trial";
  auto failing = isolate({"optim.lr=10"}, {"--baseline-set", "optim.beta1=0.8"}, dir);
  EXPECT_EQ(failing.result.exit_code, 2);
  EXPECT_THAT(failing.result.output, HasSubstr("the baseline does not pass"));
  auto run = faultline_cli({"isolate", "--run", "999"}, dir);
  EXPECT_EQ(run.result.exit_code, 2);
  EXPECT_THAT(run.result.output, HasSubstr("no run 999"));
}

TEST(Isolate, KilledIsolateResumesWithoutRepeatingFinishedTrials) {
  const uint64_t poison = micro_sampler().global_batch(9).at(5);
  const std::vector<std::string> overrides = {"fault.poison_sample=" + std::to_string(poison)};
  const std::string dir = make_temp_dir("isolate-kill");
  const std::string db = dir + "/faultline.db";
  // Kill it (SIGKILL, no chance to clean up) once three trials are finished and stored.
  auto finished_runs = [&] {
    if (!std::filesystem::exists(db)) return 0;
    int finished = 0;
    try {
      for (const auto& run : faultline::store::Store::open(db).list_runs(-1))
        finished += run.status == faultline::store::RunStatus::Finished;
    } catch (const std::exception&) {
      return 0;  // polled while faultline was still creating the file: nothing finished yet
    }
    return finished;
  };
  auto killed = faultline_cli({"isolate", "-c", kMicro, "--json", "--set", overrides[0]}, dir, 300,
                              [&] { return finished_runs() >= 3; });
  ASSERT_EQ(killed.result.signal, SIGKILL) << killed.result.output;
  const int finished_before = finished_runs();

  auto resumed = isolate(overrides, {}, dir);
  ASSERT_EQ(resumed.result.exit_code, 0) << resumed.result.output;
  auto reference = isolate(overrides);
  ASSERT_EQ(reference.result.exit_code, 0) << reference.result.output;
  for (const char* key : {"kind", "step", "phase", "where", "samples", "shards", "min_scale"})
    EXPECT_EQ(resumed.doc.at(key), reference.doc.at(key)) << key;
  EXPECT_EQ(resumed.doc.at("trials"), reference.doc.at("trials"));
  // Every trial finished before the kill was reused, so the store holds each trial's run once
  // (plus at most the one the kill cut short, now marked interrupted).
  auto store = faultline::store::Store::open(db);
  int finished = 0, interrupted = 0;
  for (const auto& run : store.list_runs(-1)) {
    finished += run.status == faultline::store::RunStatus::Finished;
    interrupted += run.status == faultline::store::RunStatus::Interrupted;
  }
  EXPECT_EQ(finished, reference.doc.at("trials").get<int>());
  EXPECT_GE(finished, finished_before);
  EXPECT_LE(interrupted, 1);
  EXPECT_THAT(resumed.result.output, HasSubstr("stored trial reused"));
}

TEST(Isolate, InterruptedIsolateSaysSoOfItsTrialAndResumes) {
  const std::vector<std::string> overrides = {"train.steps=3000", "fault.nan_step=1500",
                                              "fault.nan_layer=blocks.0.mlp"};
  const std::string dir = make_temp_dir("isolate-interrupt");
  const std::string db = dir + "/faultline.db";
  // Ctrl-C (SIGINT to the process group, trainer included) once the first trial has stored 5
  // steps: it is then far from its end at step 1500, however slow the machine.
  bool sent = false;
  auto interrupted = cli_of(
      run_process({faultline_argv(with_sets({"isolate", "-c", kMicro, "--json"}, overrides), dir),
                   {},
                   300,
                   {},
                   interrupt_past_step(db, 5, sent)}));
  ASSERT_TRUE(sent) << interrupted.result.output;
  EXPECT_EQ(interrupted.result.exit_code, 4) << interrupted.result.output;
  // The trial cut short is reported as interrupted, not with the verdict of its steps so far.
  EXPECT_THAT(interrupted.result.output, HasSubstr("reproduce: trial 1 of ~1: interrupted;"));
  EXPECT_THAT(interrupted.result.output, Not(HasSubstr("reproduce: trial 1 of ~1: run")));
  EXPECT_THAT(interrupted.result.output,
              HasSubstr("faultline isolate: interrupted; finished trials are stored"));
  // With --json the interrupt is still one document on stdout.
  ASSERT_TRUE(interrupted.doc.is_object()) << interrupted.result.output;
  EXPECT_EQ(interrupted.doc.at("error").at("kind"), "interrupted");
  EXPECT_EQ(interrupted.doc.at("error").at("exit_code"), 4);
  EXPECT_EQ(interrupted.doc.at("error").at("items").at(0).at("where"), "faultline isolate");
  auto store = faultline::store::Store::open(db);
  const auto runs = store.list_runs(-1);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].status, faultline::store::RunStatus::Interrupted);

  auto resumed = isolate(overrides, {}, dir);
  ASSERT_EQ(resumed.result.exit_code, 0) << resumed.result.output;
  EXPECT_EQ(resumed.doc.at("step"), 1500);
  // Each trial's line names its run and what it showed (a bare "fail" read as the phase's).
  EXPECT_THAT(resumed.result.output,
              ::testing::ContainsRegex("reproduce: trial 1 of ~1: run [0-9]+: fail \\(nonfinite at "
                                       "step 1500\\)"));

  // A repro cut short judges nothing: it is not "not reproduced" (exit 3) but interrupted.
  std::string finding = "F";  // appended, not `"F" + ...`: GCC 12 warns (-Wrestrict) on that
  finding += std::to_string(resumed.doc.at("finding_id").get<int64_t>());
  auto repro = cli_of(run_process({faultline_argv({"repro", finding, "--json"}, dir),
                                   {},
                                   300,
                                   {},
                                   interrupt_past_step(db, 5, sent)}));
  ASSERT_TRUE(sent) << repro.result.output;
  EXPECT_EQ(repro.result.exit_code, 4) << repro.result.output;
  ASSERT_TRUE(repro.doc.is_object()) << repro.result.output;
  EXPECT_EQ(repro.doc.at("error").at("kind"), "interrupted");
  EXPECT_THAT(repro.result.output, Not(HasSubstr("NOT reproduced")));
}

TEST(Isolate, ReproOfAFreshFindingIsBitwiseIdentical) {
  const std::string dir = make_temp_dir("isolate-repro");
  auto found = isolate({"fault.nan_step=9", "fault.nan_layer=blocks.0.attn"}, {}, dir);
  ASSERT_EQ(found.result.exit_code, 0) << found.result.output;
  std::string id = "F";
  id += std::to_string(found.doc.at("finding_id").get<int64_t>());
  auto repro = faultline_cli({"repro", id, "--json"}, dir);
  ASSERT_EQ(repro.result.exit_code, 0) << repro.result.output;
  EXPECT_EQ(repro.doc.at("reproduced"), true);
  EXPECT_EQ(repro.doc.at("bitwise_identical"), true);
  EXPECT_TRUE(repro.doc.at("differing_facts").empty());
  // The recipe is untouched: no warning, though the reproduction stops at the failure step and
  // its evidence run did not.
  EXPECT_TRUE(repro.doc.at("recipe_changed").is_null()) << repro.doc.dump();

  auto shown = faultline_cli({"show", id, "--json"}, dir);
  ASSERT_EQ(shown.result.exit_code, 0) << shown.result.output;
  EXPECT_EQ(shown.doc.at("where"), "blocks.0.attn");
  EXPECT_TRUE(shown.doc.at("evidence").at("host").contains("blas_kernel"));
  EXPECT_TRUE(shown.doc.at("evidence").at("host").contains("gemm"));
  auto listed = faultline_cli({"findings", "--json"}, dir);
  ASSERT_EQ(listed.doc.at("findings").size(), 1u);
  EXPECT_EQ(found.doc.at("already_stored"), false);
  // The same search again (its trials from the cache) finds the finding already stored.
  auto again = isolate({"fault.nan_step=9", "fault.nan_layer=blocks.0.attn"}, {}, dir);
  ASSERT_EQ(again.result.exit_code, 0) << again.result.output;
  EXPECT_EQ(again.doc.at("finding_id"), found.doc.at("finding_id"));
  EXPECT_EQ(again.doc.at("already_stored"), true);
  EXPECT_EQ(faultline_cli({"findings", "--json"}, dir).doc.at("findings").size(), 1u);
  auto missing = faultline_cli({"repro", "F99"}, dir);
  EXPECT_EQ(missing.result.exit_code, 2);
  EXPECT_THAT(missing.result.output, HasSubstr("no finding F99"));
  // A bare number is a run everywhere else: `repro 1` is not taken for F1.
  auto bare = faultline_cli({"repro", id.substr(1)}, dir);
  EXPECT_EQ(bare.result.exit_code, 2);
  EXPECT_THAT(bare.result.output,
              HasSubstr("faultline: error: '" + id.substr(1) + "' is a run id, not a finding " +
                        "(FINDING); give " + id));
}

TEST(Isolate, BisectStepsStopsAfterTheStepAndItsTrialsServeIsolate) {
  const std::string dir = make_temp_dir("isolate-axes");
  auto steps = faultline_cli({"bisect", "steps", "-c", kMicro, "--json", "--set",
                              "fault.nan_step=7", "--set", "fault.nan_layer=ln_f"},
                             dir);
  ASSERT_EQ(steps.result.exit_code, 0) << steps.result.output;
  EXPECT_EQ(steps.doc.at("step"), 7);
  EXPECT_EQ(steps.doc.at("where"), "ln_f");
  EXPECT_TRUE(steps.doc.at("samples").is_null());
  auto all = isolate({"fault.nan_step=7", "fault.nan_layer=ln_f"}, {}, dir);
  ASSERT_EQ(all.result.exit_code, 0) << all.result.output;
  EXPECT_GT(all.doc.at("trials").get<int>(), steps.doc.at("trials").get<int>());
  EXPECT_THAT(all.result.output, HasSubstr("stored trial reused"));
  // Its exported trials are its search's, the reused ones (run before it started) included.
  const std::string finding = fmt::format("F{}", all.doc.at("finding_id").get<int64_t>());
  auto trials = faultline_cli({"export", finding, "--what", "trials", "--format", "jsonl"}, dir);
  ASSERT_EQ(trials.result.exit_code, 0) << trials.result.output;
  EXPECT_EQ(std::count(trials.result.output.begin(), trials.result.output.end(), '\n'),
            all.doc.at("trials").get<int>())
      << trials.result.output;
}

TEST(Isolate, NoiseNotDerivedFromTheSeedIsANondeterministicFinding) {
  auto cli = isolate({"fault.nan_step=15", "fault.nan_layer=wte", "fault.nondeterministic=true"});
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("kind"), "nondeterministic");
  EXPECT_EQ(cli.doc.at("step"), 1);
  EXPECT_THAT(cli.doc.at("detail").get<std::string>(), HasSubstr("failed with nonfinite"));
  EXPECT_TRUE(cli.doc.at("where").is_null()) << "no replay search on a nondeterministic run";
}

TEST(Isolate, ParallelTrialsFindTheSameCulprit) {
  const std::vector<std::string> failing = {"optim.lr=10", "optim.beta1=0.8", "optim.eps=1e-6",
                                            "optim.weight_decay=0.05"};
  const std::vector<std::string> baseline = {
      "--baseline-set", "optim.lr=3e-3",  "--baseline-set", "optim.beta1=0.9",
      "--baseline-set", "optim.eps=1e-8", "--baseline-set", "optim.weight_decay=0.1"};
  auto one = isolate(failing, baseline);
  std::vector<std::string> parallel = baseline;
  parallel.insert(parallel.end(), {"--jobs", "3"});
  auto three = isolate(failing, parallel);
  ASSERT_EQ(one.result.exit_code, 0) << one.result.output;
  ASSERT_EQ(three.result.exit_code, 0) << three.result.output;
  EXPECT_EQ(one.doc.at("config_culprit"), three.doc.at("config_culprit"));
  ASSERT_EQ(three.doc.at("config_culprit").size(), 1u) << three.doc.dump();
  EXPECT_EQ(three.doc.at("config_culprit").at(0).at("key"), "optim.lr");
}
