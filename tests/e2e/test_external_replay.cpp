// End-to-end: a run of the user's PyTorch script (examples/pytorch/train.py), stored by
// `faultline train` or imported from a job that ran without faultline, is isolated from its own
// checkpoints: what the checkpoints must hold, requeued jobs, fp16 loss scales, LR spikes and a
// job that trains worse than a reference.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <map>

#include "support/pytorch_jobs.hpp"
#include "support/recipe_text.hpp"

using namespace faultline::testing;
using ::testing::HasSubstr;

// `train` of a 200-step run with checkpoints every 50 and a NaN in blocks.0.attn at step 150
// (with these --set keys too), then `isolate --run` of it: found from the checkpoint of step 100.
void expect_stored_nan_run_isolated_from_checkpoint_100(const std::string& tag,
                                                        std::vector<std::string> sets) {
  const std::string dir = make_temp_dir(tag);
  sets.insert(sets.end(), {"train.steps=200", "fault.nan_step=150", "fault.nan_layer=blocks.0.attn",
                           "faultline.checkpoint_every=50"});
  auto train = faultline_cli(with_sets({"train", "-c", kHelper, "--json"}, sets), dir, 300);
  ASSERT_EQ(train.result.exit_code, 1) << train.result.output;
  const auto finding = expect_isolated_from_checkpoint_100(
      dir, std::to_string(train.doc.at("run_id").get<int64_t>()));
  EXPECT_EQ(finding.value("where", ""), "blocks.0.attn");
}

TEST(ExternalTrainer, AStoredHelperRunIsIsolatedFromItsOwnCheckpointsAndReproduced) {
  expect_stored_nan_run_isolated_from_checkpoint_100("ext-run", {});
}

// The same through two DataLoader workers that augment each sample as it loads (a tenth of its
// tokens turned random, from torch's global generator): the replay from the checkpoint of step
// 100 draws each sample's noise as the run did (run.sample_rng), so it matches the run's records
// bit for bit and no re-run is needed to trust it. Without per-sample seeds the resumed workers
// drew other noise, and the search ended in a `nondeterministic` finding at step 101.
TEST(ExternalTrainer, ARunWhoseWorkersAugmentTheirSamplesReplaysFromItsCheckpointBitForBit) {
  expect_stored_nan_run_isolated_from_checkpoint_100(
      "ext-run-noise", {"train.loader=torch", "train.workers=2", "train.token_noise=0.1"});
}

// A mean teacher (an EMA of the weights the loss also matches) is state outside the model and
// the optimizer: given to run.start(state=...), the checkpoints hold it and the replay from the
// checkpoint of step 100 matches the run bit for bit.
TEST(ExternalTrainer, ARunWithAnEmaTeacherInItsCheckpointsReplaysFromThemBitForBit) {
  expect_stored_nan_run_isolated_from_checkpoint_100("ext-run-teacher", {"train.ema_teacher=0.99"});
}

// Left out of the checkpoints, the resumed teacher starts over: the replay parts from the run at
// step 101, the first step after the checkpoint, and the finding says what that means.
TEST(ExternalTrainer, ATeacherLeftOutOfTheCheckpointsIsNamedAsStateTheyLack) {
  const std::string dir = make_temp_dir("ext-run-unsaved");
  auto train =
      faultline_cli(with_sets({"train", "-c", kHelper, "--json"},
                              {"train.steps=200", "train.ema_teacher=0.99", "fault.ema_unsaved=1",
                               "fault.nan_step=150", "fault.nan_layer=blocks.0.attn",
                               "faultline.checkpoint_every=50", "train.determinism=warn"}),
                    dir, 300);
  ASSERT_EQ(train.result.exit_code, 1) << train.result.output;
  auto cli = isolate_imported(dir, train);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("kind"), "nondeterministic");
  EXPECT_EQ(cli.doc.at("step"), 101);
  EXPECT_THAT(cli.doc.at("detail").get<std::string>(),
              HasSubstr("the first step after the checkpoint of step 100 already differs: the "
                        "checkpoint does not hold everything the steps depend on"));
  // The script ran with determinism="warn" too: the finding quotes what its start event said
  // stays nondeterministic, the other suspect.
  EXPECT_THAT(cli.doc.at("detail").get<std::string>(),
              HasSubstr("; the trainer said this stays nondeterministic: determinism=\"warn\""));
}

