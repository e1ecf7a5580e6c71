// Unit tests of common/end_status: each status of the end event round-trips through its name;
// a trainer's own status is not one of them.
#include "common/end_status.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace faultline {
namespace {

TEST(EndStatus, EachStatusReadsBackFromItsName) {
  for (auto status : {EndStatus::Ok, EndStatus::Nonfinite, EndStatus::DataAnomaly, EndStatus::Oom,
                      EndStatus::Error, EndStatus::Terminated})
    EXPECT_EQ(parse_end_status(to_string(status)), status) << to_string(status);
  EXPECT_STREQ(to_string(EndStatus::DataAnomaly), "data_anomaly");
}

TEST(EndStatus, AnEndEventGivesItsStatusAndError) {
  const auto ended = read_end_event(nlohmann::json::parse(
      R"({"status":"error","error":"RuntimeError: connection reset","step":4})"));
  EXPECT_EQ(ended.status, EndStatus::Error);
  EXPECT_EQ(ended.error, "RuntimeError: connection reset");
  const auto plain = read_end_event(nlohmann::json::parse(R"({"status":"ok","step":9})"));
  EXPECT_EQ(plain.status, EndStatus::Ok);
  EXPECT_EQ(plain.error, "");
  // Fields of another type, or no object at all (a line that did not parse), say nothing.
  EXPECT_EQ(read_end_event(nlohmann::json::parse(R"({"status":3,"error":null})")).status,
            std::nullopt);
  EXPECT_EQ(read_end_event(nlohmann::json::value_t::discarded).status, std::nullopt);
}

TEST(EndStatus, AStatusTheProtocolDoesNotNameIsNone) {
  EXPECT_EQ(parse_end_status("finished"), std::nullopt);
  EXPECT_EQ(parse_end_status("OK"), std::nullopt);
  EXPECT_EQ(parse_end_status(""), std::nullopt);
}

}  // namespace
}  // namespace faultline
