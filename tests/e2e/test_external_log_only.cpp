// End-to-end: a script that knows nothing about faultline (examples/pytorch/train_log_only.py):
// its log lines are its records, so it gets the step and the config culprit and says why no
// more; its own checkpoints, config file and requeued logs; a commit that broke it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "support/git_fixture.hpp"
#include "support/pytorch_jobs.hpp"
#include "support/recipe_text.hpp"

using namespace faultline::testing;
using ::testing::HasSubstr;

TEST(ExternalTrainer, LogOnlyScriptGetsTheStepAndTheConfigCulpritAndSaysWhyNoModule) {
  const std::string dir = make_temp_dir("ext-log");
  auto smoke = faultline_cli({"smoke", "-c", kLogOnly, "--json"}, dir, 300);
  ASSERT_EQ(smoke.result.exit_code, 0) << smoke.result.output;
  // The script's command names no directory; the store still knows where its log went.
  auto shown = faultline_cli({"show", "1"}, dir);
  EXPECT_THAT(shown.result.output, HasSubstr("run dir:  " + dir + "/runs/run-1\n"));

  auto cli = faultline_cli(with_sets({"isolate", "-c", kLogOnly, "--json", "--baseline-set",
                                      "fault.nan_step=0", "--baseline-set", "train.seed=1234"},
                                     {"fault.nan_step=30", "train.seed=7"}),
                           dir, 300);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("kind"), "nonfinite");
  EXPECT_EQ(cli.doc.at("step"), 30);
  EXPECT_EQ(cli.doc.at("where"), nullptr);
  const std::string skipped = cli.doc.at("skipped").dump();
  EXPECT_THAT(skipped, HasSubstr("a log-only trainer's records are the lines it prints"));
  EXPECT_THAT(skipped, HasSubstr("every trial runs from step 0"));
  const auto& culprit = cli.doc.at("config_culprit");
  ASSERT_EQ(culprit.size(), 1u) << cli.doc.dump();
  EXPECT_EQ(culprit[0].at("key"), "fault.nan_step");
}

// A stored run of a script with its own checkpoints but no way to resume from them is replayed
// from step 0, and the note says why without claiming it has none.
TEST(ExternalTrainer, AStoredRunOfAScriptThatCannotResumeSaysSoNotThatItHasNoCheckpoints) {
  const std::string dir = make_temp_dir("ext-log-noresume");
  std::string recipe = read_text(kExamples + "/log_checkpoints.toml");
  recipe = replaced(recipe, "resume = [\"--resume\", \"{checkpoint}\"]\n", "");
  recipe = replaced(recipe, "\"train_log_only.py\"", "\"" + kExamples + "/train_log_only.py\"");
  std::ofstream(dir + "/noresume.toml") << recipe;
  auto train =
      faultline_cli({"train", "-c", dir + "/noresume.toml", "--steps", "50", "--json", "--set",
                     "fault.nan_step=45", "--set", "faultline.checkpoint_every=20"},
                    dir, 300);
  ASSERT_EQ(train.result.exit_code, 1) << train.result.output;
  auto cli = faultline_cli({"isolate", "--run", "1", "--json"}, dir, 300);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("step"), 45);
  const std::string skipped = cli.doc.at("skipped").dump();
  EXPECT_THAT(skipped,
              HasSubstr("replayed from step 0: the trainer cannot resume from a checkpoint"));
  EXPECT_THAT(skipped, ::testing::Not(HasSubstr("has no checkpoint")));
}

TEST(ExternalTrainer, BisectCommitsFindsTheCommitThatBrokeALogOnlyScript) {
  GitFixture repo(make_temp_dir("ext-bisect"));
  const std::string script = read_text(kExamples + "/train_log_only.py");
  const std::string root = repo.commit("root", {{"train.py", read_text(kExamples + "/train.py")},
                                                {"train_log_only.py", script},
                                                {"recipe.toml", read_text(kLogOnly)},
                                                {"n", "0"}});
  std::vector<std::string> commits = {root};
  for (int k = 1; k <= 6; ++k) {
    std::map<std::string, std::string> files = {{"n", std::to_string(k)}};
    if (k == 4)  // "a faster warm-up": the LR is 1000x what the schedule says
      files["train_log_only.py"] =
          replaced(script, "lr = train.lr_at(step, args)", "lr = 1000 * train.lr_at(step, args)");
    commits.push_back(repo.commit(numbered("c", k), files));
  }
  auto cli = faultline_cli(
      {"bisect", "commits", "--repo", repo.dir(), "--good", root, "--bad", "HEAD", "--recipe",
       "recipe.toml", "--kind", "loss_spike", "--build", "true", "--steps", "20", "--json"},
      make_temp_dir("ext-bisect-run"), 300);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("culprit"), commits[4]);
  EXPECT_EQ(repo.linked_worktrees(), 0);
}

