// Phase 3: the first bad step and, inside it, where. The detectors judge every step record, so
// the failing step of the smallest run is where the failure shows; a non-finite value is then
// replayed from the last checkpoint before it with the full per-module probes, which only that
// window pays for.
#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "bisect/step_plan.hpp"

#include "harness/isolate_phases.hpp"
#include "store/store.hpp"

namespace faultline::harness::isolate {

namespace {

// The anomaly record of `step` that the full probes wrote, if any.
std::optional<AnomalyRecord> full_probe_anomaly(store::Store& store, int64_t run_id, int64_t step) {
  for (const auto& anomaly : store.anomalies(run_id)) {
    if (anomaly.step != step || anomaly.kind != "nonfinite") continue;
    auto record = nlohmann::json::parse(anomaly.json, nullptr, false);
    if (!record.is_discarded() && record.value("probe", "") == "full") return anomaly;
  }
  return std::nullopt;
}

std::optional<AnomalyRecord> any_anomaly(store::Store& store, int64_t run_id, int64_t step) {
  for (const auto& anomaly : store.anomalies(run_id))
    if (anomaly.step == step && anomaly.kind == "nonfinite") return anomaly;
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
  if (failure.kind == "lr_anomaly") {
    location.phase = "optimizer";
    location.where = "lr";
  } else if (failure.kind == "loss_spike" || failure.kind == "stalled") {
    location.phase = "loss";
  } else if (failure.kind == "grad_explode" || failure.kind == "grad_vanish") {
    location.phase = "backward";
  } else if (failure.kind == "data_anomaly" || failure.kind == "data_stall") {
    location.phase = "data";
  }
  location.detail = failure.detail;
}

}  // namespace

namespace {

// The last step before `step` whose record is finite on every rank: where the evidence says the
// failure was still absent. With a record per step (the bundled trainer) it is step - 1; a
// trainer that logs sparsely leaves a gap for the plan to search.
int64_t last_known_good(store::Store& store, int64_t run_id, int64_t step) {
  int64_t good = 0;
  for (const auto& record : store.steps(run_id))
    if (record.step < step && std::isfinite(record.loss) && std::isfinite(record.grad_norm))
      good = std::max(good, record.step);
  return good;
}

// A replay of (from, stop] from the local run's checkpoint `from` (0: a fresh start), full
// probes inside the window only.
TrialSpec replay(const TrialSpec& local_spec, const Outcome& local, int64_t from, int64_t stop) {
  TrialSpec window =
      with(local_spec, {"probe.level=full", "probe.full_from_step=" + std::to_string(from + 1),
                        "probe.checkpoint_on_nonfinite=true"});
  window.resume = from > 0 ? checkpoint_path(local, from) : "";
  window.stop_after = stop;
  return window;
}

}  // namespace

StepLocation locate_step(Context& context, const TrialSpec& local_spec, const Outcome& local,
                         const detectors::Failure& failure) {
  StepLocation location;
  location.step = failure.step;
  if (failure.step <= 0) {  // a property of the whole run (straggler, slow, memory growth)
    location.detail = failure.detail;
    return location;
  }
  if (failure.kind != "nonfinite") {
    if (auto anomaly = any_anomaly(context.store, local.run_id, failure.step))
      take(location, *anomaly);
    locate_finite(location, failure);
    return location;
  }

  // The first bad step: the plan bisects over checkpoints only where the evidence has a gap.
  bisect::StepPlan plan({checkpoint_steps(local), failure.step,
                         last_known_good(context.store, local.run_id, failure.step)});
  context.begin_phase("steps: first bad step", 0);
  std::map<int64_t, int64_t> bad_runs;  // first bad step -> the replay that showed it
  while (!plan.done()) {
    auto trials = plan.next(static_cast<size_t>(std::max(1, context.jobs())));
    if (trials.empty()) break;
    std::vector<TrialSpec> specs;
    for (const auto& trial : trials)
      specs.push_back(replay(local_spec, local, trial.resume_from_checkpoint, trial.stop_after));
    auto outcomes = context.run(specs);
    for (size_t i = 0; i < trials.size(); ++i) {
      auto shown = failure_of(outcomes[i], "nonfinite");
      if (shown && shown->step > 0) {
        bad_runs[shown->step] = outcomes[i].run_id;
        plan.observe(trials[i], bisect::WindowOutcome::bad_at(shown->step));
      } else {
        plan.observe(trials[i], outcomes[i].verdict == Verdict::Pass
                                    ? bisect::WindowOutcome::clean()
                                    : bisect::WindowOutcome::unusable());
      }
    }
  }
  const auto found = plan.result();
  const int64_t step = found.first_bad_step.value_or(found.earliest_bad_step);
  location.step = step;

  // Inside the step: phase and module from the full probes. The state before the step is a
  // checkpoint the reproduction wrote (every N steps, and the last good one when it halted).
  auto written = checkpoint_steps(local);
  int64_t from = 0;
  for (int64_t checkpoint : written)
    if (checkpoint < step) from = checkpoint;
  if (from == step - 1 && from > 0) location.state_before = checkpoint_path(local, from);
  if (auto anomaly = full_probe_anomaly(context.store, local.run_id, step)) {
    take(location, *anomaly);  // the run had the full probes on already
    return location;
  }
  int64_t shown_in = bad_runs.count(step) ? bad_runs.at(step) : 0;
  if (shown_in == 0) {
    context.begin_phase("steps: replay " + std::to_string(from + 1) + ".." + std::to_string(step) +
                            " with full probes",
                        1);
    Outcome window = context.run(replay(local_spec, local, from, step));
    auto replayed = failure_of(window, "nonfinite");
    if (!replayed || replayed->step != step) {
      if (auto anomaly = any_anomaly(context.store, local.run_id, step)) take(location, *anomaly);
      location.detail += " (the full-probe replay of steps " + std::to_string(from + 1) + ".." +
                         std::to_string(step) + " did not fail there: run " +
                         std::to_string(window.run_id) + ")";
      return location;
    }
    shown_in = window.run_id;
    auto replay_written = checkpoint_steps(window);
    if (location.state_before.empty() &&
        std::find(replay_written.begin(), replay_written.end(), step - 1) != replay_written.end())
      location.state_before = checkpoint_path(window, step - 1);
  }
  if (auto anomaly = full_probe_anomaly(context.store, shown_in, step)) {
    take(location, *anomaly);
  } else if (auto cheap = any_anomaly(context.store, shown_in, step)) {
    take(location, *cheap);
  }
  return location;
}

}  // namespace faultline::harness::isolate
