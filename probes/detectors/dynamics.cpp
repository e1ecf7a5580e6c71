// Training-dynamics detectors: non-finite values and anomaly records, exploding or vanishing
// gradient norms, loss spikes against a running median, and a loss that does not fall.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <cmath>
#include <deque>
#include <map>
#include <set>
#include <utility>

#include "common/event_names.hpp"
#include "common/metrics_record.hpp"
#include "common/text.hpp"
#include "probes/detectors/detectors.hpp"
#include "probes/detectors/stats.hpp"

namespace faultline::detectors {

namespace {

// Better evidence of the same non-finite step wins: the probe that names a module beats the
// one that saw only the loss, which beats the bare step record.
int phase_priority(const std::string& phase) {
  switch (parse_anomaly_phase(phase).value_or(AnomalyPhase::Data)) {
    case AnomalyPhase::Forward:
      return 0;
    case AnomalyPhase::Backward:
      return 1;
    case AnomalyPhase::Optimizer:
      return 2;
    case AnomalyPhase::Loss:
      return 3;
    case AnomalyPhase::Data:
      break;
  }
  return 4;  // data, or a phase of the trainer's own
}

std::string describe(const AnomalyRecord& a) {
  std::string text = a.phase.empty() ? "anomaly" : a.phase;
  // A trainer names the loss's phase and place alike ("loss at loss"): said once.
  if (!a.where.empty() && a.where != a.phase) text += " at " + a.where;
  if (!a.detail.empty()) text += ": " + a.detail;
  if (!a.samples.empty()) text += fmt::format("; samples {}", fmt::join(a.samples, ", "));
  if (!a.shards.empty()) text += fmt::format("; shards {}", fmt::join(a.shards, ", "));
  return text;
}

// nonfinite (from step records and anomaly records), data, and any other anomaly kind a
// trainer declares, reported as `anomaly` with its name in the detail.
class AnomalyDetector : public Detector {
 public:
  explicit AnomalyDetector(const Thresholds& t) : t_(t) {}

  void observe(const StepRecord& r) override {
    if (!t_.nonfinite.enabled) return;
    std::vector<std::string> bad;
    if (!std::isfinite(r.loss)) bad.push_back("loss " + num(r.loss));
    // A step a loss scaler skipped: its overflow was handled (loss_scaler.cpp judges the scaler).
    if (r.has_grad_norm && !std::isfinite(r.grad_norm) && !r.skipped)
      bad.push_back("grad_norm " + num(r.grad_norm));
    if (r.param_norm && !std::isfinite(*r.param_norm))
      bad.push_back("param_norm " + num(*r.param_norm));
    if (r.nonfinite.value_or(0) > 0)
      bad.push_back(std::to_string(*r.nonfinite) + " non-finite values in the model state");
    if (bad.empty()) return;
    std::string evidence = fmt::format("{}", fmt::join(bad, ", "));
    step_evidence_[{r.rank, r.step}] = evidence;
    found_.offer({FailureKind::Nonfinite, r.step, r.rank,
                  "step " + std::to_string(r.step) + ": " + evidence},
                 kStepRecordPriority);
  }

  void observe(const AnomalyRecord& a) override {
    const auto kind = parse_failure_kind(a.kind);
    if (kind == FailureKind::Nonfinite) {
      if (!t_.nonfinite.enabled) return;
      from_anomaly_.insert({a.rank, a.step});
      found_.offer({FailureKind::Nonfinite, a.step, a.rank, describe(a)}, phase_priority(a.phase));
    } else if (kind == FailureKind::Data) {
      // The trainer's only data anomaly: a token id not below model.vocab_size.
      if (t_.data.enabled) found_.offer({FailureKind::Data, a.step, a.rank, describe(a)});
    } else if (!a.kind.empty()) {
      // A kind of the trainer's own (or one of ours it should not write as an anomaly).
      found_.offer({FailureKind::Anomaly, a.step, a.rank, "'" + a.kind + "': " + describe(a)});
    }
  }

  void judge(Findings& out, bool) const override {
    for (Failure failure : found_.sorted()) {
      // An anomaly record names the site; the step record beside it adds the numbers.
      auto key = std::make_pair(failure.rank, failure.step);
      auto it = step_evidence_.find(key);
      if (failure.kind == FailureKind::Nonfinite && from_anomaly_.count(key) &&
          it != step_evidence_.end())
        failure.detail += " (step record: " + it->second + ")";
      out.offer(std::move(failure));
    }
  }

