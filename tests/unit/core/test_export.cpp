// Tests for harness/browse/export.cpp: numbers as CSV holds them (NaN and infinities spelled
// out), quoting, one row per step record with absent values left empty, JSON Lines alike.
#include "harness/browse/export.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/text.hpp"
#include "store_test_records.hpp"

namespace faultline::harness {
namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

using faultline::testing::step_record;

TEST(Export, NumbersReadBackToTheSameDoubleAndNonFiniteOnesAreSpelledOut) {
  EXPECT_EQ(csv_number(kNan), "nan");
  EXPECT_EQ(csv_number(kInf), "inf");
  EXPECT_EQ(csv_number(-kInf), "-inf");
  EXPECT_EQ(csv_number(0.1), "0.1");
  EXPECT_EQ(csv_number(2), "2");
  const double awkward = 2.5872883796691895;
  EXPECT_EQ(std::stod(csv_number(awkward)), awkward);
}

TEST(Export, FieldsWithCommasQuotesOrLineBreaksAreQuoted) {
  EXPECT_EQ(csv_field("plain"), "plain");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field(R"({"k":"v"})"), R"("{""k"":""v""}")");
  EXPECT_EQ(csv_field("two\nlines"), "\"two\nlines\"");
}

TEST(Export, MetricsCsvHasAHeaderAndOneRowPerStepAndRank) {
  auto nan_step = step_record(1, 2, kNan);
  nan_step.has_lr = false;
  nan_step.param_norm = 3.0;
  nan_step.skipped = true;  // a loss scaler's, with its scale
  nan_step.loss_scale = 1024.0;
  std::ostringstream out;
  write_metrics(
      out, ExportFormat::Csv, 7,
      {step_record(0, 1, 4.25), step_record(0, 2, 4.0), step_record(1, 1, 4.25), nan_step});
  const auto lines = split(out.str(), '\n');
  ASSERT_EQ(lines.size(), 6u);  // header, four rows, the empty text after the last line break
  EXPECT_EQ(lines[0].rfind("run_id,rank,step,t,loss,grad_norm,lr,", 0), 0u);
  EXPECT_EQ(lines[1], "7,0,1,0.5,4.25,1.25,0.0003,100,5,2,1000,1048576,,,,,,0,");
  EXPECT_EQ(lines[4], "7,1,2,1,nan,1.25,,100,5,2,1000,1048576,,3,,,,1,1024");
  EXPECT_EQ(split(lines[0], ',').size(), split(lines[4], ',').size());
}

TEST(Export, TimesTokensAndMemoryATrainerNeverMeasuredAreEmptyCellsAndNullNotZero) {
  auto record = step_record(0, 1, 4.25);
  record.step_ms = record.data_ms = record.comm_ms = std::nullopt;
  record.tokens = record.mem_bytes = std::nullopt;
  std::ostringstream csv, jsonl;
  write_metrics(csv, ExportFormat::Csv, 7, {record});
  write_metrics(jsonl, ExportFormat::Jsonl, 7, {record});
  EXPECT_EQ(split(csv.str(), '\n').at(1), "7,0,1,0.5,4.25,1.25,0.0003,,,,,,,,,,,0,");
  const auto doc = nlohmann::json::parse(split(jsonl.str(), '\n').front());
  for (const char* field : {"step_ms", "data_ms", "comm_ms", "tokens", "mem_bytes"})
    EXPECT_TRUE(doc.at(field).is_null()) << field;
}

TEST(Export, MetricsJsonLinesSpellNanAsTheProtocolDoesAndAbsentAsNull) {
  auto record = step_record(0, 3, kNan);
  record.has_grad_norm = false;
  std::ostringstream out;
  write_metrics(out, ExportFormat::Jsonl, 2, {record});
  const auto doc = nlohmann::json::parse(split(out.str(), '\n').front());
  EXPECT_EQ(doc.at("loss"), "nan");
  EXPECT_TRUE(doc.at("grad_norm").is_null());
  EXPECT_EQ(doc.at("lr"), 3e-4);
  EXPECT_EQ(doc.at("run_id"), 2);
  EXPECT_EQ(doc.at("step"), 3);
}

TEST(Export, EventsKeepTheirRecordAndAnomaliesComeAfter) {
  EventRecord event{0, 0.5, "checkpoint", 4, R"({"name":"checkpoint","path":"a,b"})"};
  AnomalyRecord anomaly;
  anomaly.step = 9;
  anomaly.kind = "nonfinite";
  anomaly.json = R"({"kind":"nonfinite"})";
  std::ostringstream csv, jsonl;
  write_events(csv, ExportFormat::Csv, 3, {event}, {anomaly});
  write_events(jsonl, ExportFormat::Jsonl, 3, {event}, {anomaly});
  const auto rows = split(csv.str(), '\n');
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[1], R"(3,event,0,0.5,4,checkpoint,"{""name"":""checkpoint"",""path"":""a,b""}")");
  EXPECT_EQ(rows[2].rfind("3,anomaly,0,0,9,nonfinite,", 0), 0u);
  const auto first = nlohmann::json::parse(split(jsonl.str(), '\n').front());
  EXPECT_EQ(first.at("record").at("path"), "a,b");
}

TEST(Export, GpuRecordsAreOneRowPerIntervalWithEveryFigure) {
  GpuRecord interval{1, 2.5, 0, 1.7e9 + 0.125, 1.7e9 + 0.225};
  interval.busy_ms = 80;
  interval.compute_ms = 62.5;
  interval.nccl_ms = std::nan("");
  interval.idle_ms = 20;
  interval.kernels = 140;
  interval.nccl_kernels = 4;
  interval.late = 1;
  std::ostringstream csv, jsonl;
  using Output = std::pair<std::ostream*, ExportFormat>;
  for (const auto& [out, format] :
       {Output{&csv, ExportFormat::Csv}, {&jsonl, ExportFormat::Jsonl}}) {
    write_gpu_header(*out, format);
    write_gpu_row(*out, format, 3, interval);
  }
  const auto rows = split(csv.str(), '\n');
  ASSERT_EQ(rows.size(), 3u);  // and the empty text after the last line break
  EXPECT_EQ(rows[0],
            "run_id,rank,t,device,unix_t0,unix_t1,busy_ms,compute_ms,nccl_ms,overlap_ms,memcpy_ms,"
            "idle_ms,max_gap_ms,kernels,nccl_kernels,memcpys,late");
  EXPECT_EQ(rows[1], "3,1,2.5,0,1700000000.125,1700000000.225,80,62.5,nan,0,0,20,0,140,4,0,1");
  const auto line = nlohmann::json::parse(split(jsonl.str(), '\n').front());
  EXPECT_EQ(line.at("unix_t0").get<double>(), 1.7e9 + 0.125);
  EXPECT_EQ(line.at("nccl_ms"), "nan");
  EXPECT_EQ(line.at("kernels"), 140);
  EXPECT_EQ(line.size(), 17u);
}

TEST(Export, FormatsAndWhatsHaveOneNameEach) {
  for (const auto& name : export_format_names())
    EXPECT_EQ(to_string(*export_format_from_string(name)), name);
  for (const auto& name : export_what_names())
    EXPECT_EQ(to_string(*export_what_from_string(name)), name);
  EXPECT_FALSE(export_format_from_string("xml").has_value());
  EXPECT_FALSE(export_what_from_string("CSV").has_value());
}

}  // namespace
}  // namespace faultline::harness
