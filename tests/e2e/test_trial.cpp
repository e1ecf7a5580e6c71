// End-to-end: TrialRunner on real faultline-train ranks and a real SQLite store — the stored
// argv is the command line that ran, a run stopped at the total time limit is a `hang`, and
// malformed metrics lines are counted per rank, stored with the run and returned.
#include "harness/trial/trial.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "harness/launch/local_launcher.hpp"
#include "store/store.hpp"
#include "support/metrics.hpp"
#include "support/process.hpp"

using namespace faultline;
using namespace faultline::harness;
using faultline::testing::make_temp_dir;
using faultline::testing::processes_mentioning;
using ::testing::HasSubstr;

namespace {

const std::string kMicro = FAULTLINE_SOURCE_DIR "/tests/e2e/recipes/micro.toml";

struct Bench {
  std::string dir = make_temp_dir("trial");
  store::Store store = store::Store::open(dir + "/faultline.db");
  LocalLauncher launcher;

  Outcome run(const TrialSpec& spec, const std::string& trainer = FAULTLINE_TRAIN_BIN,
              double total_timeout_s = 0) {
    RunnerOptions options;
    options.trainer = trainer;
    options.work_dir = dir + "/runs";
    options.supervise.total_timeout_s = total_timeout_s;
    TrialRunner runner(store, launcher, options);
    return runner.run(spec);
  }
};

TrialSpec micro(std::vector<std::string> overrides, int ranks = 1) {
  TrialSpec spec;
  spec.config_path = kMicro;
  spec.overrides = std::move(overrides);
  spec.ranks = ranks;
  return spec;
}

}  // namespace

TEST(Trial, TheStoredArgvIsTheCommandLineThatRan) {
  Bench bench;
  const TrialSpec spec = micro({"train.steps=6"});
  const Outcome outcome = bench.run(spec);
  ASSERT_EQ(outcome.verdict, Verdict::Pass) << outcome.infra_detail;
  const auto argv = nlohmann::json::parse(bench.store.get_run(outcome.run_id)->argv_json)
                        .get<std::vector<std::string>>();
  std::vector<std::string> expected = trainer_argv(spec, FAULTLINE_TRAIN_BIN);
  expected.insert(expected.end(), {"--out", outcome.out_dir});
  EXPECT_EQ(argv, expected);

  // Run again from the stored argv alone: the same steps, bit for bit.
  const std::string again = make_temp_dir("trial-again") + "/metrics.jsonl";
  auto replay = faultline::testing::run_process({argv, {{"FAULTLINE_METRICS", again}}});
  ASSERT_EQ(replay.exit_code, 0) << replay.output;
  const auto first = faultline::testing::deterministic_steps(
      faultline::testing::read_jsonl(outcome.out_dir + "/metrics.rank0.jsonl"));
  EXPECT_EQ(first.size(), 6u);
  EXPECT_EQ(faultline::testing::deterministic_steps(faultline::testing::read_jsonl(again)), first);
}

TEST(Trial, ARunStoppedAtTheTotalTimeLimitIsAHangNotAPass) {
  Bench bench;
  // A million micro steps take far longer than the limit (milliseconds a step, 40 steps in
  // under a second here): the limit, not the run's end, stops it.
  const Outcome outcome = bench.run(micro({"train.steps=1000000"}), FAULTLINE_TRAIN_BIN, 3);
  EXPECT_EQ(outcome.verdict, Verdict::Fail) << outcome.infra_detail;
  ASSERT_EQ(outcome.failures.size(), 1u);
  const auto& failure = outcome.failures[0];
  EXPECT_STREQ(to_string(failure.kind), "hang");
  EXPECT_EQ(failure.rank, -1);
  EXPECT_EQ(failure.step, outcome.last_step + 1);
  EXPECT_THAT(failure.detail, HasSubstr("the total time limit of 3 s was reached"));
  EXPECT_LT(outcome.last_step, 1000000);
  auto stored = *bench.store.get_run(outcome.run_id);
  EXPECT_EQ(stored.verdict, "fail");
  ASSERT_EQ(stored.failures.size(), 1u);
  EXPECT_EQ(stored.failures[0].kind, "hang");
  EXPECT_EQ(stored.failures[0].detail, failure.detail);
  EXPECT_EQ(processes_mentioning(outcome.out_dir), 0);
}