 private:
  const Thresholds t_;
  Findings found_;
  std::map<std::pair<int, int64_t>, std::string> step_evidence_;
  std::set<std::pair<int, int64_t>> from_anomaly_;
};

// A run of consecutive steps meeting a condition, with the first values as evidence.
struct Streak {
  int64_t start = -1;
  int64_t length = 0;
  std::vector<double> values;
  void extend(int64_t step, double value) {
    if (length++ == 0) start = step;
    if (values.size() < 5) values.push_back(value);
  }
  void reset() {
    length = 0;
    values.clear();
  }
  std::string evidence() const {
    std::vector<std::string> parts;
    for (double v : values) parts.push_back(num(v));
    return fmt::format("{}", fmt::join(parts, ", ")) +
           (length > static_cast<int64_t>(values.size()) ? ", ..." : "");
  }
};

// grad_explode and grad_vanish: one wild norm is noise (clipping absorbs it); a sustained one
// is the failure.
class GradNormDetector : public Detector {
 public:
  explicit GradNormDetector(const Thresholds& t) : t_(t) {}

  void observe(const StepRecord& r) override {
    Rank& s = ranks_[r.rank];
    if (s.seen && r.step != s.prev_step + 1) {  // a gap breaks "consecutive"
      s.above.reset();
      s.below.reset();
    }
    s.seen = true;
    s.prev_step = r.step;
    const double g = r.grad_norm;
    if (!std::isfinite(g)) {  // the nonfinite detector's case, not a size
      s.above.reset();
      s.below.reset();
      return;
    }
    const auto& ex = t_.grad_explode;
    const auto& va = t_.grad_vanish;
    if (g > ex.max_norm)
      s.above.extend(r.step, g);
    else
      s.above.reset();
    if (g < va.min_norm)
      s.below.extend(r.step, g);
    else
      s.below.reset();
    if (ex.enabled && s.above.length == ex.sustained_steps)
      found_.offer({FailureKind::GradExplode, s.above.start, r.rank,
                    "grad_norm above " + num(ex.max_norm) + " for " +
                        std::to_string(ex.sustained_steps) + " consecutive steps from step " +
                        std::to_string(s.above.start) + ": " + s.above.evidence(),
                    r.step});
    if (va.enabled && s.below.length == va.sustained_steps)
      found_.offer({FailureKind::GradVanish, s.below.start, r.rank,
                    "grad_norm below " + num(va.min_norm) + " for " +
                        std::to_string(va.sustained_steps) + " consecutive steps from step " +
                        std::to_string(s.below.start) + ": " + s.below.evidence(),
                    r.step});
  }

  void judge(Findings& out, bool) const override { out.merge(found_); }

 private:
  struct Rank {
    bool seen = false;
    int64_t prev_step = 0;
    Streak above, below;
  };
  const Thresholds t_;
  std::map<int, Rank> ranks_;
  Findings found_;
};

// loss_spike: the loss against the median of recent finite losses. A median, not an EMA, so
// one spike does not raise the bar for the next; inside a warm-up of steps, against the first.
class LossSpikeDetector : public Detector {
 public:
  explicit LossSpikeDetector(const Thresholds& t) : t_(t.loss_spike) {}

  void observe(const EventRecord& e) override {
    if (e.name == kResumeEvent) ranks_[e.rank].resumed = true;
  }

  void observe(const StepRecord& r) override {
    if (!std::isfinite(r.loss)) return;
    Rank& s = ranks_[r.rank];
    if (s.seen == 0) {
      s.first = r.loss;
      // A trainer that writes no resume event still shows it: its first step is not the first.
      if (r.step > 1) s.resumed = true;
    }
    if (s.seen >= t_.warmup_steps) {
      const double reference = median({s.recent.begin(), s.recent.end()});
      if (reference > 0 && r.loss >= t_.factor * reference)
        found_.offer({FailureKind::LossSpike, r.step, r.rank,
                      "loss " + num(r.loss) + " is " + num(r.loss / reference) + "x the median " +
                          num(reference) + " of the previous " + std::to_string(s.recent.size()) +
                          " finite losses (limit " + num(t_.factor) + "x)"});
    } else if (s.seen > 0 && !s.resumed) {
      judge_against_first(r, s);
    }
    if (s.seen >= t_.warmup_steps) judge_rise(r, s);
    if (s.seen > 0) {
      s.changes.push_back(r.loss - s.recent.back());
      if (static_cast<int64_t>(s.changes.size()) > t_.window) s.changes.pop_front();
    }
    ++s.seen;
    s.recent.push_back(r.loss);
    if (static_cast<int64_t>(s.recent.size()) > t_.window) s.recent.pop_front();
  }

  void judge(Findings& out, bool) const override { out.merge(found_); }

 private:
  struct Rank {
    double first = 0;
    bool resumed = false;  // from a checkpoint: its first loss is one draw mid-curve, no start
    int64_t seen = 0;
    std::deque<double> recent;
    std::deque<double> changes;  // step-to-step loss changes of the recent window
  };

