// End-to-end on a real Slurm cluster (scripts/slurm-local.sh: 4 virtual nodes on this host):
// smoke and isolate with --launcher slurm, each trial an sbatch job (or an srun step inside
// salloc); a hung task is a hang and its job is cancelled; --jobs 2 finds what --jobs 1 does; a
// task that dies after training ended is a warning; a log-only script runs there too, and a
// launcher that starts its own ranks runs once per node.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "support/cli.hpp"
#include "support/process.hpp"
#include "support/pytorch_jobs.hpp"
#include "support/slurm.hpp"

using namespace faultline::testing;
using ::testing::AllOf;
using ::testing::HasSubstr;

namespace {

const std::string kMicro = FAULTLINE_SOURCE_DIR "/tests/e2e/recipes/micro.toml";
const std::string kLadder = FAULTLINE_SOURCE_DIR "/recipes/ladders/default.toml";
const std::string kLogOnlyCheckpoints =
    FAULTLINE_SOURCE_DIR "/examples/pytorch/log_checkpoints.toml";

Cli on_slurm(std::vector<std::string> args, const std::vector<std::string>& overrides,
             const std::string& dir) {
  args.insert(args.end(), {"--launcher", "slurm", "--json"});
  return faultline_cli(with_sets(std::move(args), overrides), dir, 400);
}

nlohmann::json failure_of(const nlohmann::json& failures, const std::string& kind) {
  for (const auto& failure : failures)
    if (failure.at("kind") == kind) return failure;
  return nullptr;
}

// 2 nodes × 2 tasks, on n1 and n2 (n3 and n4 excluded), 30 steps.
const std::vector<std::string> kTwoByTwo = {"launcher.nodes=2", "launcher.tasks_per_node=2",
                                            "launcher.exclude=n3,n4", "train.steps=30"};

std::vector<std::string> with(std::vector<std::string> base, const std::vector<std::string>& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

}  // namespace

TEST(Slurm, SmokeOfAHealthyRecipePassesEveryRung) {
  REQUIRE_SLURM();
  const std::string dir = make_temp_dir("slurm-smoke");
  auto cli = on_slurm({"smoke", "-c", kMicro, "--ladder", kLadder}, {"train.steps=20"}, dir);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("verdict"), "pass");
  for (const auto& rung : cli.doc.at("rungs")) EXPECT_EQ(rung.at("verdict"), "pass");
  EXPECT_EQ(slurm_jobs_mentioning(dir), 0);
}

TEST(Slurm, SmokeStopsAPlantedNanAtTheFirstRungThatReachesIt) {
  REQUIRE_SLURM();
  const std::string dir = make_temp_dir("slurm-nan");
  auto cli =
      on_slurm({"smoke", "-c", kMicro, "--ladder", kLadder},
               {"train.steps=20", "fault.nan_step=15", "fault.nan_layer=blocks.0.attn"}, dir);
  EXPECT_EQ(cli.result.exit_code, 1) << cli.result.output;
  ASSERT_EQ(cli.doc.at("rungs").size(), 2u) << cli.doc.dump();
  EXPECT_EQ(cli.doc["rungs"][0]["verdict"], "pass");  // 10 steps never reach step 15
  auto failure = failure_of(cli.doc["rungs"][1].at("failures"), "nonfinite");
  ASSERT_FALSE(failure.is_null()) << cli.doc.dump();
  EXPECT_EQ(failure.at("step"), 15);
}

TEST(Slurm, IsolateNamesTheRankAndTheNodeOfACorruptGradientOnTwoNodesByTwoTasks) {
  REQUIRE_SLURM();
  const std::string dir = make_temp_dir("slurm-isolate");
  auto cli =
      on_slurm({"isolate", "-c", kMicro, "--ranks", "4"},
               with(kTwoByTwo, {"fault.corrupt_grad_host=n2", "fault.corrupt_grad_step=6"}), dir);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("kind"), "rank_divergence") << cli.doc.dump();
  EXPECT_EQ(cli.doc.at("step"), 6);
  // Block placement: ranks 0,1 on n1 and 2,3 on n2.
  EXPECT_EQ(cli.doc.at("ranks"), nlohmann::json::array({2, 3})) << cli.doc.dump();
  EXPECT_EQ(cli.doc.at("host"), "n2") << cli.doc.dump();
  EXPECT_EQ(slurm_jobs_mentioning(dir), 0);
}

