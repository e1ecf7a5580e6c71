// End-to-end: `faultline isolate` names the rank (and, with spare host labels, the host) whose
// local gradients are silently corrupted, on real 2- and 4-rank runs; repro agrees; no trainer
// process outlives the search.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/cli.hpp"

using namespace faultline::testing;
using ::testing::HasSubstr;

namespace {

const std::string kMicro = FAULTLINE_SOURCE_DIR "/tests/e2e/recipes/micro.toml";

// Only the straggler test runs the timing detectors: the others are about corrupt gradients and
// crashes, which a loaded machine must not turn into a straggler verdict.
Cli isolate(int ranks, const std::vector<std::string>& overrides, const std::string& dir,
            std::vector<std::string> extra = {}, TimingDetectors timing = TimingDetectors::Off) {
  std::vector<std::string> args =
      with_sets({"isolate", "-c", kMicro, "--json", "--ranks", std::to_string(ranks)}, overrides);
  args.insert(args.end(), extra.begin(), extra.end());
  return faultline_cli(args, dir, 120, {}, timing);
}

const nlohmann::json& row_of(const nlohmann::json& doc, int rank) {
  for (const auto& row : doc.at("rank_evidence"))
    if (row.at("rank") == rank) return row;
  throw std::runtime_error("no evidence row for rank " + std::to_string(rank));
}

}  // namespace

TEST(IsolateRanks, CorruptGradientsOnTheSecondOfTwoRanksAreNamedExactly) {
  const std::string dir = make_temp_dir("ranks2");
  auto cli = isolate(2, {"fault.corrupt_grad_rank=1", "fault.corrupt_grad_step=6"}, dir);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  const auto& doc = cli.doc;
  EXPECT_EQ(doc.at("kind"), "rank_divergence");
  EXPECT_EQ(doc.at("step"), 6);
  EXPECT_EQ(doc.at("rank"), 1);
  EXPECT_EQ(doc.at("ranks"), nlohmann::json::array({1}));
  EXPECT_FALSE(doc.at("host").is_null());
  EXPECT_EQ(row_of(doc, 1).at("verdict"), "odd");
  EXPECT_EQ(row_of(doc, 0).at("verdict"), "agrees");
  EXPECT_EQ(row_of(doc, 0).at("distance"), 0.0) << "a healthy rank is bitwise equal to the replay";
  EXPECT_GT(row_of(doc, 1).at("distance").get<double>(), 1e-3);
  EXPECT_TRUE(row_of(doc, 1).contains("median_step_ms"));
  EXPECT_EQ(doc.at("min_scale").at("ranks"), 2);
  EXPECT_EQ(processes_mentioning(dir), 0);

  std::string finding = "F";
  finding += std::to_string(doc.at("finding_id").get<int>());
  auto repro = faultline_cli({"repro", finding, "--json"}, dir);
  ASSERT_EQ(repro.result.exit_code, 0) << repro.result.output;
  EXPECT_EQ(repro.doc.at("reproduced"), true);
  EXPECT_EQ(repro.doc.at("bitwise_identical"), true);
}

TEST(IsolateRanks, ABadRankAmongFourIsTheMinorityAndNotItsHost) {
  // Rank 0 is the rank a 1-rank reference also runs as: the majority of peers decides.
  const std::string dir = make_temp_dir("ranks4");
  auto cli = isolate(4, {"fault.corrupt_grad_rank=0", "fault.corrupt_grad_step=9"}, dir,
                     {"--hosts", "n0,n1,n2,n3,n4,n5,n6,n7"});
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("kind"), "rank_divergence");
  EXPECT_EQ(cli.doc.at("step"), 9);
  EXPECT_EQ(cli.doc.at("ranks"), nlohmann::json::array({0}));
  EXPECT_TRUE(cli.doc.at("host").is_null()) << "on spare hosts the same rank still disagrees";
  EXPECT_THAT(cli.doc.at("detail").get<std::string>(), HasSubstr("not a host fault"));
  EXPECT_EQ(row_of(cli.doc, 0).at("host"), "n0");
  EXPECT_EQ(processes_mentioning(dir), 0);
}