TEST(Trial, MalformedMetricsLinesAreCountedPerRankAndStored) {
  Bench bench;
  // A protocol-speaking trainer whose rank 1 adds three lines that are not the protocol.
  const std::string wrapper = bench.dir + "/train-with-garbage";
  std::ofstream(wrapper) << "#!/bin/sh\n"
                         << "'" FAULTLINE_TRAIN_BIN "' \"$@\"; code=$?\n"
                         << "if [ \"$RANK\" = 1 ]; then\n"
                         << "  printf '%s\\n' 'not json' '[1,2]' '{\"v\":1,\"type\":\"step\"}'"
                         << " >> \"$FAULTLINE_METRICS\"\n"
                         << "fi\n"
                         << "exit $code\n";
  ASSERT_EQ(chmod(wrapper.c_str(), 0755), 0);
  const Outcome outcome = bench.run(micro({"train.steps=5"}, 2), wrapper);
  EXPECT_EQ(outcome.verdict, Verdict::Pass) << outcome.infra_detail;  // never fatal
  ASSERT_EQ(outcome.malformed.size(), 1u);
  EXPECT_EQ(outcome.malformed[0].rank, 1);
  EXPECT_EQ(outcome.malformed[0].lines, 3);
  EXPECT_EQ(outcome.malformed[0].first_line, "not json");
  EXPECT_FALSE(outcome.malformed[0].first_error.empty());
  EXPECT_EQ(outcome.steps_run, 5);  // the good lines around them are all ingested

  auto stored = *store::Store::open(bench.store.path()).get_run(outcome.run_id);
  ASSERT_EQ(stored.malformed.size(), 1u);
  EXPECT_EQ(stored.malformed[0].rank, 1);
  EXPECT_EQ(stored.malformed[0].lines, 3);
  EXPECT_EQ(stored.malformed[0].first_line, "not json");
  EXPECT_EQ(stored.malformed[0].first_error, outcome.malformed[0].first_error);
}

// Nothing judged is not a pass: a "trainer" that exits 0 without a step record (--trainer
// /bin/true), and one that stops cleanly short of its steps, could not do what they were asked.
// Why is kept with the run, not only printed.
TEST(Trial, ATrainerThatTrainsNothingOrStopsShortIsAnInfrastructureErrorKeptWithTheRun) {
  Bench bench;
  const Outcome nothing = bench.run(micro({"train.steps=5"}), "/bin/true");
  EXPECT_EQ(nothing.verdict, Verdict::InfraError);
  EXPECT_THAT(nothing.infra_detail,
              HasSubstr("faultline-train ended without a single step record: it wrote none to "
                        "$FAULTLINE_METRICS (is --trainer faultline-train?); the end of rank "
                        "0's log: (the log is empty)"));
  auto stored = *bench.store.get_run(nothing.run_id);
  EXPECT_EQ(stored.verdict, "infra_error");
  EXPECT_EQ(stored.infra_detail, nothing.infra_detail);

  // Trains 2 of its 5 steps (train.stop_after behind faultline's back), then exits 0.
  const std::string short_trainer = bench.dir + "/train-two-steps";
  std::ofstream(short_trainer) << "#!/bin/sh\n"
                               << "exec '" FAULTLINE_TRAIN_BIN
                                  "' \"$@\" --set train.stop_after=2\n";
  ASSERT_EQ(chmod(short_trainer.c_str(), 0755), 0);
  const Outcome stopped = bench.run(micro({"train.steps=5"}), short_trainer);
  EXPECT_EQ(stopped.verdict, Verdict::InfraError);
  EXPECT_EQ(stopped.infra_cause, InfraCause::Machine);
  EXPECT_THAT(stopped.infra_detail,
              HasSubstr("faultline-train exited cleanly after step 2 of the 5 asked, with no "
                        "failure in its records"));
  EXPECT_EQ(bench.store.get_run(stopped.run_id)->infra_detail, stopped.infra_detail);

  // A trainer that refuses its input (exit 2) after a long usage text: the detail quotes its
  // last 15 whole lines, its error last, not the usage's first half cut mid-word.
  const std::string refusing = bench.dir + "/train-refusing";
  std::ofstream(refusing)
      << "#!/bin/sh\n"
      << "for i in $(seq 1 40); do echo \"usage: train [--option-$i N]\"; done\n"
      << "echo 'train: error: --steps must be at least 1'\nexit 2\n";
  ASSERT_EQ(chmod(refusing.c_str(), 0755), 0);
  const Outcome refused = bench.run(micro({"train.steps=5"}), refusing);
  EXPECT_EQ(refused.verdict, Verdict::InfraError);
  EXPECT_EQ(refused.infra_cause, InfraCause::BadInput);  // the caller's input: exit 2
  EXPECT_THAT(refused.infra_detail,
              HasSubstr("rank 0 exited 2 before training: …\nusage: train [--option-27 N]\n"));
  EXPECT_THAT(refused.infra_detail,
              ::testing::EndsWith("[--option-40 N]\ntrain: error: --steps must be at least 1"));
  EXPECT_THAT(refused.infra_detail, ::testing::Not(HasSubstr("--option-26 ")));
}

