// End-to-end: a reference of healthy micro runs of three seeds, stored with `faultline reference
// add`; smoke against it passes a new seed and fails a far too low learning rate with
// loss_regression, and so does a ladder that names the reference; the reference commands'
// errors name the bad value.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "support/cli.hpp"

using namespace faultline::testing;
using ::testing::HasSubstr;

namespace {

const std::string kMicro = FAULTLINE_SOURCE_DIR "/tests/e2e/recipes/micro.toml";

int64_t train(const std::string& dir, const std::vector<std::string>& overrides) {
  auto cli = faultline_cli(with_sets({"train", "-c", kMicro, "--json", "-q"}, overrides), dir);
  EXPECT_FALSE(cli.doc.is_null()) << cli.result.output;
  return cli.doc.is_null() ? 0 : cli.doc.at("run_id").get<int64_t>();
}

Cli smoke(const std::string& dir, const std::vector<std::string>& overrides) {
  return faultline_cli(
      with_sets({"smoke", "-c", kMicro, "--reference", "healthy", "--json"}, overrides), dir);
}

// One store for every test: three healthy seeds stored once as reference "healthy".
const std::string& store_dir() {
  static const std::string dir = [] {
    std::string made = make_temp_dir("smoke-reference");
    std::vector<std::string> add = {"reference", "add", "healthy"};
    for (const char* seed : {"train.seed=11", "train.seed=12", "train.seed=13"})
      add.push_back(std::to_string(train(made, {seed})));
    auto cli = faultline_cli(add, made);
    EXPECT_EQ(cli.result.exit_code, 0) << cli.result.output;
    return made;
  }();
  return dir;
}

std::string first_error(const Cli& cli) {
  return cli.result.output;
}

}  // namespace

TEST(SmokeReference, ANewSeedPassesAndAFarTooLowLearningRateIsALossRegression) {
  auto healthy = smoke(store_dir(), {"train.seed=21"});
  EXPECT_EQ(healthy.result.exit_code, 0) << healthy.result.output;
  EXPECT_EQ(healthy.doc.at("verdict"), "pass") << healthy.doc.dump();

  auto degraded = smoke(store_dir(), {"optim.lr=1e-4"});
  EXPECT_EQ(degraded.result.exit_code, 1) << degraded.result.output;
  ASSERT_EQ(degraded.doc.at("verdict"), "fail") << degraded.doc.dump();
  const auto& failures = degraded.doc.at("rungs").back().at("failures");
  ASSERT_EQ(failures.size(), 1u) << degraded.doc.dump();
  EXPECT_EQ(failures[0].at("kind"), "loss_regression");
  EXPECT_THAT(failures[0].at("detail").get<std::string>(), HasSubstr("reference band"));
  EXPECT_GT(failures[0].at("step").get<int64_t>(), 1);
}

TEST(SmokeReference, ListAndShowGiveTheStoredRuns) {
  auto list = faultline_cli({"reference", "list", "--json"}, store_dir());
  ASSERT_EQ(list.result.exit_code, 0) << list.result.output;
  ASSERT_EQ(list.doc.at("references").size(), 1u);
  EXPECT_EQ(list.doc["references"][0].at("name"), "healthy");
  auto show = faultline_cli({"reference", "show", "healthy", "--json"}, store_dir());
  ASSERT_EQ(show.result.exit_code, 0) << show.result.output;
  EXPECT_EQ(show.doc.at("runs").size(), 3u);
  EXPECT_EQ(show.doc.at("config_path"), kMicro);
  EXPECT_EQ(show.doc.at("run_summaries")[0].at("steps"), 40);
}

TEST(SmokeReference, BadReferencesAreRefusedNamingTheValue) {
  const std::string& dir = store_dir();
  auto duplicate = faultline_cli({"reference", "add", "healthy", "1"}, dir);
  EXPECT_EQ(duplicate.result.exit_code, 2);
  EXPECT_THAT(first_error(duplicate), HasSubstr("a reference named 'healthy' exists already"));

  auto unknown = faultline_cli({"reference", "add", "other", "999", "x1"}, dir);
  EXPECT_EQ(unknown.result.exit_code, 2);
  EXPECT_THAT(unknown.result.output, HasSubstr("no run 999"));
  EXPECT_THAT(unknown.result.output, HasSubstr("'x1' is not a run id"));  // both at once

  const int64_t failed = train(dir, {"fault.nan_step=5", "fault.nan_layer=blocks.0.attn"});
  auto failing = faultline_cli({"reference", "add", "other", "1", std::to_string(failed)}, dir);
  EXPECT_EQ(failing.result.exit_code, 2);
  EXPECT_THAT(failing.result.output,
              HasSubstr("run " + std::to_string(failed) + " did not pass (verdict 'fail')"));

  const int64_t other_lr = train(dir, {"optim.lr=5e-3", "train.steps=12"});
  auto mixed = faultline_cli({"reference", "add", "other", "1", std::to_string(other_lr)}, dir);
  EXPECT_EQ(mixed.result.exit_code, 2);
  EXPECT_THAT(mixed.result.output, HasSubstr("optim.lr = 0.005"));
  EXPECT_THAT(mixed.result.output, HasSubstr("train.steps = 12"));
  EXPECT_THAT(mixed.result.output, ::testing::Not(HasSubstr("train.seed =")));

  auto missing = faultline_cli({"smoke", "-c", kMicro, "--reference", "nope"}, dir);
  EXPECT_EQ(missing.result.exit_code, 2);
  EXPECT_THAT(missing.result.output, HasSubstr("no reference named 'nope'"));
  EXPECT_THAT(missing.result.output, HasSubstr("stored references: healthy"));
}

TEST(SmokeReference, ALadderNamesItsReference) {
  const std::string ladder = make_temp_dir("smoke-reference-ladder") + "/ladder.toml";
  std::ofstream(ladder) << "reference = \"healthy\"\n\n[[rungs]]\nname = \"all\"\nsteps = 0\n";
  auto degraded = faultline_cli(
      {"smoke", "-c", kMicro, "--ladder", ladder, "--json", "--set", "optim.lr=1e-4"}, store_dir());
  EXPECT_EQ(degraded.result.exit_code, 1) << degraded.result.output;
  ASSERT_EQ(degraded.doc.at("verdict"), "fail") << degraded.doc.dump();
  EXPECT_EQ(degraded.doc.at("rungs").back().at("failures").at(0).at("kind"), "loss_regression");

  std::ofstream(ladder) << "reference = \"nope\"\n\n[[rungs]]\nsteps = 0\n";
  auto unknown = faultline_cli({"smoke", "-c", kMicro, "--ladder", ladder}, store_dir());
  EXPECT_EQ(unknown.result.exit_code, 2);
  EXPECT_THAT(unknown.result.output, HasSubstr("no reference named 'nope'"));
}
