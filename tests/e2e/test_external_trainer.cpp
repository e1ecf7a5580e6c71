// End-to-end: faultline on the user's own PyTorch script (examples/pytorch/train.py, real Python
// processes with Debian's torch) through faultline_probe.py: the smoke gate, a NaN's module, a
// poisoned sample, data stalls, stragglers, hangs, shutdown deaths and a recipe's errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>

#include "support/pytorch_jobs.hpp"

using namespace faultline::testing;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

TEST(ExternalTrainer, HelperScriptPassesTheSmokeGateAndAHugeLrFailsItsFirstRung) {
  const std::string dir = make_temp_dir("ext-smoke");
  auto healthy = faultline_cli({"smoke", "-c", kHelper, "--json"}, dir, 300);
  ASSERT_EQ(healthy.result.exit_code, 0) << healthy.result.output;
  EXPECT_EQ(healthy.doc.at("verdict"), "pass");
  // No data fraction: every rung trains on all of it, and says so.
  EXPECT_THAT(healthy.result.output, HasSubstr("every rung trains on all the data"));

  auto huge = faultline_cli(with_sets({"smoke", "-c", kHelper, "--json"}, {"optim.lr=1000"}), dir);
  ASSERT_EQ(huge.result.exit_code, 1) << huge.result.output;
  const auto& rungs = huge.doc.at("rungs");
  ASSERT_EQ(rungs.size(), 1u);
  EXPECT_THAT(kinds_of(rungs[0].at("failures")), ::testing::Contains("loss_spike"));
}

TEST(ExternalTrainer, HelperScriptNanIsLocalizedToItsStepAndModule) {
  const std::string dir = make_temp_dir("ext-nan");
  auto cli = faultline_cli(with_sets({"isolate", "-c", kHelper, "--json"},
                                     {"fault.nan_step=30", "fault.nan_layer=blocks.1.mlp"}),
                           dir, 300);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("kind"), "nonfinite");
  EXPECT_EQ(cli.doc.at("step"), 30);
  EXPECT_EQ(cli.doc.at("phase"), "forward");
  EXPECT_EQ(cli.doc.at("where"), "blocks.1.mlp");
  EXPECT_EQ(cli.doc.at("samples"), nullptr);  // every sample shows it: no sample to blame
  // The run to the failure, then a one-step replay with full probes and two half batches.
  EXPECT_LE(cli.doc.at("steps_executed").get<int64_t>(), 50) << cli.doc.dump();
}

// isolate of a poisoned sample (first drawn between steps 20 and 40) names its step, wte and it.
void expect_poisoned_sample_named(const std::string& tag, std::vector<std::string> sets) {
  const std::string dir = make_temp_dir(tag);
  const auto [poison, step] = sample_first_drawn_in(20, 40);
  sets.push_back("fault.poison_sample=" + std::to_string(poison));
  auto cli = faultline_cli(with_sets({"isolate", "-c", kHelper, "--json"}, sets), dir, 300);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("step"), step);
  EXPECT_EQ(cli.doc.at("where"), "wte");
  EXPECT_EQ(cli.doc.at("samples"), nlohmann::json::array({poison}));
}

// Activation checkpointing (torch.utils.checkpoint) runs each block's forward again in the
// backward pass, and the recomputed forward must save what the first one saved. The full
// probes' checks run outside autograd, so the step's replay with them names the module; before,
// the replay died in its backward pass and the finding stopped at "loss is nan".
TEST(ExternalTrainer, ANanUnderActivationCheckpointingIsNamedInItsModule) {
  const std::string dir = make_temp_dir("ext-recompute");
  auto cli = faultline_cli(with_sets({"isolate", "-c", kHelper, "--json"},
                                     {"train.activation_checkpointing=1", "fault.nan_step=30",
                                      "fault.nan_layer=blocks.1.mlp"}),
                           dir, 300);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("step"), 30);
  EXPECT_EQ(cli.doc.at("where"), "blocks.1.mlp");
  EXPECT_EQ(cli.doc.at("phase"), "forward");
}

TEST(ExternalTrainer, HelperScriptPoisonedSampleIsNamedByItsIndex) {
  expect_poisoned_sample_named("ext-poison", {});
}

// The same with the micro-batches loaded by a torch DataLoader's worker processes
// (run.data_loader): each replay of the sample search loads only the samples it asks for.
TEST(ExternalTrainer, APoisonedSampleLoadedByDataLoaderWorkersIsNamedByItsIndex) {
  expect_poisoned_sample_named("ext-loader", {"train.loader=torch", "train.workers=2"});
}

