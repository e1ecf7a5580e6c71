// What the isolate phases share: running trials through the cache with progress and counters,
// judging outcomes against the failure under study, and finding a trial's checkpoints.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>

#include "harness/isolate_phases.hpp"

namespace faultline::harness::isolate {

Context::Context(store::Store& store_in, TrialCache& cache, const IsolateOptions& options_in,
                 const ProgressSink& progress, int jobs)
    : store(store_in), options(options_in), cache_(cache), progress_(progress), jobs_(jobs) {}

void Context::begin_phase(const std::string& phase, int64_t expected_trials) {
  phase_ = phase;
  phase_trials_ = 0;
  expected_ = expected_trials;
  if (progress_) progress_({phase_, 0, expected_, steps_executed, "started"});
}

std::vector<Outcome> Context::run(const std::vector<TrialSpec>& specs, CacheUse use) {
  std::vector<Outcome> outcomes;
  for (auto& result : cache_.run_all(specs, jobs_, use)) {
    ++trials;
    ++phase_trials_;
    if (result.from_cache) {
      ++trials_reused;
    } else {
      steps_executed += result.outcome.steps_run;
    }
    if (progress_) {
      std::string note = std::string(to_string(result.outcome.verdict)) +
                         (result.from_cache ? " (stored trial reused)" : "");
      progress_({phase_, phase_trials_, std::max(expected_, phase_trials_), steps_executed, note});
    }
    if (result.outcome.interrupted) throw Interrupted();
    outcomes.push_back(std::move(result.outcome));
  }
  return outcomes;
}

std::optional<detectors::Failure> failure_of(const Outcome& outcome, const std::string& kind) {
  for (const auto& failure : outcome.failures)
    if (failure.kind == kind) return failure;
  return std::nullopt;
}

bool shows(const Outcome& outcome, const std::string& kind) {
  return outcome.verdict == Verdict::Fail && failure_of(outcome, kind).has_value();
}

namespace {
// Lower is better localized: a step-exact signal beats a symptom seen later.
int localization_rank(const std::string& kind) {
  static const std::map<std::string, int> order = {
      {"crash", 0},        {"oom", 0},        {"hang", 0},         {"nonfinite", 1},
      {"data_anomaly", 1}, {"lr_anomaly", 2}, {"grad_explode", 3}, {"loss_spike", 4}};
  auto it = order.find(kind);
  return it == order.end() ? 9 : it->second;
}
}  // namespace

std::optional<detectors::Failure> primary_failure(const std::vector<detectors::Failure>& failures) {
  std::optional<detectors::Failure> best;
  auto key = [](const detectors::Failure& f) {
    return std::make_pair(f.step < 0 ? INT64_MAX : f.step, localization_rank(f.kind));
  };
  for (const auto& failure : failures)
    if (!best || key(failure) < key(*best)) best = failure;
  return best;
}

std::vector<int64_t> checkpoint_steps(const Outcome& outcome) {
  std::vector<int64_t> steps;
  const std::filesystem::path dir = std::filesystem::path(outcome.out_dir) / "checkpoints";
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    long long step = 0;
    const std::string name = entry.path().filename().string();
    if (std::sscanf(name.c_str(), "step-%lld.ckpt", &step) == 1) steps.push_back(step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::string checkpoint_path(const Outcome& outcome, int64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "step-%08lld.ckpt", static_cast<long long>(step));
  return (std::filesystem::path(outcome.out_dir) / "checkpoints" / name).string();
}

TrialSpec with(TrialSpec spec, const std::vector<std::string>& overrides) {
  spec.overrides.insert(spec.overrides.end(), overrides.begin(), overrides.end());
  return spec;
}

std::string sample_list(const std::vector<uint64_t>& samples) {
  std::string text;
  for (uint64_t sample : samples) {
    if (!text.empty()) text += ',';
    text += std::to_string(sample);
  }
  return text;
}

}  // namespace faultline::harness::isolate
