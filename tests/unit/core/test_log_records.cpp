// Tests for harness/launch/log_records.cpp: Python-style named groups, lines read as step
// records and checkpoint events, and the errors a bad pattern gets.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/metrics_record.hpp"
#include "harness/launch/log_records.hpp"
#include "test_support.hpp"

namespace faultline::harness {
namespace {
using faultline::testing::user_errors;
using nlohmann::json;

TEST(LogRecords, NamedGroupsAreStrippedAndNumberedAsPythonNumbersThem) {
  const auto [plain, groups] =
      strip_group_names(R"(step (?P<step>\d+)(?:/\d+)? [(](x)[)] (?<loss>[^)\]]+))");
  EXPECT_EQ(plain, R"(step (\d+)(?:/\d+)? [(](x)[)] ([^)\]]+))");
  EXPECT_EQ(groups, (std::vector<std::string>{"step", "", "loss"}));
}

TEST(LogRecords, AMatchingLineIsAStepRecordWithOnlyTheFieldsItGave) {
  const auto records =
      LogRecords::compile(R"(step (?P<step>\d+)/\d+ loss (?P<loss>[-+0-9.eEnaif]+))", "", "", "/w");
  EXPECT_FALSE(records.translate("warming up", 0, 0.5));
  const auto line = records.translate("step 12/100 loss 2.5 lr 3e-4", 1, 0.5);
  ASSERT_TRUE(line);
  const auto parsed = parse_metrics_line(*line);
  ASSERT_EQ(parsed.status, ParseStatus::Ok);
  const auto& step = std::get<StepRecord>(*parsed.record);
  EXPECT_EQ(step.rank, 1);
  EXPECT_EQ(step.step, 12);
  EXPECT_DOUBLE_EQ(step.loss, 2.5);
  EXPECT_FALSE(step.has_grad_norm);  // never printed: not a NaN
  EXPECT_FALSE(step.has_lr);
  // nor measured: not 0 ms, 0 tokens or 0 bytes
  EXPECT_FALSE(step.step_ms || step.data_ms || step.comm_ms || step.tokens || step.mem_bytes);

  const auto nan = parse_metrics_line(*records.translate("step 13/100 loss nan", 0, 1));
  EXPECT_TRUE(std::isnan(std::get<StepRecord>(*nan.record).loss));
}

TEST(LogRecords, ANonNumberIsPassedOnSoTheRecordIsMalformed) {
  const auto records = LogRecords::compile(R"(step (?P<step>\d+) loss (?P<loss>\S+))", "", "", "");
  const auto parsed = parse_metrics_line(*records.translate("step 3 loss oops", 0, 0));
  EXPECT_EQ(parsed.status, ParseStatus::Malformed);
}

TEST(LogRecords, ALossScalersSkipsAreReadAsLogsSayThem) {
  // Megatron-LM's iteration line: the loss scale and a count of skipped iterations.
  const auto records = LogRecords::compile(
      R"(iteration\s+(?P<step>\d+)/.*loss scale: (?P<loss_scale>\S+) .*number of skipped )"
      R"(iterations:\s+(?P<skipped>\S+))",
      "", "", "");
  auto step_of = [&](const std::string& line) {
    const auto parsed = parse_metrics_line(*records.translate(line, 0, 0));
    EXPECT_EQ(parsed.status, ParseStatus::Ok) << parsed.error;
    return std::get<StepRecord>(*parsed.record);
  };
  const std::string head = " iteration      120/  500000 | lm loss: 2.5 | loss scale: ";
  const auto skipped = step_of(head + "32768.0 | number of skipped iterations:   1 |");
  EXPECT_TRUE(skipped.skipped);
  EXPECT_EQ(skipped.loss_scale, 32768.0);
  EXPECT_EQ(skipped.step, 120);
  EXPECT_FALSE(step_of(head + "65536.0 | number of skipped iterations:   0 |").skipped);
  for (const char* word : {"true", "True", "yes"})
    EXPECT_TRUE(step_of(head + "1.0 | number of skipped iterations: " + word).skipped) << word;
  const auto bad = parse_metrics_line(
      *records.translate(head + "1.0 | number of skipped iterations: maybe", 0, 0));
  EXPECT_EQ(bad.status, ParseStatus::Malformed);
}

TEST(LogRecords, ACheckpointLineIsACheckpointEventWithItsPathMadeAbsolute) {
  const auto records =
      LogRecords::compile(R"(step (?P<step>\d+) loss (?P<loss>\S+))",
                          R"(saved (?P<path>\S+) at step (?P<step>\d+))", "", "/runs/a");
  const auto line = records.translate("saved ckpt/40.pt at step 40", 0, 2);
  ASSERT_TRUE(line);
  const auto event = json::parse(*line);
  EXPECT_EQ(event["type"], "event");
  EXPECT_EQ(event["name"], "checkpoint");
  EXPECT_EQ(event["step"], 40);
  EXPECT_EQ(event["path"], "/runs/a/ckpt/40.pt");
}

TEST(LogRecords, EveryProblemOfBothPatternsIsReportedWithItsKey) {
  const auto items = user_errors([] {
    LogRecords::compile(R"(loss (?P<los>\S+))", R"(saved (?P<path>\S+))", " in r.toml", "");
  });
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(items[0].what, "unknown group 'los'");
  EXPECT_EQ(items[0].where, "trainer.log_regex in r.toml");
  EXPECT_NE(items[0].hint.find("did you mean 'loss'?"), std::string::npos);
  EXPECT_EQ(items[1].what, "the regular expression has no 'step' group");
  EXPECT_EQ(items[2].where, "trainer.checkpoint_regex in r.toml");
  EXPECT_EQ(items[2].what, "the regular expression has no 'step' group");

  const auto broken = user_errors([] { LogRecords::compile("step (?P<step>\\d+", "", "", ""); });
  ASSERT_EQ(broken.size(), 1u);
  EXPECT_NE(broken[0].what.find("not a regular expression"), std::string::npos);
}

}  // namespace
}  // namespace faultline::harness
