// Phases 1 and 2: reproduce the failure from step 0 with checkpoints (when no stored run's
// checkpoint can be replayed instead), then shrink it: one rank replaying the global batch with
// gradient accumulation, the step it shows at, and, where a smaller data fraction makes a trial
// cheaper, a first-bad search over fractions — the golden rule run backwards.
#include <cmath>

#include "bisect/drive.hpp"
#include "bisect/first_bad.hpp"
#include "harness/isolate/isolate_phases.hpp"

namespace faultline::harness::isolate {

std::optional<Reproduction> reproduce(Context& context, const TrialSpec& failing,
                                      std::optional<detectors::FailureKind> expected_kind,
                                      std::string& why_not, Outcome& ran) {
  context.begin_phase("reproduce", 1);
  const auto& trainer = context.trainer;
  for (auto needed : {contract::Capability::Checkpoints, contract::Capability::Resume})
    if (!trainer.can(needed)) {
      context.skip(
          trainer.skipped("replays from checkpoints (every trial runs from step 0)", needed));
      break;
    }
  const int64_t steps = trainer.steps(failing);
  const int64_t every = std::max<int64_t>(
      1, (steps + context.options.checkpoints_per_run - 1) / context.options.checkpoints_per_run);
  // Checkpoints and the last good state are outside the trajectory: same bits, replayable.
  Reproduction reproduction;
  reproduction.spec = trainer.checkpoint_on_halt(trainer.checkpoint_every(failing, every), true);
  // Ranks are compared step by step with a 1-rank replay when nothing else fails.
  if (failing.ranks > 1) reproduction.spec = trainer.fingerprints_every_step(reproduction.spec);
  reproduction.outcome = context.run(reproduction.spec);
  ran = reproduction.outcome;
  const Outcome& outcome = reproduction.outcome;
  if (outcome.verdict == Verdict::InfraError) throw_not_run(outcome, "the failing setup");
  auto failure =
      expected_kind ? failure_of(outcome, *expected_kind) : primary_failure(outcome.failures);
  if (outcome.verdict != Verdict::Fail || !failure) {
    why_not = outcome.verdict == Verdict::Pass
                  ? "the run passed every detector (run " + std::to_string(outcome.run_id) + ")"
                  : "the run failed differently (run " + std::to_string(outcome.run_id) +
                        ") than the stored one (" +
                        (expected_kind ? to_string(*expected_kind) : "?") + ")";
    return std::nullopt;
  }
  reproduction.failure = *failure;
  return reproduction;
}

namespace {

// Data: the smallest fraction first (a fault that needs no particular sample shows there, in
// one trial), then first-bad over the fractions between it and the recipe's own.
void scale_data(Context& context, ScaledDown& result, int64_t stop) {
  const detectors::FailureKind kind = result.local_failure.kind;
  const double full = context.trainer.data_fraction(result.local_spec);
  std::vector<double> fractions;
  for (double share : {0.01, 0.05, 0.25})
    if (full * share >= 1e-6) fractions.push_back(full * share);
  fractions.push_back(full);
  auto data_trial = [&](size_t point) {
    TrialSpec spec = result.local_spec;
    spec.data_fraction = fractions[point];
    return context.trainer.prefix(spec, stop);
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
  if (search.candidate_count() > 1)
    bisect::drive(search, 1, [&](const std::vector<size_t>& points) {
      std::vector<bisect::Observation> observed;
      for (size_t point : points) {
        if (!seen.count(point)) seen[point] = context.run(data_trial(point));
        observed.push_back(judge(seen.at(point), kind));
      }
      return observed;
    });
  const size_t chosen =
      search.candidate_count() == 1 ? 0 : search.result().first_bad.value_or(fractions.size() - 1);
  if (chosen + 1 < fractions.size() && seen.count(chosen)) {
    result.repro_spec = data_trial(chosen);
    result.repro_outcome = seen.at(chosen);
  }
}

}  // namespace

ScaledDown scale_down(Context& context, const Reproduction& reproduction) {
  const auto& trainer = context.trainer;
  const detectors::FailureKind kind = reproduction.failure.kind;
  ScaledDown result;
  result.local_spec = reproduction.spec;
  result.local_outcome = reproduction.outcome;
  result.local_failure = reproduction.failure;
  const int64_t failing_step = detectors::evidence_step(reproduction.failure);
  // A failure tied to a step needs no step past it: the run is a prefix of the same trajectory.
  const int64_t stop = failing_step > 0 ? failing_step : 0;

  const int ranks = reproduction.spec.ranks;
  context.begin_phase("scale: ranks", ranks > 1 ? 1 : 0);
  if (ranks > 1 && !trainer.can(contract::Capability::Accumulate)) {
    context.skip(trainer.skipped("scale: ranks", contract::Capability::Accumulate));
  } else if (ranks > 1) {
    // The global batch of a step does not depend on the world size: one rank with N-fold
    // accumulation replays it (equal up to reduction order), from the same checkpoint.
    TrialSpec one = trainer.prefix(
        trainer.accumulate(reproduction.spec, 1, trainer.grad_accum(reproduction.spec) * ranks),
        stop);
    Outcome outcome = context.run(one);
    if (auto failure = failure_of(outcome, kind); failure && outcome.verdict == Verdict::Fail) {
      result.local_spec = one;
      result.local_outcome = outcome;
      result.local_failure = *failure;
    }
  }

  result.repro_spec = result.local_spec;
  result.repro_outcome = result.local_outcome;
  const int64_t local_stop = detectors::evidence_step(result.local_failure);
  if (!trainer.can(contract::Capability::DataFraction)) {
    context.skip(trainer.skipped("scale: data", contract::Capability::DataFraction));
  } else if (!trainer.can(contract::Capability::CheaperWithLessData)) {
    context.skip(
        "skipped scale: data: a step of this trainer costs the same on less data, so a smaller "
        "data fraction would make no trial cheaper");
  } else if (detectors::is_curve(kind)) {
    context.skip("skipped scale: data: the loss reference ran on the recipe's own data");
  } else if (!reproduction.spec.resume.empty()) {
    context.skip("skipped scale: data: a replay from a checkpoint keeps the run's data");
  } else {
    scale_data(context, result, local_stop > 0 ? local_stop : stop);
  }
  const auto repro_failure = failure_of(result.repro_outcome, kind);
  result.scale.ranks = result.repro_spec.ranks;
  result.scale.data_fraction = trainer.data_fraction(result.repro_spec);
  result.scale.from_step = reproduction.from ? reproduction.from->step : 0;
  const int64_t shown = repro_failure ? detectors::evidence_step(*repro_failure) : -1;
  result.scale.steps = shown > 0 ? shown : result.repro_outcome.last_step;
  if (shown > 0) result.repro_spec = trainer.prefix(result.repro_spec, result.scale.steps);
  return result;
}

}  // namespace faultline::harness::isolate
