// Tests for src/store (ingest.cpp, queries.cpp, real_codec.cpp): metrics and gpu records in and
// out, bit-exact non-finite numbers, ordering. Summaries and handles: test_store_summary.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <variant>

#include "store/store.hpp"
#include "store_downgrade.hpp"
#include "store_test_records.hpp"
#include "test_support.hpp"

namespace faultline::store {
namespace {
using faultline::testing::downgrade_store;
using faultline::testing::ScratchDir;
using faultline::testing::step_record;

uint64_t bits(double value) {
  uint64_t out;
  std::memcpy(&out, &value, sizeof out);
  return out;
}

double from_bits(uint64_t value) {
  double out;
  std::memcpy(&out, &value, sizeof out);
  return out;
}

TEST(StoreMetrics, StepsRoundTripEveryField) {
  ScratchDir dir;
  Store store = Store::open(dir.file("f.db"));
  const int64_t run = store.create_run(RunInfo{});
  StepRecord full = step_record(1, 7, 2.5);
  full.mem_total_bytes = int64_t{80} << 30;
  full.param_norm = 12.5;
  full.update_ratio = 1e-3;
  full.nonfinite = 0;
  full.collectives = 12;
  full.skipped = true;
  full.loss_scale = 32768.0;
  StepRecord bare = step_record(1, 8, 2.4);
  store.add_steps(run, {full, bare});
  auto steps = store.steps(run);
  ASSERT_EQ(steps.size(), 2u);
  const StepRecord& a = steps[0];
  EXPECT_EQ(a.rank, 1);
  EXPECT_EQ(a.step, 7);
  EXPECT_EQ(a.t, 3.5);
  EXPECT_EQ(a.loss, 2.5);
  EXPECT_EQ(a.grad_norm, 1.25);
  EXPECT_EQ(a.lr, 3e-4);
  EXPECT_EQ(a.step_ms, 100);
  EXPECT_EQ(a.data_ms, 5);
  EXPECT_EQ(a.comm_ms, 2);
  EXPECT_EQ(a.tokens, 1000);
  EXPECT_EQ(a.mem_bytes, 1 << 20);
  EXPECT_EQ(a.mem_total_bytes, int64_t{80} << 30);
  EXPECT_EQ(a.param_norm, 12.5);
  EXPECT_EQ(a.update_ratio, 1e-3);
  EXPECT_EQ(a.nonfinite, 0);
  EXPECT_EQ(a.collectives, 12);
  EXPECT_TRUE(a.skipped);
  EXPECT_EQ(a.loss_scale, 32768.0);
  const StepRecord& b = steps[1];  // optional fields not reported stay absent
  EXPECT_FALSE(b.mem_total_bytes.has_value());
  EXPECT_FALSE(b.param_norm.has_value());
  EXPECT_FALSE(b.update_ratio.has_value());
  EXPECT_FALSE(b.nonfinite.has_value());
  EXPECT_FALSE(b.collectives.has_value());
  EXPECT_FALSE(b.skipped);
  EXPECT_FALSE(b.loss_scale.has_value());
}

TEST(StoreMetrics, TimesTokensAndMemoryNeverMeasuredStayAbsentAndAVersion7FileKeepsItsValues) {
  ScratchDir dir;
  const std::string path = dir.file("f.db");
  int64_t run = 0;
  {
    Store store = Store::open(path);
    run = store.create_run(RunInfo{});
    StepRecord log_only;  // what a log line gives: step and loss
    log_only.step = 1;
    log_only.loss = 4.0;
    log_only.has_grad_norm = log_only.has_lr = false;
    store.add_steps(run, {log_only, step_record(0, 2, 3.5)});
    const auto steps = store.steps(run);
    ASSERT_EQ(steps.size(), 2u);
    EXPECT_FALSE(steps[0].step_ms || steps[0].data_ms || steps[0].comm_ms || steps[0].tokens ||
                 steps[0].mem_bytes);
    EXPECT_EQ(steps[1].step_ms, 100.0);
    EXPECT_EQ(steps[1].tokens, 1000);
    EXPECT_EQ(steps[1].mem_bytes, 1 << 20);
    EXPECT_EQ(store.summarize(run).tokens_per_s, 10000.0) << "the timed step's rate alone";
  }
  // A version-7 file stored the log-only step's tokens and memory as 0: they stay 0, every other
  // value as it was, and the table takes absent values from then on.
  downgrade_store(path, 7);
  Store store = Store::open(path);
  EXPECT_EQ(store.schema_version(), kSchemaVersion);
  auto steps = store.steps(run);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].tokens, 0);
  EXPECT_EQ(steps[0].mem_bytes, 0);
  EXPECT_FALSE(steps[0].step_ms);
  EXPECT_EQ(steps[0].loss, 4.0);
  EXPECT_EQ(steps[1].step_ms, 100.0);
  EXPECT_EQ(steps[1].data_ms, 5.0);
  EXPECT_EQ(steps[1].mem_bytes, 1 << 20);
  EXPECT_ANY_THROW(
      Store::raw_exec_for_tests(path, "CREATE INDEX metrics_by_run_rank_step ON metrics(run_id)"))
      << "the rebuilt table has its index again";
  StepRecord again;
  again.step = 3;
  store.add_steps(run, {again});
  EXPECT_FALSE(store.steps(run).back().tokens);
}

