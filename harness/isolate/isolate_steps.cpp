// Phase 3: the first bad step and, inside it, where. The detectors judge every step record, so
// the failing step of the smallest run is where the failure shows; a non-finite value is then
// replayed from the last checkpoint before it with the full per-module probes, which only that
// window pays for.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "bisect/drive.hpp"
#include "bisect/step_plan.hpp"
#include "common/metrics_record.hpp"

#include "harness/isolate/isolate_phases.hpp"
#include "harness/trial/run_facts.hpp"
#include "store/store.hpp"

namespace faultline::harness::isolate {

namespace {

using detectors::FailureKind;

bool is_nonfinite(const AnomalyRecord& anomaly) {
  return detectors::parse_failure_kind(anomaly.kind) == FailureKind::Nonfinite;
}

// The anomaly record of `step` that the full probes wrote, if any.
std::optional<AnomalyRecord> full_probe_anomaly(store::Store& store, int64_t run_id, int64_t step) {
  for (const auto& anomaly : store.anomalies(run_id)) {
    if (anomaly.step != step || !is_nonfinite(anomaly)) continue;
    auto record = nlohmann::json::parse(anomaly.json, nullptr, false);
    if (!record.is_discarded() && record.value("probe", "") == to_string(AnomalyProbe::Full))
      return anomaly;
  }
  return std::nullopt;
}

std::optional<AnomalyRecord> any_anomaly(store::Store& store, int64_t run_id, int64_t step) {
  for (const auto& anomaly : store.anomalies(run_id))
    if (anomaly.step == step && is_nonfinite(anomaly)) return anomaly;
  return std::nullopt;
}

void take(StepLocation& location, const AnomalyRecord& anomaly) {
  location.phase = anomaly.phase;
  location.where = anomaly.where;
  location.detail = anomaly.detail;
  if (!anomaly.samples.empty()) location.sample_hint = anomaly.samples;
}

// Where a finite failure lives, from its kind: the detectors' own evidence says the rest.
void locate_finite(StepLocation& location, const detectors::Failure& failure) {
  switch (failure.kind) {
    case FailureKind::LrAnomaly:
      location.phase = to_string(AnomalyPhase::Optimizer);
      location.where = "lr";
      break;
    case FailureKind::LossSpike:
    case FailureKind::Stalled:
      location.phase = to_string(AnomalyPhase::Loss);
      break;
    case FailureKind::GradExplode:
    case FailureKind::GradVanish:
      location.phase = to_string(AnomalyPhase::Backward);
      break;
    case FailureKind::Data:
    case FailureKind::DataStall:
      location.phase = to_string(AnomalyPhase::Data);
      break;
    default:
      break;
  }
  location.detail = failure.detail;
}

}  // namespace

namespace {

// A replay of (from, stop] from the checkpoint of step `from` (0: a fresh start), full probes
// inside the window only.
TrialSpec replay(const contract::TrainerContract& trainer, const TrialSpec& local_spec,
                 const std::vector<contract::Checkpoint>& checkpoints, int64_t from, int64_t stop) {
  TrialSpec window = trainer.full_probes_from(local_spec, from + 1);
  window = trainer.checkpoint_on_halt(window, true);
  window = trainer.resume(window, contract::at_step(checkpoints, from));
  return trainer.prefix(window, stop);
}

}  // namespace

// The last step before `step` whose record is finite on every rank (a step the loss scaler
// skipped counts: its overflow was handled): where the evidence says the failure was still absent.
// With a record per step (the bundled trainer) it is step - 1; a trainer that logs sparsely leaves
// a gap for the plan to search. A run resumed from a checkpoint before `step` started from a good
// state: that step counts as good.
int64_t last_known_good(store::Store& store, int64_t run_id, int64_t step,
                        const std::vector<contract::Checkpoint>& checkpoints) {
  int64_t good = 0;
  if (auto resumed = contract::last_before(checkpoints, step)) good = resumed->step;
  for (const auto& record : store.steps_between(run_id, good + 1, step - 1))
    if (std::isfinite(record.loss) && (std::isfinite(record.grad_norm) || record.skipped))
      good = std::max(good, record.step);
  return good;
}

StepLocation locate_step(Context& context, const TrialSpec& local_spec, const Outcome& local,
                         const detectors::Failure& failure) {
  StepLocation location;
  location.step = failure.step;
  if (failure.step <= 0) {  // a property of the whole run (straggler, slow, memory growth)
    location.detail = failure.detail;
    return location;
  }
  if (failure.kind != FailureKind::Nonfinite) {
    if (auto anomaly = any_anomaly(context.store, local.run_id, failure.step))
      take(location, *anomaly);
    locate_finite(location, failure);
    return location;
  }

  if (detectors::spans_steps(failure)) {
    // A loss scaler that never found a scale that works: every gradient overflows in its skips,
    // which began at the step. The records date it; no probe inside one step adds to that.
    location.detail = failure.detail;
    return location;
  }
  if (!context.trainer.can(contract::Capability::FullProbes)) {
    // The step is the one its records show; inside it, nothing can be asked.
    context.skip(context.trainer.skipped("the phase and module inside the step",
                                         contract::Capability::FullProbes));
    if (auto anomaly = any_anomaly(context.store, local.run_id, failure.step))
      take(location, *anomaly);
    location.detail = failure.detail;
    return location;
  }
  // The first bad step: the plan bisects over checkpoints only where the evidence has a gap.
  const auto checkpoints = checkpoints_of(context, local);
  bisect::StepPlan plan({steps_of(checkpoints), failure.step,
                         last_known_good(context.store, local.run_id, failure.step, checkpoints)});
  context.begin_phase("steps: first bad step", 0);
  std::map<int64_t, int64_t> bad_runs;  // first bad step -> the replay that showed it
  bisect::drive(plan, static_cast<size_t>(std::max(1, context.jobs())),
                [&](const std::vector<bisect::StepTrial>& trials) {
                  std::vector<TrialSpec> specs;
                  for (const auto& trial : trials)
                    specs.push_back(replay(context.trainer, local_spec, checkpoints,
                                           trial.resume_from_checkpoint, trial.stop_after));
                  auto outcomes = context.run(specs);
                  std::vector<bisect::WindowOutcome> observed;
                  for (const auto& outcome : outcomes) {
                    auto shown = failure_of(outcome, FailureKind::Nonfinite);
                    if (shown && shown->step > 0) {
                      bad_runs[shown->step] = outcome.run_id;
                      observed.push_back(bisect::WindowOutcome::bad_at(shown->step));
                    } else {
                      observed.push_back(outcome.verdict == Verdict::Pass
                                             ? bisect::WindowOutcome::clean()
                                             : bisect::WindowOutcome::unusable());
                    }
                  }
                  return observed;
                });
  const auto found = plan.result();
  const int64_t step = found.first_bad_step.value_or(found.earliest_bad_step);
  location.step = step;

  // Inside the step: phase and module from the full probes. The state before the step is a
  // checkpoint the reproduction wrote (every N steps, and the last good one when it halted).
  const auto before = contract::last_before(checkpoints, step);
  const int64_t from = before ? before->step : 0;
  if (from == step - 1 && before) location.state_before = before->path;
  if (auto anomaly = full_probe_anomaly(context.store, local.run_id, step)) {
    location.shown_in = local.run_id;
    take(location, *anomaly);  // the run had the full probes on already
    return location;
  }
  int64_t shown_in = bad_runs.count(step) ? bad_runs.at(step) : 0;
  if (shown_in == 0) {
    context.begin_phase("steps: replay " + std::to_string(from + 1) + ".." + std::to_string(step) +
                            " with full probes",
                        1);
    Outcome window = context.run(replay(context.trainer, local_spec, checkpoints, from, step));
    auto replayed = failure_of(window, FailureKind::Nonfinite);
    if (!replayed || replayed->step != step) {
      if (auto anomaly = any_anomaly(context.store, local.run_id, step)) take(location, *anomaly);
      // A replay that failed otherwise (the probes broke the script, say) says how.
      std::string instead;
      for (const auto& other : window.failures)
        if (other.kind != FailureKind::Nonfinite) {
          instead = fmt::format("; it failed with {} instead: {}", to_string(other.kind),
                                other.detail.substr(0, 300));
          break;
        }
      // Its probes ran the compiled model eagerly: a NaN of the compiled kernels alone stays away.
      const std::string eager = said_compiled(start_event(context.store, window.run_id))
                                    ? "; it ran its torch.compile'd model eagerly to probe it"
                                    : "";
      location.detail +=
          fmt::format(" (the full-probe replay of steps {}..{} did not fail there{}{}: run {})",
                      from + 1, step, instead, eager, window.run_id);
      return location;
    }
    shown_in = window.run_id;
    location.shown_in = shown_in;
    if (auto written = contract::at_step(checkpoints_of(context, window), step - 1);
        location.state_before.empty() && written)
      location.state_before = written->path;
  }
  location.shown_in = shown_in;
  if (auto anomaly = full_probe_anomaly(context.store, shown_in, step)) {
    take(location, *anomaly);
  } else if (auto cheap = any_anomaly(context.store, shown_in, step)) {
    take(location, *cheap);
  }
  return location;
}

}  // namespace faultline::harness::isolate
