// End-to-end: a setup that fails no detector alone but trains worse than its baseline. With
// `--baseline`, isolate runs the baseline as the loss reference, reproduces a loss_regression
// and names the one key of three changed ones that makes it (a far too low learning rate); its
// repro is judged against the same baseline losses, and one stored without them is an error.
#include <fmt/core.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "store/store.hpp"
#include "support/cli.hpp"

using namespace faultline::testing;
using ::testing::HasSubstr;

namespace {

const std::string kMicro = FAULTLINE_SOURCE_DIR "/tests/e2e/recipes/micro.toml";

// Three changed keys: only the learning rate (1e-2 -> 1e-4) makes micro train worse.
Cli isolate(const std::string& command, std::vector<std::string> extra,
            const std::string& dir = make_temp_dir("isolate-loss")) {
  std::vector<std::string> args = {command};
  if (command == "bisect") args.push_back("config");
  args.insert(args.end(), {"-c", kMicro, "--json", "--set", "optim.lr=1e-4", "--set",
                           "optim.grad_clip=2.0", "--set", "schedule.min_lr_ratio=0.3"});
  args.insert(args.end(), extra.begin(), extra.end());
  return faultline_cli(args, dir, 300);
}

}  // namespace

TEST(IsolateLossRegression, TheBaselineIsTheReferenceAndDdminNamesTheLearningRate) {
  const std::string dir = make_temp_dir("isolate-loss");
  auto cli = isolate("isolate", {"--baseline", kMicro}, dir);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  const auto& doc = cli.doc;
  EXPECT_EQ(doc.at("kind"), "loss_regression") << doc.dump();
  const std::string detail = doc.at("detail");
  EXPECT_THAT(detail, HasSubstr("above the reference band"));
  EXPECT_THAT(detail, HasSubstr("%)"));  // how much worse, relative
  EXPECT_GT(doc.at("step").get<int64_t>(), 1);
  EXPECT_THAT(detail, HasSubstr("at step " + std::to_string(doc.at("step").get<int64_t>())));
  ASSERT_EQ(doc.at("config_culprit").size(), 1u) << doc.dump();
  EXPECT_EQ(doc.at("config_culprit").at(0).at("key"), "optim.lr");
  EXPECT_EQ(doc.at("config_culprit").at(0).at("failing"), "1e-04");
  EXPECT_THAT(doc.at("skipped").dump(), HasSubstr("a loss regression is the whole curve's"));
  EXPECT_THAT(cli.result.output, HasSubstr("the baseline as the loss reference"));

  // The replay is judged against the same baseline losses, so the regression comes back.
  const std::string finding = fmt::format("F{}", doc.at("finding_id").get<int64_t>());
  auto repro = faultline_cli({"repro", finding, "--json"}, dir, 300);
  ASSERT_EQ(repro.result.exit_code, 0) << repro.result.output;
  EXPECT_EQ(repro.doc.at("reproduced"), true) << repro.doc.dump();
  EXPECT_EQ(repro.doc.at("bitwise_identical"), true) << repro.doc.dump();

  // A finding stored before the reference run was kept cannot be judged: a clear error, not a
  // "did not reproduce".
  faultline::store::Store::raw_exec_for_tests(
      dir + "/faultline.db", fmt::format("UPDATE findings SET fields = json_remove(fields, "
                                         "'$.evidence.loss_reference_run') WHERE id = {}",
                                         doc.at("finding_id").get<int64_t>()));
  auto old = faultline_cli({"repro", finding}, dir, 60);
  EXPECT_EQ(old.result.exit_code, 2) << old.result.output;
  EXPECT_THAT(old.result.output,
              HasSubstr("faultline: error: " + finding +
                        " is a loss regression stored without the run its losses were judged "
                        "against, so a replay cannot be judged (finding " +
                        finding + "); findings stored before"));
}

TEST(IsolateLossRegression, BisectConfigNamesTheKeyToo) {
  auto cli = isolate("bisect", {"--baseline", kMicro});
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("kind"), "loss_regression") << cli.doc.dump();
  ASSERT_EQ(cli.doc.at("config_culprit").size(), 1u) << cli.doc.dump();
  EXPECT_EQ(cli.doc.at("config_culprit").at(0).at("key"), "optim.lr");
}

TEST(IsolateLossRegression, WithoutABaselineNothingFails) {
  auto cli = isolate("isolate", {});
  EXPECT_EQ(cli.result.exit_code, 3) << cli.result.output;
  EXPECT_THAT(cli.doc.at("message").get<std::string>(), HasSubstr("passed every detector"));
}

TEST(IsolateLossRegression, ABaselineThatTrainsNoBetterIsNoCulprit) {
  // The baseline differs only in keys that do not change how well micro trains.
  auto cli = isolate("isolate", {"--baseline-set", "optim.grad_clip=1.0", "--baseline-set",
                                 "schedule.min_lr_ratio=0.1"});
  EXPECT_EQ(cli.result.exit_code, 3) << cli.result.output;
  EXPECT_THAT(cli.doc.at("message").get<std::string>(),
              HasSubstr("nor does it train worse than the baseline"));
}

// A stored 100-step run judged against a reference shows its regression at step 21, where
// judging starts (a fifth of its steps in); its reproduction is cut at step 25 and judged from
// step 6 on, so the same curve shows it sooner. That is the finding reproduced, not "not".
TEST(IsolateLossRegression, TheShorterReproductionOfAStoredRunShowsItSoonerAndReproducesIt) {
  const std::string dir = make_temp_dir("isolate-loss-run");
  auto healthy = faultline_cli({"train", "-c", kMicro, "--json"}, dir, 300);
  ASSERT_EQ(healthy.result.exit_code, 0) << healthy.result.output;
  auto reference = faultline_cli(
      {"reference", "add", "ref", std::to_string(healthy.doc.at("run_id").get<int64_t>())}, dir);
  ASSERT_EQ(reference.result.exit_code, 0) << reference.result.output;
  auto smoke = faultline_cli({"smoke", "-c", kMicro, "--set", "train.steps=100", "--set",
                              "optim.lr=1e-4", "--reference", "ref", "--json"},
                             dir, 300);
  ASSERT_EQ(smoke.result.exit_code, 1) << smoke.result.output;
  const int64_t failed = smoke.doc.at("rungs").back().at("run_id");
  auto cli = faultline_cli(
      {"isolate", "--run", std::to_string(failed), "--baseline-set", "optim.lr=1e-2", "--json"},
      dir, 300);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("kind"), "loss_regression");
  EXPECT_EQ(cli.doc.at("step"), 21);
  const std::string finding = fmt::format("F{}", cli.doc.at("finding_id").get<int64_t>());
  auto repro = faultline_cli({"repro", finding}, dir, 300);
  EXPECT_EQ(repro.result.exit_code, 0) << repro.result.output;
  EXPECT_THAT(repro.result.output, HasSubstr("reproduced"));
  EXPECT_THAT(repro.result.output, HasSubstr("the evidence at step 21"));
}
