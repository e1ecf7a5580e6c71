// Identical trials must agree: every replay the search makes relies on it. A short prefix of
// the minimal reproduction is run again and compared bit for bit; a stored failure that does not
// come back is re-run a few times and voted on. Either disagreement is a finding of its own.
#include <algorithm>

#include "bisect/vote.hpp"
#include "harness/isolate_phases.hpp"
#include "probes/detectors/compare.hpp"
#include "store/store.hpp"

namespace faultline::harness::isolate {

std::optional<detectors::Failure> check_determinism(Context& context, const ScaledDown& scaled) {
  constexpr int64_t kPrefixSteps = 10;
  const int64_t last = scaled.scale.steps > 0 ? scaled.scale.steps : scaled.repro_outcome.last_step;
  TrialSpec prefix = scaled.repro_spec;
  prefix.stop_after = std::max<int64_t>(1, std::min(last, kPrefixSteps));
  if (prefix.stop_after == scaled.repro_spec.stop_after) prefix.stop_after = 0;  // never the same
  if (prefix.stop_after == 0) return std::nullopt;  // spec: nothing shorter to compare
  context.begin_phase("determinism: steps 1.." + std::to_string(prefix.stop_after) + " again", 1);
  Outcome again = context.run(prefix);
  auto before = context.store.steps(scaled.repro_outcome.run_id);
  auto now = context.store.steps(again.run_id);
  auto differs = detectors::compare_runs(before, now);
  if (differs) {
    differs->detail += " (runs " + std::to_string(scaled.repro_outcome.run_id) + " and " +
                       std::to_string(again.run_id) + " of the same spec)";
  }
  return differs;
}

std::optional<detectors::Failure> vote_on_reproduction(Context& context, const TrialSpec& spec,
                                                       const std::string& kind) {
  bisect::Vote vote({5, 0, bisect::StopRule::WhenDecided});
  context.begin_phase("reproduce: vote over identical runs", 5);
  int64_t failing_run = 0;
  while (!vote.done()) {
    auto runs = vote.next(1);
    if (runs.empty()) break;
    for (size_t run : runs) {
      Outcome outcome = context.run_again(spec);
      const bool failed = shows(outcome, kind);
      if (failed) failing_run = outcome.run_id;
      vote.observe(run, failed                             ? bisect::Observation::Bad
                        : outcome.verdict == Verdict::Pass ? bisect::Observation::Good
                                                           : bisect::Observation::Skip);
    }
  }
  const auto result = vote.result();
  if (result.consistency != bisect::Consistency::Inconsistent) return std::nullopt;
  return detectors::Failure{"nondeterministic", -1, -1,
                            std::to_string(result.bad) + " of " +
                                std::to_string(result.good + result.bad) +
                                " identical runs failed with " + kind + " (e.g. run " +
                                std::to_string(failing_run) + ")"};
}

}  // namespace faultline::harness::isolate
