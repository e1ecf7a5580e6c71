// Phase 3: the first bad step and, inside it, where. The detectors judge every step record, so
// the failing step of the smallest run is where the failure shows; a non-finite value is then
// replayed from the last checkpoint before it with the full per-module probes, which only that
// window pays for.
#include <nlohmann/json.hpp>

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

StepLocation locate_step(Context& context, const TrialSpec& local_spec, const Outcome& local,
                         const detectors::Failure& failure) {
  StepLocation location;
  location.step = failure.step;
  if (failure.step <= 0) {  // a property of the whole run (straggler, slow, memory growth)
    location.detail = failure.detail;
    return location;
  }
  const int64_t step = failure.step;
  auto before = checkpoint_steps(local);
  if (std::find(before.begin(), before.end(), step - 1) != before.end())
    location.state_before = checkpoint_path(local, step - 1);

  if (failure.kind != "nonfinite") {
    if (auto anomaly = any_anomaly(context.store, local.run_id, step)) take(location, *anomaly);
    locate_finite(location, failure);
    return location;
  }
  if (auto anomaly = full_probe_anomaly(context.store, local.run_id, step)) {
    take(location, *anomaly);  // the run had the full probes on already
    return location;
  }
  // The window: from the last checkpoint before the step, full probes only inside it.
  int64_t from = 0;
  for (int64_t checkpoint : before)
    if (checkpoint < step) from = checkpoint;
  context.begin_phase("steps: replay window " + std::to_string(from + 1) + ".." +
                          std::to_string(step) + " with full probes",
                      1);
  TrialSpec window =
      with(local_spec, {"probe.level=full", "probe.full_from_step=" + std::to_string(from + 1),
                        "probe.checkpoint_on_nonfinite=true"});
  window.resume = from > 0 ? checkpoint_path(local, from) : "";
  window.stop_after = step;
  Outcome replay = context.run(window);
  auto replayed = failure_of(replay, "nonfinite");
  if (!replayed) {  // the replay did not fail: keep the cheap probe's word, and say so
    if (auto anomaly = any_anomaly(context.store, local.run_id, step)) take(location, *anomaly);
    location.detail += " (the full-probe replay of steps " + std::to_string(from + 1) + ".." +
                       std::to_string(step) + " did not fail: run " +
                       std::to_string(replay.run_id) + ")";
    return location;
  }
  location.step = replayed->step;
  if (auto anomaly = full_probe_anomaly(context.store, replay.run_id, replayed->step)) {
    take(location, *anomaly);
  } else if (auto cheap = any_anomaly(context.store, replay.run_id, replayed->step)) {
    take(location, *cheap);
  }
  if (location.state_before.empty() && location.step > 1) {
    auto written = checkpoint_steps(replay);
    if (std::find(written.begin(), written.end(), location.step - 1) != written.end())
      location.state_before = checkpoint_path(replay, location.step - 1);
    else if (location.step - 1 == from && from > 0)
      location.state_before = checkpoint_path(local, from);
  }
  return location;
}

}  // namespace faultline::harness::isolate