// Exit 3 and 4 are the trainer's "halted on a non-finite value / a data anomaly"; a rank that
// exits 3 with no record of one died, and is a crash at the step it died in (it read as
// "exited cleanly after step 6 of the 20 asked", an infrastructure error).
TEST(Trial, AnExitThatClaimsAHaltNoRecordShowsIsACrash) {
  Bench bench;
  for (const char* code : {"3", "4"}) {
    const Outcome died =
        bench.run(micro({"train.steps=10", "fault.crash_rank=0", "fault.crash_step=7",
                         std::string("fault.crash_signal=") + code}));
    EXPECT_EQ(died.verdict, Verdict::Fail) << code << ": " << died.infra_detail;
    ASSERT_EQ(died.failures.size(), 1u) << code;
    EXPECT_EQ(died.failures[0].kind, detectors::FailureKind::Crash);
    EXPECT_EQ(died.failures[0].step, 7);
    EXPECT_THAT(died.failures[0].detail, HasSubstr(std::string("rank 0 exited ") + code +
                                                   " after step 6, the code for a halt"));
  }
  // A real halt keeps its own kind: the NaN's record, not a crash.
  const Outcome halted =
      bench.run(micro({"train.steps=10", "fault.nan_step=5", "fault.nan_layer=blocks.0.mlp"}));
  ASSERT_FALSE(halted.failures.empty());
  EXPECT_EQ(halted.failures[0].kind, detectors::FailureKind::Nonfinite);
  for (const auto& failure : halted.failures)
    EXPECT_NE(failure.kind, detectors::FailureKind::Crash) << failure.detail;
}

// A run directory that cannot be made is the caller's --work-dir to fix; the run it would have
// been is not stored (it stayed `running`, then read as `interrupted` though nothing ran).
TEST(Trial, AWorkDirThatCannotBeMadeIsBadInputAndStoresNoRun) {
  Bench bench;
  std::ofstream(bench.dir + "/runs") << "a file where the runs' folder goes\n";
  try {
    bench.run(micro({"train.steps=2"}));
    FAIL() << "expected a UserError";
  } catch (const UserError& error) {
    EXPECT_THAT(error.items().front().what, HasSubstr("cannot create the run's directory"));
    EXPECT_EQ(error.items().front().where, bench.dir + "/runs/run-1");
  }
  EXPECT_TRUE(bench.store.list_runs().empty());
}
