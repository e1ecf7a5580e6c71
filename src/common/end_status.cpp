// The end event's statuses as text (end_status.hpp).
#include "common/end_status.hpp"

#include <array>
#include <nlohmann/json.hpp>
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

EndEvent read_end_event(const nlohmann::json& fields) {
  auto text = [&](const char* key) {
    const auto it = fields.is_object() ? fields.find(key) : fields.end();
    return it != fields.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  return {parse_end_status(text("status")), text("error")};
}

}  // namespace faultline