TEST(StoreMetrics, NonFiniteAndSpecialDoublesRoundTripBitExactly) {
  ScratchDir dir;
  const std::string path = dir.file("f.db");
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> values = {
      std::nan(""),                      // 0x7ff8000000000000
      -std::nan(""),                     // 0xfff8..., what 0.0/0.0 gives on x86
      from_bits(0x7ff0000000000001ULL),  // signalling NaN
      from_bits(0x7ff80000deadbeefULL),  // NaN with a payload
      inf,
      -inf,
      -0.0,
      0.0,
      std::numeric_limits<double>::denorm_min(),
      std::numeric_limits<double>::max(),
      -1.5,
  };
  int64_t run = 0;
  {
    Store store = Store::open(path);
    run = store.create_run(RunInfo{});
    std::vector<StepRecord> steps;
    for (size_t i = 0; i < values.size(); ++i) {
      StepRecord r = step_record(0, static_cast<int64_t>(i), values[i]);
      r.t = r.grad_norm = r.lr = values[i];
      r.step_ms = r.data_ms = r.comm_ms = r.param_norm = r.update_ratio = values[i];
      steps.push_back(r);
    }
    store.add_steps(run, steps);
  }
  auto steps = Store::open(path).steps(run);  // through the file, not a cache
  ASSERT_EQ(steps.size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    const StepRecord& r = steps[i];
    SCOPED_TRACE("value " + std::to_string(i));
    for (double got : {r.t, r.loss, r.grad_norm, r.lr, r.step_ms.value(), r.data_ms.value(),
                       r.comm_ms.value(), r.param_norm.value(), r.update_ratio.value()}) {
      EXPECT_EQ(bits(got), bits(values[i]));
    }
  }
}

TEST(StoreMetrics, StepsAreOrderedByRankThenStepAndFilterByRank) {
  ScratchDir dir;
  Store store = Store::open(dir.file("f.db"));
  const int64_t run = store.create_run(RunInfo{});
  const int64_t other = store.create_run(RunInfo{});
  std::vector<StepRecord> batch;
  for (int64_t step = 0; step < 5; ++step) {
    for (int rank = 2; rank >= 0; --rank) batch.push_back(step_record(rank, step, 1.0 + rank));
  }
  store.add_steps(run, {step_record(1, 9, 0)});
  store.add_steps(other, batch);  // interleaved with the first run's rows
  store.add_steps(run, batch);
  auto all = store.steps(run);
  ASSERT_EQ(all.size(), 16u);
  for (size_t i = 1; i < all.size(); ++i) {
    EXPECT_TRUE(all[i - 1].rank < all[i].rank ||
                (all[i - 1].rank == all[i].rank && all[i - 1].step <= all[i].step));
  }
  auto rank1 = store.steps(run, 1);
  ASSERT_EQ(rank1.size(), 6u);
  EXPECT_EQ(rank1.front().step, 0);
  EXPECT_EQ(rank1.back().step, 9);
  for (const auto& r : rank1) EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(store.steps(other).size(), 15u);
  EXPECT_TRUE(store.steps(run + 100).empty());
}

TEST(StoreMetrics, AWindowOfStepsIsEveryRanksStepsInItByRankThenStep) {
  ScratchDir dir;
  Store store = Store::open(dir.file("f.db"));
  const int64_t run = store.create_run(RunInfo{});
  const int64_t other = store.create_run(RunInfo{});
  std::vector<StepRecord> batch;
  for (int64_t step = 1; step <= 20; ++step)
    for (int rank : {3, 0, 5})  // ranks need not be 0..N-1, nor written in order
      batch.push_back(step_record(rank, step, static_cast<double>(step)));
  store.add_steps(other, batch);
  store.add_steps(run, batch);
  const auto window = store.steps_between(run, 8, 10);
  std::vector<std::pair<int, int64_t>> got;
  for (const auto& r : window) got.emplace_back(r.rank, r.step);
  EXPECT_EQ(got, (std::vector<std::pair<int, int64_t>>{
                     {0, 8}, {0, 9}, {0, 10}, {3, 8}, {3, 9}, {3, 10}, {5, 8}, {5, 9}, {5, 10}}));
  EXPECT_EQ(window.front().loss, 8.0);
  const auto rank3 = store.steps_between(run, 19, 30, 3);
  ASSERT_EQ(rank3.size(), 2u);
  EXPECT_EQ(rank3[0].rank, 3);
  EXPECT_EQ(rank3[1].step, 20);
  EXPECT_TRUE(store.steps_between(run, 1, 5, 4).empty());  // no such rank
  EXPECT_TRUE(store.steps_between(run, 21, 30).empty());
  EXPECT_TRUE(store.steps_between(run + 100, 1, 5).empty());
}

