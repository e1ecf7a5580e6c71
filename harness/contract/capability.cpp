// The capability names, as recipes spell them in `trainer.provides`.
#include "harness/contract/capability.hpp"

#include <array>
#include <utility>

namespace faultline::harness::contract {

namespace {
constexpr std::array<std::pair<Capability, const char*>, 10> kNames{{
    {Capability::Prefix, "prefix"},
    {Capability::Resume, "resume"},
    {Capability::Checkpoints, "checkpoints"},
    {Capability::DataFraction, "data_fraction"},
    {Capability::CheaperWithLessData, "cheaper_with_less_data"},
    {Capability::Accumulate, "accumulate"},
    {Capability::FullProbes, "full_probes"},
    {Capability::ReplaySamples, "replay_samples"},
    {Capability::ReplicaMode, "replica"},
    {Capability::Fingerprints, "fingerprints"},
}};
}  // namespace

const char* to_string(Capability capability) {
  for (const auto& [value, name] : kNames)
    if (value == capability) return name;
  return "?";
}

std::optional<Capability> parse_capability(const std::string& name) {
  for (const auto& [value, text] : kNames)
    if (name == text) return value;
  return std::nullopt;
}

std::vector<std::string> capability_names() {
  std::vector<std::string> names;
  for (const auto& [value, name] : kNames) names.emplace_back(name);
  return names;
}

const std::vector<Capability>& all_capabilities() {
  static const std::vector<Capability> all = [] {
    std::vector<Capability> out;
    for (const auto& [value, name] : kNames) out.push_back(value);
    return out;
  }();
  return all;
}

}  // namespace faultline::harness::contract
