// Run origins and the filters of `faultline runs`.
#include "harness/browse/run_list.hpp"

#include <filesystem>

#include "common/text.hpp"
#include "harness/trial/trial.hpp"

namespace faultline::harness {

const char* to_string(RunOrigin origin) {
  switch (origin) {
    case RunOrigin::Train:
      return "train";
    case RunOrigin::Smoke:
      return "smoke";
    case RunOrigin::Import:
      return "import";
    case RunOrigin::Repro:
      return "repro";
    case RunOrigin::SearchTrial:
      return "trial";
  }
  return "?";
}

RunOrigin origin_of(const std::string& parent) {
  if (parent == "train") return RunOrigin::Train;
  if (parent == "smoke") return RunOrigin::Smoke;
  if (starts_with(parent, "import:")) return RunOrigin::Import;
  if (starts_with(parent, "repro:")) return RunOrigin::Repro;
  return RunOrigin::SearchTrial;
}

std::string recipe_name(const std::string& config_path) {
  return std::filesystem::path(config_path).stem().string();
}

bool matches(const store::RunInfo& run, const RunFilter& filter) {
  if (filter.trials == TrialsShown::Hidden && origin_of(run.parent) == RunOrigin::SearchTrial)
    return false;
  const auto verdict = parse_verdict(run.verdict);
  if (filter.verdicts == VerdictsShown::FailedOnly && verdict != Verdict::Fail &&
      verdict != Verdict::InfraError)
    return false;
  if (!filter.recipe.empty() && filter.recipe != run.config_path &&
      filter.recipe != recipe_name(run.config_path))
    return false;
  if (filter.since) {
    const auto started = parse_utc(run.started_at);
    if (!started || *started < *filter.since) return false;
  }
  return true;
}

}  // namespace faultline::harness
