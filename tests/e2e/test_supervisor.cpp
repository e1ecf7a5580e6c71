// End-to-end: the local launcher and the supervisor on real faultline-train ranks — normal end,
// hang, crash — and no stray processes afterwards.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>

#include "harness/launch/local_launcher.hpp"
#include "harness/launch/log_records.hpp"
#include "harness/launch/supervisor.hpp"
#include "support/process.hpp"

using namespace faultline;
using namespace faultline::harness;
using faultline::testing::processes_mentioning;

namespace {

class CountingSink : public RecordSink {
 public:
  void on_record(int, const MetricsRecord& record) override {
    if (std::holds_alternative<StepRecord>(record)) ++steps;
    if (std::holds_alternative<GpuRecord>(record)) ++gpu;
    if (std::holds_alternative<AnomalyRecord>(record)) ++anomalies;
  }
  void on_malformed(int, const std::string&, const std::string&) override { ++malformed; }
  int steps = 0, malformed = 0, gpu = 0, anomalies = 0;
};

// Asks to stop at the first step record, as the run judge does at a non-finite one.
class StopAtFirstStep : public CountingSink {
 public:
  bool should_stop() override { return steps > 0; }
};

// One rank running `script` under /bin/sh, with $M its metrics file.
RankLaunch script_rank(const std::string& dir, const std::string& script) {
  RankLaunch launch;
  launch.metrics_path = dir + "/metrics.rank0.jsonl";
  launch.log_path = dir + "/rank0.log";
  launch.argv = {"/bin/sh", "-c", "M=" + launch.metrics_path + "; " + script};
  return launch;
}

const char* kNanStep = R"(echo '{"v":1,"type":"step","rank":0,"t":1,"step":3,"loss":"nan"}' >> $M)";

std::vector<RankLaunch> trainer_ranks(int count, const std::string& dir,
                                      const std::vector<std::string>& overrides) {
  std::vector<RankLaunch> ranks;
  const int port = pick_free_port();
  for (int rank = 0; rank < count; ++rank) {
    RankLaunch launch;
    launch.rank = rank;
    launch.argv = {FAULTLINE_TRAIN_BIN, "-c", FAULTLINE_SOURCE_DIR "/tests/e2e/recipes/micro.toml",
                   "--out", dir};
    for (const auto& assignment : overrides) {
      launch.argv.push_back("--set");
      launch.argv.push_back(assignment);
    }
    launch.metrics_path = dir + "/metrics.rank" + std::to_string(rank) + ".jsonl";
    launch.log_path = dir + "/rank" + std::to_string(rank) + ".log";
    launch.env = {
        {"RANK", std::to_string(rank)},        {"WORLD_SIZE", std::to_string(count)},
        {"LOCAL_RANK", std::to_string(rank)},  {"MASTER_ADDR", "127.0.0.1"},
        {"MASTER_PORT", std::to_string(port)}, {"FAULTLINE_METRICS", launch.metrics_path}};
    ranks.push_back(launch);
  }
  return ranks;
}

SupervisedResult run(const std::vector<RankLaunch>& ranks, SuperviseOptions options,
                     CountingSink& sink) {
  LocalLauncher launcher;
  auto trial = launcher.launch(ranks);
  return supervise(*trial, ranks, options, sink);
}

}  // namespace

TEST(Supervisor, HealthyTwoRankRunEndsCleanly) {
  std::string dir = faultline::testing::make_temp_dir("sup-ok");
  CountingSink sink;
  auto result = run(trainer_ranks(2, dir, {"train.steps=10"}), {}, sink);
  EXPECT_FALSE(result.hang);
  EXPECT_FALSE(result.crash);
  ASSERT_EQ(result.ranks.size(), 2u);
  for (const auto& rank : result.ranks) {
    EXPECT_EQ(rank.kind, ExitKind::Exited);
    EXPECT_EQ(rank.exit_code, 0);
  }
  EXPECT_EQ(result.last_step, (std::vector<int64_t>{10, 10}));
  EXPECT_EQ(sink.steps, 20);
  EXPECT_EQ(processes_mentioning(dir), 0);
}

// The CUPTI probe's records come from a second file next to the rank's metrics: gpu records are
// read from it (a malformed line counted), anything else in it is not.
TEST(Supervisor, GpuRecordsAreReadFromTheProbesFile) {
  std::string dir = faultline::testing::make_temp_dir("sup-gpu");
  RankLaunch launch;
  launch.metrics_path = dir + "/metrics.rank0.jsonl";
  launch.log_path = dir + "/rank0.log";
  const std::string gpu = gpu_records_path(launch.metrics_path);
  EXPECT_EQ(gpu, dir + "/metrics.rank0.jsonl.gpu.jsonl");
  const std::string interval = R"({"v":1,"type":"gpu","rank":0,"t":0.1,"unix_t0":5,"unix_t1":5.1})";
  launch.argv = {"/bin/sh", "-c",
                 "echo '{\"v\":1,\"type\":\"step\",\"rank\":0,\"t\":1,\"step\":1}' >> " +
                     launch.metrics_path + "; echo '" + interval + "' >> " + gpu + "; echo '" +
                     interval + "' >> " + gpu + "; echo 'not json' >> " + gpu +
                     "; echo '{\"v\":1,\"type\":\"step\",\"rank\":0,\"t\":1,\"step\":2}' >> " +
                     gpu};
  CountingSink sink;
  auto result = run({launch}, {}, sink);
  EXPECT_FALSE(result.crash);
  EXPECT_EQ(sink.steps, 1);
  EXPECT_EQ(sink.gpu, 2);
  EXPECT_EQ(sink.malformed, 1);
}

