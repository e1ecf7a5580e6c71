// Binds detector thresholds with the project's ConfigBinder (never toml++ directly).
#include "probes/detectors/thresholds.hpp"

namespace faultline::detectors {

namespace {
const Range<int64_t> kAtLeastOne{1, {}};
const Range<int64_t> kAtLeastZero{0, {}};
const Range<double> kFactor{1.0, {}};
const Range<double> kShare{0.0, 1.0};
const Range<double> kNonNegative{0.0, {}};
constexpr std::pair<StragglerClock, const char*> kClocks[] = {{StragglerClock::Auto, "auto"},
                                                              {StragglerClock::Wall, "wall"}};
}  // namespace

void bind_thresholds(ConfigBinder& b, Thresholds& t, const std::string& prefix) {
  auto key = [&](const char* name) { return prefix + name; };
  b.bind(key("nonfinite.enabled"), t.nonfinite.enabled);
  b.bind(key("nonfinite.max_skipped_steps"), t.nonfinite.max_skipped_steps, kAtLeastOne);
  b.bind(key("nonfinite.min_loss_scale"), t.nonfinite.min_loss_scale, kNonNegative);
  b.bind(key("data.enabled"), t.data.enabled);

  b.bind(key("stalled.enabled"), t.stalled.enabled);
  b.bind(key("stalled.after_steps"), t.stalled.after_steps, kAtLeastOne);
  b.bind(key("stalled.window"), t.stalled.window, kAtLeastOne);
  b.bind(key("stalled.min_rel_drop"), t.stalled.min_rel_drop, kShare);
  b.bind(key("stalled.trained_below"), t.stalled.trained_below, {0.0, {}});
  b.bind(key("stalled.trained_min_rel_drop"), t.stalled.trained_min_rel_drop, kShare);

  b.bind(key("grad_explode.enabled"), t.grad_explode.enabled);
  b.bind(key("grad_explode.max_norm"), t.grad_explode.max_norm, {0.0, {}});
  b.bind(key("grad_explode.sustained_steps"), t.grad_explode.sustained_steps, kAtLeastOne);
  b.bind(key("grad_vanish.enabled"), t.grad_vanish.enabled);
  b.bind(key("grad_vanish.min_norm"), t.grad_vanish.min_norm, {0.0, {}});
  b.bind(key("grad_vanish.sustained_steps"), t.grad_vanish.sustained_steps, kAtLeastOne);

  b.bind(key("loss_spike.enabled"), t.loss_spike.enabled);
  b.bind(key("loss_spike.factor"), t.loss_spike.factor, kFactor);
  b.bind(key("loss_spike.window"), t.loss_spike.window, kAtLeastOne);
  b.bind(key("loss_spike.warmup_steps"), t.loss_spike.warmup_steps, kAtLeastOne);
  b.bind(key("loss_spike.first_loss_factor"), t.loss_spike.first_loss_factor, kFactor);
  b.bind(key("loss_spike.mad_factor"), t.loss_spike.mad_factor, kFactor);
  b.bind(key("loss_spike.min_rise"), t.loss_spike.min_rise, kNonNegative);

  b.bind(key("bad_init.enabled"), t.bad_init.enabled);
  b.bind(key("bad_init.max_excess"), t.bad_init.max_excess, kNonNegative);

  b.bind(key("loss_regression.enabled"), t.loss_regression.enabled);
  b.bind(key("loss_regression.window"), t.loss_regression.window, kAtLeastOne);
  b.bind(key("loss_regression.skip_fraction"), t.loss_regression.skip_fraction, {0.0, 0.9});
  b.bind(key("loss_regression.spread_factor"), t.loss_regression.spread_factor, kNonNegative);
  b.bind(key("loss_regression.min_margin"), t.loss_regression.min_margin, kNonNegative);
  b.bind(key("loss_regression.single_margin"), t.loss_regression.single_margin, kNonNegative);
  b.bind(key("loss_regression.sustained_steps"), t.loss_regression.sustained_steps, kAtLeastOne);

  b.bind(key("lr_anomaly.enabled"), t.lr_anomaly.enabled);
  b.bind(key("lr_anomaly.jump_factor"), t.lr_anomaly.jump_factor, kFactor);
  b.bind(key("lr_anomaly.max_growth_steps"), t.lr_anomaly.max_growth_steps, kAtLeastOne);
  b.bind(key("lr_anomaly.zero_steps"), t.lr_anomaly.zero_steps, kAtLeastOne);

  b.bind(key("memory.enabled"), t.memory.enabled);
  b.bind(key("memory.max_fraction"), t.memory.max_fraction, kShare);
  b.bind(key("memory.skip_steps"), t.memory.skip_steps, kAtLeastZero);
  b.bind(key("memory.min_steps"), t.memory.min_steps, {3, {}});
  b.bind(key("memory.max_growth_mib_per_step"), t.memory.max_growth_mib_per_step, {0.0, {}});
  b.bind(key("memory.min_r2"), t.memory.min_r2, kShare);

  b.bind(key("data_stall.enabled"), t.data_stall.enabled);
  b.bind(key("data_stall.max_share"), t.data_stall.max_share, kShare);
  b.bind(key("data_stall.min_steps"), t.data_stall.min_steps, kAtLeastOne);

  b.bind(key("straggler.enabled"), t.straggler.enabled);
  b.bind(key("straggler.min_score"), t.straggler.min_score, kShare);
  b.bind(key("straggler.min_excess_ms"), t.straggler.min_excess_ms, kNonNegative);
  b.bind(key("straggler.max_p_value"), t.straggler.max_p_value, kShare);
  b.bind(key("straggler.skip_steps"), t.straggler.skip_steps, kAtLeastZero);
  b.bind(key("straggler.min_steps"), t.straggler.min_steps, kAtLeastOne);
  b.bind_enum(key("straggler.clock"), t.straggler.clock, kClocks);

  b.bind(key("gpu.enabled"), t.gpu.enabled);
  b.bind(key("gpu.nccl_factor"), t.gpu.nccl_factor, kFactor);
  b.bind(key("gpu.nccl_min_excess_ms"), t.gpu.nccl_min_excess_ms, kNonNegative);
  b.bind(key("gpu.min_steps"), t.gpu.min_steps, kAtLeastOne);
  b.bind(key("slow.enabled"), t.slow.enabled);
  b.bind(key("slow.min_ratio"), t.slow.min_ratio, kShare);
  b.bind(key("nondeterministic.enabled"), t.nondeterministic.enabled);

  // Overlapping windows would compare the run's loss with itself.
  if (2 * t.stalled.window > t.stalled.after_steps)
    b.fail(key("stalled.window"),
           "stalled.window " + std::to_string(t.stalled.window) + " is more than half of " +
               "stalled.after_steps " + std::to_string(t.stalled.after_steps),
           "the first and last windows must not overlap");
  if (t.grad_vanish.min_norm >= t.grad_explode.max_norm)
    b.fail(key("grad_vanish.min_norm"), "grad_vanish.min_norm is not below grad_explode.max_norm",
           "a healthy norm must fit between them");
}

Thresholds thresholds_from(const ConfigSource& source) {
  Thresholds thresholds;
  ConfigBinder binder(source);
  bind_thresholds(binder, thresholds);
  binder.finish();
  return thresholds;
}

Thresholds load_thresholds(const std::string& path, const std::vector<std::string>& overrides) {
  ConfigSource source = ConfigSource::from_file(path);
  source.apply_overrides(overrides);
  return thresholds_from(source);
}

}  // namespace faultline::detectors