// A trainer that declares `resume` but trains from step 1 when asked to resume (here a wrapper
// that drops FAULTLINE_RESUME, as a job script that does not pass it on would): the replay from
// the checkpoint of step 20 claimed steps 21..30 and made a finding of its own run from step 1.
// It is bad input naming the checkpoint and the step the replay began at; a script that does
// not parse is too, not a crash of the run.
TEST(ExternalTrainer, ATrainerThatIgnoresTheCheckpointItWasAskedToResumeFromIsBadInput) {
  const std::string dir = make_temp_dir("ext-ignores-resume");
  std::string recipe =
      replaced(read_text(kHelper), "command = [\"/usr/bin/python3\", \"train.py\",",
               "command = [\"/usr/bin/env\", \"-u\", \"FAULTLINE_RESUME\", "
               "\"/usr/bin/python3\", \"train.py\",");
  recipe = replaced(recipe, "[trainer]\n", "[trainer]\nworkdir = \"" + kExamples + "\"\n");
  std::ofstream(dir + "/forgets.toml") << recipe;
  auto train =
      faultline_cli(with_sets({"train", "-c", dir + "/forgets.toml", "--json"},
                              {"train.steps=30", "fault.nan_step=30",
                               "fault.nan_layer=blocks.0.attn", "faultline.checkpoint_every=10"}),
                    dir, 300);
  ASSERT_EQ(train.result.exit_code, 1) << train.result.output;
  auto cli = isolate_imported(dir, train);
  EXPECT_EQ(cli.result.exit_code, 2) << cli.result.output;
  EXPECT_THAT(cli.doc.dump(), HasSubstr("(the state after step 20), but its first step record is "
                                        "step 1: it ignored the checkpoint"));

  std::ofstream(dir + "/broken.py") << "def f(:\n    pass\n";
  std::ofstream(dir + "/broken.toml") << "[trainer]\ncommand = [\"/usr/bin/python3\", "
                                         "\"broken.py\"]\n[train]\nsteps = 5\n";
  auto broken = faultline_cli({"train", "-c", dir + "/broken.toml"}, dir);
  EXPECT_EQ(broken.result.exit_code, 2) << broken.result.output;
  EXPECT_THAT(broken.result.output, HasSubstr("did not start: its script does not parse:"));
  EXPECT_THAT(broken.result.output, HasSubstr("SyntaxError"));
}

