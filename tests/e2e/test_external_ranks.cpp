// End-to-end: the user's PyTorch script (examples/pytorch/train.py) on several ranks: a rank that
// computes or applies its update differently is named, DDP, ZeRO-1, compiled and FSDP jobs are
// replayed on one rank from their own checkpoints, and a launcher may start the ranks itself.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <thread>

#include "support/pytorch_jobs.hpp"
#include "support/recipe_text.hpp"

using namespace faultline::testing;
using ::testing::HasSubstr;

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
  EXPECT_THAT(shown.result.output, HasSubstr("  hint:     one rank computes other numbers"));
  EXPECT_THAT(
      shown.result.output,
      ::testing::ContainsRegex("rank   1  \\S+ +odd +distance [0-9.e-]+ +step [0-9]+\\.[0-9]{2} "
                               "ms, data [0-9]+\\.[0-9]{2} ms"));
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
  const std::string page = read_text(dir + "/f.html");
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

// ranks_from = "torchrun": faultline starts one process, which starts the ranks.
TEST(ExternalTrainer, ALauncherThatStartsItsOwnRanksIsOneProcessWithARecordStreamPerRank) {
  const std::string dir = make_temp_dir("ext-launcher");
  const std::string recipe = helper_launched_per_node(dir);
  auto healthy =
      faultline_cli({"train", "-c", recipe, "--ranks", "2", "--steps", "20", "--json"}, dir);
  ASSERT_EQ(healthy.result.exit_code, 0) << healthy.result.output;
  const std::string run_dir =
      dir + "/runs/run-" + std::to_string(healthy.doc.at("run_id").get<int64_t>());
  for (int rank = 0; rank < 2; ++rank) {
    std::string metrics = read_text(run_dir + "/metrics.rank" + std::to_string(rank) + ".jsonl");
    EXPECT_THAT(metrics, HasSubstr("\"world_size\":2")) << rank;
  }
  EXPECT_EQ(healthy.doc.at("steps"), 20);

  // Its ranks share one output: the stacks come from each rank's own file.
  expect_hang_of_rank_one_with_its_stack(recipe, dir);

  // Rank 1 dies (SIGSEGV) and the launcher exits with rank 0's code, rank 0 having lost its
  // peer: the crash is rank 1's, the one that wrote no end event.
  auto crashed =
      faultline_cli(with_sets({"train", "-c", recipe, "--ranks", "2", "--json"},
                              {"train.steps=10", "fault.crash_rank=1", "fault.crash_step=5"}),
                    dir);
  EXPECT_EQ(crashed.result.exit_code, 1) << crashed.result.output;
  ASSERT_EQ(failing_kinds_of(crashed.doc.at("failures")), std::vector<std::string>{"crash"})
      << crashed.doc.dump();
  const auto& crash = crashed.doc.at("failures")[0];
  EXPECT_EQ(crash.at("rank"), 1);
  EXPECT_EQ(crash.at("step"), 5);
  EXPECT_THAT(crash.at("detail").get<std::string>(),
              HasSubstr("rank 1 stopped after step 4 without an end event; the launcher of ranks "
                        "0-1 exited with code"));
}

// torchrun 2.x starts each rank in a session of its own and dies of SIGUSR1: the stack signal
// goes to its ranks, not to it, and the ranks of a hung trial are killed with it, not left
// running once their launcher is gone.
TEST(ExternalTrainer, ALauncherThatPutsItsRanksInSessionsOfTheirOwnLeavesNoneBehind) {
  const std::string dir = make_temp_dir("ext-sessions");
  const std::string recipe = helper_launched_per_node(dir, {"--sessions"});
  expect_hang_of_rank_one_with_its_stack(recipe, dir);
  EXPECT_EQ(processes_left_mentioning(dir + "/runs/"), 0) << "processes of the hung trial";

  // It exits 1 whatever its ranks did: ranks that halted on a NaN (exit 3, their end events say
  // nonfinite) are a nonfinite failure, not a crash.
  auto nan = faultline_cli(
      with_sets({"train", "-c", recipe, "--ranks", "2", "--json"},
                {"train.steps=10", "fault.nan_step=5", "fault.nan_layer=blocks.0.attn"}),
      dir);
  EXPECT_EQ(nan.result.exit_code, 1) << nan.result.output;
  EXPECT_EQ(failing_kinds_of(nan.doc.at("failures")), std::vector<std::string>{"nonfinite"})
      << nan.doc.dump();
}

// A launch script that runs torchrun (here a shell around the launcher, which waits for it): the
// stack signal goes to the processes below it that the launcher gave a RANK, not to the shell
// or the launcher, both of which die of it. faultline's own RANK (set here, as a job scheduler
// may set it) is kept from the launcher, or the shell would pass for a rank.
TEST(ExternalTrainer, ALauncherWrappedInAShellHasItsRanksStacksTaken) {
  const std::string dir = make_temp_dir("ext-wrapped");
  const std::string recipe =
      helper_launched_per_node(dir, {"--sessions"}, {"/bin/sh", "-c", "\"$0\" \"$@\"; exit $?"});
  ASSERT_EQ(setenv("RANK", "7", 1), 0);
  expect_hang_of_rank_one_with_its_stack(recipe, dir);
  unsetenv("RANK");
  EXPECT_EQ(processes_left_mentioning(dir + "/runs/"), 0) << "processes of the hung trial";
}
