// Tests for report/report_gather on a real store: a run's and a finding's report say what the
// stored rows say; unknown ids are user errors.
#include "report/report_gather.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "store_test_records.hpp"
#include "test_support.hpp"

namespace faultline::report {
namespace {

using faultline::testing::ScratchDir;
using faultline::testing::step_record;
using nlohmann::json;

// A finished run: "fail" when it has failures, unless `verdict` says otherwise (a warning).
int64_t stored_run(store::Store& store, std::vector<store::RunFailure> failures, int64_t steps,
                   double nan_from = INFINITY, std::string verdict = "") {
  store::RunInfo info;
  info.config_path = "/recipes/micro.toml";
  info.steps = steps;
  info.argv_json = R"(["faultline-train","--config","/tmp/my dir/r.toml"])";
  const int64_t id = store.create_run(info);
  std::vector<StepRecord> records;
  for (int64_t step = 1; step <= steps; ++step)
    records.push_back(step_record(0, step, step >= nan_from ? NAN : 5.0 - 0.1 * step));
  store.add_steps(id, records);
  info.status = store::RunStatus::Finished;
  info.verdict = !verdict.empty() ? verdict : failures.empty() ? "pass" : "fail";
  info.failures = std::move(failures);
  store.finish_run(id, info);
  return id;
}

// A finding with these fields (its kind among them) and a repro of train.py; its id.
int64_t stored_finding(store::Store& store, const json& fields) {
  store::FindingInfo info;
  info.kind = fields.at("kind").get<std::string>();
  info.fields_json = fields.dump();
  info.repro_json = json{{"argv", {"train.py"}}}.dump();
  return store.add_finding(info);
}

TEST(ReportGather, AStragglersRankIsTheSubjectOfItsVerdictNotSaidTwice) {
  ScratchDir dir;
  auto store = store::Store::open(dir.file("f.db"));
  const int64_t id = stored_run(store, {{"straggler", -1, 1, "rank 1 is 2x slower"}}, 9, 100);
  EXPECT_EQ(gather_run(store, id, {}).verdict,
            "Run " + std::to_string(id) + " failed: Rank 1 straggled.");
  // A straggler finding's headline alike.
  const int64_t finding = stored_finding(
      store, {{"kind", "straggler"}, {"rank", 1}, {"evidence", {{"failing_run", id}}}});
  EXPECT_EQ(gather_finding(store, finding, {}).verdict.substr(0, 17), "Rank 1 straggled.");
}

TEST(ReportGather, AFailedRunShowsItsFailureStepAndCurves) {
  ScratchDir dir;
  auto store = store::Store::open(dir.file("f.db"));
  const int64_t id = stored_run(store, {{"nonfinite", 7, 0, "loss is NaN"}}, 9, 7);
  const Report report = gather_run(store, id, {});
  EXPECT_EQ(report.subject, Subject::Run);
  EXPECT_EQ(report.verdict, "Run " + std::to_string(id) +
                                " failed: Training went non-finite (NaN/Inf) at step 7 on rank 0.");
  EXPECT_EQ(report.bad_step, 7);
  ASSERT_EQ(report.failures.rows.size(), 1u);
  EXPECT_EQ(report.failures.rows[0][3], "loss is NaN");
  EXPECT_EQ(report.repro_command, "faultline isolate --run " + std::to_string(id));
  EXPECT_EQ(report.trainer_command, "faultline-train --config '/tmp/my dir/r.toml'");
  EXPECT_EQ(report.loss.size(), 9u);
  ASSERT_FALSE(report.plots.empty());
  EXPECT_EQ(report.plots.front().id, "loss");
}

TEST(ReportGather, AFindingHasItsLocationTimelineBaselineAndReferenceBand) {
  ScratchDir dir;
  auto store = store::Store::open(dir.file("f.db"));
  const int64_t failing = stored_run(store, {{"nonfinite", 6, 0, ""}}, 8, 6);
  const int64_t replay = stored_run(store, {{"nonfinite", 6, 0, ""}}, 6, 6);
  const int64_t baseline = stored_run(store, {}, 8);
  const int64_t seed = stored_run(store, {}, 8);
  store.add_reference({0, "micro-seeds", {baseline, seed}, "/recipes/micro.toml", "", ""});
  const json timeline = json::array({{{"phase", "reproduce"},
                                      {"run", replay},
                                      {"verdict", "fail"},
                                      {"reused", false},
                                      {"steps_run", 6},
                                      {"wall_s", 1.5}},
                                     {{"phase", "config: baseline"},
                                      {"run", baseline},
                                      {"verdict", "pass"},
                                      {"reused", true},
                                      {"steps_run", 0},
                                      {"wall_s", 0.0}}});
  const int64_t search = store.create_search("isolate", json{{"timeline", timeline}}.dump());
  store::FindingInfo info;
  info.kind = "nonfinite";
  info.fields_json =
      json{{"kind", "nonfinite"},
           {"step", 6},
           {"phase", "forward"},
           {"where", "blocks.1.mlp"},
           {"rank", nullptr},
           {"samples", nullptr},
           {"config_culprit",
            json::array({{{"key", "optim.lr"}, {"baseline", "0.003"}, {"failing", "10.0"}}})},
           {"min_scale", {{"ranks", 1}, {"from_step", 0}, {"steps", 6}, {"data_fraction", 0.5}}},
           {"trials", 2},
           {"trials_reused", 1},
           {"evidence_run", replay},
           {"tolerance", 1e-5},
           {"evidence", {{"failing_run", failing}, {"host", {{"cpu", "x86"}}}}}}
          .dump();
  info.repro_json = json{{"argv", {"faultline-train", "--set", "fault.nan_step=6"}}}.dump();
  info.search_id = search;
  const int64_t id = store.add_finding(info);

  const Report report = gather_finding(store, id, {});
  EXPECT_EQ(report.verdict,
            "Training went non-finite (NaN/Inf) at step 6 in blocks.1.mlp (forward); the config "
            "change to blame: optim.lr 0.003 → 10.0; it reproduces on 1 rank in 6 steps.");
  EXPECT_EQ(report.bad_step, 6);
  EXPECT_EQ(report.repro_command, "faultline repro F" + std::to_string(id));
  EXPECT_EQ(report.trainer_command, "faultline-train --set fault.nan_step=6");
  ASSERT_EQ(report.timeline.size(), 2u);
  EXPECT_EQ(report.timeline[0].tested, "1 rank · steps 1..6");
  EXPECT_EQ(report.timeline[0].failure, "nonfinite at step 6 (rank 0)");
  EXPECT_TRUE(report.timeline[1].reused);
  ASSERT_FALSE(report.summary.empty());
  EXPECT_EQ(report.summary[0].label, "search");
  EXPECT_EQ(report.summary[0].value,
            "2 trials (1 reused from the cache), 0 trainer steps (0 rank-steps), 1.5 s");
  ASSERT_EQ(report.config_culprit.size(), 1u);
  EXPECT_EQ(report.config_culprit[0].failing, "10.0");
  ASSERT_FALSE(report.deciding_facts.empty());
  EXPECT_EQ(report.deciding_facts[0].label, "cpu");
  // failing run (rank 0), the replay, the baseline, the reference band's two edges.
  const auto& loss = report.plots.front();
  ASSERT_EQ(loss.series.size(), 5u);
  EXPECT_EQ(loss.series[1].role, SeriesRole::Replay);
  EXPECT_EQ(loss.series[2].label, "baseline (run " + std::to_string(baseline) + ")");
  EXPECT_EQ(loss.series[3].role, SeriesRole::BandHigh);
}

// A log-only trainer writes no resume event: its replay's first step is the step that saved
// the checkpoint its trial was given, as the failing run's checkpoint lines said.
TEST(ReportGather, ALogOnlyReplayFromACheckpointShowsTheStepsItRanNotOneToItsEnd) {
  ScratchDir dir;
  auto store = store::Store::open(dir.file("f.db"));
  const int64_t failing = stored_run(store, {{"nonfinite", 9, 0, ""}}, 9, 9);
  const std::string saved = dir.file("ckpt_000006.pt");
  store.add_events(failing, {{0, 1.0, "checkpoint", 3,
                              json{{"step", 3}, {"path", dir.file("ckpt_000003.pt")}}.dump()},
                             {0, 2.0, "checkpoint", 6, json{{"step", 6}, {"path", saved}}.dump()}});
  const int64_t replay = stored_run(store, {{"nonfinite", 9, 0, ""}}, 9, 9);
  store.put_trial("h1", json{{"resume", saved}, {"ranks", 1}}.dump(), "{}", replay);
  const int64_t fresh = stored_run(store, {}, 5);
  store.put_trial("h2", json{{"resume", ""}, {"ranks", 1}}.dump(), "{}", fresh);
  const json timeline = json::array(
      {{{"phase", "reproduce"}, {"run", replay}, {"verdict", "fail"}, {"steps_run", 3}},
       {{"phase", "determinism"}, {"run", fresh}, {"verdict", "pass"}, {"steps_run", 5}}});
  const int64_t search = store.create_search("isolate", json{{"timeline", timeline}}.dump());
  store::FindingInfo info;
  info.kind = "nonfinite";
  info.fields_json = json{{"kind", "nonfinite"},
                          {"step", 9},
                          {"evidence_run", replay},
                          {"evidence", {{"failing_run", failing}}}}
                         .dump();
  info.repro_json = json{{"argv", {"train.py"}}}.dump();
  info.search_id = search;
  const Report report = gather_finding(store, store.add_finding(info), {});
  ASSERT_EQ(report.timeline.size(), 2u);
  EXPECT_EQ(report.timeline[0].tested, "1 rank · steps 7..9");
  EXPECT_EQ(report.timeline[1].tested, "1 rank · steps 1..5");
}

TEST(ReportGather, AReferenceBandIsOfEachRunsLowestRankWhateverOrderItsRanksWereStoredIn) {
  ScratchDir dir;
  auto store = store::Store::open(dir.file("f.db"));
  const int64_t subject = stored_run(store, {}, 3);
  std::vector<int64_t> references;
  for (double offset : {0.0, 0.5}) {
    store::RunInfo info;
    info.config_path = "/recipes/micro.toml";
    const int64_t id = store.create_run(info);
    // Ranks 2 and 1 interleaved, the higher first and steps backwards; rank 2's loss is far off.
    std::vector<StepRecord> records;
    for (int64_t step = 3; step >= 1; --step)
      for (int rank : {2, 1})
        records.push_back(step_record(rank, step, (rank == 1 ? 4.0 : 100.0) + offset + step));
    store.add_steps(id, records);
    references.push_back(id);
  }
  store.add_reference({0, "two", references, "/recipes/micro.toml", "", ""});
  const Report report = gather_run(store, subject, {});
  const auto& loss = report.plots.front();
  ASSERT_EQ(loss.series.size(), 3u);  // the run, the band's two edges
  EXPECT_EQ(loss.series[1].steps, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(loss.series[1].values, (std::vector<double>{5.5, 6.5, 7.5}));  // high: rank 1's
  EXPECT_EQ(loss.series[2].values, (std::vector<double>{5.0, 6.0, 7.0}));
}

TEST(ReportGather, AHangsStacksAreABlockAndItsRankLoopIsTheTrainerCommand) {
  ScratchDir dir;
  auto store = store::Store::open(dir.file("f.db"));
  const int64_t failing = stored_run(store, {{"hang", 5, 1, ""}}, 4, 4);
  store::FindingInfo info;
  info.kind = "hang";
  info.fields_json = json{{"kind", "hang"},
                          {"step", 5},
                          {"rank", 1},
                          {"detail",
                           "rank(s) 1 never entered collective #5 (step 5) that rank(s) 0 wait in; "
                           "the stacks of rank 1 (SIGUSR1, from its log):\n"
                           "    Current thread 0x01 (most recent call first):\n"
                           "      File \"train.py\", line 209 in at_step_start"},
                          {"min_scale", {{"ranks", 2}, {"from_step", 0}, {"steps", 5}}},
                          {"evidence", {{"failing_run", failing}}}}
                         .dump();
  // Stored with the text to paste: one process per rank.
  info.repro_json = json{
      {"argv", {"python3", "train.py"}},
      {"command",
       "for r in $(seq 0 1); do RANK=$r ... python3 train.py & done; "
       "wait"}}.dump();
  const Report report = gather_finding(store, store.add_finding(info), {});
  EXPECT_EQ(report.trainer_command,
            "for r in $(seq 0 1); do RANK=$r ... python3 train.py & done; wait");
  const auto detail = std::find_if(report.location.begin(), report.location.end(),
                                   [](const Fact& fact) { return fact.label == "detail"; });
  ASSERT_NE(detail, report.location.end());
  EXPECT_EQ(detail->value,
            "rank(s) 1 never entered collective #5 (step 5) that rank(s) 0 wait in; the stacks of "
            "rank 1 (SIGUSR1, from its log):");
  EXPECT_EQ(report.detail_block,
            "Current thread 0x01 (most recent call first):\n"
            "  File \"train.py\", line 209 in at_step_start");
}

TEST(ReportGather, ARunWithOnlyAWarningPassedAndSaysTheWarning) {
  ScratchDir dir;
  auto store = store::Store::open(dir.file("f.db"));
  const int64_t id =
      stored_run(store, {{"teardown_crash", -1, 1, "rank 1 died of SIGABRT after its end event"}},
                 9, INFINITY, "pass");
  const Report report = gather_run(store, id, {});
  EXPECT_FALSE(report.failed);
  EXPECT_EQ(report.verdict, "Run " + std::to_string(id) +
                                " pass after 9 steps on 1 rank; loss 4.9 → 4.1; warning: A rank "
                                "died as it shut down, after training ended (rank 1).");
  EXPECT_EQ(report.failures.rows.size(), 1u);
  EXPECT_EQ(report.repro_command, "");
}

TEST(ReportGather, TheFailuresTableListsWhatFailedTheRunBeforeItsWarnings) {
  ScratchDir dir;
  auto store = store::Store::open(dir.file("f.db"));
  const int64_t id = stored_run(
      store,
      {{"teardown_crash", -1, 1, "rank 1 died of SIGABRT after its end event said it halted"},
       {"nonfinite", 20, 0, "loss is nan"}},
      20, 20, "fail");
  const Report report = gather_run(store, id, {});
  EXPECT_TRUE(report.failed);
  EXPECT_EQ(report.verdict, "Run " + std::to_string(id) +
                                " failed: Training went non-finite (NaN/Inf) at step 20 "
                                "on rank 0.");
  ASSERT_EQ(report.failures.rows.size(), 2u);
  EXPECT_EQ(report.failures.rows[0][0], "nonfinite");
  EXPECT_EQ(report.failures.rows[1][0], "teardown_crash");
}

TEST(ReportGather, ALossScalerThatFoundNoScaleIsNoNanInTheHeadline) {
  ScratchDir dir;
  auto store = store::Store::open(dir.file("f.db"));
  const store::RunFailure collapse{"nonfinite", 30, 0, "the loss scaler skipped 8 steps in a row",
                                   37};
  const int64_t run = stored_run(store, {collapse}, 40);
  EXPECT_EQ(gather_run(store, run, {}).verdict,
            "Run " + std::to_string(run) +
                " failed: The fp16 loss scale collapsed at step 30 on rank 0.");
  const int64_t finding = stored_finding(
      store, {{"kind", "nonfinite"}, {"step", 30}, {"evidence", {{"failing_run", run}}}});
  EXPECT_EQ(gather_finding(store, finding, {}).verdict,
            "The fp16 loss scale collapsed at step 30.");
}

TEST(ReportGather, AReplayFromACheckpointCountsOnlyTheStepsAfterIt) {
  ScratchDir dir;
  auto store = store::Store::open(dir.file("f.db"));
  const int64_t failing = stored_run(store, {{"nonfinite", 150, 0, ""}}, 150);
  const int64_t finding = stored_finding(
      store,
      {{"kind", "nonfinite"},
       {"step", 150},
       {"min_scale", {{"ranks", 1}, {"from_step", 100}, {"steps", 150}, {"data_fraction", 1}}},
       {"evidence", {{"failing_run", failing}}}});
  const Report report = gather_finding(store, finding, {});
  EXPECT_EQ(report.verdict,
            "Training went non-finite (NaN/Inf) at step 150; it reproduces on 1 rank in 50 steps "
            "from the checkpoint of step 100.");
}

// A trainer that names the loss as the place of a non-finite loss: said once ("in loss (loss)"
// before), and one step is "1 step".
TEST(ReportGather, APlaceThatIsItsPhaseIsSaidOnceAndOneStepIsSingular) {
  ScratchDir dir;
  auto store = store::Store::open(dir.file("f.db"));
  const int64_t failing = stored_run(store, {{"nonfinite", 47, 0, ""}}, 47);
  const int64_t finding = stored_finding(
      store, {{"kind", "nonfinite"},
              {"step", 47},
              {"where", "loss"},
              {"phase", "loss"},
              {"min_scale", {{"ranks", 1}, {"from_step", 46}, {"steps", 47}, {"data_fraction", 1}}},
              {"evidence", {{"failing_run", failing}}}});
  EXPECT_EQ(gather_finding(store, finding, {}).verdict,
            "Training went non-finite (NaN/Inf) at step 47 in loss; it reproduces on 1 rank in 1 "
            "step from the checkpoint of step 46.");
}

TEST(ReportGather, AnLrAnomalysHeadlineDoesNotSayTheLearningRateTwice) {
  ScratchDir dir;
  auto store = store::Store::open(dir.file("f.db"));
  const int64_t failing = stored_run(store, {{"lr_anomaly", 40, 0, ""}}, 60);
  const int64_t finding = stored_finding(store, {{"kind", "lr_anomaly"},
                                                 {"step", 40},
                                                 {"where", "lr"},
                                                 {"phase", "optimizer"},
                                                 {"rank", 0},
                                                 {"evidence", {{"failing_run", failing}}}});
  const Report report = gather_finding(store, finding, {});
  EXPECT_EQ(report.verdict, "The learning rate left its schedule at step 40 on rank 0.");
}

// A finding says what to check for its kind, under its detail; a kind without a hint adds none.
TEST(ReportGather, AFindingSaysWhatToCheckForItsKind) {
  ScratchDir dir;
  auto store = store::Store::open(dir.file("f.db"));
  const int64_t failing = stored_run(store, {{"loss_spike", 2, 0, ""}}, 10);
  auto what_to_check = [&](const std::string& kind) -> std::string {
    const int64_t finding = stored_finding(
        store, {{"kind", kind}, {"step", 2}, {"evidence", {{"failing_run", failing}}}});
    for (const auto& fact : gather_finding(store, finding, {}).location)
      if (fact.label == "what to check") return fact.value;
    return "";
  };
  EXPECT_NE(what_to_check("loss_spike").find("learning rate too high"), std::string::npos);
  EXPECT_EQ(what_to_check("crash"), "");
}

TEST(ReportGather, UnknownIdsAreUserErrors) {
  ScratchDir dir;
  auto store = store::Store::open(dir.file("f.db"));
  EXPECT_EQ(faultline::testing::user_error([&] { gather_finding(store, 4, {}); }).what,
            "no finding F4");
  EXPECT_EQ(faultline::testing::user_error([&] { gather_run(store, 9, {}); }).what, "no run 9");
  const int64_t id = stored_run(store, {}, 2);
  EXPECT_EQ(faultline::testing::user_error([&] { gather_run(store, id, {"nope"}); }).what,
            "no reference named 'nope'");
}

}  // namespace
}  // namespace faultline::report