// A DataLoader that cannot keep up: one worker, 40 ms a sample (320 ms a micro-batch), a step that
// computes in 5 ms (torch 1.13) to about 80 ms (torch 2.14 on a loaded machine, where 10 ms a
// sample let the worker keep up). The step waits for each micro-batch (s.micro_batches(loader=)
// times the wait as data), and the run is a data stall.
TEST(ExternalTrainer, ADataLoaderThatCannotKeepUpIsADataStall) {
  const std::string dir = make_temp_dir("ext-loader-stall");
  auto cli = faultline_cli(with_sets({"train", "-c", kHelper, "--json"},
                                     {"train.steps=20", "train.loader=torch", "train.workers=1",
                                      "fault.sample_delay_ms=40"}),
                           dir, 300, {}, TimingDetectors::On);
  ASSERT_EQ(cli.result.exit_code, 1) << cli.result.output;
  EXPECT_EQ(kinds_of(cli.doc.at("failures")), std::vector<std::string>{"data_stall"})
      << cli.doc.dump();
}

// A rank on a slower device (it burns 20 ms of CPU in each forward pass) in a DDP job: DDP's
// gradient allreduce runs inside the backward pass, so the other rank's wait for it is inside its
// compute and wall times are alike; CPU time names the straggler.
TEST(ExternalTrainer, ASlowRankUnderDdpIsAStragglerByItsCpuTime) {
  const std::string dir = make_temp_dir("ext-ddp-straggler");
  auto cli = faultline_cli(
      with_sets({"train", "-c", kHelper, "--ranks", "2", "--json"},
                {"train.steps=30", "train.ddp=1", "fault.slow_rank=1", "fault.slow_ms=20"}),
      dir, 300, {}, TimingDetectors::On);
  ASSERT_EQ(cli.result.exit_code, 1) << cli.result.output;
  const auto& failures = cli.doc.at("failures");
  ASSERT_EQ(failing_kinds_of(failures), std::vector<std::string>{"straggler"}) << cli.doc.dump();
  EXPECT_EQ(failures[0].at("rank"), 1);
  EXPECT_THAT(failures[0].at("detail").get<std::string>(), HasSubstr("median CPU time"));
}

// A rank that dies of SIGABRT as it shuts down, after its end event said training ended well
// (torch processes do this now and then when a process group is torn down at exit while a peer
// is still connected): every step trained and every record is whole, so it is a warning, not a
// crash in step 21 that isolate would search for.
TEST(ExternalTrainer, ARankThatDiesAsItShutsDownAfterTrainingEndedIsAWarning) {
  const std::string dir = make_temp_dir("ext-teardown");
  auto cli = faultline_cli(with_sets({"train", "-c", kHelper, "--ranks", "2", "--json"},
                                     {"train.steps=20", "fault.abort_after_end_rank=1"}),
                           dir, 300);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("verdict"), "pass");
  const auto& failures = cli.doc.at("failures");
  ASSERT_EQ(kinds_of(failures), std::vector<std::string>{"teardown_crash"}) << cli.doc.dump();
  EXPECT_EQ(failures[0].at("severity"), "warning");
  EXPECT_EQ(failures[0].at("rank"), 1);
  EXPECT_EQ(failures[0].at("step"), nullptr);
  EXPECT_THAT(failures[0].at("detail").get<std::string>(),
              HasSubstr("rank 1 died of SIGABRT after its end event said training ended well "
                        "(status ok, after step 20)"));
  auto report = faultline_cli({"report", std::to_string(cli.doc.at("run_id").get<int64_t>())}, dir);
  EXPECT_THAT(report.result.output, HasSubstr("pass after 20 steps on 2 ranks"));
  EXPECT_THAT(report.result.output,
              HasSubstr("warning: A rank died as it shut down, after training ended (rank 1)"));
}