// A script that knows nothing about faultline but prints its checkpoints and resumes from one
// (train_log_only.py --ckpt-every/--resume): its job's log, imported with its recipe, is isolated
// from the script's own checkpoint before the NaN.
// nanoGPT saves every checkpoint over out/ckpt.pt: only the last save's step can be replayed.
TEST(ExternalTrainer, ALogOnlyJobThatSavesOverOneCheckpointFileIsReplayedFromItsLastSave) {
  const std::string dir = make_temp_dir("ext-import-log-ckpt");
  const std::string job = dir + "/job";
  const auto ran = run_process(
      {{"/usr/bin/python3", kExamples + "/train_log_only.py", "--steps", "200", "--nan-step", "150",
        "--out", job, "--ckpt-every", "50", "--ckpt-name", "ckpt.pt"},
       {},
       300});
  ASSERT_EQ(ran.exit_code, 1) << ran.output;
  std::ofstream(job + "/train.log") << ran.output;
  auto imported = faultline_cli(
      with_sets({"import", job + "/train.log", "-c", kExamples + "/log_checkpoints.toml", "--json"},
                {"train.steps=200", "fault.nan_step=150"}),
      dir);
  ASSERT_EQ(imported.result.exit_code, 0) << imported.result.output;
  EXPECT_EQ(imported.doc.at("checkpoints"), 1);  // step 50's state was saved over by step 100's
  EXPECT_EQ(imported.doc.at("saved_over").at(job + "/ckpt.pt"), nlohmann::json::array({50, 100}))
      << imported.doc.dump();
  auto text = faultline_cli(
      with_sets({"import", job + "/train.log", "-c", kExamples + "/log_checkpoints.toml"},
                {"train.steps=200", "fault.nan_step=150"}),
      dir);
  EXPECT_THAT(text.result.output, HasSubstr("/ckpt.pt was saved over at steps 50, 100: it holds "
                                            "step 100's state only"));
  expect_isolated_from_checkpoint_100(dir,
                                      std::to_string(imported.doc.at("run_id").get<int64_t>()));
}

// A log-only job requeued with --open-mode=append: one log, no start event between its parts.
TEST(ExternalTrainer, ALogOnlyJobRequeuedIntoItsOwnLogIsSplitWhereItsStepGoesBack) {
  const std::string dir = make_temp_dir("ext-import-log-requeue");
  const std::string job = dir + "/job";
  const std::vector<std::string> script = {"/usr/bin/python3",
                                           kExamples + "/train_log_only.py",
                                           "--steps",
                                           "200",
                                           "--nan-step",
                                           "150",
                                           "--out",
                                           job,
                                           "--ckpt-every",
                                           "50"};
  auto first = script;
  first.insert(first.end(), {"--stop-after", "130"});  // preempted after step 130
  const auto preempted = run_process({first, {}, 300});
  ASSERT_EQ(preempted.exit_code, 0) << preempted.output;
  auto second = script;
  second.insert(second.end(), {"--resume", job + "/ckpt_000100.pt"});
  const auto requeued = run_process({second, {}, 300});
  ASSERT_EQ(requeued.exit_code, 1) << requeued.output;  // the naive script dies on the NaN
  std::ofstream(job + "/train.log") << preempted.output << requeued.output;

  auto imported = faultline_cli(
      with_sets({"import", job + "/train.log", "-c", kExamples + "/log_checkpoints.toml", "--json"},
                {"train.steps=200", "fault.nan_step=150"}),
      dir);
  ASSERT_EQ(imported.result.exit_code, 0) << imported.result.output;
  EXPECT_EQ(imported.doc.at("last_step"), 150);
  EXPECT_EQ(imported.doc.at("checkpoints"), 2);  // steps 50 and 100, from the first part
  ASSERT_EQ(imported.doc.at("restarts").size(), 1u) << imported.doc.dump();
  const auto& restart = imported.doc.at("restarts")[0];
  EXPECT_EQ(restart.at("stopped_after"), 130);
  EXPECT_EQ(restart.at("resumed_from"), 100);
  EXPECT_EQ(restart.at("rerun"), 30);
  EXPECT_THAT(imported.result.output, ::testing::Not(HasSubstr("error")));
  auto runs = faultline_cli({"runs", "--json"}, dir);
  ASSERT_EQ(runs.result.exit_code, 0) << runs.result.output;
  EXPECT_EQ(runs.doc.at("runs")[0].at("steps_run"), 150) << runs.doc.dump();  // not 180
  EXPECT_EQ(runs.doc.at("runs")[0].at("tokens_per_s"), nullptr) << "its log gives no tokens";
  // An import has no duration of its own: it is not "still running".
  auto shown = faultline_cli({"show", "1"}, dir);
  EXPECT_THAT(shown.result.output,
              HasSubstr("(import, 1 rank(s), 150 of 200 steps, its duration is not known)"));
}

