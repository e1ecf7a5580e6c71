// Tests for src/trainer/records.cpp: start, step and anomaly records as the harness reads them.
#include "trainer/records.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "../core/test_support.hpp"
#include "common/text.hpp"

namespace faultline::trainer {
namespace {

using faultline::testing::read_file;
using faultline::testing::ScratchDir;

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

TrainConfig tiny_config() {
  return parse_train_config("", "tiny.toml",
                            {"model.vocab_size=32", "model.block_size=8", "model.n_layer=1",
                             "model.n_head=2", "model.n_embd=16", "data.synth_shards=2",
                             "data.synth_tokens_per_shard=900", "train.batch_size=4"});
}

// A metrics file in a scratch directory, read back one JSON object per line.
struct Sink {
  ScratchDir dir;
  std::string path = dir.file("metrics.jsonl");
  MetricsWriter writer{path, 2, MetricsWriter::Mode::Truncate};

  std::vector<nlohmann::json> records() const {
    std::vector<nlohmann::json> out;
    for (const auto& line : split(read_file(path), '\n'))
      if (!line.empty()) out.push_back(nlohmann::json::parse(line));
    return out;
  }
  nlohmann::json only() const {
    auto all = records();
    EXPECT_EQ(all.size(), 1u);
    return all.empty() ? nlohmann::json::object() : all.front();
  }
};

// Two parameters: "w" (matrix, flat 0..3) and "b" (vector, flat 4..5).
struct TwoParams : torch::nn::Module {
  TwoParams() {
    register_parameter("w", torch::ones({2, 2}));
    register_parameter("b", torch::ones({2}));
  }
};

TEST(Records, StepRecordHasTheProtocolFields) {
  Sink sink;
  StepRecord r;
  r.step = 7;
  r.loss = 2.25;
  r.grad_norm = 0.5;
  r.lr = 1e-3;
  r.step_ms = 12.34567;
  r.cpu_ms = 9.87654;
  r.tokens = 256;
  r.param_norm = 3.0;
  r.update_ratio = 1e-4;
  write_step_record(sink.writer, r);
  auto j = sink.only();
  EXPECT_EQ(j.at("type"), "step");
  EXPECT_EQ(j.at("rank"), 2);
  EXPECT_EQ(j.at("step"), 7);
  EXPECT_DOUBLE_EQ(j.at("loss").get<double>(), 2.25);
  EXPECT_DOUBLE_EQ(j.at("step_ms").get<double>(), 12.346);  // rounded to microseconds
  EXPECT_DOUBLE_EQ(j.at("cpu_ms").get<double>(), 9.877);
  EXPECT_EQ(j.at("tokens"), 256);
  EXPECT_DOUBLE_EQ(j.at("param_norm").get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(j.at("update_ratio").get<double>(), 1e-4);
  for (const char* key : {"grad_norm", "lr", "data_ms", "comm_ms", "mem_bytes", "nonfinite"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_GT(j.at("mem_bytes").get<int64_t>(), 0);
}

TEST(Records, StepRecordWritesNonFiniteAsStringsAndOmitsUnmeasuredNorms) {
  Sink sink;
  StepRecord r;
  r.step = 3;
  r.loss = kNan;
  r.grad_norm = std::numeric_limits<double>::infinity();
  r.nonfinite = 5;
  write_step_record(sink.writer, r);
  auto j = sink.only();
  EXPECT_EQ(j.at("loss"), "nan");
  EXPECT_EQ(j.at("grad_norm"), "inf");
  EXPECT_EQ(j.at("nonfinite"), 5);
  EXPECT_FALSE(j.contains("param_norm"));
  EXPECT_FALSE(j.contains("update_ratio"));
}

TEST(Records, StepRecordTakesTheDevicesMemoryFiguresWhenGiven) {
  Sink sink;
  StepRecord r;
  r.memory = MemoryFigures{7000, 10000, 6500};
  write_step_record(sink.writer, r);
  auto j = sink.only();
  EXPECT_EQ(j.at("mem_bytes"), 7000);
  EXPECT_EQ(j.at("mem_total_bytes"), 10000);
  EXPECT_EQ(j.at("mem_peak_bytes"), 6500);
}

TEST(Records, StepRecordWithoutFiguresHasNoPeak) {
  Sink sink;
  write_step_record(sink.writer, StepRecord{});
  EXPECT_FALSE(sink.only().contains("mem_peak_bytes"));
}

TEST(Records, StartEventCarriesPrecisionAndDeterminism) {
  Sink sink;
  TrainConfig config = parse_train_config("", "tiny.toml", {"train.precision=bf16"});
  write_start_event(sink.writer, config, RankEnv{}, RuntimeInfo{}, 1, 1, "none", 1,
                    {{"device", "cpu"}, {"warn_only", false}});
  auto j = sink.only();
  EXPECT_EQ(j.at("precision"), "bf16");
  EXPECT_EQ(j.at("determinism").at("device"), "cpu");
}

TEST(Records, StartEventNamesConfigAndRuntime) {
  Sink sink;
  TrainConfig config = tiny_config();
  RankEnv env;
  env.rank = 2;
  env.world_size = 4;
  env.local_rank = 1;
  env.host = "node7";
  RuntimeInfo runtime;
  runtime.blas_library = "libopenblas.so";
  runtime.blas_kernel = "SkylakeX";
  runtime.blas_kernel_source = "auto";
  runtime.torch_threads = 1;
  runtime.torch_version = "2.x";
  write_start_event(sink.writer, config, env, runtime, 4242, 99, "gloo", 1);
  auto j = sink.only();
  EXPECT_EQ(j.at("type"), "event");
  EXPECT_EQ(j.at("name"), "start");
  EXPECT_EQ(j.at("config"), config.canonical);
  EXPECT_EQ(j.at("config_hash"), config.hash);
  EXPECT_EQ(j.at("trajectory_hash"), config.trajectory_hash);
  EXPECT_EQ(j.at("config_source"), "tiny.toml");
  EXPECT_EQ(j.at("world_size"), 4);
  EXPECT_EQ(j.at("host"), "node7");
  EXPECT_EQ(j.at("backend"), "gloo");
  EXPECT_EQ(j.at("parameters"), 4242);
  EXPECT_EQ(j.at("samples"), 99);
  EXPECT_EQ(j.at("first_step"), 1);
  EXPECT_EQ(j.at("blas"), "libopenblas.so");
  EXPECT_EQ(j.at("blas_kernel"), "SkylakeX");
  EXPECT_EQ(j.at("blas_kernel_source"), "auto");
}

TEST(Records, CountNonfiniteStateCountsGradsParamsAndLoss) {
  TwoParams module;
  FlatParams flat(module);
  EXPECT_EQ(count_nonfinite_state(flat, 1.0), 0);
  flat.grads()[1] = std::nanf("");
  {
    torch::NoGradGuard no_grad;
    flat.values()[5] = INFINITY;
  }
  EXPECT_EQ(count_nonfinite_state(flat, 1.0), 2);
  EXPECT_EQ(count_nonfinite_state(flat, kNan), 3);
}

struct Findings {
  std::optional<probes::NonfiniteSite> forward, backward;
  std::vector<uint64_t> samples;
  NonfiniteFindings view() const { return {forward, backward, &samples}; }
};

TEST(Records, CheapProbesBlameTheLossThenTheFirstBadGradThenTheUpdate) {
  BatchLoader loader(tiny_config());
  TwoParams module;
  FlatParams flat(module);
  Findings none;
  {
    Sink sink;
    report_nonfinite(sink.writer, 4, kNan, flat, none.view(), loader, /*before_update=*/true);
    auto j = sink.only();
    EXPECT_EQ(j.at("type"), "anomaly");
    EXPECT_EQ(j.at("kind"), "nonfinite");
    EXPECT_EQ(j.at("phase"), "loss");
    EXPECT_EQ(j.at("where"), "loss");
    EXPECT_EQ(j.at("probe"), "cheap");
    const std::string detail = j.at("detail");
    EXPECT_NE(detail.find("loss is"), std::string::npos) << detail;
    EXPECT_NE(detail.find("nan"), std::string::npos) << detail;
  }
  flat.grads()[4] = std::nanf("");  // the first element of "b"
  {
    Sink sink;
    report_nonfinite(sink.writer, 4, 1.0, flat, none.view(), loader, true);
    auto j = sink.only();
    EXPECT_EQ(j.at("phase"), "backward");
    EXPECT_EQ(j.at("where"), "b");
  }
  {
    torch::NoGradGuard no_grad;
    flat.values()[2] = INFINITY;  // inside "w"
  }
  {
    Sink sink;
    report_nonfinite(sink.writer, 4, 1.0, flat, none.view(), loader, false);
    auto j = sink.only();
    EXPECT_EQ(j.at("phase"), "optimizer");
    EXPECT_EQ(j.at("where"), "w");
    EXPECT_EQ(j.at("step"), 4);
  }
}

TEST(Records, FullProbesNameTheModuleSamplesAndShards) {
  BatchLoader loader(tiny_config());
  TwoParams module;
  FlatParams flat(module);
  Findings f;
  f.samples = {5, 0, loader.samples_used() - 1};
  f.forward = probes::NonfiniteSite{"blocks.0.attn", 12, {0, 2}};
  f.backward = probes::NonfiniteSite{"blocks.0.attn.qkv.weight", 3, {}};
  Sink sink;
  report_nonfinite(sink.writer, 9, kNan, flat, f.view(), loader, true);
  auto j = sink.only();
  EXPECT_EQ(j.at("phase"), "forward");
  EXPECT_EQ(j.at("where"), "blocks.0.attn");
  EXPECT_EQ(j.at("probe"), "full");
  EXPECT_EQ(j.at("first_grad"), "blocks.0.attn.qkv.weight");
  EXPECT_EQ(j.at("samples"), nlohmann::json({5, loader.samples_used() - 1}));
  EXPECT_EQ(j.at("shards"),
            nlohmann::json({loader.shard_of(5), loader.shard_of(loader.samples_used() - 1)}));
  EXPECT_NE(j.at("shards")[0], j.at("shards")[1]);  // first and last sample: both shards

  Findings backward_only;
  backward_only.backward = f.backward;
  Sink second;
  report_nonfinite(second.writer, 9, 1.0, flat, backward_only.view(), loader, true);
  auto b = second.only();
  EXPECT_EQ(b.at("phase"), "backward");
  EXPECT_EQ(b.at("where"), "blocks.0.attn.qkv.weight");
  EXPECT_EQ(b.at("probe"), "full");
  EXPECT_TRUE(b.at("samples").is_null());
}

TEST(Records, TokenAnomalyNamesShardSampleAndOffset) {
  Sink sink;
  TokenAnomaly anomaly;
  anomaly.sample = 17;
  anomaly.shard = "synth-00001";
  anomaly.offset = 333;
  anomaly.token = 40;
  report_token_anomaly(sink.writer, 2, anomaly, 32);
  auto j = sink.only();
  EXPECT_EQ(j.at("type"), "anomaly");
  EXPECT_EQ(j.at("kind"), "data");
  EXPECT_EQ(j.at("phase"), "data");
  EXPECT_EQ(j.at("where"), "synth-00001");
  EXPECT_EQ(j.at("samples"), nlohmann::json({17}));
  EXPECT_EQ(j.at("shards"), nlohmann::json({"synth-00001"}));
  const std::string detail = j.at("detail");
  for (const char* part : {"token id 40", "offset 333", "synth-00001", "vocab_size 32"})
    EXPECT_NE(detail.find(part), std::string::npos) << detail;
}

}  // namespace
}  // namespace faultline::trainer
