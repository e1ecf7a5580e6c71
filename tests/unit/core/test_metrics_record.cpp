// Tests for src/common/metrics_record.cpp: what a fingerprint digests, the optional step fields
// cpu_ms (the bundled trainer writes it; other trainers may not) and a loss scaler's skipped and
// loss_scale, and the `gpu` record as the CUPTI probe writes it.
#include "common/metrics_record.hpp"

#include "gpu/timeline/gpu_record.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace faultline {
namespace {

StepRecord step_of(const std::string& line) {
  ParsedLine parsed = parse_metrics_line(line);
  EXPECT_EQ(parsed.status, ParseStatus::Ok) << parsed.error;
  return std::get<StepRecord>(*parsed.record);
}

TEST(MetricsRecord, AFingerprintSaysWhatItDigestsAndAnUnknownWhatIsKeptNotMatched) {
  for (Fingerprinted what : {Fingerprinted::Params, Fingerprinted::Grads})
    EXPECT_EQ(parse_fingerprinted(to_string(what)), what) << to_string(what);
  EXPECT_FALSE(parse_fingerprinted("activations").has_value());

  auto fingerprint_of = [](const std::string& what) {
    ParsedLine parsed = parse_metrics_line(R"({"v":1,"type":"fingerprint","rank":0,"t":1,)"
                                           R"("step":4,"hash":"ab","what":")" +
                                           what + R"("})");
    EXPECT_EQ(parsed.status, ParseStatus::Ok) << parsed.error;
    return std::get<FingerprintRecord>(*parsed.record);
  };
  EXPECT_TRUE(fingerprint_of("params").is(Fingerprinted::Params));
  EXPECT_FALSE(fingerprint_of("params").is(Fingerprinted::Grads));
  const FingerprintRecord other = fingerprint_of("activations");  // a trainer's own: ignored
  EXPECT_EQ(other.what, "activations");
  EXPECT_FALSE(other.is(Fingerprinted::Params) || other.is(Fingerprinted::Grads));
}

TEST(MetricsRecord, CpuTimeIsOptional) {
  const std::string head = R"({"v":1,"type":"step","rank":1,"t":0.5,"step":3,"step_ms":9.5,)"
                           R"("data_ms":0.5,"comm_ms":6)";
  StepRecord with = step_of(head + R"(,"cpu_ms":2.75})");
  ASSERT_TRUE(with.cpu_ms.has_value());
  EXPECT_EQ(*with.cpu_ms, 2.75);
  EXPECT_EQ(with.step_ms, 9.5);
  EXPECT_FALSE(step_of(head + "}").cpu_ms.has_value());
  EXPECT_FALSE(step_of(head + R"(,"cpu_ms":null})").cpu_ms.has_value());
  StepRecord nan = step_of(head + R"(,"cpu_ms":"nan"})");
  ASSERT_TRUE(nan.cpu_ms.has_value());
  EXPECT_TRUE(std::isnan(*nan.cpu_ms));
  ParsedLine text = parse_metrics_line(head + R"(,"cpu_ms":"fast"})");
  EXPECT_EQ(text.status, ParseStatus::Malformed);
  EXPECT_EQ(text.error,
            "field 'cpu_ms' is \"fast\", not a number (a number, or \"nan\", \"inf\" or \"-inf\")");
}

// A NaN loss a reader drops as malformed would let the run pass: Python's json.dumps writes a
// bare NaN/Infinity (not JSON), str() and JavaScript other spellings; all read as non-finite.
TEST(MetricsRecord, NonFiniteValuesAsPythonAndJavaScriptWriteThemAreRead) {
  const std::string head = R"({"v":1,"type":"step","rank":0,"t":0.5,"step":3,)";
  StepRecord bare = step_of(head + R"("loss":NaN,"grad_norm":Infinity,"lr":-Infinity})");
  EXPECT_TRUE(std::isnan(bare.loss));
  EXPECT_TRUE(std::isinf(bare.grad_norm) && bare.grad_norm > 0);
  EXPECT_TRUE(std::isinf(bare.lr) && bare.lr < 0);
  StepRecord spelled = step_of(head + R"("loss":"NaN","grad_norm":"Infinity","lr":"-INF"})");
  EXPECT_TRUE(std::isnan(spelled.loss));
  EXPECT_TRUE(std::isinf(spelled.grad_norm) && spelled.grad_norm > 0);
  EXPECT_TRUE(std::isinf(spelled.lr) && spelled.lr < 0);
  // The same letters inside a string stay text; a line that is not JSON for another reason
  // stays malformed.
  ParsedLine event = parse_metrics_line(
      R"({"v":1,"type":"event","rank":0,"t":1,"name":"note NaN -Infinity","loss":NaN})");
  ASSERT_EQ(event.status, ParseStatus::Ok) << event.error;
  EXPECT_EQ(std::get<EventRecord>(*event.record).name, "note NaN -Infinity");
  // Its stored text (read again by whoever needs an event's fields) is JSON.
  EXPECT_EQ(std::get<EventRecord>(*event.record).json,
            R"({"v":1,"type":"event","rank":0,"t":1,"name":"note NaN -Infinity","loss":"nan"})");
  EXPECT_EQ(parse_metrics_line(head + R"("loss":NaN,})").status, ParseStatus::Malformed);
  EXPECT_EQ(parse_metrics_line(head + R"("loss":nan})").status, ParseStatus::Malformed);
}

