// The end event's statuses as text (end_status.hpp).
#include "common/end_status.hpp"

#include <nlohmann/json.hpp>
#include <utility>

#include "common/enum_names.hpp"

namespace faultline {

namespace {

constexpr std::pair<EndStatus, const char*> kNames[] = {
    {EndStatus::Ok, "ok"},
    {EndStatus::Nonfinite, "nonfinite"},
    {EndStatus::DataAnomaly, "data_anomaly"},
    {EndStatus::Oom, "oom"},
    {EndStatus::Error, "error"},
    {EndStatus::Terminated, "terminated"},
};

}  // namespace

const char* to_string(EndStatus status) {
  return name_of(kNames, status);
}

std::optional<EndStatus> parse_end_status(std::string_view name) {
  return value_of(kNames, name);
}

EndEvent read_end_event(const nlohmann::json& fields) {
  auto text = [&](const char* key) {
    const auto it = fields.is_object() ? fields.find(key) : fields.end();
    return it != fields.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  return {parse_end_status(text("status")), text("error")};
}

}  // namespace faultline