TEST(Slurm, JobsTwoGivesTheSameFindingAsJobsOne) {
  REQUIRE_SLURM();
  // n2, not n1: the search's 1-rank replays run on the first free node, n1 (with at most two
  // trials at once n1 always has a CPU left), and a replay on the bad node would be bad too.
  const auto overrides =
      with(kTwoByTwo, {"fault.corrupt_grad_host=n2", "fault.corrupt_grad_step=9"});
  const std::string one_dir = make_temp_dir("slurm-jobs1");
  const std::string two_dir = make_temp_dir("slurm-jobs2");
  auto one = on_slurm({"isolate", "-c", kMicro, "--ranks", "4", "--jobs", "1"}, overrides, one_dir);
  auto two = on_slurm({"isolate", "-c", kMicro, "--ranks", "4", "--jobs", "2"}, overrides, two_dir);
  ASSERT_EQ(one.result.exit_code, 0) << one.result.output;
  ASSERT_EQ(two.result.exit_code, 0) << two.result.output;
  for (const char* key : {"kind", "step", "ranks", "host", "phase"})
    EXPECT_EQ(one.doc.at(key), two.doc.at(key)) << key;
  EXPECT_EQ(one.doc.at("host"), "n2");
  EXPECT_EQ(one.doc.at("ranks"), nlohmann::json::array({2, 3}));
}

