// Tests for src/trainer/metrics_writer.cpp: one flushed JSON object per line, NaN/Inf as strings.
#include "trainer/metrics_writer.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "../core/test_support.hpp"
#include "common/text.hpp"

namespace faultline::trainer {
namespace {

using faultline::testing::read_file;
using faultline::testing::ScratchDir;
using faultline::testing::user_error;
using faultline::testing::write_file;

// Every line of `path` parsed as JSON; a line that is not JSON fails the test.
std::vector<nlohmann::json> read_lines(const std::string& path) {
  std::vector<nlohmann::json> records;
  const std::string text = read_file(path);
  EXPECT_TRUE(text.empty() || text.back() == '\n') << "last line is not terminated";
  for (const auto& line : split(text, '\n')) {
    if (line.empty()) continue;
    try {
      records.push_back(nlohmann::json::parse(line));
    } catch (const nlohmann::json::exception& error) {
      ADD_FAILURE() << "not JSON: " << line << " (" << error.what() << ")";
    }
  }
  return records;
}

TEST(MetricsWriter, EveryLineCarriesVersionRankTimeAndType) {
  ScratchDir dir;
  const std::string path = dir.file("rank3.jsonl");
  {
    MetricsWriter writer(path, 3, MetricsWriter::Mode::Truncate);
    EXPECT_EQ(writer.path(), path);
    writer.write("event", {{"name", "start"}});
    writer.write("step", {{"step", 1}, {"loss", 2.5}});
    writer.write("anomaly", {{"step", 1}, {"kind", "nonfinite"}, {"where", "blocks.0.attn"}});
  }
  auto records = read_lines(path);
  ASSERT_EQ(records.size(), 3u);
  const char* types[] = {"event", "step", "anomaly"};
  double previous_t = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    const auto& r = records[i];
    EXPECT_EQ(r.at("v"), 1);
    EXPECT_EQ(r.at("rank"), 3);
    EXPECT_EQ(r.at("type"), types[i]);
    ASSERT_TRUE(r.at("t").is_number());
    EXPECT_GE(r.at("t").get<double>(), previous_t);  // seconds since start, never backwards
    previous_t = r.at("t").get<double>();
  }
  EXPECT_EQ(records[0].at("name"), "start");
  EXPECT_EQ(records[1].at("step"), 1);
  EXPECT_DOUBLE_EQ(records[1].at("loss").get<double>(), 2.5);
  EXPECT_EQ(records[2].at("where"), "blocks.0.attn");
  EXPECT_LT(previous_t, 60.0);
}

TEST(MetricsWriter, EachLineIsFlushedAsItIsWritten) {
  ScratchDir dir;
  const std::string path = dir.file("m.jsonl");
  MetricsWriter writer(path, 0, MetricsWriter::Mode::Truncate);
  writer.write("step", {{"step", 1}});
  EXPECT_EQ(read_lines(path).size(), 1u);  // readable while the writer is still open
  writer.write("step", {{"step", 2}});
  auto records = read_lines(path);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[1].at("step"), 2);
}

TEST(MetricsWriter, TruncateStartsAfreshAndAppendKeepsWhatWasThere) {
  ScratchDir dir;
  const std::string path = dir.file("m.jsonl");
  write_file(path, "{\"v\":1,\"rank\":0,\"t\":0,\"type\":\"event\",\"name\":\"old\"}\n");
  { MetricsWriter(path, 0, MetricsWriter::Mode::Append).write("event", {{"name", "resume"}}); }
  auto appended = read_lines(path);
  ASSERT_EQ(appended.size(), 2u);
  EXPECT_EQ(appended[0].at("name"), "old");
  EXPECT_EQ(appended[1].at("name"), "resume");
  { MetricsWriter(path, 0, MetricsWriter::Mode::Truncate).write("event", {{"name", "start"}}); }
  auto fresh = read_lines(path);
  ASSERT_EQ(fresh.size(), 1u);
  EXPECT_EQ(fresh[0].at("name"), "start");
}

TEST(MetricsWriter, AnUnopenablePathIsAUserErrorNamingIt) {
  ScratchDir dir;
  const std::string path = dir.file("no/such/dir/m.jsonl");
  ErrorItem error = user_error([&] { MetricsWriter(path, 0, MetricsWriter::Mode::Truncate); });
  EXPECT_EQ(error.what, "cannot open metrics file");
  EXPECT_EQ(error.where, path);
}

TEST(MetricsNumber, FiniteValuesStayNumbers) {
  EXPECT_TRUE(number(1.5).is_number());
  EXPECT_DOUBLE_EQ(number(1.5).get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(number(-0.0).get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(number(1e300).get<double>(), 1e300);
  EXPECT_DOUBLE_EQ(number(std::numeric_limits<double>::denorm_min()).get<double>(),
                   std::numeric_limits<double>::denorm_min());
}

TEST(MetricsNumber, NanAndInfinitiesBecomeStrings) {
  EXPECT_EQ(number(std::nan("")), "nan");
  EXPECT_EQ(number(-std::nan("")), "nan");
  EXPECT_EQ(number(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(number(-std::numeric_limits<double>::infinity()), "-inf");
}

TEST(MetricsNumber, NonFiniteValuesRoundTripThroughALine) {
  ScratchDir dir;
  const std::string path = dir.file("m.jsonl");
  {
    MetricsWriter writer(path, 1, MetricsWriter::Mode::Truncate);
    writer.write("step", {{"loss", number(std::nan(""))},
                          {"grad_norm", number(std::numeric_limits<double>::infinity())},
                          {"lr", number(3e-3)}});
  }
  const std::string text = read_file(path);
  EXPECT_EQ(text.find("NaN"), std::string::npos) << text;
  EXPECT_EQ(text.find("Infinity"), std::string::npos) << text;
  auto records = read_lines(path);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].at("loss"), "nan");
  EXPECT_EQ(records[0].at("grad_norm"), "inf");
  EXPECT_DOUBLE_EQ(records[0].at("lr").get<double>(), 3e-3);
}

}  // namespace
}  // namespace faultline::trainer
