// Tests for report/gpu_figures.cpp on a real store: a run's stored gpu records are joined with
// its steps into the report's GPU plot and per-rank table; a run without them has neither.
#include "report/gpu_figures.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "gpu_run.hpp"
#include "report/report_gather.hpp"
#include "report/report_markdown.hpp"
#include "test_support.hpp"

namespace faultline::report {
namespace {

using faultline::testing::ScratchDir;

// 10 steps of 100 ms per rank: the GPU idle for the first 25 ms (data), then compute, and NCCL
// for 2 ms (rank 0) or 10 ms (rank 1) at the end (gpu_run.hpp).
// `late`: what rank 1's probe dropped, in each of its first two records.
int64_t stored_gpu_run(store::Store& store, bool with_gpu, int64_t late = 0) {
  auto run = faultline::testing::gpu_run(10, 25, {2, 10});
  int marked = 0;
  for (auto& interval : run.gpu)
    if (interval.rank == 1 && marked++ < 2) interval.late = late;
  store::RunInfo info;
  info.ranks = 2;
  info.steps = 10;
  const int64_t id = store.create_run(info);
  store.add_events(id, run.starts);
  store.add_steps(id, run.steps);
  if (with_gpu) store.add_gpu_records(id, run.gpu);
  info.status = store::RunStatus::Finished;
  info.verdict = "pass";
  store.finish_run(id, info);
  return id;
}

TEST(GpuFigures, StoredGpuRecordsAreJoinedWithTheStepsThroughEachRanksStart) {
  ScratchDir dir;
  store::Store store = store::Store::open(dir.file("f.db"));
  const auto steps = stored_gpu_steps(store, stored_gpu_run(store, true)).steps;
  ASSERT_EQ(steps.size(), 20u);
  EXPECT_EQ(steps[0].rank, 0);
  EXPECT_NEAR(steps[0].compute_ms, 73, 1e-3);
  EXPECT_NEAR(steps[0].nccl_ms, 2, 1e-3);
  EXPECT_NEAR(steps[0].idle_in_data_ms, 25, 1e-3);
  EXPECT_EQ(steps[19].rank, 1);
  EXPECT_EQ(steps[19].step, 10);
  EXPECT_NEAR(steps[19].nccl_ms, 10, 1e-3) << "rank 1 placed through its own start";
  EXPECT_TRUE(stored_gpu_steps(store, stored_gpu_run(store, false)).steps.empty());
}

TEST(GpuFigures, TheTableHasEachRanksMediansThePlotALinePerRankAndPartAndTheRunItsShares) {
  ScratchDir dir;
  store::Store store = store::Store::open(dir.file("f.db"));
  const auto steps = stored_gpu_steps(store, stored_gpu_run(store, true)).steps;
  const Table table = gpu_time_table(steps);
  ASSERT_EQ(table.rows.size(), 2u);
  EXPECT_EQ(table.columns.size(), table.rows[0].size());
  EXPECT_EQ(table.rows[0],
            (std::vector<std::string>{"0", "10", "100.0", "73.0", "2.0", "25.0", "25.0", "100%"}));
  EXPECT_EQ(table.rows[1][4], "10.0");
  const auto plot = gpu_time_plot(steps);
  ASSERT_TRUE(plot);
  EXPECT_EQ(plot->unit, "ms");
  ASSERT_EQ(plot->series.size(), 6u);
  EXPECT_EQ(plot->series[2].label, "rank 0 NCCL");
  EXPECT_EQ(plot->series[2].steps.size(), 10u);
  EXPECT_NEAR(plot->series[2].values[4], 2, 1e-3);
  EXPECT_FALSE(gpu_time_plot({}));
  EXPECT_TRUE(gpu_time_table({}).rows.empty());
  // The whole run: (73 + 65) / 200 compute, (2 + 10) / 200 NCCL, 50 / 200 idle.
  const auto shares = gpu_shares(steps);
  ASSERT_TRUE(shares);
  EXPECT_EQ(shares->steps, 20);
  EXPECT_NEAR(shares->compute, 0.69, 1e-5);
  EXPECT_NEAR(shares->nccl, 0.06, 1e-5);
  EXPECT_NEAR(shares->idle, 0.25, 1e-5);
  EXPECT_FALSE(gpu_shares({}));
}

TEST(GpuFigures, ARunsReportShowsThemAfterItsStepTimeAndOnlyWhenItHasGpuRecords) {
  ScratchDir dir;
  store::Store store = store::Store::open(dir.file("f.db"));
  const Report with = gather_run(store, stored_gpu_run(store, true), {});
  std::vector<std::string> ids;
  for (const auto& plot : with.plots) ids.push_back(plot.id);
  const auto step_time = std::find(ids.begin(), ids.end(), "step_time");
  ASSERT_NE(step_time, ids.end());
  ASSERT_NE(step_time + 1, ids.end());
  EXPECT_EQ(*(step_time + 1), "gpu_time");
  EXPECT_EQ(with.gpu_time.rows.size(), 2u);
  const std::string markdown = render_markdown(with);
  EXPECT_NE(markdown.find("GPU per step, medians (CUPTI probe):\n\n| rank | steps |"),
            std::string::npos)
      << markdown;
  EXPECT_NE(markdown.find("| 1 | 10 | 100.0 | 65.0 | 10.0 | 25.0 | 25.0 | 100% |"),
            std::string::npos)
      << markdown;

  const Report without = gather_run(store, stored_gpu_run(store, false), {});
  EXPECT_TRUE(without.gpu_time.rows.empty());
  EXPECT_TRUE(std::none_of(without.plots.begin(), without.plots.end(),
                           [](const Plot& p) { return p.id == "gpu_time"; }));
  EXPECT_EQ(render_markdown(without).find("GPU per step"), std::string::npos);
}

// Activities the probe dropped (they came after their interval was written) make the figures
// undercount: the table counts them per rank and the report says so.
TEST(GpuFigures, WhatTheProbeDroppedIsCountedPerRankAndNoted) {
  ScratchDir dir;
  store::Store store = store::Store::open(dir.file("f.db"));
  const auto joined = stored_gpu_steps(store, stored_gpu_run(store, true, 3));
  EXPECT_EQ(joined.dropped, (std::map<int, int64_t>{{1, 6}}));
  const Table table = gpu_time_table(joined.steps, joined.dropped);
  ASSERT_EQ(table.columns.size(), 9u);
  EXPECT_EQ(table.columns.back(), "dropped by the probe");
  EXPECT_EQ(table.rows[0].back(), "0");
  EXPECT_EQ(table.rows[1].back(), "6");
  const Report report = gather_run(store, stored_gpu_run(store, true, 3), {});
  ASSERT_FALSE(report.notes.empty());
  EXPECT_NE(report.notes.back().find("the CUPTI probe dropped 6 GPU activities"), std::string::npos)
      << report.notes.back();
  EXPECT_TRUE(stored_gpu_steps(store, stored_gpu_run(store, true)).dropped.empty());
  EXPECT_EQ(gather_run(store, stored_gpu_run(store, true), {}).gpu_time.columns.size(), 8u);
}

}  // namespace
}  // namespace faultline::report