// A label that is no node would be refused by sbatch without saying which: named at once.
TEST(Slurm, AHostLabelThatIsNoNodeOfTheClusterIsBadInputNamingIt) {
  REQUIRE_SLURM();
  const std::string dir = make_temp_dir("slurm-bad-host");
  auto cli = on_slurm({"isolate", "-c", kMicro, "--ranks", "2", "--hosts", "n1,nX,n3"},
                      {"train.steps=20"}, dir);
  EXPECT_EQ(cli.result.exit_code, 2) << cli.result.output;
  const auto& item = cli.doc.at("error").at("items").at(0);
  EXPECT_EQ(item.at("what"), "host label(s) nX are not nodes of the cluster");
  EXPECT_EQ(item.at("where"), "--hosts");
  EXPECT_THAT(item.at("hint").get<std::string>(), HasSubstr("n1,n2,n3,n4"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/faultline.db"));
}

TEST(Slurm, TheHostSearchRunsEachRankOnItsNodeAndSwapsInSpareNodes) {
  REQUIRE_SLURM();
  const std::string dir = make_temp_dir("slurm-hosts");
  // Rank 0 on n3 (the bad node), rank 1 on n1; n2 and n4 are spares. The 1-rank replays run on
  // n1, the first free node.
  auto cli =
      on_slurm({"isolate", "-c", kMicro, "--ranks", "2", "--hosts", "n3,n1,n2,n4"},
               {"train.steps=20", "fault.corrupt_grad_host=n3", "fault.corrupt_grad_step=6"}, dir);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("kind"), "rank_divergence") << cli.doc.dump();
  EXPECT_EQ(cli.doc.at("ranks"), nlohmann::json::array({0})) << cli.doc.dump();
  EXPECT_EQ(cli.doc.at("host"), "n3") << cli.doc.dump();
  EXPECT_THAT(cli.doc.at("detail").get<std::string>(), HasSubstr("ddmin over the hosts"));
  EXPECT_EQ(slurm_jobs_mentioning(dir), 0);
}

TEST(Slurm, AHungTaskIsAHangNamingItAndItsJobIsCancelled) {
  REQUIRE_SLURM();
  const std::string dir = make_temp_dir("slurm-hang");
  auto cli = on_slurm({"train", "-c", kMicro, "--ranks", "4", "--step-timeout", "5"},
                      with(kTwoByTwo, {"fault.hang_rank=3", "fault.hang_step=8"}), dir);
  EXPECT_EQ(cli.result.exit_code, 1) << cli.result.output;
  auto failure = failure_of(cli.doc.at("failures"), "hang");
  ASSERT_FALSE(failure.is_null()) << cli.doc.dump();
  EXPECT_EQ(failure.at("rank"), 3);
  EXPECT_EQ(failure.at("step"), 8);
  EXPECT_EQ(slurm_jobs_mentioning(dir), 0) << "the hung trial's job is still queued or running";
}

// Time in the queue is the scheduler's, not the training's start-up: a trial queued behind a
// job that holds its node for longer than --startup-timeout passes, and says how long it
// waited. A job that no wait can start is an infrastructure error at once, quoting Slurm; so is
// a step srun refuses, quoting srun.
TEST(Slurm, TimeInTheQueueIsNotStartUpAndAJobThatCanNeverStartIsAnInfraError) {
  REQUIRE_SLURM();
  const std::string dir = make_temp_dir("slurm-queue");
  auto blocker = run_process({{"/usr/bin/sbatch", "--parsable", "--nodelist=n4", "--ntasks=4",
                               "--output=/dev/null", "--job-name=" + dir, "--wrap", "sleep 25"},
                              {},
                              30});
  ASSERT_EQ(blocker.exit_code, 0) << blocker.output;
  const std::string job = blocker.output.substr(0, blocker.output.find_first_of(";\n"));
  // Once it holds n4 (another test's job may hold it first), the trial queues behind it.
  for (int i = 0; i < 600; ++i) {
    auto state = run_process({{"/usr/bin/squeue", "-h", "-j", job, "-o", "%T"}, {}, 30});
    if (state.output.find("RUNNING") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  auto queued = on_slurm(
      {"train", "-c", kMicro, "--ranks", "2", "--startup-timeout", "8", "--step-timeout", "5"},
      {"launcher.nodelist=n4", "train.steps=5"}, dir);
  EXPECT_EQ(queued.result.exit_code, 0) << queued.result.output;
  EXPECT_EQ(queued.doc.at("verdict"), "pass") << queued.doc.dump();
  EXPECT_GT(queued.doc.at("queue_wait_s").get<double>(), 8) << queued.doc.dump();

  auto never = on_slurm({"train", "-c", kMicro, "--ranks", "32"},
                        {"train.batch_size=32", "launcher.nodes=1"}, dir);
  EXPECT_EQ(never.result.exit_code, 4) << never.result.output;
  EXPECT_THAT(never.doc.at("infra_detail").get<std::string>(),
              HasSubstr("can never start: it is pending with Reason=PartitionConfig"));
  EXPECT_EQ(slurm_jobs_mentioning(dir), 0) << "the job that could never start is still queued";

  // srun refusing the step: its own words, not "the trainer wrote no step record".
  auto refused = on_slurm({"train", "-c", kMicro, "--ranks", "2"},
                          {"launcher.srun_args=--no-such-srun-flag"}, dir);
  EXPECT_EQ(refused.result.exit_code, 4) << refused.result.output;
  EXPECT_THAT(refused.doc.at("infra_detail").get<std::string>(),
              AllOf(HasSubstr("no rank started; the end of "), HasSubstr("/srun.log: "),
                    HasSubstr("--no-such-srun-flag")));
}

// A PyTorch task that dies of SIGABRT as it exits, after its end event said training ended
// well: srun reports the signal, and the run is a pass with a teardown_crash warning.
TEST(Slurm, APythonTaskThatDiesAsItShutsDownAfterTrainingIsAWarning) {
  REQUIRE_SLURM();
  const std::string dir = make_temp_dir("slurm-teardown");
  auto cli = on_slurm({"train", "-c", kHelper, "--ranks", "2"},
                      {"launcher.nodes=1", "launcher.tasks_per_node=2", "train.steps=20",
                       "fault.abort_after_end_rank=1"},
                      dir);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  auto failure = failure_of(cli.doc.at("failures"), "teardown_crash");
  ASSERT_FALSE(failure.is_null()) << cli.doc.dump();
  EXPECT_EQ(failure.at("rank"), 1);
  EXPECT_EQ(failure.at("severity"), "warning");
  EXPECT_THAT(failure.at("detail").get<std::string>(), HasSubstr("died of SIGABRT"));
  EXPECT_EQ(slurm_jobs_mentioning(dir), 0);
}

// A script that knows nothing of faultline: its records are the lines srun writes to each
// task's log (rank0.log), its checkpoints the ones it prints there.
TEST(Slurm, ALogOnlyScriptIsIsolatedFromTheLinesItsTaskPrints) {
  REQUIRE_SLURM();
  const std::string dir = make_temp_dir("slurm-log-only");
  auto cli = on_slurm({"isolate", "-c", kLogOnlyCheckpoints},
                      {"train.steps=40", "fault.nan_step=25", "launcher.nodes=1"}, dir);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("kind"), "nonfinite") << cli.doc.dump();
  EXPECT_EQ(cli.doc.at("step"), 25);
  EXPECT_EQ(cli.doc.at("min_scale").at("ranks"), 1) << cli.doc.dump();
  EXPECT_TRUE(std::filesystem::exists(dir + "/runs/run-1/job.sh")) << "an sbatch job";
  EXPECT_THAT(faultline_cli({"show", "1"}, dir).result.output, HasSubstr(", on Slurm)"));
  EXPECT_EQ(slurm_jobs_mentioning(dir), 0);
}

// A run that ran on Slurm is replayed there (where a job's GPUs are), with the launcher keys it
// ran with, unless --launcher says otherwise; its finding's repro too.
TEST(Slurm, IsolateRunOfARunThatRanOnSlurmReplaysItThere) {
  REQUIRE_SLURM();
  const std::string dir = make_temp_dir("slurm-isolate-run");
  auto failing = on_slurm({"train", "-c", kMicro},
                          {"train.steps=8", "train.checkpoint_every=2", "fault.nan_step=5",
                           "fault.nan_layer=blocks.0.mlp", "launcher.exclude=n1"},
                          dir);
  ASSERT_EQ(failing.result.exit_code, 1) << failing.result.output;
  auto isolate = faultline_cli({"isolate", "--run", "1", "--json"}, dir, 400);
  ASSERT_EQ(isolate.result.exit_code, 0) << isolate.result.output;
  EXPECT_THAT(
      isolate.result.output,
      HasSubstr("run 1 ran on Slurm: its replays do too (--launcher local runs them here)"));
  EXPECT_EQ(isolate.doc.at("step"), 5) << isolate.doc.dump();
  // Run 2 is its first replay, from the checkpoint of step 4.
  EXPECT_TRUE(std::filesystem::exists(dir + "/runs/run-2/job.sh")) << "an sbatch job";
  EXPECT_THAT(faultline_cli({"show", "2"}, dir).result.output, HasSubstr(", on Slurm)"));
  // So does the finding's repro.
  auto repro = faultline_cli({"repro", "F1"}, dir, 300);
  EXPECT_EQ(repro.result.exit_code, 0) << repro.result.output;
  EXPECT_THAT(repro.result.output, HasSubstr("run 1 ran on Slurm: the repro does too"));
  EXPECT_THAT(repro.result.output, HasSubstr("bitwise identical: yes"));
  EXPECT_EQ(slurm_jobs_mentioning(dir), 0);
}

// A command trainer's argv does not carry the --set launcher.* keys: they are stored with the
// run, and its replays are placed as it was (they went to any free node, an excluded one too,
// and the finding named it).
TEST(Slurm, IsolateRunOfAScriptsRunKeepsTheLauncherKeysItWasPlacedWith) {
  REQUIRE_SLURM();
  const std::string dir = make_temp_dir("slurm-isolate-run-keys");
  const std::string helper = FAULTLINE_SOURCE_DIR "/examples/pytorch/train.toml";
  auto failing = on_slurm({"train", "-c", helper},
                          {"train.steps=8", "faultline.checkpoint_every=2", "fault.nan_step=5",
                           "fault.nan_layer=blocks.0.mlp", "launcher.exclude=n1,n2"},
                          dir);
  ASSERT_EQ(failing.result.exit_code, 1) << failing.result.output;
  auto isolate = faultline_cli({"isolate", "--run", "1", "--json"}, dir, 400);
  ASSERT_EQ(isolate.result.exit_code, 0) << isolate.result.output;
  EXPECT_EQ(isolate.doc.at("step"), 5) << isolate.doc.dump();
  // Its first replay ran where the excluded nodes were not (sbatch --exclude; Slurm's first
  // free node is n1).
  const std::string replay = read_text(dir + "/runs/run-2/metrics.rank0.jsonl");
  EXPECT_THAT(replay, ::testing::AnyOf(HasSubstr("\"host\":\"n3\""), HasSubstr("\"host\":\"n4\"")));
  EXPECT_NE(isolate.doc.at("host"), "n1");
  EXPECT_NE(isolate.doc.at("host"), "n2");
  EXPECT_EQ(slurm_jobs_mentioning(dir), 0);
}

TEST(Slurm, InsideAnAllocationEachTrialIsAStepOfIt) {
  REQUIRE_SLURM();
  const std::string dir = make_temp_dir("slurm-salloc");
  // salloc runs faultline with SLURM_JOB_ID set: the trial is an srun step of that job.
  auto salloc = run_process({{"/usr/bin/salloc",
                              "--nodes=2",
                              "--ntasks-per-node=2",
                              "--exclude=n3,n4",
                              FAULTLINE_BIN,
                              "train",
                              "-c",
                              kMicro,
                              "--ranks",
                              "4",
                              "--launcher",
                              "slurm",
                              "--json",
                              "--db",
                              dir + "/faultline.db",
                              "--work-dir",
                              dir + "/runs",
                              "--trainer",
                              FAULTLINE_TRAIN_BIN,
                              "--set",
                              "launcher.tasks_per_node=2",
                              "--set",
                              "train.steps=10"},
                             {},
                             300});
  ASSERT_EQ(salloc.exit_code, 0) << salloc.output;
  EXPECT_THAT(salloc.output, HasSubstr("\"verdict\":\"pass\""));
  EXPECT_THAT(salloc.output, HasSubstr("Granted job allocation"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/runs/run-1/rank3.exit"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/runs/run-1/job.sh")) << "a step, not a job";
}

// A launcher that starts its own ranks (ranks_from = "torchrun"; here spawn_ranks.py, which does
// what torchrun's static rendezvous does): one task per node, each told its node's rank and the
// first node's address in its command; every rank writes its own records and its stacks.
TEST(Slurm, ALauncherThatStartsItsOwnRanksRunsOncePerNode) {
  REQUIRE_SLURM();
  const std::string dir = make_temp_dir("slurm-torchrun");
  // Each rank in a session of its own, as torchrun 2.x starts them: Slurm signals every process
  // of the step, the ranks included.
  const std::string recipe = helper_launched_per_node(dir, {"--sessions"});
  const std::vector<std::string> two_nodes = {"launcher.nodes=2", "launcher.exclude=n3,n4",
                                              "train.steps=10"};
  auto healthy = on_slurm({"train", "-c", recipe, "--ranks", "4"}, two_nodes, dir);
  ASSERT_EQ(healthy.result.exit_code, 0) << healthy.result.output;
  EXPECT_EQ(healthy.doc.at("steps"), 10);
  const std::string run_dir =
      dir + "/runs/run-" + std::to_string(healthy.doc.at("run_id").get<int64_t>());
  for (int rank = 0; rank < 4; ++rank) {
    const std::string metrics =
        read_text(run_dir + "/metrics.rank" + std::to_string(rank) + ".jsonl");
    EXPECT_THAT(metrics, HasSubstr("\"world_size\":4")) << rank;
    // Block placement: ranks 0 and 1 started by n1's launcher, 2 and 3 by n2's.
    EXPECT_THAT(metrics, HasSubstr(rank < 2 ? "\"host\":\"n1\"" : "\"host\":\"n2\"")) << rank;
  }
  for (const char* file : {"/node0.exit", "/node1.exit", "/node0.log", "/node1.log"})
    EXPECT_TRUE(std::filesystem::exists(run_dir + file)) << file;
  EXPECT_FALSE(std::filesystem::exists(run_dir + "/node2.exit")) << "one launcher per node";

  // Rank 3 hangs: it is named, with its own stack, and its job is cancelled.
  auto hung = on_slurm({"train", "-c", recipe, "--ranks", "4", "--step-timeout", "5"},
                       with(two_nodes, {"fault.hang_rank=3", "fault.hang_step=5"}), dir);
  EXPECT_EQ(hung.result.exit_code, 1) << hung.result.output;
  auto failure = failure_of(hung.doc.at("failures"), "hang");
  ASSERT_FALSE(failure.is_null()) << hung.doc.dump();
  EXPECT_EQ(failure.at("rank"), 3);
  EXPECT_EQ(failure.at("step"), 5);
  EXPECT_THAT(failure.at("detail").get<std::string>(), HasSubstr("in at_step_start"));
  // The launchers died of the stack signal; their ranks were ended with their tasks, not left
  // running (here the virtual nodes' processes are this machine's).
  EXPECT_EQ(processes_left_mentioning(dir + "/runs/"), 0);

  // Rank 2 dies: every launcher exits 1 (as torchrun does), and the crash is the rank that wrote
  // no end event.
  auto crashed = on_slurm({"train", "-c", recipe, "--ranks", "4"},
                          with(two_nodes, {"fault.crash_rank=2", "fault.crash_step=5"}), dir);
  EXPECT_EQ(crashed.result.exit_code, 1) << crashed.result.output;
  failure = failure_of(crashed.doc.at("failures"), "crash");
  ASSERT_FALSE(failure.is_null()) << crashed.doc.dump();
  EXPECT_EQ(failure.at("rank"), 2);
  EXPECT_EQ(failure.at("step"), 5);
  EXPECT_THAT(failure.at("detail").get<std::string>(),
              HasSubstr("without an end event; the launcher of ranks 2-3"));

  // Three ranks cannot be started as many on each of two nodes: said before anything runs.
  auto uneven = faultline_cli(
      with_sets({"train", "-c", recipe, "--ranks", "3", "--launcher", "slurm"}, two_nodes), dir);
  EXPECT_EQ(uneven.result.exit_code, 2) << uneven.result.output;
  EXPECT_THAT(uneven.result.output,
              HasSubstr("3 ranks do not split evenly over 2 nodes (launcher.nodes, "
                        "launcher.tasks_per_node); give --ranks a multiple of the nodes"));
  EXPECT_EQ(slurm_jobs_mentioning(dir), 0);
}