TEST(StoreMetrics, AnomaliesEventsAndFingerprintsRoundTrip) {
  ScratchDir dir;
  Store store = Store::open(dir.file("f.db"));
  const int64_t run = store.create_run(RunInfo{});
  AnomalyRecord anomaly{3,
                        1.5,
                        17,
                        "nonfinite",
                        "backward",
                        "blocks.2.attn",
                        "grad has NaN",
                        {4, 9},
                        {"shard-0001"},
                        R"({"v":1,"type":"anomaly"})"};
  store.add_anomalies(run, {anomaly});
  EventRecord start{0, 0.0, "start", std::nullopt, R"({"name":"start","config_hash":"ab"})"};
  EventRecord checkpoint{0, 9.5, "checkpoint", 100, R"({"path":"ckpt/100"})"};
  store.add_events(run, {start, checkpoint});
  store.add_fingerprints(run, {{0, 2.0, 10, "params", "00ff00ff00ff00ff", 1.5, {0.5, -0.5}},
                               {1, 2.0, 10, "params", "00ff00ff00ff00fe", {}, {}}});

  auto anomalies = store.anomalies(run);
  ASSERT_EQ(anomalies.size(), 1u);
  EXPECT_EQ(anomalies[0].rank, 3);
  EXPECT_EQ(anomalies[0].t, 1.5);
  EXPECT_EQ(anomalies[0].step, 17);
  EXPECT_EQ(anomalies[0].kind, "nonfinite");
  EXPECT_EQ(anomalies[0].phase, "backward");
  EXPECT_EQ(anomalies[0].where, "blocks.2.attn");
  EXPECT_EQ(anomalies[0].detail, "grad has NaN");
  EXPECT_EQ(anomalies[0].samples, (std::vector<uint64_t>{4, 9}));
  EXPECT_EQ(anomalies[0].shards, std::vector<std::string>{"shard-0001"});
  EXPECT_EQ(anomalies[0].json, anomaly.json);

  auto events = store.events(run);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].name, "start");
  EXPECT_FALSE(events[0].step.has_value());
  EXPECT_EQ(events[0].json, start.json);
  EXPECT_EQ(events[1].name, "checkpoint");
  EXPECT_EQ(events[1].step, 100);
  EXPECT_EQ(events[1].t, 9.5);

  auto prints = store.fingerprints(run);
  ASSERT_EQ(prints.size(), 2u);
  EXPECT_EQ(prints[1].rank, 1);
  EXPECT_EQ(prints[1].step, 10);
  EXPECT_EQ(prints[1].what, "params");
  EXPECT_EQ(prints[1].hash, "00ff00ff00ff00fe");
  EXPECT_FALSE(prints[1].norm.has_value());
  EXPECT_EQ(prints[0].norm, 1.5);
  EXPECT_EQ(prints[0].sketch, (std::vector<double>{0.5, -0.5}));
}

TEST(StoreMetrics, ParsedProtocolLinesKeepTheirNaN) {
  ScratchDir dir;
  Store store = Store::open(dir.file("f.db"));
  const int64_t run = store.create_run(RunInfo{});
  ParsedLine line = parse_metrics_line(
      R"({"v":1,"type":"step","rank":0,"t":1.0,"step":3,"loss":"nan","grad_norm":"inf",)"
      R"("lr":0.1,"step_ms":10,"data_ms":1,"comm_ms":0,"tokens":64,"mem_bytes":0})");
  ASSERT_EQ(line.status, ParseStatus::Ok) << line.error;
  store.add_steps(run, {std::get<StepRecord>(*line.record)});
  auto steps = store.steps(run);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_TRUE(std::isnan(steps[0].loss));
  EXPECT_EQ(steps[0].grad_norm, std::numeric_limits<double>::infinity());
}

