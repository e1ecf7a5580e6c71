// Tests for report/step_thinner: a short run keeps every record; a long one keeps, per rank and
// bucket, the records that hold each plotted metric's extremes and its first non-finite value,
// so its plots show what all the records would; each rank's loss stays whole for the sparkline.
#include "report/step_thinner.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "report/plot_data.hpp"
#include "store_test_records.hpp"

namespace faultline::report {
namespace {

using faultline::testing::step_record;
using nlohmann::json;

std::vector<int64_t> steps_of(const std::vector<StepRecord>& records, int rank) {
  std::vector<int64_t> steps;
  for (const auto& r : records)
    if (r.rank == rank) steps.push_back(r.step);
  return steps;
}

TEST(StepThinner, AShortRunKeepsEveryRecordByRankThenStep) {
  StepThinner thinner(1, 20, 10);  // 20 steps: at most 2 per bucket, nothing to thin
  for (int64_t step = 1; step <= 20; ++step)
    for (int rank : {1, 0}) thinner.add(step_record(rank, step, 4.0));
  const auto records = thinner.take();
  ASSERT_EQ(records.size(), 40u);
  EXPECT_EQ(records.front().rank, 0);
  EXPECT_EQ(records[19].step, 20);
  EXPECT_EQ(records[20].rank, 1);
}

TEST(StepThinner, ALongRunKeepsEachBucketsExtremesAndItsFirstNonFiniteRecord) {
  // 1000 steps in 10 buckets of 100; two ranks, interleaved as a live trial stores them.
  StepThinner thinner(1, 1000, 10);
  std::vector<StepRecord> all;
  for (int64_t step = 1; step <= 1000; ++step)
    for (int rank : {0, 1}) {
      auto r = step_record(rank, step, 5.0 - static_cast<double>(step) / 1000);
      if (step == 437 && rank == 1) r.loss = 9.0;  // a one-step spike
      if (step == 612 && rank == 0) r.grad_norm = NAN;
      if (step == 613 && rank == 0) r.grad_norm = INFINITY;  // the same bucket's second
      all.push_back(r);
      thinner.add(r);
    }
  const auto kept = thinner.take();
  EXPECT_LT(kept.size(), all.size() / 10) << "thinned";
  const auto rank1 = steps_of(kept, 1);
  EXPECT_TRUE(std::is_sorted(rank1.begin(), rank1.end()));
  const std::set<int64_t> kept1(rank1.begin(), rank1.end()), kept0 = [&] {
    const auto steps = steps_of(kept, 0);
    return std::set<int64_t>(steps.begin(), steps.end());
  }();
  EXPECT_TRUE(kept1.count(437)) << "the spike is its bucket's highest loss";
  EXPECT_TRUE(kept1.count(401) && kept1.count(500)) << "the falling loss's ends of a bucket";
  EXPECT_TRUE(kept0.count(612)) << "the bucket's first non-finite grad norm";
  EXPECT_FALSE(kept0.count(613));
  // Each rank's loss stays whole: the sparkline is a mean per character.
  EXPECT_EQ(thinner.rank_loss(1).size(), 1000u);
  EXPECT_EQ(thinner.rank_loss(1)[436], 9.0);

  // The plots of the kept records: the same extremes as all records give.
  const auto line = [](const std::vector<StepRecord>& records, const char* id) {
    const json doc = plots_json(
        metric_plots({"run", SeriesRole::Subject, records}, {}, std::nullopt), std::nullopt);
    for (const auto& plot : doc.at("plots"))
      if (plot.at("id") == id) return plot.at("series");
    return json();
  };
  auto extremes = [](const json& series) {
    double low = INFINITY, high = -INFINITY;
    for (const auto& v : series.at("values"))
      if (v.is_number())
        low = std::min(low, v.get<double>()), high = std::max(high, v.get<double>());
    return std::make_pair(low, high);
  };
  const json thin_loss = line(kept, "loss"), full_loss = line(all, "loss");
  for (size_t rank = 0; rank < 2; ++rank)
    EXPECT_EQ(extremes(thin_loss[rank]), extremes(full_loss[rank])) << "rank " << rank;
  EXPECT_EQ(line(kept, "grad_norm")[0].at("nonfinite"), json({612}));
}

TEST(StepThinner, EveryRecordAroundTheBadStepIsKept) {
  StepThinner thinner(1, 10000, 100, int64_t{5000});
  for (int64_t step = 1; step <= 10000; ++step) thinner.add(step_record(0, step, 4.0));
  const auto steps = steps_of(thinner.take(), 0);
  const std::set<int64_t> kept(steps.begin(), steps.end());
  for (int64_t step = 5000 - kFocusSteps; step <= 5000 + kFocusSteps; ++step)
    EXPECT_TRUE(kept.count(step)) << step;
  EXPECT_FALSE(kept.count(5000 - kFocusSteps - 2)) << "thinned outside";
  EXPECT_LT(kept.size(), 2u * kFocusSteps + 1 + 2 * 100 + 2);
}

TEST(StepThinner, TheFailingRanksLossIsTheSparklineInputElseTheLowestRanks) {
  StepThinner thinner(1, 2, 1000);
  for (const auto& r :
       {step_record(1, 1, 9), step_record(2, 1, 8), step_record(1, 2, 7), step_record(2, 2, 6)})
    thinner.add(r);
  EXPECT_EQ(thinner.rank_loss(), (std::vector<double>{9, 7}));
  EXPECT_EQ(thinner.rank_loss(2), (std::vector<double>{8, 6}));
  EXPECT_EQ(thinner.rank_loss(5), (std::vector<double>{9, 7}));  // no records of it
  EXPECT_TRUE(StepThinner(1, 1, 10).rank_loss().empty());
}

}  // namespace
}  // namespace faultline::report
