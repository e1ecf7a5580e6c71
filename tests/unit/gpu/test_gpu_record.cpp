// Tests for gpu/timeline/gpu_record.cpp: the `gpu` line the CUPTI probe writes (read back by the
// harness's parser in test_metrics_record.cpp) and the file it goes to.
#include "gpu/timeline/gpu_record.hpp"

#include <gtest/gtest.h>

namespace faultline::gpu {
namespace {

TEST(GpuRecord, LineHoldsTheFiguresAndUnixTimes) {
  IntervalFigures f;
  f.device = 1;
  f.start_ns = 2000000000;  // CUPTI time 2 s
  f.end_ns = 2100000000;
  f.busy_ms = 60;
  f.nccl_ms = 12.5;
  f.idle_ms = 40;
  f.kernels = 7;
  RecordClock clock{1700000000000000000, 1000000000};  // Unix 1.7e9 s at CUPTI 0; started at 1 s
  const std::string line = gpu_record_line(f, 3, clock);
  EXPECT_EQ(line.back(), '\n');
  EXPECT_NE(line.find("\"type\":\"gpu\""), std::string::npos) << line;
  EXPECT_NE(line.find("\"rank\":3"), std::string::npos) << line;
  EXPECT_NE(line.find("\"t\":1.100000"), std::string::npos) << line;
  EXPECT_NE(line.find("\"unix_t0\":1700000002.000000"), std::string::npos) << line;
  EXPECT_NE(line.find("\"unix_t1\":1700000002.100000"), std::string::npos) << line;
  EXPECT_NE(line.find("\"nccl_ms\":12.5000"), std::string::npos) << line;
  EXPECT_NE(line.find("\"kernels\":7"), std::string::npos) << line;
}

TEST(GpuRecord, PathFollowsTheRanksMetricsFile) {
  EXPECT_EQ(gpu_records_path(std::nullopt, "/runs/1/metrics.rank2.jsonl", 2, "/cwd"),
            "/runs/1/metrics.rank2.jsonl.gpu.jsonl");
  EXPECT_EQ(gpu_records_path(std::nullopt, "/runs/1/metrics.rank{rank}.jsonl", 5, "/cwd"),
            "/runs/1/metrics.rank5.jsonl.gpu.jsonl");
  EXPECT_EQ(gpu_records_path(std::nullopt, std::nullopt, 0, "/cwd"),
            "/cwd/faultline-gpu.rank0.jsonl");
  EXPECT_EQ(gpu_records_path(std::string("/x.jsonl"), "/m.jsonl", 0, "/cwd"), "/x.jsonl");
}

TEST(GpuRecord, EnvIntegerFallsBackOnBadValues) {
  EXPECT_EQ(env_integer("250", 100), 250);
  EXPECT_EQ(env_integer(nullptr, 100), 100);
  EXPECT_EQ(env_integer("", 100), 100);
  EXPECT_EQ(env_integer("12ms", 100), 100);
  EXPECT_EQ(env_integer("-5", 100), 100);
}

}  // namespace
}  // namespace faultline::gpu