TEST(ExternalTrainer, ARankThatDiesAsItExitsAfterItHaltedIsTheHaltNotACrash) {
  // Both ranks halt on the NaN of step 20 and write their end events; rank 1 then dies of
  // SIGABRT at exit. The run's failure is the NaN, never a crash in step 21. faultline stops a
  // run at its first fatal record, so rank 1 is either killed by it first (no warning) or seen
  // to die of its own (a teardown_crash warning); which one is a race, and both are right
  // (tests/unit/core/test_teardown_deaths.cpp decides each case).
  const std::string dir = make_temp_dir("ext-teardown-halt");
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto cli =
        faultline_cli(with_sets({"train", "-c", kHelper, "--ranks", "2", "--json"},
                                {"train.steps=30", "fault.nan_step=20",
                                 "fault.nan_layer=blocks.0.attn", "fault.abort_after_end_rank=1"}),
                      dir, 300);
    ASSERT_EQ(cli.result.exit_code, 1) << cli.result.output;
    const auto& failures = cli.doc.at("failures");
    const auto kinds = kinds_of(failures);
    ASSERT_THAT(kinds, ::testing::Contains("nonfinite")) << cli.doc.dump();
    EXPECT_THAT(kinds, ::testing::Not(::testing::Contains("crash"))) << cli.doc.dump();
    for (const auto& failure : failures) {
      if (failure.at("kind") == "nonfinite") {
        EXPECT_EQ(failure.at("step"), 20);
      }
      if (failure.at("kind") != "teardown_crash") continue;
      EXPECT_EQ(failure.at("rank"), 1);
      EXPECT_THAT(failure.at("detail").get<std::string>(),
                  HasSubstr("rank 1 died of SIGABRT after its end event said it halted "
                            "(status nonfinite, after step 20)"));
    }
  }
}

TEST(ExternalTrainer, HelperScriptConfigCulpritIsFoundAgainstABaseline) {
  const std::string dir = make_temp_dir("ext-config");
  auto cli = faultline_cli(with_sets({"isolate", "-c", kHelper, "--json", "--baseline-set",
                                      "optim.lr=1e-2", "--baseline-set", "optim.weight_decay=0.1"},
                                     {"optim.lr=1000", "optim.weight_decay=0.2"}),
                           dir, 300);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  const auto& culprit = cli.doc.at("config_culprit");
  ASSERT_EQ(culprit.size(), 1u) << cli.doc.dump();
  EXPECT_EQ(culprit[0].at("key"), "optim.lr");
}

TEST(ExternalTrainer, AHangOnTwoRanksNamesTheRankAndShowsItsPythonStack) {
  expect_hang_of_rank_one_with_its_stack(kHelper, make_temp_dir("ext-hang"));
  // The model in DistributedDataParallel: rank 0 waits inside DDP's allreduce in its backward
  // pass, whose heartbeat rank 1 never wrote.
  expect_hang_of_rank_one_with_its_stack(kHelper, make_temp_dir("ext-hang-ddp"), {"train.ddp=1"});
}

TEST(ExternalTrainer, AScriptThatCannotImportItsModulesIsAnInfrastructureError) {
  const std::string dir = make_temp_dir("ext-import");
  std::ofstream(dir + "/r.toml")
      << "[trainer]\ncommand = [\"/usr/bin/python3\", \"-c\", \"import no_such_module_fl\"]\n"
         "[train]\nsteps = 10\n";
  auto cli = faultline_cli({"train", "-c", dir + "/r.toml"}, dir);
  EXPECT_EQ(cli.result.exit_code, 4) << cli.result.output;
  EXPECT_THAT(cli.result.output, HasSubstr("could not import a module before training"));
  EXPECT_THAT(cli.result.output, HasSubstr("No module named 'no_such_module_fl'"));
}

TEST(ExternalTrainer, AnOpWithoutADeterministicKernelIsTheSetUpsProblemNamedWithTheWayOn) {
  // The helper asks torch for deterministic kernels, so replays from checkpoints are bitwise; an
  // op that has none (put_ with a repeated index, as F.interpolate's backward on CUDA) would run
  // without faultline. Not a crash of the run to search: exit 4, naming the op and the option.
  const std::string dir = make_temp_dir("ext-nondeterministic-op");
  auto strict = faultline_cli(
      with_sets({"train", "-c", kHelper}, {"train.steps=6", "fault.nondeterministic_op_step=4"}),
      dir, 300);
  EXPECT_EQ(strict.result.exit_code, 4) << strict.result.output;
  EXPECT_THAT(strict.result.output, HasSubstr("rank 0 exited 2 after step 3"));
  EXPECT_THAT(strict.result.output,
              HasSubstr("step 4: put_ has no deterministic implementation on this device"));
  EXPECT_THAT(strict.result.output, HasSubstr("determinism=\"warn\""));
  auto warn = faultline_cli(
      with_sets({"train", "-c", kHelper, "--json"},
                {"train.steps=6", "fault.nondeterministic_op_step=4", "train.determinism=warn"}),
      dir, 300);
  ASSERT_EQ(warn.result.exit_code, 0) << warn.result.output;
  EXPECT_EQ(warn.doc.at("verdict"), "pass");
}