// A job that ran train.py without faultline (the helper's variables set by its script, as on a
// cluster): imported with its recipe, it is isolated from its own checkpoints.
TEST(ExternalTrainer, AHelperRunStartedWithoutFaultlineIsImportedWithItsRecipeAndIsolated) {
  const std::string dir = make_temp_dir("ext-import-job");
  const std::string job = dir + "/job/out";  // the helper makes the folder the job names
  const auto ran =
      run_helper_job(job, {"--steps", "200", "--nan-step=150", "--nan-layer", "blocks.0.attn"});
  ASSERT_EQ(ran.exit_code, 3) << ran.output;  // halted on the NaN

  // Without its recipe: stored and judged, but faultline cannot launch the script again.
  auto bare = faultline_cli({"import", job}, dir);
  ASSERT_EQ(bare.result.exit_code, 0) << bare.result.output;
  EXPECT_THAT(bare.result.output, HasSubstr("is not faultline-train, and no recipe was given"));
  EXPECT_THAT(bare.result.output, HasSubstr("next: faultline import " + job + " -c RECIPE"));
  auto refused = faultline_cli({"isolate", "--run", "1"}, dir);
  EXPECT_EQ(refused.result.exit_code, 2) << refused.result.output;
  EXPECT_THAT(refused.result.output,
              HasSubstr("run 1 cannot be launched again: it was imported without a recipe"));

  // The recipe as it is does not describe the run: every differing key is named at once.
  auto wrong = faultline_cli({"import", job, "-c", kHelper}, dir);
  EXPECT_EQ(wrong.result.exit_code, 2) << wrong.result.output;
  EXPECT_THAT(wrong.result.output,
              HasSubstr("train.steps = 100 is passed as --steps, but the run had 200"));
  EXPECT_THAT(wrong.result.output, HasSubstr("fault.nan_step = 0 is passed as --nan-step, but "
                                             "the run had 150"));  // from --nan-step=150
  EXPECT_THAT(wrong.result.output, HasSubstr("--set train.steps=200 --set fault.nan_step=150 --set "
                                             "fault.nan_layer=blocks.0.attn"));

  auto imported = import_helper_job(
      dir, job, {"train.steps=200", "fault.nan_step=150", "fault.nan_layer=blocks.0.attn"});
  ASSERT_EQ(imported.result.exit_code, 0) << imported.result.output;
  EXPECT_EQ(imported.doc.at("config"), "recipe");
  EXPECT_EQ(imported.doc.at("earlier_imports"), nlohmann::json::array({1}));  // the bare import
  // Judged with the recipe's warm-up: the LR rising over steps 1..10 is no anomaly.
  EXPECT_EQ(kinds_of(imported.doc.at("failures")), std::vector<std::string>{"nonfinite"});
  const auto finding = expect_isolated_from_checkpoint_100(
      dir, std::to_string(imported.doc.at("run_id").get<int64_t>()));
  EXPECT_EQ(finding.value("where", ""), "blocks.0.attn");
}

// Training that goes wrong without a NaN, in a job: the LR multiplied by 300 at step 150 makes
// the loss jump at 151. Imported with its recipe, the cause is found from the checkpoint of step
// 100 in one replay: the LR anomaly at step 150, before the loss spike it causes.
TEST(ExternalTrainer, AnLrSpikeInAHelperJobIsFoundFromItsCheckpointBeforeTheLossSpike) {
  const std::string dir = make_temp_dir("ext-import-spike");
  const std::string job = dir + "/job";
  const auto ran =
      run_helper_job(job, {"--steps", "200", "--lr-spike-step", "150", "--lr-spike-factor", "300"});
  ASSERT_EQ(ran.exit_code, 0) << ran.output;  // nothing non-finite: the script finishes
  auto imported = import_helper_job(
      dir, job, {"train.steps=200", "fault.lr_spike_step=150", "fault.lr_spike_factor=300"});
  ASSERT_EQ(imported.result.exit_code, 0) << imported.result.output;
  EXPECT_THAT(kinds_of(imported.doc.at("failures")), ::testing::Contains("loss_spike"));
  auto cli = isolate_imported(dir, imported);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("kind"), "lr_anomaly");
  EXPECT_EQ(cli.doc.at("step"), 150);
  EXPECT_EQ(cli.doc.at("where"), "lr");
  EXPECT_EQ(cli.doc.at("min_scale").at("from_step"), 100);
  EXPECT_EQ(cli.doc.at("steps_executed"), 50) << cli.doc.dump();
}

