// Tests for report/sparkline: levels, buckets, non-finite values.
#include "report/sparkline.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace faultline::report {
namespace {

// Characters, not bytes: each bar is three bytes of UTF-8.
size_t glyphs(const std::string& text) {
  size_t count = 0;
  for (unsigned char c : text) count += (c & 0xC0) != 0x80;
  return count;
}

TEST(Sparkline, OneBarPerValueFromLowestToHighest) {
  EXPECT_EQ(sparkline({1, 2, 3, 4, 5, 6, 7, 8}), "▁▂▃▄▅▆▇█");
  EXPECT_EQ(sparkline({8, 1}), "█▁");
}

TEST(Sparkline, AFlatLineSitsInTheMiddle) {
  EXPECT_EQ(sparkline({2, 2, 2}), "▄▄▄");
}

TEST(Sparkline, NonFiniteValuesAreCrosses) {
  EXPECT_EQ(sparkline({1, 2, NAN, INFINITY}), "▁█✕✕");
}

TEST(Sparkline, LongCurvesAreAveragedIntoBuckets) {
  std::vector<double> values;
  for (int i = 0; i < 1000; ++i) values.push_back(1000 - i);
  const std::string line = sparkline(values, 20);
  EXPECT_EQ(glyphs(line), 20u);
  EXPECT_EQ(line.substr(0, 3), "█");
  EXPECT_EQ(line.substr(line.size() - 3), "▁");
  // A NaN anywhere in a bucket shows, however long the curve.
  values[500] = NAN;
  EXPECT_NE(sparkline(values, 20).find("✕"), std::string::npos);
}

TEST(Sparkline, NothingForNoValues) {
  EXPECT_EQ(sparkline({}), "");
}

}  // namespace
}  // namespace faultline::report
