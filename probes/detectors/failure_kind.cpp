// Names of the failure kinds: the one table that spells them.
#include "probes/detectors/failure_kind.hpp"

#include <array>
#include <stdexcept>
#include <utility>

#include <nlohmann/json.hpp>

namespace faultline::detectors {

namespace {

constexpr std::array<std::pair<FailureKind, const char*>, 17> kNames = {{
    {FailureKind::Nonfinite, "nonfinite"},
    {FailureKind::Data, "data"},
    {FailureKind::LossSpike, "loss_spike"},
    {FailureKind::Stalled, "stalled"},
    {FailureKind::GradExplode, "grad_explode"},
    {FailureKind::GradVanish, "grad_vanish"},
    {FailureKind::LrAnomaly, "lr_anomaly"},
    {FailureKind::Memory, "memory"},
    {FailureKind::Slow, "slow"},
    {FailureKind::Straggler, "straggler"},
    {FailureKind::DataStall, "data_stall"},
    {FailureKind::RankDivergence, "rank_divergence"},
    {FailureKind::Nondeterministic, "nondeterministic"},
    {FailureKind::Crash, "crash"},
    {FailureKind::Hang, "hang"},
    {FailureKind::Oom, "oom"},
    {FailureKind::Anomaly, "anomaly"},
}};

}  // namespace

const char* to_string(FailureKind kind) {
  for (const auto& [each, name] : kNames)
    if (each == kind) return name;
  return "?";
}

std::optional<FailureKind> parse_failure_kind(std::string_view name) {
  for (const auto& [kind, each] : kNames)
    if (name == each) return kind;
  return std::nullopt;
}

std::vector<std::string> failure_kind_names() {
  std::vector<std::string> names;
  for (const auto& entry : kNames) names.emplace_back(entry.second);
  return names;
}

bool is_timing(FailureKind kind) {
  return kind == FailureKind::Straggler || kind == FailureKind::DataStall ||
         kind == FailureKind::Slow;
}

int localization_rank(FailureKind kind) {
  switch (kind) {
    case FailureKind::Crash:
    case FailureKind::Oom:
    case FailureKind::Hang:
      return 0;
    case FailureKind::Nonfinite:
    case FailureKind::Data:
      return 1;
    case FailureKind::LrAnomaly:
      return 2;
    case FailureKind::GradExplode:
      return 3;
    case FailureKind::LossSpike:
      return 4;
    default:
      return 9;
  }
}

void to_json(nlohmann::json& json, FailureKind kind) {
  json = to_string(kind);
}

void from_json(const nlohmann::json& json, FailureKind& kind) {
  const auto name = json.get<std::string>();
  auto parsed = parse_failure_kind(name);
  if (!parsed) throw std::invalid_argument("unknown failure kind '" + name + "'");
  kind = *parsed;
}

}  // namespace faultline::detectors