  // Inside the warm-up the reference is the first loss: a run that blows up at once (a far too
  // high LR, no LR warm-up) would otherwise have raised its own median before it is judged.
  // Healthy runs never rise above their first loss there (70 tiny and micro seeds), while an LR
  // that keeps the model from learning doubles it within a few steps (docs/detectors.md). Not
  // for a run resumed from a checkpoint: mid-curve, its first loss is one batch's draw, and a
  // small batch's noise (a user's MLP: 0.30, then 1.87 seven steps on) is no divergence.
  void judge_against_first(const StepRecord& r, const Rank& s) {
    if (!(s.first > 0)) return;
    const bool rose = r.loss >= t_.first_loss_factor * s.first && r.loss - s.first > t_.min_rise;
    if (!rose && !(r.loss >= t_.factor * s.first)) return;
    found_.offer({FailureKind::LossSpike, r.step, r.rank,
                  fmt::format("loss {} is {}x the first loss {} ({} nats above it) within the "
                              "first {} steps (limit {}x and {} nat above it, or {}x): a "
                              "healthy run's loss falls from its start",
                              num(r.loss), num(r.loss / s.first), num(s.first),
                              num(r.loss - s.first), t_.warmup_steps, num(t_.first_loss_factor),
                              num(t_.min_rise), num(t_.factor))});
  }

  // A rise far outside the recent step-to-step variation (robust: median absolute deviation),
  // above an absolute floor: a jump of a few nats that is not yet 10x the loss.
  void judge_rise(const StepRecord& r, const Rank& s) {
    if (s.changes.size() < 3) return;
    const double rise = r.loss - s.recent.back();
    if (!(rise > t_.min_rise)) return;
    std::vector<double> changes(s.changes.begin(), s.changes.end());
    const double center = median(changes);
    for (double& change : changes) change = std::fabs(change - center);
    const double mad = median(changes);
    if (!(rise > center + t_.mad_factor * mad)) return;
    found_.offer({FailureKind::LossSpike, r.step, r.rank,
                  "loss rose " + num(rise) + " in one step (" + num(s.recent.back()) + " -> " +
                      num(r.loss) + "): " + (mad > 0 ? num((rise - center) / mad) : "inf") +
                      " median absolute deviations of the previous " +
                      std::to_string(changes.size()) + " step-to-step changes (limit " +
                      num(t_.mad_factor) + ", and above " + num(t_.min_rise) + ")"});
  }

  const Thresholds::LossSpike t_;
  std::map<int, Rank> ranks_;
  Findings found_;
};

// stalled: after enough steps, the mean of the last window of losses must be clearly below the
// mean of the first window. A whole-run judgement. A run that starts well below ln(vocab size)
// started trained (a fine-tune, a resume) and only has to fall at all.
class StalledDetector : public Detector {
 public:
  StalledDetector(const Thresholds& t, int64_t vocab_size)
      : t_(t.stalled),
        trained_start_(vocab_size > 1 ? std::log(static_cast<double>(vocab_size)) - t_.trained_below
                                      : -INFINITY) {}

  void observe(const StepRecord& r) override {
    Rank& s = ranks_[r.rank];
    ++s.steps;
    s.last_step = r.step;
    if (!std::isfinite(r.loss)) return;
    if (static_cast<int64_t>(s.first.size()) < t_.window) s.first.push_back(r.loss);
    s.last.push_back(r.loss);
    if (static_cast<int64_t>(s.last.size()) > t_.window) s.last.pop_front();
  }

  void judge(Findings& out, bool final) const override {
    if (!final) return;
    for (const auto& [rank, s] : ranks_) {
      const auto window = static_cast<size_t>(t_.window);
      if (s.steps < t_.after_steps || s.first.size() < window || s.last.size() < window) continue;
      const double start = mean(s.first);
      const double end = mean({s.last.begin(), s.last.end()});
      const bool trained = s.first.front() < trained_start_;
      const double drop = trained ? t_.trained_min_rel_drop : t_.min_rel_drop;
      const double needed = start - std::fabs(start) * drop;
      if (end < needed) continue;
      out.offer({FailureKind::Stalled, s.last_step, rank,
                 "mean loss of the last " + std::to_string(t_.window) + " steps " + num(end) +
                     " is not below " + num(needed) + " (the first " + std::to_string(t_.window) +
                     " steps' mean " + num(start) + " less " + num(100 * drop) + "%" +
                     (trained ? ": it started trained, below ln(vocab size)" : "") + ") after " +
                     std::to_string(s.steps) + " steps"});
    }
  }

 private:
  struct Rank {
    int64_t steps = 0;
    int64_t last_step = -1;
    std::vector<double> first;
    std::deque<double> last;
  };
  const Thresholds::Stalled t_;
  const double trained_start_;  // a first loss below this started from trained weights
  std::map<int, Rank> ranks_;
};

}  // namespace

void add_dynamics_detectors(DetectorList& out, const Thresholds& t, const RunContext& context) {
  out.push_back(std::make_unique<AnomalyDetector>(t));
  if (t.grad_explode.enabled || t.grad_vanish.enabled)
    out.push_back(std::make_unique<GradNormDetector>(t));
  if (t.loss_spike.enabled) out.push_back(std::make_unique<LossSpikeDetector>(t));
  if (t.stalled.enabled) out.push_back(std::make_unique<StalledDetector>(t, context.vocab_size));
}

}  // namespace faultline::detectors
