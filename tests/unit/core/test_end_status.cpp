// Unit tests of common/end_status: each status of the end event round-trips through its name;
// a trainer's own status is not one of them.
#include "common/end_status.hpp"

#include <gtest/gtest.h>

namespace faultline {
namespace {

TEST(EndStatus, EachStatusReadsBackFromItsName) {
  for (auto status : {EndStatus::Ok, EndStatus::Nonfinite, EndStatus::DataAnomaly, EndStatus::Oom,
                      EndStatus::Error, EndStatus::Terminated})
    EXPECT_EQ(parse_end_status(to_string(status)), status) << to_string(status);
  EXPECT_STREQ(to_string(EndStatus::DataAnomaly), "data_anomaly");
}

TEST(EndStatus, AStatusTheProtocolDoesNotNameIsNone) {
  EXPECT_EQ(parse_end_status("finished"), std::nullopt);
  EXPECT_EQ(parse_end_status("OK"), std::nullopt);
  EXPECT_EQ(parse_end_status(""), std::nullopt);
}

}  // namespace
}  // namespace faultline
