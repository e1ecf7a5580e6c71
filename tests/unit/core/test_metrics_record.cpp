// Tests for src/common/metrics_record.cpp: the optional step field cpu_ms (the bundled trainer
// writes it; other trainers may not).
#include "common/metrics_record.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace faultline {
namespace {

StepRecord step_of(const std::string& line) {
  ParsedLine parsed = parse_metrics_line(line);
  EXPECT_EQ(parsed.status, ParseStatus::Ok) << parsed.error;
  return std::get<StepRecord>(*parsed.record);
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
  EXPECT_EQ(text.error, "field 'cpu_ms' is not a number");
}

}  // namespace
}  // namespace faultline
