// Tests for src/store/runs.cpp beyond the round trip of test_store.cpp: the command line set
// after the id is known, per-rank malformed-line counts, and a version-2 file migrated to 3.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "store/store.hpp"
#include "store_downgrade.hpp"
#include "store_test_records.hpp"
#include "test_support.hpp"

namespace faultline::store {
namespace {
using faultline::testing::downgrade_store;
using faultline::testing::ScratchDir;
using faultline::testing::step_record;

RunInfo finished(std::vector<RankMalformed> malformed) {
  RunInfo result;
  result.exit_code = 0;
  result.verdict = "pass";
  result.malformed = std::move(malformed);
  return result;
}

TEST(StoreRuns, TheArgvSetAfterCreationIsTheOneStored) {
  ScratchDir dir;
  Store store = Store::open(dir.file("f.db"));
  const int64_t id = store.create_run({});
  EXPECT_EQ(store.get_run(id)->argv_json, "[]");
  store.set_run_argv(id, R"(["/bin/train","--out","/w/run-1"])");
  EXPECT_EQ(store.get_run(id)->argv_json, R"(["/bin/train","--out","/w/run-1"])");
  store.finish_run(id, finished({}));
  EXPECT_EQ(store.get_run(id)->argv_json, R"(["/bin/train","--out","/w/run-1"])");
}

TEST(StoreRuns, TheRunDirectoryIsKeptAndAnOlderFilesRunsHaveNone) {
  ScratchDir dir;
  const std::string path = dir.file("f.db");
  int64_t id = 0;
  {
    Store store = Store::open(path);
    id = store.create_run({});
    EXPECT_EQ(store.get_run(id)->out_dir, "");
    store.set_run_out_dir(id, "/w/faultline-runs/run-1");
    store.finish_run(id, finished({}));
    EXPECT_EQ(store.get_run(id)->out_dir, "/w/faultline-runs/run-1");
    EXPECT_EQ(store.list_runs().at(0).out_dir, "/w/faultline-runs/run-1");
  }
  downgrade_store(path, 6);
  Store store = Store::open(path);
  EXPECT_EQ(store.schema_version(), kSchemaVersion);
  EXPECT_EQ(store.get_run(id)->out_dir, "") << "a version-6 file did not keep it";
  EXPECT_EQ(store.get_run(id)->verdict, "pass");
}

TEST(StoreRuns, TheRunsOfAParentAreFoundOldestFirst) {
  ScratchDir dir;
  Store store = Store::open(dir.file("f.db"));
  RunInfo imported;
  imported.parent = "import:/jobs/run-1";
  const int64_t first = store.create_run(imported);
  store.create_run({});
  const int64_t second = store.create_run(imported);
  EXPECT_EQ(store.run_ids_with_parent("import:/jobs/run-1"), (std::vector<int64_t>{first, second}));
  EXPECT_TRUE(store.run_ids_with_parent("import:/jobs/run-2").empty());
}

TEST(StoreRuns, SettingTheArgvOfAnUnknownRunIsABug) {
  ScratchDir dir;
  Store store = Store::open(dir.file("f.db"));
  try {
    store.set_run_argv(99, "[]");
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& error) {
    EXPECT_STREQ(error.what(), "store: set_run_argv of unknown run 99");
  }
}

TEST(StoreRuns, MalformedCountsAreKeptPerRankAndReplacedByASecondFinish) {
  ScratchDir dir;
  const std::string path = dir.file("f.db");
  const int64_t id = Store::open(path).create_run({});
  const std::string long_line(300, 'x');
  Store::open(path).finish_run(
      id, finished({{3, 1, long_line, "not JSON"}, {1, 7, "{\"v\":2}", "no \"v\": 1"}}));
  auto run = *Store::open(path).get_run(id);  // a fresh handle: read from the file
  ASSERT_EQ(run.malformed.size(), 2u);
  EXPECT_EQ(run.malformed[0].rank, 1);  // by rank
  EXPECT_EQ(run.malformed[0].lines, 7);
  EXPECT_EQ(run.malformed[0].first_line, "{\"v\":2}");
  EXPECT_EQ(run.malformed[0].first_error, "no \"v\": 1");
  EXPECT_EQ(run.malformed[1].rank, 3);
  EXPECT_EQ(run.malformed[1].first_line, std::string(200, 'x'));  // cut to 200 bytes
  EXPECT_EQ(Store::open(path).list_runs().at(0).malformed.size(), 2u);

  Store::open(path).finish_run(id, finished({{0, 2, "a", "b"}}));
  run = *Store::open(path).get_run(id);
  ASSERT_EQ(run.malformed.size(), 1u);
  EXPECT_EQ(run.malformed[0].rank, 0);
  EXPECT_EQ(run.malformed[0].lines, 2);
  Store::open(path).finish_run(id, finished({}));
  EXPECT_TRUE(Store::open(path).get_run(id)->malformed.empty());
}

TEST(StoreRuns, AVersion2FileIsMigratedAndKeepsItsRows) {
  ScratchDir dir;
  const std::string path = dir.file("v2.db");
  int64_t id = 0;
  {
    Store store = Store::open(path);
    RunInfo run;
    run.config_path = "recipes/micro.toml";
    run.argv_json = R"(["faultline-train"])";
    id = store.create_run(run);
    store.add_steps(id, {step_record(0, 1, 4.5), step_record(0, 2, 4.25)});
    store.add_fingerprints(id, {{0, 0.5, 2, "grads", "00ff", 2.5, {1.0}}});
    RunInfo result = finished({});
    result.verdict = "fail";
    result.failures = {{"nonfinite", 2, 0, "loss is nan"}};
    store.finish_run(id, result);
  }
  // Back to what a version-2 build wrote: everything but run_malformed and the references.
  downgrade_store(path, 2);
  Store store = Store::open(path);
  EXPECT_EQ(store.schema_version(), kSchemaVersion);
  auto old = *store.get_run(id);
  EXPECT_EQ(old.config_path, "recipes/micro.toml");
  EXPECT_EQ(old.argv_json, R"(["faultline-train"])");
  EXPECT_EQ(old.verdict, "fail");
  ASSERT_EQ(old.failures.size(), 1u);
  EXPECT_EQ(old.failures[0].detail, "loss is nan");
  EXPECT_TRUE(old.malformed.empty());
  ASSERT_EQ(store.steps(id).size(), 2u);
  EXPECT_EQ(store.steps(id)[1].loss, 4.25);
  EXPECT_EQ(store.fingerprints(id).at(0).hash, "00ff");

  const int64_t fresh = store.create_run({});
  store.finish_run(fresh, finished({{0, 4, "garbage", "not JSON"}}));
  EXPECT_EQ(store.get_run(fresh)->malformed.at(0).lines, 4);
}

}  // namespace
}  // namespace faultline::store
