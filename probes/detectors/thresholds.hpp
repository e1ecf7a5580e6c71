// Detector thresholds: defaults from practice (docs/detectors.md gives each one's source),
// overridable from a TOML file such as recipes/detectors/default.toml and from `--set`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/config.hpp"

namespace faultline::detectors {

// Which time the straggler detector compares. Auto: cpu_ms when every rank reports it
// (descheduling does not add CPU time), wall compute time otherwise. Wall: always wall time.
enum class StragglerClock { Auto, Wall };

// One section per failure kind; the TOML keys are `<section>.<field>`.
struct Thresholds {
  struct Nonfinite {
    bool enabled = true;
    // A dynamic loss scaler (fp16) skips overflowing steps and halves its scale: a few skips
    // are how it finds its scale; this many in a row, or a scale below min_loss_scale, is a run
    // whose gradients overflow whatever the scale.
    int64_t max_skipped_steps = 32;
    double min_loss_scale = 1.0;
  } nonfinite;
  struct Data {
    bool enabled = true;
  } data;
  struct Stalled {
    bool enabled = true;
    int64_t after_steps = 100;  // judged only on runs with at least this many steps
    int64_t window = 10;        // steps averaged at the start and at the end
    double min_rel_drop = 0.1;  // the end's mean must be this much (relative) below the start's
    // A run whose first loss is more than `trained_below` nats under ln(vocab size) started from
    // trained weights (a fine-tune, a resume): it starts near its floor, and only has to fall
    // by trained_min_rel_drop. Needs the vocabulary size; without it min_rel_drop applies.
    double trained_below = 1.0;
    double trained_min_rel_drop = 0.01;
  } stalled;
  struct GradExplode {
    bool enabled = true;
    double max_norm = 1e3;
    int64_t sustained_steps = 3;  // consecutive steps above max_norm; one step is not enough
  } grad_explode;
  struct GradVanish {
    bool enabled = true;
    double min_norm = 1e-6;
    int64_t sustained_steps = 3;
  } grad_vanish;
  struct LossSpike {
    bool enabled = true;
    double factor = 10.0;       // loss >= factor x reference is a spike
    int64_t window = 20;        // reference: median of this many recent finite losses
    int64_t warmup_steps = 10;  // finite losses seen before the median is the reference
    // Before warmup_steps finite losses: loss >= first_loss_factor x the first loss and more than
    // min_rise above it. A healthy run's loss falls from its start; an early rise is divergence.
    double first_loss_factor = 1.5;
    // A step-to-step rise above mad_factor x the median absolute deviation of the last `window`
    // step-to-step changes, and above min_rise (nats): an early jump of a few nats.
    double mad_factor = 10.0;
    double min_rise = 1.0;
  } loss_spike;
  struct BadInit {
    bool enabled = true;
    double max_excess = 1.0;  // first loss above ln(vocab_size) + this many nats
  } bad_init;
  struct LossRegression {  // against a reference of runs (reference.hpp)
    bool enabled = true;
    int64_t window = 10;          // trailing mean of this many steps' losses
    double skip_fraction = 0.2;   // judged from this share of the run's steps on
    double spread_factor = 2.0;   // tolerance: this x (max - min) of the reference's runs ...
    double min_margin = 0.1;      // ... and at least this share of the reference's mean
    double single_margin = 0.12;  // one reference run: tolerance = this share of its loss
    int64_t sustained_steps = 5;  // consecutive judged steps beyond the tolerance
  } loss_regression;
  struct LrAnomaly {
    bool enabled = true;
    double jump_factor = 10.0;     // lr above jump_factor x the previous step's
    int64_t max_growth_steps = 5;  // consecutive increases allowed after the warm-up window
    int64_t zero_steps = 5;        // consecutive steps at lr == 0
  } lr_anomaly;
  struct Memory {
    bool enabled = true;
    double max_fraction = 0.95;            // of mem_total_bytes
    int64_t skip_steps = 5;                // first steps allocate for good; not fitted
    int64_t min_steps = 20;                // fitted steps needed to call a leak
    double max_growth_mib_per_step = 1.0;  // least-squares slope above this ...
    double min_r2 = 0.9;                   // ... with a fit this good is a leak
  } memory;
  struct DataStall {
    bool enabled = true;
    double max_share = 0.5;  // median over steps of data_ms / (step_ms - comm_ms)
    int64_t min_steps = 5;
  } data_stall;
  struct Straggler {
    bool enabled = true;
    // A step counts against a rank when the other ranks' median compute time / this rank's is
    // below min_score and the rank is at least min_excess_ms slower in that step ...
    double min_score = 0.75;
    double min_excess_ms = 5;
    // ... and the rank is a straggler when so many of its steps count that a rank no slower
    // than its peers (at most half its steps, by symmetry) would show it with a binomial
    // probability of at most max_p_value.
    double max_p_value = 1e-3;
    int64_t skip_steps = 2;  // first steps pay one-time costs
    int64_t min_steps = 5;
    StragglerClock clock = StragglerClock::Auto;
  } straggler;
  struct Gpu {
    bool enabled = true;
    // slow_comm: a rank's median NCCL ms per step at least nccl_factor x the other ranks' median
    // and at least nccl_min_excess_ms above it, over at least min_steps joined steps.
    double nccl_factor = 2.0;
    double nccl_min_excess_ms = 1.0;
    int64_t min_steps = 5;
  } gpu;
  struct Slow {
    bool enabled = true;
    double min_ratio = 0.75;  // run tokens/s below min_ratio x baseline tokens/s is slow
  } slow;
  struct Nondeterministic {
    bool enabled = true;
  } nondeterministic;
};

// Binds every key under `prefix` ("" or e.g. "detectors."); the caller calls binder.finish().
void bind_thresholds(ConfigBinder& binder, Thresholds& thresholds, const std::string& prefix = "");

// Thresholds from a source: unknown keys (with a did-you-mean), type and range errors and
// cross-field problems are thrown together as one UserError.
Thresholds thresholds_from(const ConfigSource& source);

// Reads PATH, applies `key=value` overrides, and binds as thresholds_from().
Thresholds load_thresholds(const std::string& path, const std::vector<std::string>& overrides = {});

}  // namespace faultline::detectors
