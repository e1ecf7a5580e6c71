// What the isolate phases share: running trials through the cache with progress and counters,
// judging outcomes against the failure under study, and finding a trial's checkpoints.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "harness/isolate/isolate_phases.hpp"

namespace faultline::harness::isolate {

Context::Context(store::Store& store_in, TrialCache& cache, const IsolateOptions& options_in,
                 const ProgressSink& progress, int jobs)
    : store(store_in), options(options_in), cache_(cache), progress_(progress), jobs_(jobs) {}

void Context::begin_phase(const std::string& phase, int64_t expected_trials) {
  phase_ = phase;
  phase_trials_ = 0;
  expected_ = expected_trials;
  if (progress_) progress_({ProgressEvent::PhaseStarted, phase_, 0, expected_, steps_executed, ""});
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
      rank_steps_executed += result.outcome.steps_run * result.outcome.ranks;
    }
    timeline.push_back({{"phase", phase_},
                        {"run", result.outcome.run_id},
                        {"verdict", to_string(result.outcome.verdict)},
                        {"reused", result.from_cache},
                        {"steps_run", result.from_cache ? 0 : result.outcome.steps_run},
                        {"wall_s", result.from_cache ? 0.0 : result.outcome.wall_s}});
    if (progress_) {
      // An interrupted trial's verdict is that of the steps it ran before the signal: not a result.
      // "fail" alone read as the phase failing (a determinism check whose run failed again, as
      // it should): the line says which run and what it showed.
      std::string note = result.outcome.interrupted
                             ? std::string("interrupted")
                             : fmt::format("run {}: {}{}{}", result.outcome.run_id,
                                           to_string(result.outcome.verdict),
                                           result.outcome.verdict == Verdict::Fail
                                               ? first_failure_text(result.outcome)
                                               : std::string(),
                                           result.from_cache ? " (stored trial reused)" : "");
      progress_({ProgressEvent::TrialDone, phase_, phase_trials_,
                 std::max(expected_, phase_trials_), steps_executed, note});
    }
    if (result.outcome.interrupted) throw Interrupted();
    outcomes.push_back(std::move(result.outcome));
  }
  return outcomes;
}

std::string first_failure_text(const Outcome& outcome) {
  for (const auto& failure : outcome.failures)
    if (detectors::severity(failure.kind) == detectors::Severity::Failure)
      return failure.step > 0
                 ? fmt::format(" ({} at step {})", to_string(failure.kind), failure.step)
                 : fmt::format(" ({})", to_string(failure.kind));
  return "";
}

std::optional<detectors::Failure> failure_of(const Outcome& outcome, detectors::FailureKind kind) {
  for (const auto& failure : outcome.failures)
    if (failure.kind == kind) return failure;
  return std::nullopt;
}

bool shows(const Outcome& outcome, detectors::FailureKind kind) {
  return outcome.verdict == Verdict::Fail && failure_of(outcome, kind).has_value();
}

bisect::Observation judge(const Outcome& outcome, detectors::FailureKind kind) {
  if (shows(outcome, kind)) return bisect::Observation::Bad;
  if (outcome.verdict == Verdict::Pass) return bisect::Observation::Good;
  return bisect::Observation::Skip;
}

void Context::skip(const std::string& why) {
  skipped.push_back(why);
  if (progress_)
    progress_({ProgressEvent::Skipped, phase_, phase_trials_, expected_, steps_executed, why});
}

std::optional<detectors::Failure> primary_failure(const std::vector<detectors::Failure>& failures) {
  std::optional<detectors::Failure> best;
  auto key = [](const detectors::Failure& f) {
    return std::make_pair(f.step < 0 ? INT64_MAX : f.step, detectors::localization_rank(f.kind));
  };
  // A warning (bad_init) names the failure only when there is nothing else.
  auto warning = [](const detectors::Failure& f) {
    return detectors::severity(f.kind) == detectors::Severity::Warning;
  };
  for (const auto& failure : failures)
    if (!best ||
        std::make_pair(warning(failure), key(failure)) < std::make_pair(warning(*best), key(*best)))
      best = failure;
  return best;
}

std::vector<contract::Checkpoint> checkpoints_of(Context& context, const Outcome& outcome) {
  return contract::checkpoints(context.store, outcome.run_id);
}

std::vector<int64_t> steps_of(const std::vector<contract::Checkpoint>& checkpoints) {
  std::vector<int64_t> steps;
  for (const auto& checkpoint : checkpoints) steps.push_back(checkpoint.step);
  return steps;
}

}  // namespace faultline::harness::isolate