// fp16 with a dynamic loss scaler: three overflowing steps are the scaler's to skip (a run that
// passes); gradients that overflow for good from step 130 of a job make the scaler halve its
// scale below 1 by step 147 while the script trains on. Imported, that is a nonfinite failure
// dated by the first skip; isolate finds it from the checkpoint of step 100, repro repeats it and
// the report says the loss scale collapsed, not that the model made a NaN.
TEST(ExternalTrainer, AnFp16JobsLossScaleThatCollapsesIsDatedByItsFirstSkippedStep) {
  const std::string dir = make_temp_dir("ext-fp16");
  auto skips = faultline_cli(
      with_sets({"train", "-c", kHelper, "--json"},
                {"train.precision=fp16", "fault.overflow_step=20", "fault.overflow_steps=3"}),
      dir, 300);
  ASSERT_EQ(skips.result.exit_code, 0) << skips.result.output;
  EXPECT_EQ(skips.doc.at("failures"), nlohmann::json::array()) << skips.doc.dump();
  EXPECT_EQ(skips.doc.at("skipped_steps"), 3);

  const std::string job = dir + "/job";
  const auto ran = run_helper_job(job, {"--steps", "200", "--precision", "fp16", "--overflow-step",
                                        "130", "--overflow-steps", "1000"});
  ASSERT_EQ(ran.exit_code, 0) << ran.output;  // the scaler skips every step to the end
  auto imported = import_helper_job(dir, job,
                                    {"train.steps=200", "train.precision=fp16",
                                     "fault.overflow_step=130", "fault.overflow_steps=1000"});
  ASSERT_EQ(imported.result.exit_code, 0) << imported.result.output;
  const auto& failures = imported.doc.at("failures");
  ASSERT_EQ(kinds_of(failures), std::vector<std::string>{"nonfinite"}) << imported.doc.dump();
  EXPECT_EQ(imported.doc.at("skipped_steps"), 71);  // 130..200
  EXPECT_EQ(failures[0].at("step"), 130);
  EXPECT_THAT(failures[0].at("detail").get<std::string>(),
              HasSubstr("loss scale 0.5 at step 147 is below 1 after 18 skipped steps"));
  auto cli = isolate_imported(dir, imported);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("kind"), "nonfinite");
  EXPECT_EQ(cli.doc.at("step"), 130);
  EXPECT_EQ(cli.doc.at("min_scale").at("from_step"), 100);
  // From the checkpoint of step 100 to step 147, where the scale fell under the floor; no probes
  // or sample split inside one step of an overflow that every step has.
  EXPECT_LE(cli.doc.at("steps_executed").get<int64_t>(), 2 * 47) << cli.doc.dump();
  std::string finding = "F";  // not "F" + ...: GCC 12 warns of a false overlap (-Wrestrict)
  finding += std::to_string(cli.doc.at("finding_id").get<int64_t>());
  auto repro = faultline_cli({"repro", finding}, dir, 300);
  EXPECT_EQ(repro.result.exit_code, 0) << repro.result.output;
  EXPECT_THAT(repro.result.output, HasSubstr("bitwise identical: yes"));
  // No step made a NaN: the headline says what did happen.
  auto report = faultline_cli({"report", finding}, dir);
  EXPECT_THAT(report.result.output, HasSubstr("The fp16 loss scale collapsed at step 130"));
}

