// Tests for harness/browse/gc.cpp on a real store and real files: a run's directory from its
// command line, what a finding's repro needs stays, everything else of finished runs goes.
#include "harness/browse/gc.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "harness/trial/run_owner.hpp"
#include "harness/trial/trial_cache.hpp"
#include "test_support.hpp"

namespace faultline::harness {
namespace {

namespace fs = std::filesystem;
using faultline::testing::ScratchDir;
using faultline::testing::write_file;
using nlohmann::json;

// A finished run whose trainer wrote to DIR/run-<id>, with a checkpoint event per step given.
int64_t stored_run(store::Store& store, const std::string& work,
                   const std::vector<int>& checkpoints, const std::string& parent = "train") {
  store::RunInfo info;
  info.parent = parent;
  const int64_t id = store.create_run(info);
  const std::string dir = work + "/run-" + std::to_string(id);
  fs::create_directories(dir + "/checkpoints");
  write_file(dir + "/metrics.rank0.jsonl", std::string(100, 'x'));
  store.set_run_argv(id, json({"faultline-train", "-c", "r.toml", "--out", dir}).dump());
  std::vector<EventRecord> events;
  for (int step : checkpoints) {
    const std::string path = dir + "/checkpoints/step-" + std::to_string(step) + ".ckpt";
    write_file(path, std::string(1000, 'c'));
    events.push_back(
        {0, 0, "checkpoint", step, json{{"name", "checkpoint"}, {"path", path}}.dump()});
  }
  store.add_events(id, events);
  info.verdict = "fail";
  info.status = store::RunStatus::Finished;
  store.finish_run(id, info);
  return id;
}

TEST(Gc, RunDirectoryComesFromOutOrARunFolderNamedInTheCommandLine) {
  store::RunInfo run;
  run.id = 12;
  run.argv_json = json({"t", "--out", "/w/run-12.2"}).dump();
  EXPECT_EQ(run_directory(run, {}), "/w/run-12.2");
  run.argv_json = json({"python", "train.py", "--dir=/w/run-12/x"}).dump();
  EXPECT_EQ(run_directory(run, {}), "/w/run-12");
  run.argv_json = json({"python", "train.py", "/w/run-123/x"}).dump();
  EXPECT_EQ(run_directory(run, {}), "") << "run-123 is another run's folder";
  const EventRecord checkpoint{0, 0, "checkpoint", 5, R"({"path":"/w/run-12/ck/5.pt"})"};
  EXPECT_EQ(run_directory(run, {checkpoint}), "/w/run-12");
}

TEST(Gc, TheStoredRunDirectoryWinsOverTheCommandLine) {
  store::RunInfo run;
  run.id = 12;
  // A log-only script's command names no directory: only the store knows where its logs went.
  run.argv_json = json({"python", "train.py", "--steps", "100"}).dump();
  EXPECT_EQ(run_directory(run, {}), "");
  run.out_dir = "/w/faultline-runs/run-12";
  EXPECT_EQ(run_directory(run, {}), "/w/faultline-runs/run-12");
  run.argv_json = json({"t", "--out", "/w/elsewhere/run-12"}).dump();
  EXPECT_EQ(run_directory(run, {}), "/w/faultline-runs/run-12");
}

TEST(Gc, KeepsTheCheckpointAReproResumesFromAndRemovesTheRest) {
  ScratchDir dir;
  auto store = store::Store::open(dir.file("f.db"));
  const std::string work = dir.file("runs");
  const int64_t failing = stored_run(store, work, {10, 20, 30});
  const int64_t unrelated = stored_run(store, work, {10});
  const int64_t trial = stored_run(store, work, {}, "isolate");
  const std::string needed = work + "/run-" + std::to_string(failing) + "/checkpoints/step-30.ckpt";
  store::FindingInfo finding;
  finding.kind = "nonfinite";
  finding.fields_json = json{{"evidence_run", trial}}.dump();
  finding.repro_json = json{{"spec", {{"resume", needed}}}}.dump();
  store.add_finding(finding);

  const auto plan = plan_gc(store, {});
  std::vector<std::string> paths;
  for (const auto& item : plan.items) paths.push_back(item.path);
  const std::string failing_dir = work + "/run-" + std::to_string(failing);
  EXPECT_EQ(paths, (std::vector<std::string>{work + "/run-" + std::to_string(trial),
                                             work + "/run-" + std::to_string(unrelated),
                                             failing_dir + "/checkpoints/step-10.ckpt",
                                             failing_dir + "/checkpoints/step-20.ckpt"}))
      << "newest run first; of the failing run only the checkpoints no repro needs";
  EXPECT_EQ(plan.bytes(), 1000u + 1000u + (1100u) + 100u);
  ASSERT_EQ(plan.kept.size(), 1u);

  EXPECT_TRUE(apply_gc(plan).empty());
  EXPECT_TRUE(fs::exists(needed));
  EXPECT_FALSE(fs::exists(failing_dir + "/checkpoints/step-10.ckpt"));
  EXPECT_FALSE(fs::exists(work + "/run-" + std::to_string(unrelated)));
  EXPECT_TRUE(fs::exists(failing_dir + "/" + kPrunedNote)) << "the trial cache must not reuse it";
  EXPECT_EQ(store.list_runs(-1).size(), 3u) << "the rows stay";
  EXPECT_TRUE(plan_gc(store, {}).items.empty()) << "a second gc finds nothing";
}

TEST(Gc, KeepFindingsKeepsTheEvidenceRunsWholeAndOlderThanSparesNewRuns) {
  ScratchDir dir;
  auto store = store::Store::open(dir.file("f.db"));
  const std::string work = dir.file("runs");
  const int64_t evidence = stored_run(store, work, {10});
  store::FindingInfo finding;
  finding.kind = "nonfinite";
  finding.fields_json = json{{"evidence_run", evidence}}.dump();
  finding.repro_json = json{{"spec", {{"resume", ""}}}}.dump();
  store.add_finding(finding);
  EXPECT_EQ(plan_gc(store, {}).items.size(), 1u);
  GcOptions keep;
  keep.keep = KeepFindings::Everything;
  EXPECT_TRUE(plan_gc(store, keep).items.empty());
  GcOptions old;
  old.older_than = Clock::now() - std::chrono::hours(1);
  EXPECT_TRUE(plan_gc(store, old).items.empty()) << "the run ended just now";
}

// Two stores share a work dir. Store A's gc removed its run 1's folder; store B's run 1 then took
// the free name run-1. A's next gc must leave B's folder alone: its owner file says whose it is.
TEST(Gc, AFolderThatNowHoldsAnotherStoresRunIsLeftAlone) {
  ScratchDir dir;
  const std::string work = dir.file("runs");
  auto a = store::Store::open(dir.file("a.db"));
  const int64_t a_run = stored_run(a, work, {});
  const std::string folder = work + "/run-" + std::to_string(a_run);
  write_run_owner(folder, {a.path(), a_run});
  EXPECT_FALSE(held_by_another_run(folder, a.path(), a_run).has_value());
  EXPECT_TRUE(held_by_another_run(folder, a.path(), a_run + 1).has_value());
  ASSERT_EQ(plan_gc(a, {}).items.size(), 1u) << "its own folder goes";
  EXPECT_TRUE(apply_gc(plan_gc(a, {})).empty());
  ASSERT_FALSE(fs::exists(folder));

  auto b = store::Store::open(dir.file("b.db"));
  const int64_t b_run = stored_run(b, work, {});
  ASSERT_EQ(b_run, a_run);
  write_run_owner(folder, {b.path(), b_run});
  const auto plan = plan_gc(a, {});
  EXPECT_TRUE(plan.items.empty());
  ASSERT_EQ(plan.kept.size(), 1u);
  EXPECT_EQ(plan.kept[0], fmt::format("run {}: {}: now run {} of {}, left alone", a_run, folder,
                                      b_run, dir.file("b.db")));
  EXPECT_EQ(plan_gc(b, {}).items.size(), 1u) << "for its own store it is a run folder like any";

  // A file that is not this faultline's version is as good as none.
  write_file(folder + "/" + kRunOwnerFile, R"({"version": 2, "store": "/x.db", "run_id": 1})");
  EXPECT_FALSE(read_run_owner(folder).has_value());
}

TEST(Gc, BytesReadAsPeopleWriteThem) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(163'000'000), "163.0 MB");
  EXPECT_EQ(format_bytes(1'500), "1.5 kB");
}

}  // namespace
}  // namespace faultline::harness
