// Unit tests of harness/isolate/rank_agreement: sketch distances, the first divergent step, and who
// is the odd rank out with and without a majority.
#include "harness/isolate/rank_agreement.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace faultline::harness {
namespace {

FingerprintRecord print(int rank, int64_t step, std::string hash, std::vector<double> sketch,
                        std::string what = "grads") {
  return {rank, 0.0, step, std::move(what), std::move(hash), std::nullopt, std::move(sketch)};
}

TEST(RankAgreement, DistanceIsRelativeToTheReferenceAndZeroForEqualBits) {
  EXPECT_EQ(sketch_distance(print(0, 1, "a", {3, 4}), print(0, 1, "a", {1, 1})), 0.0);
  EXPECT_DOUBLE_EQ(sketch_distance(print(0, 1, "a", {3, 4}), print(0, 1, "b", {0, 4})), 3.0 / 4.0);
  EXPECT_TRUE(std::isnan(sketch_distance(print(0, 1, "a", {}), print(0, 1, "b", {1}))));
  EXPECT_TRUE(std::isnan(sketch_distance(print(0, 1, "a", {1, 2}), print(0, 1, "b", {1}))));
}

TEST(RankAgreement, FirstDivergenceIsTheFirstStepBeyondTolerance) {
  std::vector<FingerprintRecord> run, reference;
  for (int64_t step = 1; step <= 5; ++step) {
    reference.push_back(print(0, step, "r" + std::to_string(step), {1, 1}, "params"));
    const double drift = step < 4 ? 1e-7 * step : 0.1;
    run.push_back(print(0, step, "x" + std::to_string(step), {1 + drift, 1}, "params"));
    run.push_back(print(1, step, "y", {9, 9}, "params"));  // only rank 0 is compared
  }
  auto divergence = first_divergence(run, reference, Fingerprinted::Params, 1e-5);
  ASSERT_TRUE(divergence.has_value());
  EXPECT_EQ(divergence->step, 4);
  EXPECT_NEAR(divergence->healthy_max, 3e-7 / std::sqrt(2.0), 1e-12);
  EXPECT_FALSE(first_divergence(run, reference, Fingerprinted::Params, 1.0).has_value());
  EXPECT_FALSE(first_divergence(run, reference, Fingerprinted::Grads, 1e-5).has_value());
}

TEST(RankAgreement, SmoothDriftPastTheToleranceIsNotADivergenceButAJumpIs) {
  // Reduction-order drift (as measured on a 400-step 4-rank micro run, in units of 1e-5 past
  // a tolerance of 1e-5): dipping, growing at most 1.3x its largest; the corrupted update at
  // step 9 here jumps 4x.
  const std::vector<double> drift = {5e-6,   8e-6,   1.1e-5, 1.3e-5, 3.8e-6,
                                     1.6e-5, 1.7e-5, 1.8e-5, 7.2e-5, 1.4e-4};
  std::vector<FingerprintRecord> run, reference;
  for (size_t i = 0; i < drift.size(); ++i) {
    const auto step = static_cast<int64_t>(i + 1);
    reference.push_back(print(0, step, "r", {1, 0}, "params"));
    run.push_back(print(0, step, "x", {1 + drift[i], 0}, "params"));
  }
  auto divergence = first_divergence(run, reference, Fingerprinted::Params, 1e-5);
  ASSERT_TRUE(divergence.has_value());
  EXPECT_EQ(divergence->step, 9);
  EXPECT_NEAR(divergence->healthy_max, 1.8e-5, 1e-12);
  run.resize(8);
  EXPECT_FALSE(first_divergence(run, reference, Fingerprinted::Params, 1e-5).has_value());
}

TEST(RankAgreement, TwoRanksAreJudgedByTheReference) {
  const auto reference = print(0, 6, "good", {1, 2});
  std::vector<FingerprintRecord> run = {print(1, 6, "bad", {-1, 2}), print(0, 6, "good", {1, 2}),
                                        print(0, 5, "other", {7, 7})};
  auto ranks = compare_ranks(run, &reference, 6, 1e-5);
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks[0].rank, 0);
  EXPECT_TRUE(ranks[0].agrees);
  EXPECT_FALSE(ranks[1].agrees);
  EXPECT_EQ(ranks[1].peers, 0);
  EXPECT_EQ(odd_ranks(ranks), std::vector<int>{1});
}

