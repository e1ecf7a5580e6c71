// End-to-end: faultline on the user's own PyTorch scripts (examples/pytorch/, real Python
// processes with Debian's torch). The script that uses faultline_probe.py gets what the bundled
// trainer gets; the log-only script gets the step and the config culprit, and says why no more.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/cli.hpp"
#include "support/git_fixture.hpp"
#include "support/process.hpp"
#include "trainer/sampler.hpp"

using namespace faultline::testing;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

namespace {

const std::string kExamples = FAULTLINE_SOURCE_DIR "/examples/pytorch";
const std::string kHelper = kExamples + "/train.toml";
const std::string kLogOnly = kExamples + "/log_only.toml";

std::vector<std::string> with_sets(std::vector<std::string> args,
                                   const std::vector<std::string>& overrides) {
  for (const auto& o : overrides) args.insert(args.end(), {"--set", o});
  return args;
}

std::string text_of(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

std::vector<std::string> kinds_of(const nlohmann::json& failures) {
  std::vector<std::string> kinds;
  for (const auto& failure : failures) kinds.push_back(failure.at("kind"));
  return kinds;
}

// The kinds that fail the run: not a warning, such as the teardown_crash torch 1.13 over Gloo now
// and then adds to a DDP run that ended well (it aborts the process as it exits).
std::vector<std::string> failing_kinds_of(const nlohmann::json& failures) {
  std::vector<std::string> kinds;
  for (const auto& failure : failures)
    if (failure.value("severity", "") != "warning") kinds.push_back(failure.at("kind"));
  return kinds;
}

// A sample of train.py's synthetic corpus (1,023 samples, seed 1234, batches of 8: the same
// sampler as faultline-train) first drawn at a step in (from, to], and that step.
std::pair<uint64_t, int64_t> sample_first_drawn_in(int64_t from, int64_t to) {
  faultline::trainer::BatchSampler sampler(1234, 1023, 8);
  std::map<uint64_t, int64_t> first;
  for (int64_t step = 1; step <= to; ++step)
    for (uint64_t sample : sampler.global_batch(step)) first.emplace(sample, step);
  for (const auto& [sample, step] : first)
    if (step > from) return {sample, step};
  ADD_FAILURE() << "no sample first drawn in (" << from << ", " << to << "]";
  return {0, 0};
}

// train.py run as a job would run it, without faultline: the helper's variables set by the job
// script, its metrics and checkpoints (every 50 steps) in `job`.
ProcessResult run_helper_job(const std::string& job, std::vector<std::string> args) {
  std::vector<std::string> argv = {"/usr/bin/python3", kExamples + "/train.py", "--log-every", "0"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process({argv,
                      {{"FAULTLINE_METRICS", job + "/metrics.rank0.jsonl"},
                       {"FAULTLINE_OUT", job},
                       {"FAULTLINE_CHECKPOINT_EVERY", "50"},
                       {"PYTHONPATH", FAULTLINE_SOURCE_DIR "/probes/python"}},
                      300});
}

// One rank of a job, run as its job script runs it: the helper's variables, its stacks to
// FAULTLINE_STACKS, checkpoints every 50 steps in `job`, the torchrun variables.
ProcessSpec job_rank(const std::string& job, int rank, int world, const std::string& port,
                     const std::vector<std::string>& args) {
  ProcessSpec spec{{"/usr/bin/python3", kExamples + "/train.py", "--log-every", "0"},
                   {{"FAULTLINE_METRICS", job + "/metrics.rank{rank}.jsonl"},
                    {"FAULTLINE_STACKS", job + "/stacks.rank{rank}.txt"},
                    {"FAULTLINE_OUT", job},
                    {"FAULTLINE_CHECKPOINT_EVERY", "50"},
                    {"PYTHONPATH", FAULTLINE_SOURCE_DIR "/probes/python"},
                    {"RANK", std::to_string(rank)},
                    {"WORLD_SIZE", std::to_string(world)},
                    {"MASTER_ADDR", "127.0.0.1"},
                    {"MASTER_PORT", port}},
                   300};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  return spec;
}

// That rank, stopped as a job's time limit stops it once `watched` holds `text`: SIGUSR1
// (sbatch --signal=USR1@60), again about every second until the rank's stacks show `where` (a
// rank may still be on its way to a planted hang), then SIGTERM, once `stalled_s` seconds have
// passed since `text` showed (a time limit comes long after a hang began).
ProcessSpec job_rank_stopped_by_time_limit(const std::string& job, int rank, int world,
                                           const std::string& port,
                                           const std::vector<std::string>& args,
                                           const std::string& watched, const std::string& text,
                                           const std::string& where, double stalled_s = 0) {
  ProcessSpec spec = job_rank(job, rank, world, port, args);
  const std::string stacks = job + "/stacks.rank" + std::to_string(rank) + ".txt";
  auto contains = [](const std::string& path, const std::string& part) {
    return text_of(path).find(part) != std::string::npos;
  };
  using Clock = std::chrono::steady_clock;
  spec.signal_when = [=, polls = 0, seen = Clock::time_point()]() mutable {
    if (polls < 0) return 0;
    if (polls == 0 && !contains(watched, text)) return 0;
    if (polls == 0) seen = Clock::now();
    if (contains(stacks, where) &&
        Clock::now() - seen >= std::chrono::duration<double>(stalled_s)) {
      polls = -1;
      return SIGTERM;
    }
    return polls++ % 50 == 0 ? SIGUSR1 : 0;
  };
  return spec;
}

// `faultline import JOB -c train.toml --json` with these --set keys.
Cli import_helper_job(const std::string& dir, const std::string& job,
                      const std::vector<std::string>& sets) {
  return faultline_cli(with_sets({"import", job, "-c", kHelper, "--json"}, sets), dir);
}

// `faultline isolate --run ID ARGS --json` of the run `imported` (or a `train`) stored.
Cli isolate_imported(const std::string& dir, const Cli& imported,
                     const std::vector<std::string>& args = {}) {
  std::vector<std::string> argv = {"isolate", "--run",
                                   std::to_string(imported.doc.at("run_id").get<int64_t>())};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back("--json");
  return faultline_cli(argv, dir, 300);
}

// `isolate --run` of a stored run whose NaN at step 150 follows its checkpoint of step 100: the
// search starts from that checkpoint (one interval, then at most a one-step replay per half
// batch), and `repro` of the finding is bitwise identical. Returns the finding's document.
// `extra_steps`: the determinism check of a replay that cannot match the stored run's bits (a
// 2-rank run replayed on one rank runs 10 of its steps again).
nlohmann::json expect_isolated_from_checkpoint_100(const std::string& dir, const std::string& run,
                                                   int64_t extra_steps = 0) {
  auto cli = faultline_cli({"isolate", "--run", run, "--json"}, dir, 300);
  EXPECT_EQ(cli.result.exit_code, 0) << cli.result.output;
  if (cli.result.exit_code != 0) return cli.doc;
  EXPECT_EQ(cli.doc.at("step"), 150);
  EXPECT_EQ(cli.doc.at("min_scale").at("from_step"), 100);
  EXPECT_LE(cli.doc.at("steps_executed").get<int64_t>(), 50 + 4 + extra_steps) << cli.doc.dump();
  std::string finding = "F";
  finding += std::to_string(cli.doc.at("finding_id").get<int64_t>());
  auto repro = faultline_cli({"repro", finding}, dir, 300);
  EXPECT_EQ(repro.result.exit_code, 0) << repro.result.output;
  EXPECT_THAT(repro.result.output, HasSubstr("bitwise identical: yes"));
  return cli.doc;
}

// Rank 1 of 2 hangs at step 5: the finding names it and quotes its Python stack.
void expect_hang_of_rank_one_with_its_stack(const std::string& recipe, const std::string& dir,
                                            std::vector<std::string> sets = {}) {
  sets.insert(sets.end(), {"fault.hang_rank=1", "fault.hang_step=5"});
  auto cli = faultline_cli(
      with_sets({"train", "-c", recipe, "--ranks", "2", "--step-timeout", "5", "--json"}, sets),
      dir, 300);
  ASSERT_EQ(cli.result.exit_code, 1) << cli.result.output;
  const auto& failures = cli.doc.at("failures");
  ASSERT_EQ(kinds_of(failures), std::vector<std::string>{"hang"}) << cli.doc.dump();
  EXPECT_EQ(failures[0].at("rank"), 1);
  EXPECT_EQ(failures[0].at("step"), 5);
  const std::string detail = failures[0].at("detail");
  EXPECT_THAT(detail, HasSubstr("the stacks of rank 1 (SIGUSR1, from its log)"));
  EXPECT_THAT(detail, HasSubstr("in at_step_start"));  // where train.py's planted hang sleeps
  EXPECT_THAT(detail, ::testing::Not(HasSubstr("in all_reduce")));  // rank 0's, not its own
}

}  // namespace

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

// `isolate -c train.toml --ranks 2 --json` with these keys, expecting a rank_divergence of rank 1
// at step 40 (the planted faults below all strike rank 1 at 40).
Cli isolate_rank_one_at_40(const std::string& dir, const std::vector<std::string>& sets) {
  auto cli = faultline_cli(with_sets({"isolate", "-c", kHelper, "--ranks", "2", "--json"}, sets),
                           dir, 300);
  EXPECT_EQ(cli.result.exit_code, 0) << cli.result.output;
  if (cli.result.exit_code != 0) return cli;
  EXPECT_EQ(cli.doc.at("kind"), "rank_divergence");
  EXPECT_EQ(cli.doc.at("step"), 40);
  EXPECT_EQ(cli.doc.at("rank"), 1);
  return cli;
}

TEST(ExternalTrainer, SilentGradientCorruptionOnTheSecondOfTwoRanksIsNamed) {
  const std::string dir = make_temp_dir("ext-corrupt");
  auto cli =
      isolate_rank_one_at_40(dir, {"fault.corrupt_grad_rank=1", "fault.corrupt_grad_step=40"});
  ASSERT_EQ(cli.result.exit_code, 0);
  // The corrupt gradient went into the allreduce: every rank's parameters stayed equal.
  EXPECT_THAT(cli.doc.at("detail").get<std::string>(),
              ::testing::Not(HasSubstr("parameters already differed")));

  // On screen: measured numbers rounded, and a repro line a shell reads back as the same
  // arguments (the empty --nan-layer is '', not a missing argument).
  std::string finding = "F";  // appended, not "F" + ...: GCC 12 warns on that (-Wrestrict)
  finding += std::to_string(cli.doc.at("finding_id").get<int64_t>());
  auto shown = faultline_cli({"show", finding}, dir);
  ASSERT_EQ(shown.result.exit_code, 0) << shown.result.output;
  EXPECT_THAT(shown.result.output, HasSubstr("--nan-layer '' --poison-sample -1"));
  EXPECT_THAT(shown.result.output, HasSubstr("  where:    in backward\n"));
  EXPECT_THAT(
      shown.result.output,
      ::testing::ContainsRegex("rank   1  \\S+ +odd +distance [0-9.e-]+ +step [0-9]+\\.[0-9]{2} "
                               "ms, data [0-9]+\\.[0-9]{2} ms"));
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

TEST(ExternalTrainer, LogOnlyScriptGetsTheStepAndTheConfigCulpritAndSaysWhyNoModule) {
  const std::string dir = make_temp_dir("ext-log");
  auto smoke = faultline_cli({"smoke", "-c", kLogOnly, "--json"}, dir, 300);
  ASSERT_EQ(smoke.result.exit_code, 0) << smoke.result.output;

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

TEST(ExternalTrainer, BisectCommitsFindsTheCommitThatBrokeALogOnlyScript) {
  GitFixture repo(make_temp_dir("ext-bisect"));
  const std::string script = text_of(kExamples + "/train_log_only.py");
  const std::string root = repo.commit("root", {{"train.py", text_of(kExamples + "/train.py")},
                                                {"train_log_only.py", script},
                                                {"recipe.toml", text_of(kLogOnly)},
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
      HasSubstr("placeholder {optim.lrate} names no key of the recipe (trainer.command.0 at "));
  EXPECT_THAT(cli.result.output, HasSubstr("the regular expression has no 'step' group"));
  std::ofstream(dir + "/r.toml") << "[trainer]\ncommand = [\"python9-no\"]\n[train]\nsteps = 10\n";
  cli = faultline_cli({"train", "-c", dir + "/r.toml"}, dir);
  EXPECT_EQ(cli.result.exit_code, 2) << cli.result.output;
  EXPECT_THAT(cli.result.output, HasSubstr("command not found: python9-no"));
  auto runs = faultline_cli({"runs", "--json"}, dir);
  EXPECT_THAT(runs.result.output, ::testing::Not(HasSubstr("run_id")));
}

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

// Under DDP the same planted fault negates part of rank 1's gradient after DDP averaged it: rank
// 1 applies an update of its own at step 40. Data parallel keeps the ranks' parameters equal, so
// the run's own fingerprints date it: step 40, where they part (not 41, where the next gradients
// show it).
TEST(ExternalTrainer, AnUpdateAppliedDifferentlyOnOneDdpRankIsDatedByItsParameters) {
  const std::string dir = make_temp_dir("ext-ddp-update");
  auto cli = isolate_rank_one_at_40(
      dir, {"train.ddp=1", "fault.corrupt_grad_rank=1", "fault.corrupt_grad_step=40"});
  ASSERT_EQ(cli.result.exit_code, 0);
  EXPECT_EQ(cli.doc.at("phase"), "backward");  // its gradient, after DDP's average, differs
  EXPECT_THAT(cli.doc.at("detail").get<std::string>(),
              HasSubstr("the ranks' parameters parted after step 40 (rank(s) 1 differ from rank "
                        "0's; data parallel keeps them bitwise equal); fed the same batch, rank(s) "
                        "1 compute different local gradients"));
}

// Silent corruption in one rank's optimizer: rank 1 applies the same averaged gradient
// differently at step 40 (its parameters off by 1 % after the update). No gradient differs at
// that step, and from the next one every rank computes from the same wrong average, so a replay
// on one rank could not date it. The ranks' own parameters do: step 40, rank 1, in the optimizer,
// and the repro (a replica check comparing parameters) repeats it bit for bit.
TEST(ExternalTrainer, AnUpdateAppliedDifferentlyWithTheSameGradientsIsFoundInTheOptimizer) {
  const std::string dir = make_temp_dir("ext-update");
  auto cli =
      isolate_rank_one_at_40(dir, {"fault.corrupt_update_rank=1", "fault.corrupt_update_step=40"});
  ASSERT_EQ(cli.result.exit_code, 0);
  EXPECT_EQ(cli.doc.at("phase"), "optimizer");
  EXPECT_THAT(cli.doc.at("detail").get<std::string>(),
              HasSubstr("rank(s) 1 compute the same gradients as the others but end the step "
                        "with other parameters"));
  for (const auto& row : cli.doc.at("rank_evidence"))
    EXPECT_EQ(row.at("verdict"), row.at("rank") == 1 ? "odd" : "agrees") << row.dump();

  std::string finding = "F";
  finding += std::to_string(cli.doc.at("finding_id").get<int64_t>());
  auto repro = faultline_cli({"repro", finding, "--json"}, dir, 300);
  ASSERT_EQ(repro.result.exit_code, 0) << repro.result.output;
  EXPECT_EQ(repro.doc.at("reproduced"), true);
  EXPECT_EQ(repro.doc.at("bitwise_identical"), true);

  // The report's first plot is the evidence: rank 1's parameters leave rank 0's at step 40.
  auto report = faultline_cli({"report", finding, "--html", dir + "/f.html"}, dir);
  ASSERT_EQ(report.result.exit_code, 0) << report.result.output;
  const std::string page = text_of(dir + "/f.html");
  const auto plot = page.find("\"id\":\"params_distance\"");
  ASSERT_NE(plot, std::string::npos);
  EXPECT_LT(plot, page.find("\"id\":\"loss\""));
  EXPECT_THAT(page, HasSubstr("rank 1 vs rank 0"));
}

// A torchrun-style job of train.py on 2 ranks (Gloo) with data parallelism as `more_args` says
// (the recipe keys `more_sets`; default DistributedDataParallel), NaN in blocks.0.attn at step
// 150: imported with its recipe, it is replayed on one rank (no DDP or FSDP there) from the
// checkpoint of step 100, the module is named, and repro repeats it bit for bit.
void expect_job_isolated_on_one_rank(const std::string& dir,
                                     const std::vector<std::string>& more_args = {"--ddp", "1"},
                                     const std::vector<std::string>& more_sets = {"train.ddp=1"}) {
  const std::string job = dir + "/job";
  const std::string port = std::to_string(free_port());
  std::vector<std::string> args = {"--steps", "200",         "--nan-step",
                                   "150",     "--nan-layer", "blocks.0.attn"};
  args.insert(args.end(), more_args.begin(), more_args.end());
  const auto ran =
      run_processes({job_rank(job, 0, 2, port, args), job_rank(job, 1, 2, port, args)});
  // Both halt on the NaN (exit 3); torch 1.13 over Gloo may abort a rank as it exits after
  // that (its end event says nonfinite, and the import below reads it so).
  for (const auto& rank : ran)
    ASSERT_TRUE(rank.exit_code == 3 || rank.signal == SIGABRT) << rank.output;
  std::vector<std::string> sets = {"train.steps=200", "fault.nan_step=150",
                                   "fault.nan_layer=blocks.0.attn"};
  sets.insert(sets.end(), more_sets.begin(), more_sets.end());
  auto imported = import_helper_job(dir, job, sets);
  ASSERT_EQ(imported.result.exit_code, 0) << imported.result.output;
  EXPECT_EQ(kinds_of(imported.doc.at("failures")), std::vector<std::string>{"nonfinite"});
  const auto finding = expect_isolated_from_checkpoint_100(
      dir, std::to_string(imported.doc.at("run_id").get<int64_t>()), 10);
  EXPECT_EQ(finding.value("where", ""), "blocks.0.attn");
  EXPECT_EQ(finding.at("min_scale").at("ranks"), 1) << finding.dump();
}

TEST(ExternalTrainer, ADdpJobIsIsolatedOnOneRankFromItsOwnCheckpoint) {
  expect_job_isolated_on_one_rank(make_temp_dir("ext-ddp"));
}

// ZeRO-1 (torch's ZeroRedundancyOptimizer): each rank holds a share of the AdamW state; the
// helper gathers it on rank 0 for every checkpoint, and the 1-rank replay loads the whole.
TEST(ExternalTrainer, AZeroOneJobIsIsolatedOnOneRankFromItsOwnCheckpoint) {
  expect_job_isolated_on_one_rank(make_temp_dir("ext-zero"), {"--ddp", "1", "--zero", "1"},
                                  {"train.ddp=1", "train.zero=1"});
}

// torch.compile (nanoGPT's order: compiled, then DDP): the checkpoints hold the module inside
// both wrappers, and the 1-rank replay's full-probe step runs the compiled model eagerly, so its
// probes name the module. Needs torch >= 2.6 (torch.compiler.set_stance): Debian bookworm's 1.13
// skips it; it ran on Debian sid's torch 2.14 in a chroot (probes/python/README.md).
TEST(ExternalTrainer, ACompiledDdpJobIsIsolatedOnOneRankFromItsOwnCheckpoint) {
  const auto probe =
      run_process({{"/usr/bin/python3", "-c", "import torch; torch.compiler.set_stance"}, {}, 60});
  if (probe.exit_code != 0) GTEST_SKIP() << "this torch has no torch.compiler.set_stance";
  expect_job_isolated_on_one_rank(make_temp_dir("ext-compiled"),
                                  {"--ddp", "1", "--compile", "aot_eager"},
                                  {"train.ddp=1", "train.compile=aot_eager"});
}

// FSDP2 (fully_shard on each block, then the model): every rank writes its shards of each
// checkpoint into a folder (format 3, torch.distributed.checkpoint), and the 1-rank replay, no
// FSDP there, loads them whole. Needs torch >= 2.6: skips on Debian bookworm's 1.13; it ran
// on Debian sid's torch 2.14 in a chroot (probes/python/README.md).
TEST(ExternalTrainer, AnFsdpJobIsIsolatedOnOneRankFromItsOwnCheckpoint) {
  const auto probe = run_process(
      {{"/usr/bin/python3", "-c", "from torch.distributed.fsdp import fully_shard"}, {}, 60});
  if (probe.exit_code != 0) GTEST_SKIP() << "this torch has no FSDP2 (fully_shard)";
  expect_job_isolated_on_one_rank(make_temp_dir("ext-fsdp"), {"--fsdp", "1"}, {"train.fsdp=1"});
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
    return text_of(job + "/metrics.rank0.jsonl").find(R"("type":"step","step":120,)") !=
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
  for (const auto& entry : fs::directory_iterator(dir + "/runs/run-1"))
    EXPECT_EQ(entry.path().extension(), entry.path().filename() == "rank0.log" ? ".log" : ".jsonl")
        << entry.path();  // no checkpoints: none was asked for
}

// A job of two ranks whose rank 1 never comes back at step 130, stopped from outside as a job's
// time limit stops it: every task gets SIGUSR1 (sbatch --signal=USR1@60: the helper writes its
// stacks to FAULTLINE_STACKS), then SIGTERM, 12 s after the hang began. Rank 0 waits in the
// allreduce of step 130 then. Both end events say SIGTERM stopped them, long after their last step
// records: they had stopped making progress, so the import reads the hang from the collective
// heartbeats, and isolate replays it from the checkpoint of step 100.
TEST(ExternalTrainer, AJobStoppedByItsTimeLimitWhileARankHungIsImportedAsThatRanksHang) {
  const std::string dir = make_temp_dir("ext-import-hang");
  const std::string job = dir + "/job";
  const std::string port = std::to_string(free_port());
  const std::vector<std::string> args = {"--steps", "200",         "--hang-rank",
                                         "1",       "--hang-step", "130"};
  // Stopped once rank 0 waits in step 130's allreduce; rank 1 is then at its planted sleep.
  const std::string rank0 = job + "/metrics.rank0.jsonl";
  const std::string waits = R"("op":"allreduce","step":130,)";
  std::vector<ProcessSpec> ranks = {
      job_rank_stopped_by_time_limit(job, 0, 2, port, args, rank0, waits, "in all_reduce", 12),
      job_rank_stopped_by_time_limit(job, 1, 2, port, args, rank0, waits, "in at_step_start", 12)};
  for (const auto& ran : run_processes(ranks)) ASSERT_EQ(ran.signal, SIGTERM) << ran.output;
  // Rank 0 was blocked in the allreduce, out of Python's reach, and still wrote its end event.
  EXPECT_THAT(text_of(rank0), HasSubstr(R"("status":"terminated")"));

  auto imported =
      import_helper_job(dir, job, {"train.steps=200", "fault.hang_rank=1", "fault.hang_step=130"});
  ASSERT_EQ(imported.result.exit_code, 0) << imported.result.output;
  const auto& failures = imported.doc.at("failures");
  ASSERT_EQ(kinds_of(failures), std::vector<std::string>{"hang"}) << imported.doc.dump();
  EXPECT_EQ(failures[0].at("rank"), 1);
  EXPECT_EQ(failures[0].at("step"), 130);
  const std::string detail = failures[0].at("detail");
  EXPECT_THAT(detail, HasSubstr("rank(s) 1 never entered collective #132 (step 130) that rank(s) "
                                "0 wait in; no rank ended by itself"));
  EXPECT_THAT(detail, HasSubstr("the stacks of rank 1 (from " + job + "/stacks.rank1.txt)"));
  EXPECT_THAT(detail, HasSubstr("in at_step_start"));
  EXPECT_THAT(detail, ::testing::Not(HasSubstr("in all_reduce")));  // rank 0's, not its own

  auto cli = isolate_imported(dir, imported, {"--step-timeout", "5"});
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("kind"), "hang");
  EXPECT_EQ(cli.doc.at("rank"), 1);
  EXPECT_EQ(cli.doc.at("step"), 130);
  EXPECT_EQ(cli.doc.at("min_scale").at("from_step"), 100);
  EXPECT_EQ(cli.doc.at("min_scale").at("ranks"), 2);  // one rank replaying both cannot hang
  EXPECT_LE(cli.doc.at("steps_executed").get<int64_t>(), 2 * 30) << cli.doc.dump();
  // The command to paste starts both ranks, as the trial did.
  EXPECT_THAT(cli.doc.at("repro_command").get<std::string>(),
              HasSubstr("for r in $(seq 0 1); do RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 "));
}

// Rank 1 of a job dies of SIGSEGV at step 130; rank 0, in the allreduce, gets a connection
// error, and the helper's end event says so. The import names both, the rank that stopped writing
// first; isolate replays from the checkpoint of step 100 and names rank 1 with its stacks.
TEST(ExternalTrainer, ARankThatDiedInAJobIsNamedBeforeThePeerItsDeathBroke) {
  const std::string dir = make_temp_dir("ext-import-crash");
  const std::string job = dir + "/job";
  const std::string port = std::to_string(free_port());
  const std::vector<std::string> args = {"--steps", "200",          "--crash-rank",
                                         "1",       "--crash-step", "130"};
  const auto ran =
      run_processes({job_rank(job, 0, 2, port, args), job_rank(job, 1, 2, port, args)});
  ASSERT_EQ(ran[0].exit_code, 1) << ran[0].output;  // the connection error, raised
  ASSERT_EQ(ran[1].signal, SIGSEGV) << ran[1].output;

  auto imported = import_helper_job(
      dir, job, {"train.steps=200", "fault.crash_rank=1", "fault.crash_step=130"});
  ASSERT_EQ(imported.result.exit_code, 0) << imported.result.output;
  const auto& failures = imported.doc.at("failures");
  ASSERT_EQ(kinds_of(failures), (std::vector<std::string>{"crash", "crash"}))
      << imported.doc.dump();
  EXPECT_EQ(failures[0].at("rank"), 1);
  EXPECT_THAT(failures[0].at("detail").get<std::string>(),
              HasSubstr("rank 1 wrote no end event after step 129"));
  EXPECT_EQ(failures[1].at("rank"), 0);
  EXPECT_THAT(failures[1].at("detail").get<std::string>(),
              HasSubstr("rank 0 ended in step 130 with an error: RuntimeError: "));
  EXPECT_THAT(
      failures[1].at("detail").get<std::string>(),
      HasSubstr("; it waited in collective #132 (step 130), which rank(s) 1 never entered"));

  auto cli = isolate_imported(dir, imported);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("kind"), "crash");
  EXPECT_EQ(cli.doc.at("rank"), 1);
  EXPECT_EQ(cli.doc.at("step"), 130);
  EXPECT_EQ(cli.doc.at("min_scale").at("from_step"), 100);
  const std::string detail = cli.doc.at("detail");
  EXPECT_THAT(detail, HasSubstr("rank 1 died of SIGSEGV; its stacks (from its log):"));
  EXPECT_THAT(detail, HasSubstr("in at_step_start"));
  EXPECT_THAT(detail, ::testing::Not(HasSubstr("Extension modules")));

  // The command to paste starts both ranks from the checkpoint, on the port the shell gives:
  // rank 1 dies at step 130 again, and rank 0 sees it go.
  const auto pasted =
      run_process({{"/bin/bash", "-c", cli.doc.at("repro_command").get<std::string>()},
                   {{"MASTER_PORT", std::to_string(free_port())}},
                   300});
  EXPECT_FALSE(pasted.timed_out) << pasted.output;
  EXPECT_THAT(pasted.output, HasSubstr("Segmentation fault"));
  EXPECT_THAT(pasted.output, HasSubstr("RuntimeError"));  // Gloo's words for it vary
}

// The same on one rank: no collective heartbeats. The helper's end event says SIGTERM stopped
// it, 12 s after its last step record (its steps a few ms apart): it had stopped making
// progress, a hang, with the stacks it wrote; the replay from its checkpoint hangs there too.
TEST(ExternalTrainer, AOneRankJobStoppedLongAfterItsLastStepIsAHangItsReplayRepeats) {
  const std::string dir = make_temp_dir("ext-import-hang1");
  const std::string job = dir + "/job";
  auto ran = run_process(job_rank_stopped_by_time_limit(
      job, 0, 1, std::to_string(free_port()),
      {"--steps", "200", "--hang-rank", "0", "--hang-step", "130"}, job + "/metrics.rank0.jsonl",
      R"("type":"step","step":129,)", "in at_step_start", 12));
  ASSERT_EQ(ran.signal, SIGTERM) << ran.output;
  auto imported =
      import_helper_job(dir, job, {"train.steps=200", "fault.hang_rank=0", "fault.hang_step=130"});
  ASSERT_EQ(imported.result.exit_code, 0) << imported.result.output;
  const auto& failures = imported.doc.at("failures");
  ASSERT_EQ(kinds_of(failures), std::vector<std::string>{"hang"}) << imported.doc.dump();
  EXPECT_EQ(failures[0].at("step"), 130);
  const std::string detail = failures[0].at("detail");
  EXPECT_THAT(detail, ::testing::ContainsRegex("rank 0 wrote no step record for 1[0-9] s after "
                                               "step 129 before SIGTERM stopped it"));
  EXPECT_THAT(detail, HasSubstr("in at_step_start"));  // its stacks, from stacks.rank0.txt

  auto cli = isolate_imported(dir, imported);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("kind"), "hang");
  EXPECT_EQ(cli.doc.at("step"), 130);
  EXPECT_EQ(cli.doc.at("min_scale").at("from_step"), 100);
  EXPECT_LE(cli.doc.at("steps_executed").get<int64_t>(), 30) << cli.doc.dump();
  // No --step-timeout: the stored run's steps of a few ms make it the 10 s floor, not 60 s.
  EXPECT_THAT(cli.doc.at("detail").get<std::string>(),
              ::testing::ContainsRegex("no step record for 1[0-9] s"));
  EXPECT_THAT(cli.doc.at("repro_command").get<std::string>(),
              ::testing::StartsWith("env -C " + kExamples));  // one rank: no loop
}

// A 2-rank job its time limit stops while it trains (at step 50 of 200): each rank's end event
// says SIGTERM stopped it (the helper writes it from a thread, so a rank blocked in an allreduce
// writes it too, and still dies of the signal at once). That is no crash: the import passes and
// names the ranks stopped.
TEST(ExternalTrainer, AJobItsTimeLimitStopsWhileItTrainsIsNoCrash) {
  const std::string dir = make_temp_dir("ext-import-timelimit");
  const std::string job = dir + "/job";
  const std::string port = std::to_string(free_port());
  const std::vector<std::string> args = {"--steps", "200"};
  std::vector<ProcessSpec> ranks = {job_rank(job, 0, 2, port, args),
                                    job_rank(job, 1, 2, port, args)};
  const std::string rank0 = job + "/metrics.rank0.jsonl";
  for (auto& rank : ranks)
    rank.signal_when = [rank0, sent = false]() mutable {
      if (sent || text_of(rank0).find(R"("type":"step","step":50,)") == std::string::npos) return 0;
      sent = true;
      return SIGTERM;
    };
  for (const auto& ran : run_processes(ranks)) ASSERT_EQ(ran.signal, SIGTERM) << ran.output;
  auto imported = import_helper_job(dir, job, {"train.steps=200"});
  ASSERT_EQ(imported.result.exit_code, 0) << imported.result.output;
  EXPECT_EQ(imported.doc.at("failures"), nlohmann::json::array()) << imported.doc.dump();
  EXPECT_EQ(imported.doc.at("verdict"), "pass");
  EXPECT_EQ(imported.doc.at("terminated"), nlohmann::json::array({0, 1}));
  auto shown = faultline_cli({"import", job, "-c", kHelper, "--set", "train.steps=200"}, dir);
  EXPECT_THAT(shown.result.output,
              HasSubstr("note: rank(s) 0,1 were stopped by SIGTERM after step"));
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
  EXPECT_THAT(kinds, ::testing::UnorderedElementsAre("nonfinite", "crash"));  // the log stops
  const auto finding = expect_isolated_from_checkpoint_100(
      dir, std::to_string(imported.doc.at("run_id").get<int64_t>()));
  EXPECT_EQ(finding.value("kind", ""), "nonfinite");
  EXPECT_EQ(finding.value("steps_executed", 0), 50) << finding.dump();  // no probes to replay
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
      text_of(dir + "/runs/run-" + std::to_string(huge.doc.at("run_id").get<int64_t>()) +
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

// ranks_from = "torchrun": faultline starts one process, which starts the ranks.
std::string launcher_recipe(const std::string& dir) {
  std::ofstream(dir + "/launched.toml") << replaced(
      replaced(text_of(kHelper), "command = [\"/usr/bin/python3\", \"train.py\",",
               "command = [\"/usr/bin/python3\", \"" FAULTLINE_SOURCE_DIR
               "/tests/e2e/launchers/spawn_ranks.py\", \"--nproc\", \"{ranks}\", "
               "\"--\", \"/usr/bin/python3\", \"train.py\","),
      "[trainer]\n", "[trainer]\nranks_from = \"torchrun\"\nworkdir = \"" + kExamples + "\"\n");
  return dir + "/launched.toml";
}

TEST(ExternalTrainer, ALauncherThatStartsItsOwnRanksIsOneProcessWithARecordStreamPerRank) {
  const std::string dir = make_temp_dir("ext-launcher");
  const std::string recipe = launcher_recipe(dir);
  auto healthy =
      faultline_cli({"train", "-c", recipe, "--ranks", "2", "--steps", "20", "--json"}, dir);
  ASSERT_EQ(healthy.result.exit_code, 0) << healthy.result.output;
  const std::string run_dir =
      dir + "/runs/run-" + std::to_string(healthy.doc.at("run_id").get<int64_t>());
  for (int rank = 0; rank < 2; ++rank) {
    std::string metrics = text_of(run_dir + "/metrics.rank" + std::to_string(rank) + ".jsonl");
    EXPECT_THAT(metrics, HasSubstr("\"world_size\":2")) << rank;
  }
  EXPECT_EQ(healthy.doc.at("steps"), 20);

  // Its ranks share one output: the stacks come from each rank's own file.
  expect_hang_of_rank_one_with_its_stack(recipe, dir);
}
