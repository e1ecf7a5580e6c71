// Tests for src/store/references.cpp: a named reference keeps its runs in order with the first
// run's config, survives reopening, lists by name; a version-3 file gains the tables on open.
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>

#include "store/store.hpp"
#include "store_downgrade.hpp"
#include "test_support.hpp"

namespace faultline::store {
namespace {
using faultline::testing::downgrade_store;
using faultline::testing::ScratchDir;

int64_t run_of(Store& store, const std::string& hash) {
  RunInfo run;
  run.config_path = "recipes/micro.toml";
  run.config_hash = hash;
  return store.create_run(run);
}

TEST(StoreReferences, AReferenceKeepsItsRunsInOrderAcrossOpens) {
  ScratchDir dir;
  const std::string path = dir.file("refs.db");
  {
    Store store = Store::open(path);
    const int64_t a = run_of(store, "h1"), b = run_of(store, "h1"), c = run_of(store, "h1");
    store.add_reference({0, "zeta", {c, a, b}, "recipes/micro.toml", "h1", ""});
    store.add_reference({0, "alpha", {b}, "recipes/micro.toml", "h1", "2026-01-01T00:00:00Z"});
  }
  Store store = Store::open(path);
  auto zeta = store.get_reference("zeta");
  ASSERT_TRUE(zeta);
  EXPECT_EQ(zeta->run_ids, (std::vector<int64_t>{3, 1, 2}));
  EXPECT_EQ(zeta->config_hash, "h1");
  EXPECT_FALSE(zeta->created_at.empty());
  EXPECT_FALSE(store.get_reference("nope"));
  auto all = store.list_references();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].name, "alpha");
  EXPECT_EQ(all[0].created_at, "2026-01-01T00:00:00Z");
  // A name is taken once; a run the store does not have is refused (the CLI checks both first).
  EXPECT_THROW(store.add_reference({0, "alpha", {1}, "", "", ""}), std::runtime_error);
  EXPECT_THROW(store.add_reference({0, "ghost", {99}, "", "", ""}), std::runtime_error);
  EXPECT_FALSE(store.get_reference("ghost"));  // rolled back whole
}

TEST(StoreReferences, AVersion3FileIsMigratedAndKeepsItsRuns) {
  ScratchDir dir;
  const std::string path = dir.file("v3.db");
  { run_of(*std::make_unique<Store>(Store::open(path)), "h"); }
  downgrade_store(path, 3);
  Store store = Store::open(path);
  EXPECT_EQ(store.schema_version(), kSchemaVersion);
  EXPECT_EQ(store.list_runs().size(), 1u);
  EXPECT_TRUE(store.list_references().empty());
  store.add_reference({0, "r", {1}, "", "h", ""});
  EXPECT_EQ(store.get_reference("r")->run_ids.size(), 1u);
}

}  // namespace
}  // namespace faultline::store
