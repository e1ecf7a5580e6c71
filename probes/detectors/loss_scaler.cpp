// nonfinite from fp16's dynamic loss scaler: a step it skipped is an overflow it handled (the
// nonfinite detector passes over its grad norm); a scaler that cannot find a scale that works is
// the failure: too many skips in a row, or a scale under the floor.
#include <map>

#include "probes/detectors/detectors.hpp"
#include "probes/detectors/stats.hpp"

namespace faultline::detectors {

namespace {

class LossScalerDetector : public Detector {
 public:
  explicit LossScalerDetector(const Thresholds& t) : t_(t.nonfinite) {}

  // Dated by the first skip of the last run of skips (the one that shows the failure, or took
  // the scale under the floor), shown by the step that completes the evidence.
  void observe(const StepRecord& r) override {
    Scaler& s = scalers_[r.rank];
    if (!r.skipped || (s.skips_in_a_row > 0 && r.step != s.last_skip + 1)) s.skips_in_a_row = 0;
    if (r.skipped) {
      if (s.skips_in_a_row++ == 0) s.streak_start = r.step;
      s.last_skip = r.step;
      ++s.skipped;
    }
    const std::string scale = r.loss_scale ? "; loss scale " + num(*r.loss_scale) : "";
    if (s.skips_in_a_row == t_.max_skipped_steps)
      found_.offer({FailureKind::Nonfinite, s.streak_start, r.rank,
                    "the loss scaler skipped " + std::to_string(s.skips_in_a_row) +
                        " steps in a row from step " + std::to_string(s.streak_start) +
                        " (gradients non-finite at every scale it tried" + scale + " at step " +
                        std::to_string(r.step) + ")",
                    r.step},
                   kStepRecordPriority);
    if (r.loss_scale && *r.loss_scale < t_.min_loss_scale && !s.below_floor) {
      s.below_floor = true;
      const int64_t from = s.streak_start > 0 ? s.streak_start : r.step;  // a scale set that low
      found_.offer(
          {FailureKind::Nonfinite, from, r.rank,
           "loss scale " + num(*r.loss_scale) + " at step " + std::to_string(r.step) +
               " is below " + num(t_.min_loss_scale) + " after " + std::to_string(s.skipped) +
               " skipped steps, the last run of them from step " + std::to_string(from) +
               ": the gradients overflow even unscaled",
           r.step},
          kStepRecordPriority);
    }
  }

  void judge(Findings& out, bool) const override { out.merge(found_); }

 private:
  struct Scaler {
    int64_t skipped = 0, skips_in_a_row = 0, streak_start = -1, last_skip = -1;
    bool below_floor = false;
  };
  const Thresholds::Nonfinite t_;
  std::map<int, Scaler> scalers_;
  Findings found_;
};

}  // namespace

void add_loss_scaler_detector(DetectorList& out, const Thresholds& t) {
  if (t.nonfinite.enabled) out.push_back(std::make_unique<LossScalerDetector>(t));
}

}  // namespace faultline::detectors
