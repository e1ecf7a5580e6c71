// Phases 1 and 2: reproduce the failure with checkpoints, then shrink it — one rank replaying
// the global batch with gradient accumulation, the step it shows at, a first-bad search over
// data fractions — the golden rule run backwards.
#include <cmath>

#include "bisect/first_bad.hpp"
#include "harness/isolate_phases.hpp"
#include "trainer/train_config.hpp"

namespace faultline::harness::isolate {

namespace {

trainer::TrainConfig resolve(const TrialSpec& spec) {
  return trainer::load_train_config(spec.config_path, trial_overrides(spec));
}

bisect::Observation judge(const Outcome& outcome, const std::string& kind) {
  if (shows(outcome, kind)) return bisect::Observation::Bad;
  if (outcome.verdict == Verdict::Pass) return bisect::Observation::Good;
  return bisect::Observation::Skip;  // another failure, or it could not run: no evidence
}

}  // namespace

std::optional<Reproduction> reproduce(Context& context, const TrialSpec& failing,
                                      std::optional<std::string> expected_kind,
                                      std::string& why_not, Outcome& ran) {
  context.begin_phase("reproduce", 1);
  const auto config = resolve(failing);
  const int64_t steps = failing.stop_after > 0 ? std::min(failing.stop_after, config.train.steps)
                                               : config.train.steps;
  const int64_t every = std::max<int64_t>(
      1, (steps + context.options.checkpoints_per_run - 1) / context.options.checkpoints_per_run);
  // Checkpoints and the last good state are outside the trajectory: same bits, replayable.
  Reproduction reproduction;
  reproduction.spec = with(failing, {"train.checkpoint_every=" + std::to_string(every),
                                     "probe.checkpoint_on_nonfinite=true"});
  // Ranks are compared step by step with a 1-rank replay when nothing else fails.
  if (failing.ranks > 1) reproduction.spec.overrides.push_back("probe.fingerprint_every=1");
  reproduction.outcome = context.run(reproduction.spec);
  ran = reproduction.outcome;
  const Outcome& outcome = reproduction.outcome;
  if (outcome.verdict == Verdict::InfraError)
    throw InfraError("the failing setup could not be run: " + outcome.infra_detail);
  auto failure =
      expected_kind ? failure_of(outcome, *expected_kind) : primary_failure(outcome.failures);
  if (outcome.verdict != Verdict::Fail || !failure) {
    why_not = outcome.verdict == Verdict::Pass
                  ? "the run passed every detector (run " + std::to_string(outcome.run_id) + ")"
                  : "the run failed differently (run " + std::to_string(outcome.run_id) +
                        ") than the stored one (" + expected_kind.value_or("?") + ")";
    return std::nullopt;
  }
  reproduction.failure = *failure;
  return reproduction;
}

ScaledDown scale_down(Context& context, const Reproduction& reproduction) {
  const std::string& kind = reproduction.failure.kind;
  const auto config = resolve(reproduction.spec);
  ScaledDown result;
  result.local_spec = reproduction.spec;
  result.local_outcome = reproduction.outcome;
  result.local_failure = reproduction.failure;
  const int64_t failing_step = detectors::evidence_step(reproduction.failure);
  // A failure tied to a step needs no step past it: the run is a prefix of the same trajectory.
  const int64_t stop = failing_step > 0 ? failing_step : 0;

  context.begin_phase("scale: ranks", reproduction.spec.ranks > 1 ? 1 : 0);
  if (reproduction.spec.ranks > 1) {
    // The global batch of a step does not depend on the world size: one rank with N-fold
    // accumulation replays it (equal up to reduction order).
    TrialSpec one = with(
        reproduction.spec,
        {"train.grad_accum=" + std::to_string(config.train.grad_accum * reproduction.spec.ranks)});
    one.ranks = 1;
    one.stop_after = stop;
    Outcome outcome = context.run(one);
    if (auto failure = failure_of(outcome, kind); failure && outcome.verdict == Verdict::Fail) {
      result.local_spec = one;
      result.local_outcome = outcome;
      result.local_failure = *failure;
    }
  }

  // Data: the smallest fraction first (a fault that needs no particular sample shows there, in
  // one trial), then first-bad over the fractions between it and the recipe's own.
  const double full = config.data.fraction;
  std::vector<double> fractions;
  for (double share : {0.01, 0.05, 0.25})
    if (full * share >= 1e-6) fractions.push_back(full * share);
  fractions.push_back(full);
  const int64_t local_stop = detectors::evidence_step(result.local_failure);
  const int64_t data_stop = local_stop > 0 ? local_stop : stop;
  auto data_trial = [&](size_t point) {
    TrialSpec spec = result.local_spec;
    spec.data_fraction = fractions[point];
    spec.stop_after = data_stop;
    return spec;
  };
  context.begin_phase("scale: data",
                      static_cast<int64_t>(std::ceil(std::log2(fractions.size()))) + 1);
  std::map<size_t, Outcome> seen;
  bisect::FirstBad search(fractions.size(),
                          {bisect::LastCandidate::KnownBad, bisect::BeforeFirst::Unknown});
  if (fractions.size() > 1) {
    seen[0] = context.run(data_trial(0));
    if (judge(seen[0], kind) == bisect::Observation::Bad) search = bisect::FirstBad(1);
  }
  while (!search.done() && search.candidate_count() > 1) {
    auto points = search.next(1);
    if (points.empty()) break;
    for (size_t point : points) {
      if (!seen.count(point)) seen[point] = context.run(data_trial(point));
      search.observe(point, judge(seen.at(point), kind));
    }
  }
  const size_t chosen =
      search.candidate_count() == 1 ? 0 : search.result().first_bad.value_or(fractions.size() - 1);
  result.repro_spec = result.local_spec;
  result.repro_outcome = result.local_outcome;
  if (chosen + 1 < fractions.size() && seen.count(chosen)) {
    result.repro_spec.data_fraction = fractions[chosen];
    result.repro_spec.stop_after = data_stop;
    result.repro_outcome = seen.at(chosen);
  }
  const auto repro_failure = failure_of(result.repro_outcome, kind);
  result.scale.ranks = result.repro_spec.ranks;
  result.scale.data_fraction = resolve(result.repro_spec).data.fraction;
  const int64_t shown = repro_failure ? detectors::evidence_step(*repro_failure) : -1;
  result.scale.steps = shown > 0 ? shown : result.repro_outcome.last_step;
  if (shown > 0) result.repro_spec.stop_after = result.scale.steps;
  return result;
}

}  // namespace faultline::harness::isolate
