// The end event's statuses as text (end_status.hpp).
#include "common/end_status.hpp"

#include <array>
#include <utility>

namespace faultline {

namespace {

constexpr std::array<std::pair<EndStatus, const char*>, 6> kNames = {{
    {EndStatus::Ok, "ok"},
    {EndStatus::Nonfinite, "nonfinite"},
    {EndStatus::DataAnomaly, "data_anomaly"},
    {EndStatus::Oom, "oom"},
    {EndStatus::Error, "error"},
    {EndStatus::Terminated, "terminated"},
}};

}  // namespace

const char* to_string(EndStatus status) {
  for (const auto& [each, name] : kNames)
    if (each == status) return name;
  return "?";
}

std::optional<EndStatus> parse_end_status(std::string_view name) {
  for (const auto& [each, text] : kNames)
    if (name == text) return each;
  return std::nullopt;
}

}  // namespace faultline
