// Tests for report/plot_data: step records → plot lines → the page's JSON.
#include "report/plot_data.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "store_test_records.hpp"

namespace faultline::report {
namespace {

using faultline::testing::step_record;
using nlohmann::json;

const json& plot(const json& doc, const std::string& id) {
  for (const auto& p : doc.at("plots"))
    if (p.at("id") == id) return p;
  throw std::runtime_error("no plot " + id);
}

TEST(PlotData, LinesShareOneStepAxisWithNullsAndNonFiniteStepsNamed) {
  Curves failing{"failing run 3",
                 SeriesRole::Subject,
                 {step_record(0, 1, 4.0), step_record(0, 2, 3.5), step_record(0, 3, NAN),
                  step_record(1, 1, 4.1), step_record(1, 2, 3.6), step_record(1, 3, NAN)}};
  Curves baseline{
      "baseline (run 5)", SeriesRole::Reference, {step_record(0, 2, 3.4), step_record(0, 4, 3.0)}};
  const json doc = plots_json(metric_plots(failing, {baseline}, std::nullopt), 3);
  EXPECT_EQ(doc.at("bad_step"), 3);
  const json& loss = plot(doc, "loss");
  EXPECT_EQ(loss.at("x"), json({1, 2, 3, 4}));
  ASSERT_EQ(loss.at("series").size(), 3u);
  EXPECT_EQ(loss.at("series")[0].at("label"), "failing run 3 · rank 0");
  EXPECT_EQ(loss.at("series")[0].at("values"), json({4.0, 3.5, nullptr, nullptr}));
  EXPECT_EQ(loss.at("series")[0].at("nonfinite"), json({3}));
  EXPECT_EQ(loss.at("series")[1].at("label"), "failing run 3 · rank 1");
  EXPECT_EQ(loss.at("series")[2].at("role"), "reference");
  EXPECT_EQ(loss.at("series")[2].at("values"), json({nullptr, 3.4, nullptr, 3.0}));
}

TEST(PlotData, ALongRunIsDrawnFromBucketsThatKeepEachLinesLowAndHighInOrder) {
  // 10,000 steps: 1,000 buckets of 10 steps (1..10, 11..20, ...), two points each.
  std::vector<StepRecord> steps;
  for (int rank : {0, 1})
    for (int64_t step = 1; step <= 10000; ++step) {
      double loss = 2.0;
      if (rank == 0 && step == 103) loss = 0.5;  // a dip, then a spike, in bucket 10
      if (rank == 0 && step == 107) loss = 9.0;
      if (rank == 1 && step == 5004) loss = 50.0;  // a spike, then a dip, in bucket 500
      if (rank == 1 && step == 5007) loss = 1.0;
      if (rank == 0 && step > 7000 && step <= 7100) loss = NAN;
      steps.push_back(step_record(rank, step, loss));
    }
  const json doc = plots_json(metric_plots({"run 1", SeriesRole::Subject, steps}, {}, {}), {});
  const json& loss = plot(doc, "loss");
  const json& x = loss.at("x");
  ASSERT_EQ(x.size(), 2 * kMaxPlotBuckets);
  EXPECT_EQ(x[0], 1);
  EXPECT_EQ(x[1], 10);
  EXPECT_EQ(x[20], 101);
  EXPECT_EQ(x[21], 110);
  EXPECT_EQ(x.back(), 10000);
  for (size_t i = 1; i < x.size(); ++i) EXPECT_LT(x[i - 1], x[i]);
  const json& rank0 = loss.at("series")[0].at("values");
  const json& rank1 = loss.at("series")[1].at("values");
  ASSERT_EQ(rank0.size(), x.size());
  EXPECT_EQ(rank0[20], 0.5);  // the low came first
  EXPECT_EQ(rank0[21], 9.0);
  EXPECT_EQ(rank0[0], 2.0);  // a flat bucket: its value twice, no gap
  EXPECT_EQ(rank0[1], 2.0);
  EXPECT_EQ(rank1[1000], 50.0);  // the high came first
  EXPECT_EQ(rank1[1001], 1.0);
  EXPECT_TRUE(rank0[1400].is_null());  // steps 7001..7010: all NaN
  EXPECT_EQ(rank0[1420], 2.0);         // steps 7101..7110
  // The first NaN of each bucket: 7001, 7011, ... 7091.
  const json& nonfinite = loss.at("series")[0].at("nonfinite");
  ASSERT_EQ(nonfinite.size(), 10u);
  EXPECT_EQ(nonfinite.front(), 7001);
  EXPECT_EQ(nonfinite.back(), 7091);
  EXPECT_LT(doc.dump().size(), 400000u) << "was 20,000 points a line";
}

TEST(PlotData, ALongRunsStepsAroundTheBadStepAreDrawnEachOnItsOwn) {
  std::vector<StepRecord> steps;
  for (int64_t step = 1; step <= 10000; ++step)
    steps.push_back(step_record(0, step, step == 6000 ? 9.0 : 2.0 + step % 7));
  const json doc =
      plots_json(metric_plots({"run 1", SeriesRole::Subject, steps}, {}, {}), int64_t{6000});
  const json& loss = plot(doc, "loss");
  const json& x = loss.at("x");
  const json& values = loss.at("series")[0].at("values");
  ASSERT_EQ(values.size(), x.size());
  for (size_t i = 1; i < x.size(); ++i) ASSERT_LT(x[i - 1], x[i]) << "at " << i;
  // Buckets of 10 steps up to 5749, then every step of 5750..6250, then buckets again.
  const auto at = [&](int64_t step) {
    for (size_t i = 0; i < x.size(); ++i)
      if (x[i] == step) return i;
    return x.size();
  };
  ASSERT_LT(at(5750), x.size());
  EXPECT_EQ(at(5749), at(5750) - 1);  // the last bucket before it: 5741..5749
  EXPECT_EQ(at(5741), at(5750) - 2);
  for (int64_t step = 5750; step <= 6250; ++step) {
    const size_t i = at(step);
    ASSERT_EQ(i, at(5750) + static_cast<size_t>(step - 5750)) << step;
    EXPECT_EQ(values[i], step == 6000 ? 9.0 : 2.0 + step % 7) << step;
  }
  EXPECT_EQ(x[at(6250) + 1], 6251);
  EXPECT_EQ(x[at(6250) + 2], 6260);  // a bucket of 10 again
  // Buckets 5751..5760 to 6241..6250 became 500 single steps; 5741..5750 lost its last (5750).
  EXPECT_EQ(x.size(), 2 * kMaxPlotBuckets - 2 * 50 + 500 + 1);
}

TEST(PlotData, StepTimeIsSplitIntoComputeDataAndCommPerRank) {
  Curves run{"run 1", SeriesRole::Subject, {step_record(0, 1, 4.0), step_record(1, 1, 4.0)}};
  const json time =
      plot(plots_json(metric_plots(run, {}, std::nullopt), std::nullopt), "step_time");
  ASSERT_EQ(time.at("series").size(), 6u);
  EXPECT_EQ(time.at("series")[0].at("label"), "rank 0 compute");
  EXPECT_EQ(time.at("series")[0].at("values"), json({93.0}));  // 100 - 5 - 2
  EXPECT_EQ(time.at("series")[2].at("label"), "rank 0 data");
  EXPECT_EQ(time.at("series")[5].at("label"), "rank 1 comm");
  EXPECT_EQ(plot(plots_json(metric_plots(run, {}, std::nullopt), std::nullopt), "memory")
                .at("series")[1]
                .at("values"),
            json({1.0}));  // MiB
}

TEST(PlotData, MetricsATrainerNeverWroteAreLeftOut) {
  auto record = step_record(0, 1, 4.0);
  record.has_grad_norm = false;
  const auto plots = metric_plots({"run 1", SeriesRole::Subject, {record}}, {}, std::nullopt);
  for (const auto& p : plots) EXPECT_NE(p.id, "grad_norm");
  EXPECT_EQ(plots.front().id, "loss");
}

TEST(PlotData, ALogOnlyTrainerHasNoStepTimeOrMemoryPlotOfZeros) {
  auto record = step_record(0, 1, 4.0);
  record.step_ms = record.data_ms = record.comm_ms = std::nullopt;
  record.mem_bytes = std::nullopt;
  std::vector<std::string> ids;
  for (const auto& p : metric_plots({"run 1", SeriesRole::Subject, {record}}, {}, std::nullopt))
    ids.push_back(p.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"loss", "grad_norm", "lr"}));
  // A trainer that times its steps but not its data loading: compute is the whole step.
  record.step_ms = 40.0;
  const json time =
      plot(plots_json(metric_plots({"run 1", SeriesRole::Subject, {record}}, {}, std::nullopt), {}),
           "step_time");
  ASSERT_EQ(time.at("series").size(), 1u);
  EXPECT_EQ(time.at("series")[0].at("label"), "rank 0 compute");
  EXPECT_EQ(time.at("series")[0].at("values"), json({40.0}));
}

