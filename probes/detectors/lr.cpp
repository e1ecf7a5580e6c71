// lr_anomaly: the detector does not know the schedule, so it flags what no sane schedule does —
// a one-step jump by a large factor, growth that goes on after the warm-up, LR stuck at zero.
#include <cmath>
#include <map>

#include "probes/detectors/detectors.hpp"
#include "probes/detectors/stats.hpp"

namespace faultline::detectors {

namespace {

// Schedules are computed in double precision; anything above this relative step is growth.
constexpr double kGrowthTolerance = 1e-9;

class LrDetector : public Detector {
 public:
  LrDetector(const Thresholds& t, const RunContext& context)
      : t_(t.lr_anomaly), warmup_steps_(context.warmup_steps) {}

  void observe(const StepRecord& r) override {
    if (!r.has_lr) return;  // a trainer that does not report its LR
    Rank& s = ranks_[r.rank];
    const double lr = r.lr;
    if (!std::isfinite(lr) || lr < 0) {
      offer(r, "lr is " + num(lr));
      s.has_prev = false;
      s.growth.reset();
      s.zero.reset();
      return;
    }
    ++s.records;
    if (s.records == 2 && s.first_lr > t_.jump_factor * lr && lr > 0) {
      // A spike on the very first step has no previous step to compare with; the next one shows it.
      Failure f{FailureKind::LrAnomaly, s.first_step, r.rank,
                "lr " + num(s.first_lr) + " at the first step " + std::to_string(s.first_step) +
                    " is " + num(s.first_lr / lr) + "x the next step's " + num(lr) + " (limit " +
                    num(t_.jump_factor) + "x)",
                r.step};
      found_.offer(std::move(f));
    }
    if (s.records == 1) {
      s.first_lr = lr;
      s.first_step = r.step;
    }
    if (s.has_prev && s.prev > 0 && lr > t_.jump_factor * s.prev)
      offer(r, "lr " + num(lr) + " is " + num(lr / s.prev) + "x the previous step's " +
                   num(s.prev) + " (limit " + num(t_.jump_factor) + "x)");

    const bool increasing = s.has_prev && lr > s.prev * (1 + kGrowthTolerance);
    // The warm-up window: known from the context, or else the run's initial rising stretch.
    bool in_warmup;
    if (warmup_steps_ >= 0) {
      in_warmup = r.step <= warmup_steps_;
    } else {
      s.rising_start = s.rising_start && (!s.has_prev || increasing);
      in_warmup = s.rising_start;
    }
    if (increasing && !in_warmup) {
      s.growth.extend(r.step, lr);
      if (s.growth.length == t_.max_growth_steps + 1)
        found_.offer({FailureKind::LrAnomaly, s.growth.start, r.rank,
                      "lr kept increasing after the warm-up for " +
                          std::to_string(s.growth.length) + " consecutive steps from step " +
                          std::to_string(s.growth.start) + " (" + num(s.growth.first) + " -> " +
                          num(lr) + "; limit " + std::to_string(t_.max_growth_steps) + ")",
                      r.step});
    } else {
      s.growth.reset();
    }
    // Zero anywhere: a warm-up from zero spends one step there, not zero_steps.
    if (lr == 0) {
      s.zero.extend(r.step, lr);
      if (s.zero.length == t_.zero_steps)
        found_.offer({FailureKind::LrAnomaly, s.zero.start, r.rank,
                      "lr is 0 for " + std::to_string(s.zero.length) +
                          " consecutive steps from step " + std::to_string(s.zero.start),
                      r.step});
    } else {
      s.zero.reset();
    }
    s.prev = lr;
    s.has_prev = true;
  }

  void judge(Findings& out, bool) const override { out.merge(found_); }

 private:
  struct Run {
    int64_t start = -1;
    int64_t length = 0;
    double first = 0;
    void extend(int64_t step, double value) {
      if (length++ == 0) {
        start = step;
        first = value;
      }
    }
    void reset() { length = 0; }
  };
  struct Rank {
    int64_t records = 0;
    double first_lr = 0;
    int64_t first_step = 0;
    double prev = 0;
    bool has_prev = false;
    bool rising_start = true;
    Run growth, zero;
  };

  void offer(const StepRecord& r, std::string detail) {
    found_.offer({FailureKind::LrAnomaly, r.step, r.rank, std::move(detail)});
  }

  const Thresholds::LrAnomaly t_;
  const int64_t warmup_steps_;
  std::map<int, Rank> ranks_;
  Findings found_;
};

}  // namespace

void add_lr_detector(DetectorList& out, const Thresholds& t, const RunContext& context) {
  if (t.lr_anomaly.enabled) out.push_back(std::make_unique<LrDetector>(t, context));
}

}  // namespace faultline::detectors