TEST(MetricsRecord, ALossScalersSkippedStepAndScaleAreOptional) {
  const std::string head = R"({"v":1,"type":"step","rank":0,"t":0.5,"step":7,"loss":2.5,)"
                           R"("grad_norm":"inf")";
  StepRecord skipped = step_of(head + R"(,"skipped":true,"loss_scale":32768.0})");
  EXPECT_TRUE(skipped.skipped);
  ASSERT_TRUE(skipped.loss_scale.has_value());
  EXPECT_EQ(*skipped.loss_scale, 32768.0);
  EXPECT_TRUE(std::isinf(skipped.grad_norm));
  StepRecord plain = step_of(head + "}");
  EXPECT_FALSE(plain.skipped);
  EXPECT_FALSE(plain.loss_scale.has_value());
  EXPECT_TRUE(step_of(head + R"(,"skipped":1})").skipped);  // as a Python int writes it
  EXPECT_FALSE(step_of(head + R"(,"skipped":false})").skipped);
  for (const char* bad : {R"(,"skipped":"yes"})", R"(,"skipped":2})"}) {
    ParsedLine text = parse_metrics_line(head + bad);
    EXPECT_EQ(text.status, ParseStatus::Malformed) << bad;
    EXPECT_EQ(text.error, "field 'skipped' is not true or false");
  }
}

TEST(MetricsRecord, GpuRecordFromTheCuptiProbeReadsBack) {
  gpu::IntervalFigures f;
  f.device = 2;
  f.start_ns = 1000000000;
  f.end_ns = 1100000000;
  f.busy_ms = 70;
  f.compute_ms = 50;
  f.nccl_ms = 30;
  f.overlap_ms = 10;
  f.idle_ms = 30;
  f.nccl_kernels = 4;
  f.memcpys = 3;
  f.late = 2;
  const std::string line = gpu::gpu_record_line(f, 1, {1700000000000000000, 0});
  ParsedLine parsed = parse_metrics_line(line.substr(0, line.size() - 1));
  ASSERT_EQ(parsed.status, ParseStatus::Ok) << parsed.error;
  const auto& gpu = std::get<GpuRecord>(*parsed.record);
  EXPECT_EQ(gpu.rank, 1);
  EXPECT_EQ(gpu.device, 2);
  EXPECT_DOUBLE_EQ(gpu.unix_t0, 1700000001.0);
  EXPECT_DOUBLE_EQ(gpu.unix_t1, 1700000001.1);
  EXPECT_DOUBLE_EQ(gpu.nccl_ms, 30);
  EXPECT_DOUBLE_EQ(gpu.idle_ms, 30);
  EXPECT_EQ(gpu.nccl_kernels, 4);
  EXPECT_EQ(gpu.memcpys, 3);
  EXPECT_EQ(gpu.late, 2);
}

TEST(MetricsRecord, GpuRecordNeedsItsInterval) {
  ParsedLine missing = parse_metrics_line(R"({"v":1,"type":"gpu","rank":0,"t":1,"unix_t0":5})");
  EXPECT_EQ(missing.status, ParseStatus::Malformed);
  EXPECT_EQ(missing.error, "missing field 'unix_t1'");
  ParsedLine reversed =
      parse_metrics_line(R"({"v":1,"type":"gpu","rank":0,"t":1,"unix_t0":5,"unix_t1":4})");
  EXPECT_EQ(reversed.status, ParseStatus::Malformed);
  EXPECT_EQ(reversed.error, "unix_t1 is not after unix_t0");
}

}  // namespace
}  // namespace faultline