// One spare for two ranks: the odd rank alone moves to it and stays odd, so the fault is the
// rank's. The search kept the healthy rank's host, moved the odd rank, saw it still odd, and
// named the healthy rank's host ("needs a"), which the same finding's table said agrees.
TEST(IsolateRanks, WithOneSpareARanksOwnFaultIsNotBlamedOnAHealthyRanksHost) {
  const std::string dir = make_temp_dir("hosts-one-spare");
  auto cli = isolate(2, {"fault.corrupt_grad_rank=1", "fault.corrupt_grad_step=6"}, dir,
                     {"--hosts", "a,b,c"});
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("ranks"), nlohmann::json::array({1}));
  EXPECT_TRUE(cli.doc.at("host").is_null()) << cli.doc.dump();
  EXPECT_THAT(cli.doc.at("detail").get<std::string>(), HasSubstr("not a host fault"));
  EXPECT_EQ(row_of(cli.doc, 0).at("verdict"), "agrees");
  EXPECT_EQ(processes_mentioning(dir), 0);
}

TEST(IsolateRanks, ABadHostIsNamedByDdminOverTheHostsTakingPart) {
  const std::string dir = make_temp_dir("hosts4");
  auto cli = isolate(4, {"fault.corrupt_grad_host=n2", "fault.corrupt_grad_step=9"}, dir,
                     {"--hosts", "n0,n1,n2,n3,n4,n5,n6,n7"});
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("kind"), "rank_divergence");
  EXPECT_EQ(cli.doc.at("step"), 9);
  EXPECT_EQ(cli.doc.at("rank"), 2);
  EXPECT_EQ(cli.doc.at("host"), "n2");
  EXPECT_EQ(row_of(cli.doc, 2).at("verdict"), "odd");
  for (int rank : {0, 1, 3}) EXPECT_EQ(row_of(cli.doc, rank).at("verdict"), "agrees");
  EXPECT_EQ(processes_mentioning(dir), 0);
}

TEST(IsolateRanks, HealthyRanksAgreeAndNothingIsReported) {
  const std::string dir = make_temp_dir("ranks-ok");
  auto cli = isolate(2, {"train.steps=12"}, dir);
  EXPECT_EQ(cli.result.exit_code, 3) << cli.result.output;
  EXPECT_THAT(cli.doc.at("message").get<std::string>(),
              HasSubstr("ranks agree with a 1-rank replay"));
}

TEST(IsolateRanks, TooFewHostLabelsAreABadInput) {
  const std::string dir = make_temp_dir("hosts-bad");
  auto cli = isolate(4, {}, dir, {"--hosts", "n0,n1"});
  EXPECT_EQ(cli.result.exit_code, 2);
  EXPECT_THAT(cli.result.output,
              HasSubstr("faultline: error: 2 host label(s) for 4 ranks (--hosts)"));
  auto repeated = isolate(2, {}, dir, {"--hosts", "n0,n0"});
  EXPECT_EQ(repeated.result.exit_code, 2);
  EXPECT_THAT(repeated.result.output, HasSubstr("repeated label"));
}

TEST(IsolateRanks, AStragglerIsNamedWithItsHostOnFourRanks) {
  const std::string dir = make_temp_dir("straggler4");
  auto cli = isolate(4, {"fault.slow_rank=2", "fault.slow_ms=20", "train.steps=20"}, dir,
                     {"--hosts", "a,b,c,d"}, TimingDetectors::On);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("kind"), "straggler");
  EXPECT_EQ(cli.doc.at("rank"), 2);
  EXPECT_EQ(cli.doc.at("ranks"), nlohmann::json::array({2}));
  EXPECT_EQ(cli.doc.at("host"), "c");
  EXPECT_EQ(cli.doc.at("min_scale").at("ranks"), 4) << "one rank cannot straggle";
  EXPECT_EQ(processes_mentioning(dir), 0);
}

TEST(IsolateRanks, ACrashNamesTheFirstRankToDieAndItsStep) {
  const std::string dir = make_temp_dir("crash2");
  auto cli = isolate(2, {"fault.crash_rank=1", "fault.crash_step=7"}, dir, {"--hosts", "x,y"});
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("kind"), "crash");
  EXPECT_EQ(cli.doc.at("step"), 7);
  EXPECT_EQ(cli.doc.at("ranks"), nlohmann::json::array({1}));
  EXPECT_EQ(cli.doc.at("host"), "y");
  EXPECT_THAT(cli.doc.at("detail").get<std::string>(), HasSubstr("SIGSEGV"));
  EXPECT_EQ(processes_mentioning(dir), 0);
}
