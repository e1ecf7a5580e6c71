// End-to-end: browsing a store of real runs: export round-trips the stored values (NaN too), runs
// hides search trials and filters, show RUN lays a run out, diff names the one changed key, gc
// keeps what a finding's repro needs (repro still works) and removes the rest, and bad input is
// refused with the value and the valid ones named.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "common/text.hpp"
#include "store/store.hpp"
#include "support/cli.hpp"

using namespace faultline::testing;
using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

namespace {

const std::string kMicro = FAULTLINE_SOURCE_DIR "/tests/e2e/recipes/micro.toml";

Cli train(const std::string& dir, std::vector<std::string> sets,
          std::vector<std::string> extra = {}) {
  std::vector<std::string> args = with_sets({"train", "-c", kMicro}, sets);
  args.insert(args.end(), extra.begin(), extra.end());
  return faultline_cli(args, dir, 300);
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool same_value(const std::string& cell, double stored) {
  const double read = std::stod(cell);
  return std::isnan(stored) ? std::isnan(read) : std::memcmp(&read, &stored, sizeof read) == 0;
}

int64_t run_id_of(const Cli& cli) {
  return cli.doc.value("run_id", int64_t{0});
}

}  // namespace

TEST(Browse, ExportedCsvHasOneRowPerStepAndRankWithTheStoredValues) {
  const std::string dir = make_temp_dir("browse-export");
  auto failing = train(
      dir, {"dist.ranks=2", "train.steps=12", "fault.nan_step=9", "fault.nan_layer=blocks.0.mlp"},
      {"--json"});
  ASSERT_EQ(failing.result.exit_code, 1) << failing.result.output;
  const int64_t run = run_id_of(failing);
  auto csv =
      faultline_cli({"export", std::to_string(run), "--format", "csv", "-o", dir + "/m.csv"}, dir);
  ASSERT_EQ(csv.result.exit_code, 0) << csv.result.output;

  auto store = faultline::store::Store::open(dir + "/faultline.db");
  const auto stored = store.steps(run);
  const auto summary = store.summarize(run);
  ASSERT_EQ(summary.ranks, 2);
  const auto lines = lines_of(dir + "/m.csv");
  ASSERT_EQ(lines.size(), stored.size() + 1) << "a header, then one row per step and rank";
  // Every step before the NaN on both ranks, and the NaN's step on at least one: the run halts
  // there, and on a loaded machine the rank torn down second may not have written that step.
  std::map<int, std::set<int64_t>> steps_of_rank;
  for (const auto& record : stored) steps_of_rank[record.rank].insert(record.step);
  ASSERT_EQ(steps_of_rank.size(), 2u);
  for (auto& [rank, steps] : steps_of_rank) {
    steps.insert(summary.last_step);  // present or not: the steps before it are what is checked
    EXPECT_EQ(steps.size(), static_cast<size_t>(summary.last_step)) << "rank " << rank;
    EXPECT_EQ(*steps.begin(), 1) << "rank " << rank;
  }
  EXPECT_GE(stored.size(), static_cast<size_t>(summary.last_step * 2 - 1));
  const auto header = faultline::split(lines[0], ',');
  const auto column = [&](const std::string& name) {
    return static_cast<size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  };
  int nans = 0;
  for (size_t i = 0; i < stored.size(); ++i) {
    const auto cells = faultline::split(lines[i + 1], ',');
    ASSERT_EQ(cells.size(), header.size()) << lines[i + 1];
    EXPECT_EQ(std::stoi(cells[column("rank")]), stored[i].rank);
    EXPECT_EQ(std::stoll(cells[column("step")]), stored[i].step);
    EXPECT_TRUE(same_value(cells[column("loss")], stored[i].loss)) << lines[i + 1];
    EXPECT_TRUE(same_value(cells[column("grad_norm")], stored[i].grad_norm)) << lines[i + 1];
    EXPECT_TRUE(same_value(cells[column("lr")], stored[i].lr)) << lines[i + 1];
    EXPECT_TRUE(same_value(cells[column("step_ms")], stored[i].step_ms.value())) << lines[i + 1];
    nans += cells[column("loss")] == "nan";
  }
  EXPECT_GE(nans, 1) << "the failing step's loss is spelled nan";

  auto jsonl = faultline_cli(
      {"export", std::to_string(run), "--format", "jsonl", "-o", dir + "/m.jsonl"}, dir);
  ASSERT_EQ(jsonl.result.exit_code, 0) << jsonl.result.output;
  EXPECT_EQ(lines_of(dir + "/m.jsonl").size(), stored.size());
  auto events =
      faultline_cli({"export", std::to_string(run), "--what", "events", "-o", dir + "/e.csv"}, dir);
  ASSERT_EQ(events.result.exit_code, 0) << events.result.output;
  EXPECT_GT(lines_of(dir + "/e.csv").size(), 2u);
}

TEST(Browse, RunsHidesSearchTrialsFiltersAndCountsStepsNotRankSteps) {
  const std::string dir = make_temp_dir("browse-runs");
  ASSERT_EQ(train(dir, {"dist.ranks=2", "train.steps=6"}).result.exit_code, 0);
  auto failing = train(dir, {"train.steps=30", "train.checkpoint_every=10", "fault.nan_step=24",
                             "fault.nan_layer=ln_f"});
  ASSERT_EQ(failing.result.exit_code, 1) << failing.result.output;
  EXPECT_THAT(failing.result.output, HasSubstr("next: faultline isolate --run 2"));
  auto isolate = faultline_cli({"isolate", "--run", "2", "--json"}, dir, 300);
  ASSERT_EQ(isolate.result.exit_code, 0) << isolate.result.output;

  auto runs = faultline_cli({"runs"}, dir);
  ASSERT_EQ(runs.result.exit_code, 0) << runs.result.output;
  EXPECT_THAT(runs.result.output, HasSubstr("RUN  ORIGIN"));
  EXPECT_THAT(runs.result.output, HasSubstr("FIRST FAILURE"));
  EXPECT_THAT(runs.result.output, HasSubstr("nonfinite@24"));
  EXPECT_THAT(runs.result.output, HasSubstr("search trial(s) hidden; --all shows them"));
  auto listed = faultline_cli({"runs", "--json"}, dir);
  ASSERT_EQ(listed.doc.at("runs").size(), 2u) << listed.result.output;
  EXPECT_EQ(listed.doc.at("runs").at(1).at("steps_run"), 6) << "steps, not steps x ranks";
  EXPECT_EQ(listed.doc.at("runs").at(1).at("steps_stored"), 12);
  auto all = faultline_cli({"runs", "--all", "--json"}, dir);
  EXPECT_GT(all.doc.at("runs").size(), 2u);
  auto failed = faultline_cli({"runs", "--failed", "--json"}, dir);
  ASSERT_EQ(failed.doc.at("runs").size(), 1u);
  EXPECT_EQ(failed.doc.at("runs").at(0).at("run_id"), 2);
  EXPECT_EQ(faultline_cli({"runs", "--recipe", "micro", "--since", "1h", "--json"}, dir)
                .doc.at("runs")
                .size(),
            2u);
  EXPECT_EQ(faultline_cli({"runs", "--recipe", "tiny", "--json"}, dir).doc.at("runs").size(), 0u);
  EXPECT_EQ(faultline_cli({"runs", "--since", "2199-01-01", "--json"}, dir).doc.at("runs").size(),
            0u);
  EXPECT_EQ(faultline_cli({"runs", "--limit", "1", "--json"}, dir).doc.at("runs").size(), 1u);

  auto bad = faultline_cli({"runs", "--since", "yesterday"}, dir);
  EXPECT_EQ(bad.result.exit_code, 2);
  EXPECT_THAT(bad.result.output,
              HasSubstr("'yesterday' is neither a date nor a duration (--since)"));
}

TEST(Browse, ShowRunIsLaidOutLikeAFindingAndJsonIsTheDocument) {
  const std::string dir = make_temp_dir("browse-show");
  auto failing = train(dir, {"train.steps=12", "fault.nan_step=9", "fault.nan_layer=ln_f"});
  ASSERT_EQ(failing.result.exit_code, 1) << failing.result.output;
  auto shown = faultline_cli({"show", "1"}, dir);
  ASSERT_EQ(shown.result.exit_code, 0) << shown.result.output;
  const auto& text = shown.result.output;
  EXPECT_THAT(text, HasSubstr("run 1: fail (train, 1 rank(s), 9 of 12 steps, "));
  EXPECT_THAT(text, HasSubstr("  overrides: train.steps=12 fault.nan_step=9 fault.nan_layer=ln_f"));
  EXPECT_THAT(text, HasSubstr("  run dir:  " + fs::weakly_canonical(dir + "/runs/run-1").string()));
  EXPECT_THAT(text, HasSubstr(" -> nan (9 step records)"));
  EXPECT_THAT(text, HasSubstr("  failure:  nonfinite at step 9 rank 0"));
  EXPECT_THAT(text, HasSubstr("  command:  " FAULTLINE_TRAIN_BIN " -c " + kMicro));
  EXPECT_THAT(text, HasSubstr("  next:     faultline isolate --run 1"));
  EXPECT_THAT(text, Not(HasSubstr("{")));
  auto doc = faultline_cli({"show", "1", "--json"}, dir);
  ASSERT_EQ(doc.result.exit_code, 0) << doc.result.output;
  EXPECT_EQ(doc.doc.at("run_id"), 1);
  EXPECT_EQ(doc.doc.at("verdict"), "fail");
  EXPECT_TRUE(doc.doc.at("config").is_string());
}

TEST(Browse, DiffOfTwoRunsNamesTheChangedKeyAndTheFirstStepThatDiffers) {
  const std::string dir = make_temp_dir("browse-diff");
  ASSERT_EQ(train(dir, {"train.steps=6"}).result.exit_code, 0);
  ASSERT_EQ(train(dir, {"train.steps=6", "optim.lr=0.02"}).result.exit_code, 0);
  ASSERT_EQ(train(dir, {"train.steps=6"}).result.exit_code, 0);
  auto diff = faultline_cli({"diff", "1", "2"}, dir);
  ASSERT_EQ(diff.result.exit_code, 0) << diff.result.output;
  EXPECT_THAT(diff.result.output, HasSubstr("config:   optim.lr: 0.01 -> 0.02"));
  EXPECT_THAT(diff.result.output,
              HasSubstr("records:  steps 1..6: first differ at step 1 rank 0: lr "));
  auto doc = faultline_cli({"diff", "1", "2", "--json"}, dir);
  ASSERT_EQ(doc.doc.at("config").size(), 1u) << doc.result.output;
  EXPECT_EQ(doc.doc.at("config").at(0).at("key"), "optim.lr");
  EXPECT_EQ(doc.doc.at("first_difference").at("step"), 1);
  auto same = faultline_cli({"diff", "1", "3"}, dir);
  EXPECT_THAT(same.result.output, HasSubstr("config:   the same"));
  EXPECT_THAT(same.result.output, HasSubstr("steps 1..6: every step record the same (6 compared)"));
  // A prefix of the run is compared over the steps it has, not called different at step 4.
  ASSERT_EQ(train(dir, {"train.steps=6", "train.stop_after=3"}).result.exit_code, 0);
  auto prefix = faultline_cli({"diff", "1", "4"}, dir);
  EXPECT_THAT(prefix.result.output,
              HasSubstr("records:  steps 1..3: every step record the same (3 compared); run 1 "
                        "also has steps 4..6"));
  auto prefix_doc = faultline_cli({"diff", "1", "4", "--json"}, dir);
  EXPECT_EQ(prefix_doc.doc.at("compared_steps"), nlohmann::json::array({1, 3}));
  EXPECT_EQ(prefix_doc.doc.at("a_steps"), nlohmann::json::array({1, 6}));
  EXPECT_TRUE(prefix_doc.doc.at("first_difference").is_null());
}

TEST(Browse, GcKeepsWhatAFindingsReproNeedsAndReproStillWorks) {
  const std::string dir = make_temp_dir("browse-gc");
  auto failing = train(dir, {"train.steps=60", "train.checkpoint_every=10", "fault.nan_step=34",
                             "fault.nan_layer=blocks.1.mlp"});
  ASSERT_EQ(failing.result.exit_code, 1) << failing.result.output;
  auto isolate = faultline_cli({"isolate", "--run", "1"}, dir, 300);
  ASSERT_EQ(isolate.result.exit_code, 0) << isolate.result.output;
  EXPECT_THAT(isolate.result.output, HasSubstr("next: faultline report F1 --html f1.html"));
  EXPECT_THAT(isolate.result.output, HasSubstr("trainer steps so far; "));
  EXPECT_THAT(isolate.result.output, HasSubstr(" spent"));
  auto unrelated = train(dir, {"train.steps=5"}, {"--json"});
  ASSERT_EQ(unrelated.result.exit_code, 0) << unrelated.result.output;
  const std::string unrelated_dir = dir + "/runs/run-" + std::to_string(run_id_of(unrelated));
  auto store = faultline::store::Store::open(dir + "/faultline.db");
  const auto finding = store.get_finding(1);
  ASSERT_TRUE(finding);
  const std::string resume =
      nlohmann::json::parse(finding->repro_json).at("spec").at("resume").get<std::string>();
  ASSERT_FALSE(resume.empty()) << "the repro resumes from run 1's checkpoint";
  ASSERT_TRUE(fs::exists(resume));

  // A finding exports its search's trials, and its evidence run's records.
  auto trials = faultline_cli(
      {"export", "F1", "--what", "trials", "--format", "jsonl", "-o", dir + "/t.jsonl"}, dir);
  ASSERT_EQ(trials.result.exit_code, 0) << trials.result.output;
  const auto fields = nlohmann::json::parse(finding->fields_json);
  EXPECT_EQ(lines_of(dir + "/t.jsonl").size(), fields.at("trials").get<size_t>());
  auto evidence = faultline_cli({"export", "F1", "-o", dir + "/f1.csv"}, dir);
  ASSERT_EQ(evidence.result.exit_code, 0) << evidence.result.output;
  EXPECT_EQ(lines_of(dir + "/f1.csv").size(),
            store.steps(fields.at("evidence_run").get<int64_t>()).size() + 1);

  auto dry = faultline_cli({"gc", "--dry-run"}, dir);
  ASSERT_EQ(dry.result.exit_code, 0) << dry.result.output;
  EXPECT_THAT(dry.result.output, HasSubstr("would remove (dry run):"));
  EXPECT_THAT(dry.result.output, HasSubstr(fs::weakly_canonical(unrelated_dir).string()));
  EXPECT_THAT(dry.result.output, HasSubstr("would free "));
  EXPECT_THAT(dry.result.output,
              HasSubstr("kept: run 1: " + resume + ": F1's repro resumes from it"));
  EXPECT_TRUE(fs::exists(unrelated_dir)) << "a dry run removes nothing";

  auto gc = faultline_cli({"gc", "--json"}, dir);
  ASSERT_EQ(gc.result.exit_code, 0) << gc.result.output;
  EXPECT_GT(gc.doc.at("bytes").get<uint64_t>(), 0u);
  EXPECT_FALSE(fs::exists(unrelated_dir));
  EXPECT_TRUE(fs::exists(resume));
  EXPECT_FALSE(fs::exists(dir + "/runs/run-1/checkpoints/step-00000010.ckpt"));
  EXPECT_EQ(store.list_runs(-1).size(), static_cast<size_t>(run_id_of(unrelated)))
      << "every run's row stays";

  auto repro = faultline_cli({"repro", "F1", "--json"}, dir, 300);
  ASSERT_EQ(repro.result.exit_code, 0) << repro.result.output;
  EXPECT_EQ(repro.doc.at("reproduced"), true);
  EXPECT_EQ(repro.doc.at("bitwise_identical"), true);
  auto shown = faultline_cli({"show", std::to_string(run_id_of(unrelated))}, dir);
  EXPECT_THAT(shown.result.output, HasSubstr("(removed)"));
}

TEST(Browse, BadInputNamesTheValueAndWhatWouldBeValid) {
  const std::string dir = make_temp_dir("browse-errors");
  ASSERT_EQ(train(dir, {"train.steps=3"}).result.exit_code, 0);
  auto format = faultline_cli({"export", "1", "--format", "xml"}, dir);
  EXPECT_EQ(format.result.exit_code, 2);
  EXPECT_THAT(format.result.output,
              HasSubstr("faultline: error: unknown --format value 'xml' (--format); give one of: "
                        "csv, jsonl"));
  auto what = faultline_cli({"export", "1", "--what", "losses"}, dir);
  EXPECT_EQ(what.result.exit_code, 2);
  EXPECT_THAT(what.result.output, HasSubstr("give one of: metrics, trials, events"));
  auto missing = faultline_cli({"export", "999"}, dir);
  EXPECT_EQ(missing.result.exit_code, 2);
  EXPECT_THAT(missing.result.output, HasSubstr("no run 999"));
  auto not_a_run = faultline_cli({"diff", "1", "two"}, dir);
  EXPECT_EQ(not_a_run.result.exit_code, 2);
  EXPECT_THAT(not_a_run.result.output, HasSubstr("'two' is not a run id"));
  auto older = faultline_cli({"gc", "--older-than", "soon"}, dir);
  EXPECT_EQ(older.result.exit_code, 2);
  EXPECT_THAT(older.result.output, HasSubstr("'soon' is neither a date nor a duration"));
  auto quiet = faultline_cli({"train", "-c", kMicro, "--set", "train.steps=3", "--quiet"}, dir);
  EXPECT_THAT(quiet.result.output, Not(HasSubstr("faultline train:")));
}

// A --db that names a folder (a run's output folder, say) is said to be one, with the file to
// give instead; it read "cannot open the store for writing" even for a read-only command.
TEST(Browse, AStorePathThatIsAFolderIsNamedAsOne) {
  const std::string dir = make_temp_dir("browse-db-dir");
  const auto result = run_process({{FAULTLINE_BIN, "runs", "--db", dir}});
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output,
              HasSubstr("faultline: error: the store path is a directory (" + dir +
                        "); give --db (or FAULTLINE_DB) a file, e.g. " + dir + "/faultline.db"));
}
