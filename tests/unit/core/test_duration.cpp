// Tests for src/common/duration.cpp: durations and dates as typed, the store's stamps, estimates.
#include "common/duration.hpp"

#include <gtest/gtest.h>

namespace faultline {
namespace {

TEST(Duration, ParsesOneNumberAndOneUnit) {
  EXPECT_EQ(parse_duration("90s"), std::chrono::seconds(90));
  EXPECT_EQ(parse_duration("30m"), std::chrono::seconds(1800));
  EXPECT_EQ(parse_duration("12h"), std::chrono::seconds(12 * 3600));
  EXPECT_EQ(parse_duration("3d"), std::chrono::seconds(3 * 86400));
  EXPECT_EQ(parse_duration("2w"), std::chrono::seconds(14 * 86400));
  for (const char* bad : {"", "d", "3", "3x", "-3d", "3.5d", "3 d", "d3"})
    EXPECT_FALSE(parse_duration(bad).has_value()) << bad;
}

TEST(Duration, ReadsDatesAndTheStoresStampsAsUtc) {
  const auto day = parse_utc("2026-12-01");
  ASSERT_TRUE(day);
  EXPECT_EQ(format_utc(*day), "2026-12-01T00:00:00.000Z");
  const auto stamp = parse_utc("2026-12-04T16:54:23.677Z");
  ASSERT_TRUE(stamp);
  EXPECT_EQ(format_utc(*stamp), "2026-12-04T16:54:23.677Z");
  EXPECT_EQ(format_utc(*parse_utc("2026-12-04T16:54:23Z")), "2026-12-04T16:54:23.000Z");
  for (const char* bad : {"2026-13-01", "2026-12-01T25:00:00Z", "2026-12-01T10:00:00", "yesterday",
                          "2026-1-1", "2026-12-01X", "2999-01-01"})
    EXPECT_FALSE(parse_utc(bad).has_value()) << bad;
}

TEST(Duration, PointInTimeIsADateOrADurationBackFromNow) {
  const auto now = *parse_utc("2026-12-04T12:00:00Z");
  EXPECT_EQ(format_utc(*point_in_time("3d", now)), "2026-12-01T12:00:00.000Z");
  EXPECT_EQ(format_utc(*point_in_time("2026-11-30", now)), "2026-11-30T00:00:00.000Z");
  EXPECT_FALSE(point_in_time("last week", now).has_value());
}

TEST(Duration, SecondsBetweenStampsAndTheirText) {
  EXPECT_DOUBLE_EQ(*seconds_between("2026-12-04T16:54:23.677Z", "2026-12-04T16:56:24.177Z"), 120.5);
  EXPECT_FALSE(seconds_between("2026-12-04T16:54:23.677Z", "").has_value());
  EXPECT_EQ(format_seconds(0.44), "0.4 s");
  EXPECT_EQ(format_seconds(59.94), "59.9 s");
  EXPECT_EQ(format_seconds(245), "4m 05s");
  EXPECT_EQ(format_seconds(7620), "2h 07m");
  EXPECT_EQ(format_seconds(-1), "-");
}

TEST(Duration, EstimateLeftFollowsThePaceSoFar) {
  EXPECT_DOUBLE_EQ(*estimate_left(10, 2, 6), 20);
  EXPECT_FALSE(estimate_left(10, 0, 6).has_value()) << "no pace before the first trial";
  EXPECT_FALSE(estimate_left(10, 6, 6).has_value());
  EXPECT_FALSE(estimate_left(10, 7, 6).has_value()) << "past the estimate: unknown, not negative";
  EXPECT_FALSE(estimate_left(10, 3, 0).has_value());
}

}  // namespace
}  // namespace faultline