TEST(ExternalTrainer, ALogOnlyJobsLogIsImportedAndIsolatedFromTheScriptsOwnCheckpoints) {
  const std::string dir = make_temp_dir("ext-import-log");
  const std::string job = dir + "/job";
  const auto ran = run_process({{"/usr/bin/python3", kExamples + "/train_log_only.py", "--steps",
                                 "200", "--nan-step", "150", "--out", job, "--ckpt-every", "50"},
                                {},
                                300});
  ASSERT_EQ(ran.exit_code, 1) << ran.output;  // the naive script dies on the NaN
  std::ofstream(job + "/train.log") << ran.output;
  const std::string recipe = kExamples + "/log_checkpoints.toml";

  // A log has no argv to check the recipe against, but its length shows.
  auto short_recipe = faultline_cli({"import", job + "/train.log", "-c", recipe}, dir);
  EXPECT_EQ(short_recipe.result.exit_code, 2) << short_recipe.result.output;
  EXPECT_THAT(short_recipe.result.output,
              HasSubstr("the recipe's run is 100 steps long, but the run in " + job +
                        "/train.log has records up to step 150"));

  auto imported = faultline_cli(with_sets({"import", job + "/train.log", "-c", recipe, "--json"},
                                          {"train.steps=200", "fault.nan_step=150"}),
                                dir);
  ASSERT_EQ(imported.result.exit_code, 0) << imported.result.output;
  EXPECT_EQ(imported.doc.at("checkpoints"), 2);  // steps 50 and 100: it died at 150
  const auto kinds = kinds_of(imported.doc.at("failures"));
  // The NaN, then the stop it explains: the run failed with the NaN (`runs`, its report).
  EXPECT_THAT(kinds, ::testing::ElementsAre("nonfinite", "crash"));
  const auto finding = expect_isolated_from_checkpoint_100(
      dir, std::to_string(imported.doc.at("run_id").get<int64_t>()));
  EXPECT_EQ(finding.value("kind", ""), "nonfinite");
  EXPECT_EQ(finding.value("steps_executed", 0), 50) << finding.dump();  // no probes to replay
  auto again = faultline_cli(with_sets({"import", job + "/train.log", "-c", recipe},
                                       {"train.steps=200", "fault.nan_step=150"}),
                             dir);
  EXPECT_THAT(again.result.output, HasSubstr("note: this log was imported before, as run(s) "));
  // What the script does not declare is to be declared in its recipe, not the trials' copy.
  EXPECT_THAT(finding.value("skipped", nlohmann::json()).dump(),
              HasSubstr("does not declare (trainer.data_fraction_key in " + recipe + ")"));
  // The command to paste writes its checkpoints to a folder of its own, and asks only for what
  // the script declares (no full probes).
  const std::string pasted = finding.value("repro", nlohmann::json()).dump();
  EXPECT_THAT(pasted, HasSubstr(R"("--out","faultline-repro")"));
  EXPECT_THAT(pasted, HasSubstr(R"("FAULTLINE_OUT=faultline-repro")"));
  EXPECT_THAT(pasted, ::testing::Not(HasSubstr("FAULTLINE_PROBE")));
}

TEST(ExternalTrainer, ATrainersOwnConfigFileGetsEachTrialsValues) {
  const std::string dir = make_temp_dir("ext-config-file");
  const std::string recipe = kExamples + "/config_file.toml";
  auto healthy = faultline_cli({"train", "-c", recipe, "--steps", "20", "--json"}, dir);
  ASSERT_EQ(healthy.result.exit_code, 0) << healthy.result.output;
  auto huge = faultline_cli({"train", "-c", recipe, "--set", "lr=1000", "--json"}, dir);
  ASSERT_EQ(huge.result.exit_code, 1) << huge.result.output;
  EXPECT_THAT(kinds_of(huge.doc.at("failures")), ::testing::Contains("loss_spike"));
  // The copy the trainer read is in the run's directory, with the trial's value.
  const auto copy = nlohmann::json::parse(
      read_text(dir + "/runs/run-" + std::to_string(huge.doc.at("run_id").get<int64_t>()) +
                "/train_config.json"),
      nullptr, false);
  ASSERT_FALSE(copy.is_discarded());
  EXPECT_EQ(copy.at("lr"), 1000);
  EXPECT_EQ(copy.at("nan_layer"), "");
}

TEST(ExternalTrainer, ATrainerWhoseLinesNeverMatchIsAnInfrastructureErrorNotAPass) {
  const std::string dir = make_temp_dir("ext-no-records");
  std::ofstream(dir + "/r.toml") << R"([trainer]
command = ["/bin/echo", "epoch 1 done, loss=2.5"]
records = "log"
log_regex = 'step (?P<step>\d+) loss (?P<loss>\S+)'
[train]
steps = 10
)";
  auto cli = faultline_cli({"train", "-c", dir + "/r.toml"}, dir);
  EXPECT_EQ(cli.result.exit_code, 4) << cli.result.output;
  EXPECT_THAT(cli.result.output, HasSubstr("no line of its output matched trainer.log_regex"));
  EXPECT_THAT(cli.result.output, HasSubstr("epoch 1 done, loss=2.5"));
}
