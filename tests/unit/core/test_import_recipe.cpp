// Tests for harness/trial/import_recipe.cpp: a command recipe compared key by key with the start
// event of a run it is said to describe (its argv first, then its config under argparse's names).
#include <gtest/gtest.h>

#include "harness/contract/recipe.hpp"
#include "harness/trial/import_recipe.hpp"
#include "test_support.hpp"

namespace faultline::harness {
namespace {
using faultline::testing::ScratchDir;
using faultline::testing::write_file;
using nlohmann::json;

constexpr const char* kRecipe = R"([trainer]
command = ["/bin/sh", "train.sh", "--lr", "{optim.lr}", "--steps={train.steps}", "--out", "{out}",
           "--name", "{run.name}", "--compile", "--amp", "{run.amp}", "--log-every", "10"]
[optim]
lr = 1e-2
[train]
steps = 200
[run]
name = "base"
amp = false
)";

contract::CommandRecipe recipe_with(const std::vector<std::string>& overrides = {}) {
  ScratchDir dir;
  write_file(dir.file("r.toml"), kRecipe);
  return *contract::load_recipe(dir.file("r.toml"), overrides).command;
}

std::vector<std::string> keys_of(const std::vector<RecipeMismatch>& mismatches) {
  std::vector<std::string> keys;
  for (const auto& m : mismatches) keys.push_back(m.key);
  return keys;
}

TEST(ImportRecipe, ARunStartedWithTheRecipesValuesMatchesInAnySpelling) {
  // "0.01" for 1e-2, `--steps 200` for `--steps=200`, Python's True/False for TOML's booleans.
  const json start = {{"command",
                       {"train.sh", "--lr", "0.01", "--steps", "200", "--compile", "--name=base",
                        "--amp", "False", "--out", "/elsewhere"}}};
  EXPECT_TRUE(recipe_mismatches(recipe_with(), start).empty());
}

TEST(ImportRecipe, EachDifferingKeyIsNamedWithTheFlagAndWhereTheRunsValueWasRead) {
  const json start = {{"command", {"train.sh", "--lr=0.02", "--steps", "300"}},
                      {"config", {{"lr", 0.02}, {"steps", 300}, {"name", "long"}, {"amp", true}}}};
  const auto mismatches = recipe_mismatches(recipe_with(), start);
  ASSERT_EQ(keys_of(mismatches),
            (std::vector<std::string>{"optim.lr", "train.steps", "run.name", "run.amp"}));
  EXPECT_EQ(mismatches[0].flag, "--lr");
  EXPECT_EQ(mismatches[0].recipe_value, "0.01");
  EXPECT_EQ(mismatches[0].run_value, "0.02");
  EXPECT_EQ(mismatches[0].seen_in, "its command");
  EXPECT_EQ(mismatches[1].flag, "--steps");  // from the recipe's `--steps={train.steps}`
  EXPECT_EQ(mismatches[2].run_value, "long");
  EXPECT_EQ(mismatches[2].seen_in, "its config's name");  // a default the argv did not show
  EXPECT_EQ(mismatches[3].run_value, "true");
  EXPECT_EQ(mismatch_overrides(mismatches),
            "--set optim.lr=0.02 --set train.steps=300 --set run.name=long --set run.amp=true");
  // With those overrides the recipe describes the run.
  EXPECT_TRUE(
      recipe_mismatches(
          recipe_with({"optim.lr=0.02", "train.steps=300", "run.name=long", "run.amp=true"}), start)
          .empty());
}

TEST(ImportRecipe, TheLastOfARepeatedFlagWinsAsInArgparse) {
  const json start = {{"command", {"train.sh", "--lr", "0.5", "--lr", "0.01"}}};
  EXPECT_TRUE(recipe_mismatches(recipe_with(), start).empty());
}

TEST(ImportRecipe, AKeyTheRunShowsNowhereAndTheTrialsOwnPlaceholdersAreNotCompared) {
  // No command, a config without these names: nothing to compare, so nothing differs. {out} is
  // each trial's run directory, and `--log-every 10` is a literal, not a key.
  EXPECT_TRUE(recipe_mismatches(recipe_with(), json::object()).empty());
  const json start = {{"config", {{"out", "/x"}, {"log_every", 0}, {"lr", {1, 2}}}}};
  EXPECT_TRUE(recipe_mismatches(recipe_with(), start).empty());
}

TEST(ImportRecipe, AConfigFilesKeysAreComparedWithTheRunsConfigUnderTheirOwnNames) {
  ScratchDir dir;
  write_file(dir.file("train_config.json"), R"({"lr": 0.01, "steps": 100, "tags": ["a"]})");
  write_file(dir.file("r.toml"),
             "[trainer]\ncommand = [\"python3\", \"train.py\", \"--config\", "
             "\"{config_file}\"]\nconfig_file = \"train_config.json\"\n"
             "steps_key = \"steps\"\n");
  const auto recipe = *contract::load_recipe(dir.file("r.toml"), {}).command;
  // The run had lr 1000 (its config, as train.py records vars(args)); steps agree as 100.0.
  const json start = {{"config", {{"lr", 1000}, {"steps", 100.0}, {"tags", {"b"}}}}};
  const auto mismatches = recipe_mismatches(recipe, start);
  ASSERT_EQ(keys_of(mismatches), std::vector<std::string>{"lr"});
  EXPECT_EQ(mismatches[0].flag, "train_config.json's lr");
  EXPECT_EQ(mismatches[0].recipe_value, "0.01");
  EXPECT_EQ(mismatches[0].run_value, "1000");
  EXPECT_EQ(mismatch_overrides(mismatches), "--set lr=1000");
  EXPECT_TRUE(
      recipe_mismatches(*contract::load_recipe(dir.file("r.toml"), {"lr=1000"}).command, start)
          .empty());
}

}  // namespace
}  // namespace faultline::harness
