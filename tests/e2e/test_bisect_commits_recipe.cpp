// End-to-end: `bisect commits --recipe` runs the trainer "built" at each commit (a link to this
// build's) on that commit's recipe: a huge LR is found by loss_spike, a slow step by `slow`, a
// too low LR by loss_regression against seeds of the good commit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "support/cli.hpp"
#include "support/git_fixture.hpp"
#include "support/recipe_text.hpp"

using namespace faultline::testing;

namespace {

std::string micro_recipe() {
  return read_text(FAULTLINE_SOURCE_DIR "/tests/e2e/recipes/micro.toml");
}

struct History {
  std::string root;
  std::vector<std::string> commit;  // c1..cN at [1..N]
};

// root and c1..c<n>; from c<first_bad> on, recipe.toml is `bad_recipe`.
History history(GitFixture& repo, int n, int first_bad, const std::string& bad_recipe) {
  History h;
  h.root = repo.commit("root", {{"recipe.toml", micro_recipe()}, {"n", "0"}});
  h.commit.push_back(h.root);
  for (int k = 1; k <= n; ++k) {
    std::map<std::string, std::string> files = {{"n", std::to_string(k)}};
    if (k == first_bad) files["recipe.toml"] = bad_recipe;
    h.commit.push_back(repo.commit(numbered("c", k), files));
  }
  return h;
}

Cli bisect(const GitFixture& repo, const History& h, const std::string& kind,
           const std::vector<std::string>& extra = {}) {
  std::string build = "mkdir -p build/src/trainer && ln -sf ";
  build += FAULTLINE_TRAIN_BIN;
  build += " build/src/trainer/faultline-train";
  std::vector<std::string> args = {
      "bisect",  "commits", "--repo",   repo.dir(),       "--good", h.root,
      "--bad",   "HEAD",    "--recipe", "recipe.toml",    "--kind", kind,
      "--build", build,     "--json",   "--step-timeout", "30"};
  args.insert(args.end(), extra.begin(), extra.end());
  return faultline_cli(args, make_temp_dir("bc-recipe-run"), 300);
}

}  // namespace

TEST(BisectCommitsRecipe, HugeLearningRateCommitIsFoundByItsLossSpike) {
  GitFixture repo(make_temp_dir("bc-recipe-lr"));
  const auto h =
      history(repo, 6, 4, replaced(micro_recipe(), "lr = 1e-2", "lr = 10\nbeta2 = 0.99"));
  auto cli = bisect(repo, h, "loss_spike");
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("culprit"), h.commit[4]);
  EXPECT_EQ(cli.doc.at("parent"), h.commit[3]);
  for (const auto& run : cli.doc.at("runs")) {
    EXPECT_EQ(run.at("stage"), "trial");
    EXPECT_GT(run.at("run_id").get<int>(), 0);
    if (run.at("verdict") == "bad") {
      EXPECT_THAT(run.at("detail").get<std::string>(), ::testing::HasSubstr("loss_spike"));
    }
  }
  EXPECT_EQ(repo.linked_worktrees(), 0);
}

// A mistyped --set would skip every commit alike; it is refused at the bad end, with the key's
// did-you-mean, before any search.
TEST(BisectCommitsRecipe, ARecipeOrSetThatCannotRunAtTheBadCommitIsBadInput) {
  GitFixture repo(make_temp_dir("bc-recipe-typo"));
  const auto h =
      history(repo, 4, 2, replaced(micro_recipe(), "lr = 1e-2", "lr = 10\nbeta2 = 0.99"));
  auto typo = bisect(repo, h, "loss_spike", {"--set", "optim.lrr=1"});
  EXPECT_EQ(typo.result.exit_code, 2) << typo.result.output;
  const std::string what = typo.doc.at("error").at("items").at(0).at("what");
  EXPECT_THAT(what, ::testing::HasSubstr("cannot be judged: the recipe is invalid at this commit: "
                                         "unknown key 'optim.lrr'"));
  EXPECT_THAT(what, ::testing::HasSubstr("did you mean 'optim.lr'"));
  EXPECT_EQ(typo.doc.at("error").at("items").at(0).at("where"), "--bad HEAD");
  EXPECT_EQ(repo.linked_worktrees(), 0);
}

TEST(BisectCommitsRecipe, SlowStepCommitIsFoundAgainstTheGoodCommitsThroughput) {
  GitFixture repo(make_temp_dir("bc-recipe-slow"));
  const auto h = history(repo, 6, 3, micro_recipe() + "\n[fault]\nslow_rank = 0\nslow_ms = 40\n");
  // The planted commits run at a few % of the baseline; a loose ratio keeps a busy machine's
  // noise on the good ones from reading as slow.
  const std::string detectors = make_temp_dir("bc-recipe-detectors") + "/detectors.toml";
  std::ofstream(detectors) << "[slow]\nmin_ratio = 0.3\n";
  auto cli = bisect(repo, h, "slow", {"--detectors", detectors});
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("culprit"), h.commit[3]);
  ASSERT_FALSE(cli.doc.at("runs").empty());
  EXPECT_EQ(cli.doc.at("runs").at(0).at("stage"), "baseline");
  EXPECT_EQ(cli.doc.at("runs").at(0).at("commit"), h.root);
  EXPECT_GT(cli.doc.at("runs").at(0).at("tokens_per_s").get<double>(), 0);
}

// A learning rate three times too low fails no detector alone: micro still learns, 22 % worse.
// Judged against four seeds of the good commit (--flaky reruns a commit on another seed).
TEST(BisectCommitsRecipe, LossRegressionCommitIsFoundAgainstSeedsOfTheGoodCommit) {
  GitFixture repo(make_temp_dir("bc-recipe-loss"));
  const auto h = history(repo, 6, 3, replaced(micro_recipe(), "lr = 1e-2", "lr = 3e-3"));
  auto cli = bisect(repo, h, "loss_regression", {"--flaky"});
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("culprit"), h.commit[3]) << cli.doc.dump();
  EXPECT_EQ(cli.doc.at("seed_flake_rate"), 0.0);
  EXPECT_GE(cli.doc.at("p_good_looks_bad").get<double>(), 0.025);
  const auto& runs = cli.doc.at("runs");
  ASSERT_GE(runs.size(), 5u);
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(runs.at(k).at("stage"), "reference");
    EXPECT_EQ(runs.at(k).at("commit"), h.root);
  }
  for (const auto& run : runs) {
    if (run.at("stage") != "trial") continue;
    if (run.at("verdict") == "bad") {
      const std::string detail = run.at("detail");
      EXPECT_THAT(detail, ::testing::HasSubstr("loss_regression at step"));
      EXPECT_THAT(detail, ::testing::HasSubstr("above the reference band"));
      EXPECT_THAT(detail, ::testing::HasSubstr("of 4 run(s)"));
    }
  }

  auto few = bisect(repo, h, "loss_regression", {"--reference-seeds", "1"});
  EXPECT_EQ(few.result.exit_code, 2);
  EXPECT_THAT(few.result.output, ::testing::HasSubstr("--reference-seeds 1 is too few"));
}
