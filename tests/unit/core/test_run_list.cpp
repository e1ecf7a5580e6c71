// Tests for harness/browse/run_list.cpp: a run's origin from its parent, and the filters of
// `faultline runs`.
#include "harness/browse/run_list.hpp"

#include <gtest/gtest.h>

namespace faultline::harness {
namespace {

store::RunInfo run(const std::string& parent, const std::string& verdict,
                   const std::string& started_at = "2026-12-04T10:00:00.000Z",
                   const std::string& config_path = "/r/recipes/train/tiny.toml") {
  store::RunInfo info;
  info.parent = parent;
  info.verdict = verdict;
  info.started_at = started_at;
  info.config_path = config_path;
  return info;
}

TEST(RunList, OriginComesFromTheParentAndEverythingElseIsASearchTrial) {
  EXPECT_EQ(origin_of("train"), RunOrigin::Train);
  EXPECT_EQ(origin_of("smoke"), RunOrigin::Smoke);
  EXPECT_EQ(origin_of("import:/data/run7"), RunOrigin::Import);
  EXPECT_EQ(origin_of("repro:F3"), RunOrigin::Repro);
  for (const char* trial : {"isolate", "isolate:baseline", "bisect-commits:abc123", ""})
    EXPECT_EQ(origin_of(trial), RunOrigin::SearchTrial) << trial;
}

TEST(RunList, SearchTrialsAreHiddenUnlessShown) {
  RunFilter filter;
  EXPECT_TRUE(matches(run("train", "pass"), filter));
  EXPECT_FALSE(matches(run("isolate", "fail"), filter));
  EXPECT_FALSE(matches(run("", "pass"), filter));
  filter.trials = TrialsShown::Shown;
  EXPECT_TRUE(matches(run("isolate", "fail"), filter));
}

TEST(RunList, FailedRecipeAndSinceFilterTogether) {
  RunFilter filter;
  filter.verdicts = VerdictsShown::FailedOnly;
  EXPECT_FALSE(matches(run("train", "pass"), filter));
  EXPECT_TRUE(matches(run("train", "fail"), filter));
  EXPECT_TRUE(matches(run("smoke", "infra_error"), filter));
  EXPECT_FALSE(matches(run("train", ""), filter)) << "a run still running has not failed";

  filter.recipe = "tiny";
  EXPECT_TRUE(matches(run("train", "fail"), filter));
  EXPECT_FALSE(matches(run("train", "fail", "2026-12-04T10:00:00.000Z", "/r/small.toml"), filter));
  filter.recipe = "/r/small.toml";
  EXPECT_TRUE(matches(run("train", "fail", "2026-12-04T10:00:00.000Z", "/r/small.toml"), filter));

  filter.recipe.clear();
  filter.since = parse_utc("2026-12-04T09:00:00Z");
  EXPECT_TRUE(matches(run("train", "fail", "2026-12-04T09:00:00.000Z"), filter));
  EXPECT_FALSE(matches(run("train", "fail", "2026-12-04T08:59:59.999Z"), filter));
  EXPECT_FALSE(matches(run("train", "fail", "garbled"), filter));
}

TEST(RunList, RecipeNameIsTheFileStem) {
  EXPECT_EQ(recipe_name("/x/recipes/train/tiny.toml"), "tiny");
  EXPECT_EQ(recipe_name("micro.toml"), "micro");
}

}  // namespace
}  // namespace faultline::harness