TEST(StoreMetrics, FingerprintLinesKeepNormAndSketch) {
  ParsedLine line = parse_metrics_line(
      R"({"v":1,"type":"fingerprint","rank":2,"t":1.0,"step":7,"what":"grads","hash":"ab",)"
      R"("norm":4.5,"sketch":[1.5,"nan",-2]})");
  ASSERT_EQ(line.status, ParseStatus::Ok) << line.error;
  const auto& print = std::get<FingerprintRecord>(*line.record);
  EXPECT_EQ(print.norm, 4.5);
  ASSERT_EQ(print.sketch.size(), 3u);
  EXPECT_EQ(print.sketch[0], 1.5);
  EXPECT_TRUE(std::isnan(print.sketch[1]));
  EXPECT_EQ(print.sketch[2], -2.0);
  // A trainer that writes only the digest (the protocol's minimum) is read as such.
  ParsedLine bare = parse_metrics_line(
      R"({"v":1,"type":"fingerprint","rank":0,"t":1.0,"step":7,"what":"grads","hash":"ab"})");
  ASSERT_EQ(bare.status, ParseStatus::Ok) << bare.error;
  EXPECT_FALSE(std::get<FingerprintRecord>(*bare.record).norm.has_value());
  EXPECT_TRUE(std::get<FingerprintRecord>(*bare.record).sketch.empty());
}

// The CUPTI probe's intervals are kept (version 9): a report joins them with the steps later.
TEST(StoreMetrics, GpuRecordsRoundTripByRankAndAVersion8FileGetsTheTable) {
  ScratchDir dir;
  const std::string path = dir.file("f.db");
  int64_t run = 0;
  {
    Store store = Store::open(path);
    run = store.create_run(RunInfo{});
    store.add_steps(run, {step_record(0, 1, 3.0)});
  }
  downgrade_store(path, 8);
  Store store = Store::open(path);
  EXPECT_EQ(store.schema_version(), kSchemaVersion);
  EXPECT_EQ(store.steps(run).size(), 1u) << "the version-8 file keeps its steps";
  EXPECT_TRUE(store.gpu_ranks(run).empty());
  GpuRecord second;
  second.rank = 1;
  second.t = 0.5;
  second.device = 3;
  second.unix_t0 = 1.7e9 + 0.125;
  second.unix_t1 = 1.7e9 + 0.225;
  second.busy_ms = 80;
  second.compute_ms = 60;
  second.nccl_ms = 25;
  second.overlap_ms = 5;
  second.memcpy_ms = 2.5;
  second.idle_ms = 20;
  second.max_gap_ms = 12.5;
  second.kernels = 140;
  second.nccl_kernels = 4;
  second.memcpys = 6;
  second.late = 2;
  GpuRecord first = second;
  first.rank = 0;
  first.unix_t0 = 1.7e9 + 0.0625;
  first.nccl_ms = std::numeric_limits<double>::quiet_NaN();  // a record is stored as it came
  store.add_gpu_records(run, {second, first});
  const int64_t other = store.create_run(RunInfo{});
  store.add_gpu_records(other, {second});
  EXPECT_EQ(store.gpu_ranks(run), (std::vector<int>{0, 1}));
  EXPECT_EQ(store.gpu_records(run, 1).size(), 1u);
  EXPECT_EQ(store.gpu_records(run, 1)[0].rank, 1);
  const auto read = store.gpu_records(run);
  ASSERT_EQ(read.size(), 2u);
  EXPECT_EQ(read[0].rank, 0) << "by rank";
  EXPECT_EQ(bits(read[0].unix_t0), bits(first.unix_t0));
  EXPECT_TRUE(std::isnan(read[0].nccl_ms));
  const GpuRecord& back = read[1];
  EXPECT_EQ(back.rank, 1);
  EXPECT_EQ(back.t, 0.5);
  EXPECT_EQ(back.device, 3);
  EXPECT_EQ(bits(back.unix_t0), bits(second.unix_t0));
  EXPECT_EQ(bits(back.unix_t1), bits(second.unix_t1));
  EXPECT_EQ(back.busy_ms, 80);
  EXPECT_EQ(back.compute_ms, 60);
  EXPECT_EQ(back.nccl_ms, 25);
  EXPECT_EQ(back.overlap_ms, 5);
  EXPECT_EQ(back.memcpy_ms, 2.5);
  EXPECT_EQ(back.idle_ms, 20);
  EXPECT_EQ(back.max_gap_ms, 12.5);
  EXPECT_EQ(back.kernels, 140);
  EXPECT_EQ(back.nccl_kernels, 4);
  EXPECT_EQ(back.memcpys, 6);
  EXPECT_EQ(back.late, 2);
  EXPECT_EQ(store.gpu_records(other).size(), 1u);
}

}  // namespace
}  // namespace faultline::store
