// End-to-end: `faultline train` and `faultline smoke` on real trainer runs and a real SQLite
// file — a healthy recipe passes every rung, planted and organic faults are caught with the
// right kind, step and rank, bad ladder and detector files give clear errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "support/cli.hpp"

using namespace faultline::testing;
using ::testing::HasSubstr;

namespace {

const std::string kMicro = FAULTLINE_SOURCE_DIR "/tests/e2e/recipes/micro.toml";
const std::string kLadder = FAULTLINE_SOURCE_DIR "/recipes/ladders/default.toml";

// Tests about the timing detectors (straggler, data_stall) turn them on; the others run without
// them, so a loaded machine cannot fail them.
Cli smoke(const std::vector<std::string>& overrides, const std::string& ladder = kLadder,
          TimingDetectors timing = TimingDetectors::Off) {
  std::string dir = make_temp_dir("smoke");
  return faultline_cli(
      with_sets({"smoke", "-c", kMicro, "--ladder", ladder, "--json", "--step-timeout", "5"},
                overrides),
      dir, 120, {}, timing);
}

Cli timed_smoke(const std::vector<std::string>& overrides) {
  return smoke(overrides, kLadder, TimingDetectors::On);
}

nlohmann::json failure_of(const Cli& cli, const std::string& kind) {
  for (const auto& rung : cli.doc.at("rungs"))
    for (const auto& failure : rung.at("failures"))
      if (failure.at("kind") == kind) return failure;
  return nullptr;
}

std::string write_file(const std::string& name, const std::string& text) {
  std::string path = make_temp_dir("file") + "/" + name;
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST(Smoke, HealthyRecipePassesEveryRung) {
  auto cli = smoke({});
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("verdict"), "pass");
  const auto& rungs = cli.doc.at("rungs");
  ASSERT_EQ(rungs.size(), 2u);  // micro.toml: 1 rank, 40 steps → later rungs repeat rung 2
  EXPECT_EQ(rungs[0].at("steps"), 10);
  EXPECT_EQ(rungs[0].at("data_fraction"), 0.01);
  EXPECT_EQ(rungs[1].at("steps"), 40);
  for (const auto& rung : rungs) EXPECT_EQ(rung.at("verdict"), "pass");
  EXPECT_THAT(cli.result.output, HasSubstr("faultline smoke: rung 1/2"));
}

TEST(Smoke, NanStopsAtTheFirstRungThatReachesIt) {
  auto cli = smoke({"fault.nan_step=25", "fault.nan_layer=blocks.0.attn"});
  EXPECT_EQ(cli.result.exit_code, 1) << cli.result.output;
  EXPECT_EQ(cli.doc.at("verdict"), "fail");
  ASSERT_EQ(cli.doc.at("rungs").size(), 2u);
  EXPECT_EQ(cli.doc["rungs"][0]["verdict"], "pass");  // 10 steps never reach step 25
  auto failure = failure_of(cli, "nonfinite");
  ASSERT_FALSE(failure.is_null()) << cli.doc.dump();
  EXPECT_EQ(failure.at("step"), 25);
  EXPECT_EQ(failure.at("rank"), 0);
}

TEST(Smoke, CrashOnTheSecondRankOfAMultiRankRung) {
  auto cli = smoke({"dist.ranks=2", "fault.crash_rank=1", "fault.crash_step=20",
                    "fault.crash_signal=SEGV", "dist.timeout_s=10"});
  EXPECT_EQ(cli.result.exit_code, 1) << cli.result.output;
  auto failure = failure_of(cli, "crash");
  ASSERT_FALSE(failure.is_null()) << cli.doc.dump();
  EXPECT_EQ(failure.at("rank"), 1);
  EXPECT_EQ(failure.at("step"), 20);
  EXPECT_THAT(failure.at("detail").get<std::string>(), HasSubstr("SIGSEGV"));
}

TEST(Smoke, HangIsCaughtWithinTheStepTimeout) {
  auto cli = smoke({"dist.ranks=2", "fault.hang_rank=1", "fault.hang_step=15"});
  EXPECT_EQ(cli.result.exit_code, 1) << cli.result.output;
  auto failure = failure_of(cli, "hang");
  ASSERT_FALSE(failure.is_null()) << cli.doc.dump();
  EXPECT_EQ(failure.at("step"), 15);
  EXPECT_EQ(failure.at("rank"), 1);
  EXPECT_THAT(failure.at("detail").get<std::string>(),
              HasSubstr("rank(s) 1 never entered collective #15"));
}

TEST(Smoke, LrSpikeAndLeakAreCaughtByTheDetectors) {
  auto spike = smoke({"fault.lr_spike_step=30", "probe.halt_on_nonfinite=false"});
  EXPECT_EQ(spike.result.exit_code, 1) << spike.result.output;
  auto lr = failure_of(spike, "lr_anomaly");
  ASSERT_FALSE(lr.is_null()) << spike.doc.dump();
  EXPECT_EQ(lr.at("step"), 30);

  auto leak = smoke({"fault.leak_mb_per_step=4"});
  EXPECT_EQ(leak.result.exit_code, 1) << leak.result.output;
  EXPECT_FALSE(failure_of(leak, "memory").is_null()) << leak.doc.dump();
}

// On the bundled tiny model a huge init keeps the gradient norm above 1e3 step after step (on the
// micro test model it only spikes), so this one runs tiny.toml, cut to 20 steps.
TEST(Smoke, OrganicHugeInitIsAGradExplosion) {
  std::string dir = make_temp_dir("smoke-init");
  auto cli =
      faultline_cli({"smoke", "-c", FAULTLINE_SOURCE_DIR "/recipes/train/tiny.toml", "--ladder",
                     kLadder, "--json", "--set", "train.steps=20", "--set", "model.init_std=10"},
                    dir);
  EXPECT_EQ(cli.result.exit_code, 1) << cli.result.output;
  auto failure = failure_of(cli, "grad_explode");
  ASSERT_FALSE(failure.is_null()) << cli.doc.dump();
  EXPECT_EQ(cli.doc.at("rungs").size(), 1u);  // caught on the first, smallest rung
}

TEST(Smoke, SlowRankIsAStraggler) {
  auto cli = timed_smoke({"dist.ranks=2", "fault.slow_rank=1", "fault.slow_ms=40"});
  EXPECT_EQ(cli.result.exit_code, 1) << cli.result.output;
  auto failure = failure_of(cli, "straggler");
  ASSERT_FALSE(failure.is_null()) << cli.doc.dump();
  EXPECT_EQ(failure.at("rank"), 1);
}

// A slow rank (compute) and a starved one (data) are told apart, on 2 and on 4 ranks.
TEST(Smoke, StarvedRankIsADataStallAndASlowOneAStraggler) {
  for (const char* ranks : {"2", "4"}) {
    SCOPED_TRACE(ranks);
    const std::string world = std::string("dist.ranks=") + ranks;
    auto starved = timed_smoke({world, "fault.data_delay_rank=1", "fault.data_delay_ms=20"});
    EXPECT_EQ(starved.result.exit_code, 1) << starved.result.output;
    auto stall = failure_of(starved, "data_stall");
    ASSERT_FALSE(stall.is_null()) << starved.doc.dump();
    EXPECT_EQ(stall.at("rank"), 1);
    EXPECT_TRUE(failure_of(starved, "straggler").is_null()) << starved.doc.dump();

    auto slow = timed_smoke({world, "fault.slow_rank=1", "fault.slow_ms=20"});
    EXPECT_EQ(slow.result.exit_code, 1) << slow.result.output;
    auto straggler = failure_of(slow, "straggler");
    ASSERT_FALSE(straggler.is_null()) << slow.doc.dump();
    EXPECT_EQ(straggler.at("rank"), 1);
    EXPECT_TRUE(failure_of(slow, "data_stall").is_null()) << slow.doc.dump();
  }
}

TEST(Smoke, OrganicHighLearningRateIsCaught) {
  auto cli = smoke({"optim.lr=10"});
  EXPECT_EQ(cli.result.exit_code, 1) << cli.result.output;
  EXPECT_EQ(cli.doc.at("verdict"), "fail") << cli.doc.dump();
}

// One rank starved of data: fault.data_delay_rank defaults to -1 (every rank), so a 1-rank
// recipe needs no rank key. 50 ms is many times micro.toml's compute per step (~2 ms), so the
// median data share is far above data_stall.max_share (0.5), and the first rung's 10 steps are
// more than data_stall.min_steps (5): the gate fails there and runs nothing bigger.
TEST(Smoke, DataDelayOnOneRankIsADataStallOnTheFirstRung) {
  auto cli = timed_smoke({"fault.data_delay_ms=50"});
  EXPECT_EQ(cli.result.exit_code, 1) << cli.result.output;
  const auto& rungs = cli.doc.at("rungs");
  ASSERT_EQ(rungs.size(), 1u) << cli.doc.dump();
  EXPECT_EQ(rungs[0].at("verdict"), "fail");
  EXPECT_EQ(rungs[0].at("steps"), 10);
  auto stall = failure_of(cli, "data_stall");
  ASSERT_FALSE(stall.is_null()) << cli.doc.dump();
  EXPECT_EQ(stall.at("rank"), 0);
  EXPECT_TRUE(stall.at("step").is_null());  // a property of the whole run: no step
}

// Organic: a learning rate of 1e-9 learns nothing. `stalled` is judged only on runs of at least
// stalled.after_steps (100) steps, so the 10-step rung passes and the 100-step one fails, at its
// last step. train.steps = 100 makes rung 2 reach 100 steps (micro.toml has 40) and drops the
// later rungs, which would repeat it.
TEST(Smoke, OrganicTinyLearningRateStallsOnTheHundredStepRung) {
  auto cli = smoke({"optim.lr=1e-9", "train.steps=100"});
  EXPECT_EQ(cli.result.exit_code, 1) << cli.result.output;
  const auto& rungs = cli.doc.at("rungs");
  ASSERT_EQ(rungs.size(), 2u) << cli.doc.dump();
  EXPECT_EQ(rungs[0].at("verdict"), "pass") << cli.doc.dump();
  EXPECT_EQ(rungs[1].at("steps"), 100);
  EXPECT_EQ(rungs[1].at("verdict"), "fail");
  const auto& failures = rungs[1].at("failures");
  ASSERT_EQ(failures.size(), 1u) << cli.doc.dump();
  EXPECT_EQ(failures[0].at("kind"), "stalled");
  EXPECT_EQ(failures[0].at("step"), 100);
  EXPECT_EQ(failures[0].at("rank"), 0);
}

TEST(Smoke, BadLadderFileIsReportedWithFileAndKey) {
  std::string ladder = write_file("ladder.toml", "[[rungs]]\nranks = 1\nstepz = 10\n");
  auto cli = smoke({}, ladder);
  EXPECT_EQ(cli.result.exit_code, 2);
  EXPECT_THAT(cli.result.output, HasSubstr("unknown key 'rungs.0.stepz' (" + ladder +
                                           ":3); did you mean 'rungs.0.steps'?"));
}

TEST(Smoke, BadDetectorFileIsReported) {
  std::string dir = make_temp_dir("det");
  std::string detectors = write_file("det.toml", "[loss_spike]\nfactr = 3\n");
  auto cli = faultline_cli({"train", "-c", kMicro, "--detectors", detectors}, dir);
  EXPECT_EQ(cli.result.exit_code, 2);
  EXPECT_THAT(cli.result.output, HasSubstr("unknown key 'loss_spike.factr'"));
  EXPECT_THAT(cli.result.output, HasSubstr(detectors));
}

TEST(Train, StoresTheRunAndShowsIt) {
  std::string dir = make_temp_dir("train");
  auto train = faultline_cli({"train", "-c", kMicro, "--steps", "12", "--json"}, dir);
  ASSERT_EQ(train.result.exit_code, 0) << train.result.output;
  EXPECT_EQ(train.doc.at("verdict"), "pass");
  EXPECT_EQ(train.doc.at("steps"), 12);
  auto run_id = train.doc.at("run_id").get<int64_t>();
  auto show = faultline_cli({"show", std::to_string(run_id), "--json"}, dir);
  ASSERT_EQ(show.result.exit_code, 0) << show.result.output;
  EXPECT_EQ(show.doc.at("steps_stored"), 12);
  EXPECT_EQ(show.doc.at("status"), "finished");
  EXPECT_THAT(show.doc.at("config").get<std::string>(), HasSubstr("train.stop_after = 12"));
  auto runs = faultline_cli({"runs", "--json"}, dir);
  EXPECT_EQ(runs.doc.at("runs").size(), 1u);
}

TEST(Train, BadRecipeIsABadInputExitBeforeAnythingRuns) {
  std::string dir = make_temp_dir("badtrain");
  auto cli = faultline_cli({"train", "-c", kMicro, "--set", "optim.lrr=1"}, dir);
  EXPECT_EQ(cli.result.exit_code, 2);
  EXPECT_THAT(cli.result.output, HasSubstr("faultline: error: unknown key 'optim.lrr'"));
  // --steps is a prefix of the recipe's run: more than it has is a mistake, not a silent cap.
  auto longer = faultline_cli({"train", "-c", kMicro, "--steps", "41"}, dir);
  EXPECT_EQ(longer.result.exit_code, 2);
  EXPECT_THAT(longer.result.output,
              HasSubstr("faultline: error: --steps 41 is more than the recipe's 40 steps "
                        "(--steps); --steps runs a prefix of the recipe's run; to train longer, "
                        "--set train.steps=41"));
  // A detector file that is not there is named by its option, before any store is made.
  auto detectors = faultline_cli({"train", "-c", kMicro, "--detectors", dir + "/nosuch.toml"}, dir);
  EXPECT_EQ(detectors.result.exit_code, 2);
  EXPECT_THAT(detectors.result.output, HasSubstr("faultline: error: no detector file " + dir +
                                                 "/nosuch.toml (--detectors)"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/faultline.db"));
}

// A module name only the model knows is checked by the trainer as it starts: its refusal (exit 2
// before the first step) is the caller's input to fix, exit 2 naming the key, not the machine's
// failure (exit 4, "retry elsewhere") — for a run, a gate and a search alike.
TEST(Train, InputTheTrainerRefusesAtItsStartIsBadInputNamingTheKey) {
  std::string dir = make_temp_dir("refused");
  const std::vector<std::string> sets = {"fault.nan_step=3", "fault.nan_layer=blocks.0.atn"};
  auto train = faultline_cli(with_sets({"train", "-c", kMicro, "--steps", "5"}, sets), dir);
  EXPECT_EQ(train.result.exit_code, 2) << train.result.output;
  EXPECT_THAT(train.result.output,
              HasSubstr("bad input: rank 0 exited 2 before training: "
                        "faultline-train: error: unknown module 'blocks.0.atn' "
                        "(fault.nan_layer); did you mean 'blocks.0.attn'?"));
  auto gate = faultline_cli(with_sets({"smoke", "-c", kMicro, "--json"}, sets), dir);
  EXPECT_EQ(gate.result.exit_code, 2) << gate.result.output;
  EXPECT_EQ(gate.doc.at("verdict"), "infra_error");
  EXPECT_EQ(gate.doc.at("rungs").size(), 1u);
  auto search = faultline_cli(with_sets({"isolate", "-c", kMicro, "--json"}, sets), dir);
  EXPECT_EQ(search.result.exit_code, 2) << search.result.output;
  const auto& item = search.doc.at("error").at("items").at(0);
  EXPECT_THAT(item.at("what").get<std::string>(),
              HasSubstr("the failing setup could not run: rank 0 exited 2 before "
                        "training: faultline-train: error: unknown module 'blocks.0.atn'"));
}

// A model too large for the machine. n_embd at its cap (65536) makes block 0's qkv weight
// 3 × 65536² floats = 48 GiB, the first large tensor the model allocates (the whole model, 8
// blocks, asks for about 1.5 TiB; tensors are allocated one at a time, so the 48 GiB is what the
// kernel sees). With overcommit in its default heuristic mode (or strict), the kernel refuses an
// allocation larger than RAM + swap at once, before a page is touched: the trainer exits 5 and
// the harness says `oom`, within seconds. Where 48 GiB would fit, or with overcommit always on,
// the allocation would succeed and initializing it would fill real memory: not run there.
TEST(Train, ModelTooLargeForMemoryIsAnOomReportedByTheTrainer) {
  constexpr double kFirstTensorGiB = 48;
  std::ifstream overcommit("/proc/sys/vm/overcommit_memory");
  int overcommit_mode = 0;
  overcommit >> overcommit_mode;
  if (overcommit_mode == 1) GTEST_SKIP() << "vm.overcommit_memory = 1 never refuses";
  std::ifstream meminfo("/proc/meminfo");
  double memory_kib = 0;
  for (std::string key, unit; meminfo >> key;) {
    double kib = 0;
    meminfo >> kib >> unit;
    if (key == "MemTotal:" || key == "SwapTotal:") memory_kib += kib;
  }
  if (memory_kib / (1024.0 * 1024.0) >= kFirstTensorGiB)
    GTEST_SKIP() << "RAM + swap " << memory_kib / (1024.0 * 1024.0) << " GiB would hold "
                 << kFirstTensorGiB << " GiB";

  std::string dir = make_temp_dir("oom");
  const auto start = std::chrono::steady_clock::now();
  auto train = faultline_cli(
      {"train", "-c", kMicro, "--set", "model.n_embd=65536", "--set", "model.n_layer=8", "--json"},
      dir, /*timeout_s=*/60);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(train.result.exit_code, 1) << train.result.output;
  EXPECT_LT(seconds, 20) << train.result.output;  // refused at once, not swapped or OOM-killed
  ASSERT_TRUE(train.doc.is_object()) << train.result.output;
  EXPECT_EQ(train.doc.at("verdict"), "fail");

  // The stored run, as `faultline show` reads it back from the store.
  const std::string run_id = std::to_string(train.doc.at("run_id").get<int64_t>());
  auto show = faultline_cli({"show", run_id, "--json"}, dir);
  ASSERT_EQ(show.result.exit_code, 0) << show.result.output;
  const auto& failures = show.doc.at("failures");
  ASSERT_EQ(failures.size(), 1u) << show.doc.dump();
  EXPECT_EQ(failures[0].at("kind"), "oom");
  EXPECT_EQ(failures[0].at("rank"), 0);
  EXPECT_EQ(failures[0].at("detail"), "rank 0 ran out of memory (the trainer reported it)");

  // The trainer's own line, in the rank's log.
  EXPECT_THAT(read_text(dir + "/runs/run-" + run_id + "/rank0.log"),
              HasSubstr("faultline-train: out of memory: "));
}

TEST(Smoke, InterruptedGateHasNoVerdictAndNamesTheRungCutShort) {
  const std::string dir = make_temp_dir("smoke-interrupt");
  const std::string db = dir + "/faultline.db";
  // Ctrl-C (SIGINT to the process group) once the last rung, the full 3000 steps, is past step
  // 105: far from its end however slow the machine, and past the 100 steps of rung 2.
  bool sent = false;
  auto smoke = cli_of(run_process(
      {faultline_argv({"smoke", "-c", kMicro, "--json", "--set", "train.steps=3000"}, dir),
       {},
       300,
       {},
       interrupt_past_step(db, 105, sent)}));
  ASSERT_TRUE(sent) << smoke.result.output;
  EXPECT_EQ(smoke.result.exit_code, 4) << smoke.result.output;
  ASSERT_TRUE(smoke.doc.is_object()) << smoke.result.output;
  EXPECT_EQ(smoke.doc.at("verdict"), "interrupted");
  EXPECT_EQ(smoke.doc.at("interrupted"), true);
  const auto& rungs = smoke.doc.at("rungs");
  ASSERT_EQ(rungs.size(), 3u) << smoke.doc.dump();
  EXPECT_EQ(rungs[0].at("verdict"), "pass");
  EXPECT_EQ(rungs[1].at("verdict"), "pass");
  EXPECT_EQ(rungs[2].at("verdict"), "interrupted");
  EXPECT_EQ(rungs[2].at("steps"), 3000);
  EXPECT_THAT(smoke.result.output, HasSubstr("rung 3/3: interrupted (run 3,"));
  EXPECT_THAT(smoke.result.output, ::testing::Not(HasSubstr("rung 3/3: pass")));
}

TEST(Train, InterruptedRunKeepsItsRowsAndIsMarkedInterrupted) {
  std::string dir = make_temp_dir("interrupt");
  std::vector<std::string> args = {FAULTLINE_BIN, "train",
                                   "-c",          kMicro,
                                   "--set",       "train.steps=100000",
                                   "--db",        dir + "/faultline.db",
                                   "--work-dir",  dir + "/runs",
                                   "--trainer",   FAULTLINE_TRAIN_BIN};
  pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (auto& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    freopen("/dev/null", "w", stdout);
    execv(argv[0], argv.data());
    _exit(127);
  }
  // Interrupt once the store holds more than 10 steps (polled: a loaded machine is slow to start).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int64_t stored = 0;
  while (stored <= 10 && std::chrono::steady_clock::now() < deadline) {
    auto polled = faultline_cli({"show", "1", "--json"}, dir);
    if (polled.result.exit_code == 0 && polled.doc.is_object())
      stored = polled.doc.value("steps_stored", int64_t{0});
    if (stored <= 10) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_GT(stored, 10) << "the run stored no more than 10 steps in 60 s";
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 4);
  auto show = faultline_cli({"show", "1", "--json"}, dir);
  ASSERT_EQ(show.result.exit_code, 0) << show.result.output;
  EXPECT_EQ(show.doc.at("status"), "interrupted");
  EXPECT_GT(show.doc.at("steps_stored").get<int64_t>(), 10);
}
