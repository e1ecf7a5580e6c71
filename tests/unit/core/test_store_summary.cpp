// Tests for src/store (queries.cpp summarize, ingest.cpp batches): run summaries, two handles
// writing one file in turn, big batches, moved handles, bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "store/store.hpp"
#include "store_test_records.hpp"
#include "test_support.hpp"

namespace faultline::store {
namespace {
using faultline::testing::ScratchDir;
using faultline::testing::step_record;

TEST(StoreSummary, SummarizeReportsLossesRatesAndCounts) {
  ScratchDir dir;
  Store store = Store::open(dir.file("f.db"));
  const int64_t run = store.create_run(RunInfo{});
  std::vector<StepRecord> batch;
  for (int64_t step = 0; step < 10; ++step) {
    for (int rank = 0; rank < 2; ++rank) {
      StepRecord r = step_record(rank, step, 10.0 - static_cast<double>(step) + rank);
      r.tokens = 500;
      r.step_ms = 250;  // each rank: 2,000 tokens/s
      batch.push_back(r);
    }
  }
  batch[19].loss = std::nan("");  // rank 1's last step; the summary follows rank 0
  batch.push_back(step_record(1, 10, 0));
  batch.back().step_ms = std::nan("");  // untimed: counted, not in the rate
  batch.back().tokens = 0;
  store.add_steps(run, batch);
  store.add_anomalies(run, {AnomalyRecord{1, 0, 9, "nonfinite", "loss", "", "", {}, {}, "{}"}});

  MetricsSummary summary = store.summarize(run);
  EXPECT_EQ(summary.steps, 21);
  EXPECT_EQ(summary.ranks, 2);
  EXPECT_EQ(summary.last_step, 10);
  EXPECT_EQ(summary.first_loss, 10.0);
  EXPECT_EQ(summary.last_loss, 1.0);
  EXPECT_DOUBLE_EQ(summary.tokens_per_s, 4000.0);
  EXPECT_EQ(summary.anomalies, 1);
  EXPECT_EQ(summary.slowest_step_ms, 250);  // the untimed (NaN) step is not the slowest

  batch = {step_record(0, 10, std::nan(""))};
  store.add_steps(run, batch);
  EXPECT_TRUE(std::isnan(store.summarize(run).last_loss.value()));  // NaN is reported as NaN
}

TEST(StoreSummary, SummarizeOfARunWithoutMetrics) {
  ScratchDir dir;
  Store store = Store::open(dir.file("f.db"));
  MetricsSummary summary = store.summarize(store.create_run(RunInfo{}));
  EXPECT_EQ(summary.steps, 0);
  EXPECT_EQ(summary.ranks, 0);
  EXPECT_EQ(summary.last_step, -1);
  EXPECT_FALSE(summary.first_loss.has_value());
  EXPECT_FALSE(summary.last_loss.has_value());
  EXPECT_EQ(summary.tokens_per_s, 0);
  EXPECT_EQ(summary.slowest_step_ms, 0);
}

TEST(StoreSummary, TwoHandlesOnOneFileWriteInTurn) {
  ScratchDir dir;
  const std::string path = dir.file("f.db");
  Store first = Store::open(path);
  Store second = Store::open(path);
  const int64_t a = first.create_run(RunInfo{});
  const int64_t b = second.create_run(RunInfo{});
  EXPECT_NE(a, b);
  for (int64_t step = 0; step < 20; ++step) {
    first.add_steps(a, {step_record(0, step, 1)});
    second.add_steps(b, {step_record(0, step, 2)});
    second.add_events(a, {EventRecord{0, 0, "tick", step, "{}"}});
  }
  EXPECT_EQ(second.steps(a).size(), 20u);  // each sees the other's commits
  EXPECT_EQ(first.steps(b).size(), 20u);
  EXPECT_EQ(first.events(a).size(), 20u);
  EXPECT_EQ(first.list_runs().size(), 2u);
}

TEST(StoreSummary, BigBatchesAndMovedHandlesKeepWorking) {
  ScratchDir dir;
  Store store = Store::open(dir.file("f.db"));
  const int64_t run = store.create_run(RunInfo{});
  std::vector<StepRecord> batch;
  for (int64_t step = 0; step < 5000; ++step) batch.push_back(step_record(0, step, 1));
  store.add_steps(run, batch);
  Store moved = std::move(store);  // cached statements move along
  moved.add_steps(run, batch);
  Store assigned = Store::open(dir.file("g.db"));
  assigned = std::move(moved);
  assigned.add_steps(run, batch);
  EXPECT_EQ(assigned.summarize(run).steps, 15000);
}

TEST(StoreSummary, EmptyBatchesAreNoOps) {
  ScratchDir dir;
  Store store = Store::open(dir.file("f.db"));
  store.add_steps(1, {});
  store.add_anomalies(1, {});
  store.add_events(1, {});
  store.add_fingerprints(1, {});
  EXPECT_TRUE(store.list_runs().empty());
}

TEST(StoreSummary, RecordsOfAnUnknownRunAreABug) {
  ScratchDir dir;
  Store store = Store::open(dir.file("f.db"));
  EXPECT_THROW(store.add_steps(42, {step_record(0, 0, 1)}), std::runtime_error);
}

}  // namespace
}  // namespace faultline::store