TEST(RankAgreement, AMajorityOfPeersOutvotesAReferenceThatSharesTheFault) {
  // The reference ran as rank 0 and carries rank 0's fault: three peers agree among themselves.
  const auto reference = print(0, 9, "bad", {-1, 2});
  std::vector<FingerprintRecord> run = {print(0, 9, "bad", {-1, 2}), print(1, 9, "good", {1, 2}),
                                        print(2, 9, "good", {1, 2}), print(3, 9, "good", {1, 2})};
  auto ranks = compare_ranks(run, &reference, 9, 1e-5);
  EXPECT_EQ(ranks[1].peers, 2);
  EXPECT_EQ(odd_ranks(ranks), std::vector<int>{0});
}

TEST(RankAgreement, NoMajorityFallsBackToTheReferenceAndAgreementIsEmpty) {
  const auto reference = print(0, 2, "a", {1, 0});
  std::vector<FingerprintRecord> split = {print(0, 2, "a", {1, 0}), print(1, 2, "a", {1, 0}),
                                          print(2, 2, "b", {0, 1}), print(3, 2, "c", {0, -1})};
  EXPECT_EQ(odd_ranks(compare_ranks(split, &reference, 2, 1e-5)), (std::vector<int>{2, 3}));
  std::vector<FingerprintRecord> healthy = {print(0, 2, "a", {1, 0}), print(1, 2, "a", {1, 0})};
  EXPECT_TRUE(odd_ranks(compare_ranks(healthy, &reference, 2, 1e-5)).empty());
}

TEST(RankAgreement, ParamsSplitIsTheFirstStepARanksParametersLeaveRankZeros) {
  std::vector<FingerprintRecord> run;
  for (int64_t step = 1; step <= 5; ++step)
    for (int rank = 0; rank < 3; ++rank)
      run.push_back(print(rank, step, rank == 2 && step >= 4 ? "other" : "p" + std::to_string(step),
                          {1, 1}, "params"));
  run.push_back(print(1, 2, "grads differ: not compared", {1, 1}));
  const auto split = first_params_split(run);
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(split->step, 4);
  EXPECT_EQ(split->ranks, std::vector<int>{2});
  EXPECT_EQ(split->agreed, 3);
  // One rank fingerprinted at a step, or every rank equal: no split.
  std::vector<FingerprintRecord> alone = {print(0, 1, "a", {1}, "params"),
                                          print(1, 2, "b", {1}, "params")};
  EXPECT_FALSE(first_params_split(alone).has_value());
  run.erase(std::remove_if(run.begin(), run.end(),
                           [](const FingerprintRecord& r) { return r.hash == "other"; }),
            run.end());
  EXPECT_FALSE(first_params_split(run).has_value());
}

TEST(RankAgreement, ParamsThatNeverAgreedSplitWithNoAgreedStep) {
  // Ranks holding different shards from the start (model parallelism): a split, but never agreed.
  std::vector<FingerprintRecord> run = {print(0, 1, "a", {1}, "params"),
                                        print(1, 1, "b", {1}, "params")};
  const auto split = first_params_split(run);
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(split->step, 1);
  EXPECT_EQ(split->agreed, -1);
}

TEST(RankAgreement, RanksAreComparedOnTheFingerprintAsked) {
  // The same gradients, another update on rank 1: grads agree, params do not.
  const auto grads = print(0, 7, "g", {1, 2});
  const auto params = print(0, 7, "p", {5, 5}, "params");
  std::vector<FingerprintRecord> run = {print(0, 7, "g", {1, 2}), print(1, 7, "g", {1, 2}),
                                        print(0, 7, "p", {5, 5}, "params"),
                                        print(1, 7, "q", {5.5, 5}, "params")};
  EXPECT_TRUE(odd_ranks(compare_ranks(run, &grads, 7, 1e-4)).empty());
  const auto ranks = compare_ranks(run, &params, 7, 1e-4, Fingerprinted::Params);
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks[1].hash, "q");
  EXPECT_EQ(odd_ranks(ranks), std::vector<int>{1});
}

}  // namespace
}  // namespace faultline::harness
