// The capability names, as recipes spell them in `trainer.provides`.
#include "harness/contract/capability.hpp"

#include <utility>

#include "common/enum_names.hpp"

namespace faultline::harness::contract {

namespace {
constexpr std::pair<Capability, const char*> kNames[] = {
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
};
}  // namespace

const char* to_string(Capability capability) {
  return name_of(kNames, capability);
}

std::optional<Capability> parse_capability(const std::string& name) {
  return value_of(kNames, name);
}

std::vector<std::string> capability_names() {
  return names_of(kNames);
}

const std::vector<Capability>& all_capabilities() {
  static const std::vector<Capability> all = [] {
    std::vector<Capability> out;
    for (const auto& [value, name] : kNames) out.push_back(value);
    return out;
  }();
  return all;
}

bool needs_metrics_protocol(Capability capability) {
  return capability == Capability::FullProbes || capability == Capability::Fingerprints ||
         capability == Capability::ReplaySamples || capability == Capability::ReplicaMode;
}

}  // namespace faultline::harness::contract