TEST(Supervisor, HangIsCaughtWithinTheStepTimeoutAndLeavesNoProcess) {
  std::string dir = faultline::testing::make_temp_dir("sup-hang");
  CountingSink sink;
  SuperviseOptions options;
  options.step_timeout_s = 3;
  auto result =
      run(trainer_ranks(2, dir, {"fault.hang_rank=1", "fault.hang_step=6"}), options, sink);
  ASSERT_TRUE(result.hang);
  EXPECT_EQ(result.hang->step, 6);
  EXPECT_LT(result.wall_s, 3 + 10);  // start-up plus the timeout plus the kill grace
  for (const auto& rank : result.ranks) EXPECT_TRUE(rank.killed_by_harness);
  EXPECT_EQ(processes_mentioning(dir), 0);
}

TEST(Supervisor, HangNamesTheRankThatNeverEnteredTheCollective) {
  std::string dir = faultline::testing::make_temp_dir("sup-hang4");
  CountingSink sink;
  SuperviseOptions options;
  options.step_timeout_s = 3;
  auto result =
      run(trainer_ranks(4, dir, {"fault.hang_rank=2", "fault.hang_step=7"}), options, sink);
  ASSERT_TRUE(result.hang);
  EXPECT_EQ(result.hang->ranks, (std::vector<int>{2}));
  EXPECT_EQ(result.hang->waiting, (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(result.hang->step, 7);
  EXPECT_EQ(result.hang->collective, 7);  // one allreduce per step
  EXPECT_LT(result.wall_s, 3 + 15);
  EXPECT_EQ(processes_mentioning(dir), 0);
}

TEST(Supervisor, CrashNamesTheFirstRankItsSignalAndStep) {
  std::string dir = faultline::testing::make_temp_dir("sup-crash");
  CountingSink sink;
  SuperviseOptions options;
  options.peer_exit_grace = std::chrono::milliseconds(500);
  auto result =
      run(trainer_ranks(2, dir,
                        {"fault.crash_rank=1", "fault.crash_step=4", "fault.crash_signal=ABRT"}),
          options, sink);
  ASSERT_TRUE(result.crash);
  EXPECT_EQ(result.crash->rank, 1);
  EXPECT_EQ(result.crash->signal, SIGABRT);
  EXPECT_EQ(signal_name(result.crash->signal), "SIGABRT");
  EXPECT_EQ(result.crash->step, 4);
  EXPECT_EQ(processes_mentioning(dir), 0);
}

// A trainer halting on a failure writes its evidence after the step record that failed: the
// harness, stopping the trial on that record, lets it finish. Killing it at once lost the anomaly
// record that names the module whenever the trainer was slower than the harness's poll.
TEST(Supervisor, ATrainerHaltingOnTheRecordThatStopsTheTrialWritesItsEvidenceFirst) {
  std::string dir = faultline::testing::make_temp_dir("sup-halt");
  const std::string anomaly =
      R"(echo '{"v":1,"type":"anomaly","rank":0,"t":1,"step":3,"kind":"nonfinite",)"
      R"("phase":"forward","where":"blocks.1.mlp","probe":"full"}' >> $M)";
  const RankLaunch rank =
      script_rank(dir, std::string(kNanStep) + "; sleep 1; " + anomaly + "; exit 3");
  StopAtFirstStep sink;
  auto result = run({rank}, {}, sink);
  EXPECT_TRUE(result.stopped_by_sink);
  EXPECT_EQ(sink.anomalies, 1);
  ASSERT_EQ(result.ranks.size(), 1u);
  EXPECT_FALSE(result.ranks[0].killed_by_harness);
  EXPECT_EQ(result.ranks[0].exit_code, 3);
}

// Not halting (it goes on to later steps) or log-only (it writes no evidence of its own): such
// a rank is stopped at once. With a grace of an hour, waiting for it would time the test out.
TEST(Supervisor, ARankThatGoesOnOrOnlyLogsIsStoppedWithoutTheHaltGrace) {
  SuperviseOptions options;
  options.halt_grace = std::chrono::hours(1);
  {
    std::string dir = faultline::testing::make_temp_dir("sup-goes-on");
    const RankLaunch rank =
        script_rank(dir, std::string(kNanStep) +
                             R"(; s=4; while :; do echo "{\"v\":1,\"type\":\"step\",\"rank\":0,)"
                             R"(\"t\":1,\"step\":$s}" >> $M; s=$((s+1)); sleep 0.05; done)");
    StopAtFirstStep sink;
    auto result = run({rank}, options, sink);
    EXPECT_TRUE(result.stopped_by_sink);
    EXPECT_TRUE(result.ranks.at(0).killed_by_harness);
    EXPECT_GT(result.last_step.at(0), 3);
    EXPECT_EQ(processes_mentioning(dir), 0);
  }
  {
    std::string dir = faultline::testing::make_temp_dir("sup-log-only");
    RankLaunch rank = script_rank(dir, "echo 'step 3 loss 4.5'; sleep 3600");
    rank.log_records = std::make_shared<const LogRecords>(
        LogRecords::compile(R"(step (?P<step>\d+) loss (?P<loss>\S+))", "", "test", dir));
    StopAtFirstStep sink;
    auto result = run({rank}, options, sink);
    EXPECT_TRUE(result.stopped_by_sink);
    EXPECT_TRUE(result.ranks.at(0).killed_by_harness);
    EXPECT_EQ(processes_mentioning(dir), 0);
  }
}

TEST(Supervisor, ExecutableThatDoesNotExistIsAnInfraError) {
  LocalLauncher launcher;
  RankLaunch launch;
  launch.argv = {"/nonexistent/faultline-train"};
  launch.log_path = faultline::testing::make_temp_dir("sup-infra") + "/log";
  EXPECT_THROW(launcher.launch({launch}), InfraError);
}