TEST(ExternalTrainer, BadRecipesAreExitTwoWithTheKeyAndNothingIsStored) {
  const std::string dir = make_temp_dir("ext-bad");
  std::ofstream(dir + "/r.toml") << R"([trainer]
command = ["/usr/bin/python3", "train.py", "--lr", "{optim.lrate}"]
records = "log"
log_regex = 'loss (?P<loss>\S+)'
[optim]
lr = 3e-4
[train]
steps = 10
)";
  auto cli = faultline_cli({"smoke", "-c", dir + "/r.toml"}, dir);
  EXPECT_EQ(cli.result.exit_code, 2) << cli.result.output;
  EXPECT_THAT(
      cli.result.output,
      HasSubstr("placeholder {optim.lrate} names no key of the recipe (trainer.command.3 at "));
  EXPECT_THAT(cli.result.output, HasSubstr("the regular expression has no 'step' group"));
  std::ofstream(dir + "/r.toml") << "[trainer]\ncommand = [\"python9-no\"]\n[train]\nsteps = 10\n";
  cli = faultline_cli({"train", "-c", dir + "/r.toml"}, dir);
  EXPECT_EQ(cli.result.exit_code, 2) << cli.result.output;
  EXPECT_THAT(cli.result.output, HasSubstr("command not found: python9-no"));
  auto runs = faultline_cli({"runs", "--json"}, dir);
  EXPECT_THAT(runs.result.output, ::testing::Not(HasSubstr("run_id")));
}

// faultline run from a job script that exported the helper's variables for the job itself: a
// trial gets the variables it asks for and none of the shell's (that FAULTLINE_RESUME made
// every trial resume from another run's checkpoint, and FAULTLINE_STOP_AFTER cut it short).
TEST(ExternalTrainer, ATrialGetsOnlyTheVariablesItAsksNotTheOnesAJobScriptExported) {
  const std::string dir = make_temp_dir("ext-job-env");
  const std::map<std::string, std::string> exported = {
      {"FAULTLINE_RESUME", dir + "/no-such-checkpoint.pt"},
      {"FAULTLINE_STOP_AFTER", "3"},
      {"FAULTLINE_CHECKPOINT_EVERY", "7"},
      {"FAULTLINE_METRICS", dir + "/job-metrics.rank{rank}.jsonl"}};
  for (const auto& [name, value] : exported) setenv(name.c_str(), value.c_str(), 1);
  auto cli = faultline_cli({"train", "-c", kHelper, "--set", "train.steps=20", "--json"}, dir, 300);
  for (const auto& [name, value] : exported) unsetenv(name.c_str());
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("steps"), 20);  // from step 1, to the end
  EXPECT_FALSE(fs::exists(dir + "/job-metrics.rank0.jsonl"));
  for (const auto& entry : fs::directory_iterator(dir + "/runs/run-1")) {
    if (entry.path().filename() == ".faultline-run.json") continue;  // whose run it is
    EXPECT_EQ(entry.path().extension(), entry.path().filename() == "rank0.log" ? ".log" : ".jsonl")
        << entry.path();  // no checkpoints: none was asked for
  }
}

// A script that writes the protocol itself with json.dumps: a NaN loss comes out as a bare NaN,
// which is not JSON. Read as malformed, the NaN step was dropped and the run passed; it is the
// non-finite step it is.
TEST(ExternalTrainer, ANanLossAsJsonDumpsWritesItFailsTheRunAtItsStep) {
  const std::string dir = make_temp_dir("ext-json-dumps-nan");
  std::ofstream(dir + "/dumps.py") << R"(import json, os
with open(os.environ["FAULTLINE_METRICS"], "w") as out:
    for step in range(1, 7):
        loss = float("nan") if step == 4 else 2.0 - 0.01 * step
        out.write(json.dumps({"v": 1, "type": "step", "rank": 0, "t": 0.01 * step,
                              "step": step, "loss": loss, "grad_norm": 1.0}) + "\n")
)";
  std::ofstream(dir + "/dumps.toml") << R"([trainer]
command = ["/usr/bin/python3", "dumps.py"]
[train]
steps = 6
)";
  auto cli = faultline_cli({"train", "-c", dir + "/dumps.toml", "--json"}, dir);
  EXPECT_EQ(cli.result.exit_code, 1) << cli.result.output;
  EXPECT_EQ(cli.doc.at("verdict"), "fail");
  EXPECT_EQ(cli.doc.at("malformed").size(), 0u) << cli.doc.dump();
  ASSERT_FALSE(cli.doc.at("failures").empty()) << cli.doc.dump();
  EXPECT_EQ(cli.doc.at("failures").at(0).at("kind"), "nonfinite");
  EXPECT_EQ(cli.doc.at("failures").at(0).at("step"), 4);
}
