// Planner for the first bad training step (isolate step 3): bisects over checkpoints with
// one-step probes, then one replay window from the last good checkpoint names the exact step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "bisect/first_bad.hpp"
#include "bisect/observation.hpp"

namespace faultline::bisect {

// Resume from the checkpoint taken after step resume_from_checkpoint (0: the initial state) and
// run steps resume_from_checkpoint+1 .. stop_after (steps are 1-based).
struct StepTrial {
  int64_t resume_from_checkpoint = 0;
  int64_t stop_after = 0;
  int64_t steps() const { return stop_after - resume_from_checkpoint; }
  bool operator==(const StepTrial& other) const {
    return resume_from_checkpoint == other.resume_from_checkpoint && stop_after == other.stop_after;
  }
};

// What a trial's per-step metrics said about its window (resume, stop]: Good with no
// first_bad_step (the failure never showed), Bad with the first step that shows it, or Skip
// (the trial was unusable: crashed for another reason, checkpoint unreadable).
struct WindowOutcome {
  Observation observation = Observation::Skip;
  std::optional<int64_t> first_bad_step;

  static WindowOutcome clean() { return {Observation::Good, std::nullopt}; }
  static WindowOutcome bad_at(int64_t step) { return {Observation::Bad, step}; }
  static WindowOutcome unusable() { return {Observation::Skip, std::nullopt}; }
  bool operator==(const WindowOutcome& other) const {
    return observation == other.observation && first_bad_step == other.first_bad_step;
  }
};

struct StepPlanInputs {
  std::vector<int64_t> checkpoints;  // steps with a checkpoint, any order; 0 is always added
  int64_t known_bad_step = 0;        // the failure is present here (where the detector fired)
  int64_t known_good_step = 0;       // the failure is absent up to and including this step
  // An unusable window is retried from the checkpoint before it (the checkpoint may be
  // unreadable), up to this many windows in all; more failures are likely systematic.
  size_t max_window_attempts = 2;
};

// The first bad step lies in (last_good_step, earliest_bad_step]; exact when they are adjacent.
struct StepPlanResult {
  std::optional<int64_t> first_bad_step;
  int64_t last_good_step = 0;
  int64_t earliest_bad_step = 0;
};

class StepPlan {
 public:
  explicit StepPlan(StepPlanInputs inputs);

  // Trials to run now: up to `slots` one-step probes (k-way over the checkpoints), then the
  // single replay window. Empty when done or while an outstanding trial must come back first.
  std::vector<StepTrial> next(size_t slots = 1);

  // Records a proposed trial's outcome; any order. A first_bad_step outside the trial's window
  // is std::invalid_argument, as is one that contradicts steps already known good (a flaky
  // step: vote on it). A never-proposed trial is std::logic_error.
  void observe(const StepTrial& trial, const WindowOutcome& outcome);

  bool done() const { return phase_ == Phase::Done; }
  StepPlanResult result() const;
  size_t evaluations() const { return evaluations_; }  // trials observed
  int64_t steps_executed() const { return steps_executed_; }
  // The reference cost model: the same trials, each re-running from step 0 to its last step.
  int64_t naive_steps_from_zero() const { return naive_steps_; }
  const std::vector<int64_t>& checkpoints() const { return checkpoints_; }

  // Inputs, the probe search, the window attempts and the costs; an outstanding trial is
  // proposed again after from_json.
  nlohmann::json to_json() const;
  static StepPlan from_json(const nlohmann::json& state);

 private:
  enum class Phase { Probing, Window, Done };

  void finish_probing();
  void open_window(int64_t start);
  void count(const StepTrial& trial);
  bool is_repeated_window(const StepTrial& trial, const WindowOutcome& outcome) const;

  std::vector<int64_t> checkpoints_;  // sorted, unique, with 0
  int64_t known_bad_ = 0;
  int64_t known_good_ = 0;
  size_t max_window_attempts_ = 2;
  // The probe axis: checkpoints c with known_good <= c <= known_bad - 2, each probed by the
  // trial (c, c+1). P(c) = "step c+1 is bad" is monotone in c.
  std::vector<int64_t> axis_;
  std::optional<FirstBad> probes_;
  Phase phase_ = Phase::Probing;
  int64_t last_good_ = 0;     // the latest step known good
  int64_t earliest_bad_ = 0;  // the earliest step known bad
  int64_t window_start_ = 0;  // the checkpoint the current window resumes from
  int64_t window_stop_ = 0;   // its last step: just before the earliest known bad step
  bool window_outstanding_ = false;
  std::vector<int64_t> unusable_window_starts_;  // earlier windows that came back unusable
  std::optional<WindowOutcome> window_outcome_;  // the window that ended the plan
  size_t evaluations_ = 0;
  int64_t steps_executed_ = 0;
  int64_t naive_steps_ = 0;
};

}  // namespace faultline::bisect
