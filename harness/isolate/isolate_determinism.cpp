// Identical trials must agree: every replay the search makes relies on it. The reproduction is
// compared bit for bit with the stored run it replays when both ran alike, else a short prefix of
// it is run again; a stored failure that does not come back is re-run a few times and voted on,
// and a timing failure must show in most identical runs. Each disagreement is a finding of its
// own, or no finding at all.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "bisect/drive.hpp"
#include "bisect/vote.hpp"
#include "harness/isolate/isolate_phases.hpp"
#include "harness/trial/run_facts.hpp"
#include "probes/detectors/compare.hpp"
#include "store/store.hpp"

namespace faultline::harness::isolate {

namespace {

// Step records in (from, to], without param_norm: a replay with full probes reports fields the
// stored run may not have, and loss, grad_norm and lr already carry the trajectory's bits.
std::vector<StepRecord> window(std::vector<StepRecord> records, int64_t from, int64_t to) {
  std::vector<StepRecord> kept;
  for (auto& record : records) {
    if (record.step <= from || record.step > to) continue;
    record.param_norm.reset();
    kept.push_back(std::move(record));
  }
  return kept;
}

// A replay that parts from the run at the first step after the checkpoint it resumed from,
// on the same machine: the likeliest cause is state the checkpoint does not hold.
std::string missing_state_hint(int64_t checkpoint_step) {
  return "; the first step after the checkpoint of step " + std::to_string(checkpoint_step) +
         " already differs: the checkpoint does not hold everything the steps depend on (an EMA "
         "or teacher model, a second optimizer, an RNG or data iterator of the script's own); "
         "with the Python helper, give it to run.start(state={...})";
}

// What the replay's trainer said it could not make deterministic: the first suspect when two
// identical trials part.
std::string said_nondeterministic_hint(store::Store& store, int64_t run_id) {
  const auto said = said_nondeterministic(start_event(store, run_id));
  if (said.empty()) return "";
  return fmt::format("; the trainer said this stays nondeterministic: {}", fmt::join(said, "; "));
}

bool ran_alike(store::Store& store, int64_t run_a, int64_t run_b) {
  return host_facts(start_event(store, run_a)) == host_facts(start_event(store, run_b));
}

}  // namespace

std::optional<detectors::Failure> check_determinism(Context& context, const ScaledDown& scaled,
                                                    int64_t stored_run) {
  constexpr int64_t kPrefixSteps = 10;
  const int64_t from = scaled.scale.from_step;
  const int64_t last = scaled.scale.steps > 0 ? scaled.scale.steps : scaled.repro_outcome.last_step;
  const Outcome& replay = scaled.local_outcome;
  if (stored_run > 0) {
    const auto stored = context.store.get_run(stored_run);
    if (stored && stored->ranks == replay.ranks &&
        ran_alike(context.store, stored_run, replay.run_id)) {
      context.begin_phase(
          "determinism: the replay against stored run " + std::to_string(stored_run), 0);
      auto differs = detectors::compare_runs(
          window(context.store.steps_between(stored_run, from + 1, last), from, last),
          window(context.store.steps(replay.run_id), from, last));
      if (differs) {
        differs->detail += " (stored run " + std::to_string(stored_run) + " and its replay, run " +
                           std::to_string(replay.run_id) + ")";
        if (from > 0 && differs->step == from + 1) differs->detail += missing_state_hint(from);
        differs->detail += said_nondeterministic_hint(context.store, replay.run_id);
      }
      return differs;
    }
  }
  TrialSpec prefix = context.trainer.prefix(scaled.repro_spec, std::min(last, from + kPrefixSteps));
  const bool same = prefix.stop_after == scaled.repro_spec.stop_after;
  context.begin_phase("determinism: steps " + std::to_string(from + 1) + ".." +
                          std::to_string(prefix.stop_after) + " again",
                      1);
  // Nothing shorter to compare: the same trial once more.
  Outcome again = same ? context.run_again(prefix, 1) : context.run(prefix);
  auto before = window(context.store.steps(scaled.repro_outcome.run_id), from, last);
  auto now = window(context.store.steps(again.run_id), from, last);
  auto differs = detectors::compare_runs(before, now);
  if (differs) {
    differs->detail += " (runs " + std::to_string(scaled.repro_outcome.run_id) + " and " +
                       std::to_string(again.run_id) + " of the same spec)" +
                       said_nondeterministic_hint(context.store, again.run_id);
  }
  return differs;
}

std::optional<detectors::Failure> vote_on_reproduction(Context& context, const TrialSpec& spec,
                                                       detectors::FailureKind kind) {
  bisect::Vote vote({5, 0, bisect::StopRule::WhenDecided});
  context.begin_phase("reproduce: vote over identical runs", 5);
  int64_t failing_run = 0;
  bisect::drive(vote, 1, [&](const std::vector<size_t>& runs) {
    std::vector<bisect::Observation> observed;
    for (size_t run : runs) {
      Outcome outcome = context.run_again(spec, static_cast<int>(run) + 1);
      if (shows(outcome, kind)) failing_run = outcome.run_id;
      observed.push_back(judge(outcome, kind));
    }
    return observed;
  });
  const auto result = vote.result();
  if (result.consistency != bisect::Consistency::Inconsistent) return std::nullopt;
  return detectors::Failure{detectors::FailureKind::Nondeterministic, -1, -1,
                            std::to_string(result.bad) + " of " +
                                std::to_string(result.good + result.bad) +
                                " identical runs failed with " + to_string(kind) + " (e.g. run " +
                                std::to_string(failing_run) + ")"};
}

std::optional<std::string> confirm_timing(Context& context, const Reproduction& reproduction) {
  const auto kind = reproduction.failure.kind;
  if (!detectors::is_timing(kind)) return std::nullopt;
  // The reproduction is vote 0; identical runs are the rest, stopped once decided.
  bisect::Vote vote({5, 3, bisect::StopRule::WhenDecided});
  context.begin_phase(std::string("reproduce: confirm ") + to_string(kind) + " by identical runs",
                      2);
  (void)vote.next(1);
  vote.observe(0, bisect::Observation::Bad);
  bisect::drive(vote, 1, [&](const std::vector<size_t>& runs) {
    std::vector<bisect::Observation> observed;
    for (size_t run : runs)
      observed.push_back(judge(context.run_again(reproduction.spec, static_cast<int>(run)), kind));
    return observed;
  });
  const auto result = vote.result();
  if (result.verdict == bisect::Observation::Bad) return std::nullopt;
  return std::string(to_string(kind)) + " showed in " + std::to_string(result.bad) + " of " +
         std::to_string(result.good + result.bad + result.skipped) +
         " identical runs of the window: a noisy run, not a finding";
}

}  // namespace faultline::harness::isolate
