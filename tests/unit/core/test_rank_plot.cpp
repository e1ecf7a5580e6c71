// Unit tests of report/rank_plot: the parameter-distance lines of a rank finding.
#include "report/rank_plot.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace faultline::report {
namespace {

FingerprintRecord params(int rank, int64_t step, std::string hash, std::vector<double> sketch) {
  return {rank, 0.0, step, "params", std::move(hash), std::nullopt, std::move(sketch)};
}

TEST(RankPlot, EachRankIsMeasuredFromRankZeroAndRankZeroFromTheReplay) {
  // Rank 1 applies an update of its own at step 3; rank 0 stays with the 1-rank replay.
  std::vector<FingerprintRecord> run, replay;
  for (int64_t step = 1; step <= 4; ++step) {
    const std::string same = "p" + std::to_string(step);
    run.push_back(params(0, step, same, {1, 1}));
    run.push_back(step >= 3 ? params(1, step, "other", {1.5, 1}) : params(1, step, same, {1, 1}));
    replay.push_back(params(0, step, same, {1, 1}));
  }
  run.push_back({0, 0.0, 2, "grads", "g", std::nullopt, {9, 9}});  // not a parameter
  const auto plot = rank_params_plot(run, replay, "1-rank replay (run 12)");
  ASSERT_TRUE(plot.has_value());
  EXPECT_EQ(plot->id, "params_distance");
  ASSERT_EQ(plot->series.size(), 2u);
  EXPECT_EQ(plot->series[0].label, "rank 1 vs rank 0");
  EXPECT_EQ(plot->series[0].steps, (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(plot->series[0].values[1], 0.0);
  EXPECT_DOUBLE_EQ(plot->series[0].values[2], 0.5 / std::sqrt(2.0));
  EXPECT_EQ(plot->series[1].label, "rank 0 vs 1-rank replay (run 12)");
  EXPECT_EQ(plot->series[1].role, SeriesRole::Replay);
  EXPECT_EQ(plot->series[1].values, (std::vector<double>{0, 0, 0, 0}));
}

TEST(RankPlot, StepsWithoutASketchHaveNoPointAndNoLineIsNoPlot) {
  std::vector<FingerprintRecord> run = {params(0, 1, "a", {1}), params(1, 1, "b", {}),
                                        params(0, 2, "c", {1}), params(1, 2, "d", {2})};
  const auto plot = rank_params_plot(run, {}, "");
  ASSERT_TRUE(plot.has_value());
  ASSERT_EQ(plot->series.size(), 1u);
  EXPECT_EQ(plot->series[0].steps, std::vector<int64_t>{2});
  EXPECT_FALSE(rank_params_plot({params(1, 1, "a", {1})}, {}, "").has_value());  // no rank 0
  EXPECT_FALSE(rank_params_plot({params(0, 1, "a", {1})}, {}, "").has_value());  // rank 0 alone
}

}  // namespace
}  // namespace faultline::report