// A job preempted after step 120 and requeued: the second run resumes from the checkpoint of
// step 100 and appends to the same metrics file, then hits the NaN at 150. The import keeps the
// last run of each step, says the job restarted, and isolate replays from that checkpoint.
TEST(ExternalTrainer, ARequeuedJobIsImportedAsItsLastRunOfEachStepAndSaysItRestarted) {
  const std::string dir = make_temp_dir("ext-import-requeue");
  const std::string job = dir + "/job";
  const std::vector<std::string> argv = {"/usr/bin/python3", kExamples + "/train.py",
                                         "--log-every",      "0",
                                         "--steps",          "200",
                                         "--nan-step",       "150",
                                         "--nan-layer",      "blocks.0.attn"};
  const std::map<std::string, std::string> env = {
      {"FAULTLINE_METRICS", job + "/metrics.rank0.jsonl"},
      {"FAULTLINE_OUT", job},
      {"FAULTLINE_CHECKPOINT_EVERY", "50"},
      {"PYTHONPATH", FAULTLINE_SOURCE_DIR "/probes/python"}};
  ProcessSpec first{argv, env, 300};
  first.kill_when = [&] {
    return read_text(job + "/metrics.rank0.jsonl").find(R"("type":"step","step":120,)") !=
           std::string::npos;
  };
  ASSERT_EQ(run_process(first).signal, SIGKILL);
  auto requeued = env;
  requeued["FAULTLINE_RESUME"] = job + "/ckpt-step000100.pt";
  const auto second = run_process({argv, requeued, 300});
  ASSERT_EQ(second.exit_code, 3) << second.output;  // halted on the NaN

  auto imported = import_helper_job(
      dir, job, {"train.steps=200", "fault.nan_step=150", "fault.nan_layer=blocks.0.attn"});
  ASSERT_EQ(imported.result.exit_code, 0) << imported.result.output;
  EXPECT_EQ(kinds_of(imported.doc.at("failures")), std::vector<std::string>{"nonfinite"});
  EXPECT_EQ(imported.doc.at("last_step"), 150);
  ASSERT_EQ(imported.doc.at("restarts").size(), 1u) << imported.doc.dump();
  const auto& restart = imported.doc.at("restarts")[0];
  EXPECT_EQ(restart.at("resumed_from"), 100);
  EXPECT_FALSE(restart.at("ended").get<bool>());
  const int64_t stopped = restart.at("stopped_after");
  EXPECT_GE(stopped, 120);
  EXPECT_EQ(restart.at("rerun"), stopped - 100);
  // One record per step, the second run's: the stored run has 150 steps, not 150 + rerun.
  auto runs = faultline_cli({"runs", "--json"}, dir);
  ASSERT_EQ(runs.result.exit_code, 0) << runs.result.output;
  EXPECT_EQ(runs.doc.at("runs")[0].at("steps_run"), 150) << runs.doc.dump();
  expect_isolated_from_checkpoint_100(dir,
                                      std::to_string(imported.doc.at("run_id").get<int64_t>()));
}

// "This job trains worse than the last good one": both jobs imported with the recipe, the good
// one stored as a reference, the bad one judged against it (a loss_regression, no NaN), and
// isolate, given the healthy run's value of the key that differs, names that key.
TEST(ExternalTrainer, AJobThatTrainsWorseThanAReferenceIsImportedAgainstItAndItsKeyFound) {
  const std::string dir = make_temp_dir("ext-import-regression");
  ASSERT_EQ(run_helper_job(dir + "/good", {"--steps", "200", "--lr", "0.01"}).exit_code, 0);
  ASSERT_EQ(run_helper_job(dir + "/bad", {"--steps", "200", "--lr", "0.0003"}).exit_code, 0);
  auto good =
      faultline_cli({"import", dir + "/good", "-c", kHelper, "--set", "train.steps=200"}, dir);
  ASSERT_EQ(good.result.exit_code, 0) << good.result.output;
  auto reference = faultline_cli({"reference", "add", "healthy", "1"}, dir);
  ASSERT_EQ(reference.result.exit_code, 0) << reference.result.output;
  auto bad = faultline_cli(
      with_sets({"import", dir + "/bad", "-c", kHelper, "--reference", "healthy", "--json"},
                {"train.steps=200", "optim.lr=0.0003"}),
      dir);
  ASSERT_EQ(bad.result.exit_code, 0) << bad.result.output;
  ASSERT_EQ(kinds_of(bad.doc.at("failures")), std::vector<std::string>{"loss_regression"})
      << bad.doc.dump();
  const std::string run = std::to_string(bad.doc.at("run_id").get<int64_t>());

  auto alone = faultline_cli({"isolate", "--run", run}, dir);
  EXPECT_EQ(alone.result.exit_code, 2) << alone.result.output;
  EXPECT_THAT(alone.result.output, HasSubstr("was judged against a reference, and isolate has "
                                             "none (--run); give the known-good setup"));
  auto cli = faultline_cli({"isolate", "--run", run, "--baseline-set", "optim.lr=0.01", "--json"},
                           dir, 300);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("kind"), "loss_regression");
  ASSERT_EQ(cli.doc.at("config_culprit").size(), 1u) << cli.doc.dump();
  EXPECT_EQ(cli.doc.at("config_culprit")[0].at("key"), "optim.lr");
}