TEST(PlotData, ALossScalersScaleIsPlottedAndItsSkippedStepsAreNotGradNormPoints) {
  std::vector<StepRecord> steps;
  for (int64_t step = 1; step <= 4; ++step) {
    auto record = step_record(0, step, 4.0);
    record.loss_scale = step <= 2 ? 65536.0 : 32768.0;
    record.skipped = step == 2;
    if (record.skipped) record.grad_norm = std::numeric_limits<double>::infinity();
    steps.push_back(record);
  }
  const json doc =
      plots_json(metric_plots({"run 1", SeriesRole::Subject, steps}, {}, std::nullopt), 2);
  const json& grad = plot(doc, "grad_norm");
  EXPECT_EQ(grad.at("x"), json({1, 3, 4}));
  EXPECT_EQ(grad.at("series")[0].at("values"), json({1.25, 1.25, 1.25}));
  EXPECT_EQ(grad.at("series")[0].at("nonfinite"), json::array());  // no red cross for it
  EXPECT_EQ(plot(doc, "loss_scale").at("series")[0].at("values"),
            json({65536.0, 65536.0, 32768.0, 32768.0}));
  // A trainer without a scaler has no such plot.
  const auto plain =
      metric_plots({"run 1", SeriesRole::Subject, {step_record(0, 1, 4.0)}}, {}, std::nullopt);
  for (const auto& p : plain) EXPECT_NE(p.id, "loss_scale");
}

TEST(PlotData, TheBandSpansTheReferenceRunsAtStepsTheyAllHave) {
  const Band band =
      loss_band("ref", {{step_record(0, 1, 4.0), step_record(0, 2, 3.0)},
                        {step_record(0, 1, 4.4), step_record(0, 2, 2.8), step_record(0, 3, 2.5)}});
  EXPECT_EQ(band.steps, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(band.low, (std::vector<double>{4.0, 2.8}));
  EXPECT_EQ(band.high, (std::vector<double>{4.4, 3.0}));
  const json loss = plot(
      plots_json(metric_plots({"run 1", SeriesRole::Subject, {step_record(0, 1, 4.2)}}, {}, band),
                 std::nullopt),
      "loss");
  EXPECT_EQ(loss.at("series")[1].at("role"), "band_high");
  EXPECT_EQ(loss.at("series")[2].at("role"), "band_low");
}

}  // namespace
}  // namespace faultline::report
