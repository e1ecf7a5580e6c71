// StepPlan: first bad step from checkpoints. One-step probes bisect the checkpoints (each costs
// one trainer step), so the only long trial is a single window of at most one checkpoint gap.
#include "bisect/step_plan.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace faultline::bisect {
namespace {

std::string describe(const StepTrial& trial) {
  return "(" + std::to_string(trial.resume_from_checkpoint) + ", " +
         std::to_string(trial.stop_after) + "]";
}

}  // namespace

StepPlan::StepPlan(StepPlanInputs inputs)
    : checkpoints_(std::move(inputs.checkpoints)),
      known_bad_(inputs.known_bad_step),
      known_good_(inputs.known_good_step),
      max_window_attempts_(inputs.max_window_attempts),
      last_good_(inputs.known_good_step),
      earliest_bad_(inputs.known_bad_step) {
  if (max_window_attempts_ == 0) throw std::invalid_argument("StepPlan: max_window_attempts 0");
  if (known_good_ < 0 || known_bad_ <= known_good_)
    throw std::invalid_argument("StepPlan: need 0 <= known_good_step < known_bad_step, got " +
                                std::to_string(known_good_) + " and " + std::to_string(known_bad_));
  checkpoints_.push_back(0);  // the initial state: a run can always start from scratch
  std::sort(checkpoints_.begin(), checkpoints_.end());
  checkpoints_.erase(std::unique(checkpoints_.begin(), checkpoints_.end()), checkpoints_.end());
  if (checkpoints_.front() < 0) throw std::invalid_argument("StepPlan: negative checkpoint step");
  // Probing the checkpoint at or below known_good would be wasted: the window starts there
  // anyway. Probing at known_bad - 1 or later would only confirm what is known.
  for (int64_t checkpoint : checkpoints_)
    if (checkpoint > known_good_ && checkpoint <= known_bad_ - 2) axis_.push_back(checkpoint);
  if (earliest_bad_ == last_good_ + 1) {
    phase_ = Phase::Done;
  } else if (axis_.empty()) {
    finish_probing();
  } else {
    probes_.emplace(axis_.size(), FirstBadOptions{LastCandidate::Unknown, BeforeFirst::KnownGood});
  }
}

// Turns the probe results into step bounds and opens the window from the latest checkpoint
// at or below the last good step, passing over checkpoints whose probe was unusable.
void StepPlan::finish_probing() {
  std::vector<int64_t> unusable_probes;
  if (probes_) {
    const auto probed = probes_->result();
    if (probed.range_begin > 0)
      last_good_ = std::max(last_good_, axis_[probed.range_begin - 1] + 1);
    if (probed.upper_edge == Observation::Bad)
      earliest_bad_ = std::min(earliest_bad_, axis_[probed.range_end - 1] + 1);
    for (const auto& [index, observation] : probes_->observed())
      if (observation == Observation::Skip) unusable_probes.push_back(axis_[index]);
  }
  if (earliest_bad_ == last_good_ + 1) {
    phase_ = Phase::Done;
    return;
  }
  auto start = std::prev(std::upper_bound(checkpoints_.begin(), checkpoints_.end(), last_good_));
  while (start != checkpoints_.begin() &&
         std::count(unusable_probes.begin(), unusable_probes.end(), *start) != 0)
    --start;
  open_window(*start);
}

// The window stops just before the earliest known bad step: if it stays clean, that step is
// the first bad one, and no trial re-runs a step already known bad.
void StepPlan::open_window(int64_t start) {
  phase_ = Phase::Window;
  window_start_ = start;
  window_stop_ = earliest_bad_ - 1;
  window_outstanding_ = false;
}

void StepPlan::count(const StepTrial& trial) {
  ++evaluations_;
  steps_executed_ += trial.steps();
  naive_steps_ += trial.stop_after;
}

// A window observed before that comes back again with the same outcome: ignored.
bool StepPlan::is_repeated_window(const StepTrial& trial, const WindowOutcome& outcome) const {
  if (phase_ == Phase::Probing || trial.stop_after != window_stop_) return false;
  if (outcome.observation == Observation::Skip)
    return std::count(unusable_window_starts_.begin(), unusable_window_starts_.end(),
                      trial.resume_from_checkpoint) != 0;
  return window_outcome_ && trial.resume_from_checkpoint == window_start_ &&
         *window_outcome_ == outcome;
}

std::vector<StepTrial> StepPlan::next(size_t slots) {
  std::vector<StepTrial> trials;
  if (slots == 0) return trials;
  if (phase_ == Phase::Probing) {
    for (size_t index : probes_->next(slots)) trials.push_back({axis_[index], axis_[index] + 1});
  } else if (phase_ == Phase::Window && !window_outstanding_) {
    window_outstanding_ = true;
    trials.push_back({window_start_, window_stop_});
  }
  return trials;
}

void StepPlan::observe(const StepTrial& trial, const WindowOutcome& outcome) {
  const bool bad = outcome.observation == Observation::Bad;
  if (bad != outcome.first_bad_step.has_value())
    throw std::invalid_argument("StepPlan: a Bad outcome needs a first bad step, others none");
  if (bad && (*outcome.first_bad_step <= trial.resume_from_checkpoint ||
              *outcome.first_bad_step > trial.stop_after))
    throw std::invalid_argument("StepPlan: first bad step " +
                                std::to_string(*outcome.first_bad_step) + " is outside trial " +
                                describe(trial));
  const StepTrial window{window_start_, window_stop_};
  if (is_repeated_window(trial, outcome)) return;
  if (phase_ == Phase::Window && window_outstanding_ && trial == window) {
    if (bad && *outcome.first_bad_step <= last_good_)
      throw std::invalid_argument("StepPlan: window " + describe(trial) + " is bad at step " +
                                  std::to_string(*outcome.first_bad_step) + ", but step " +
                                  std::to_string(last_good_) +
                                  " is known good: not deterministic (vote on it)");
    count(trial);
    window_outstanding_ = false;
    if (outcome.observation == Observation::Skip) {
      // Try an earlier checkpoint: this one may be unreadable. From step 0 there is no retry.
      unusable_window_starts_.push_back(window_start_);
      const auto at = std::lower_bound(checkpoints_.begin(), checkpoints_.end(), window_start_);
      if (at == checkpoints_.begin() || unusable_window_starts_.size() >= max_window_attempts_) {
        phase_ = Phase::Done;
      } else {
        open_window(*std::prev(at));
      }
      return;
    }
    window_outcome_ = outcome;
    earliest_bad_ = bad ? *outcome.first_bad_step : earliest_bad_;
    last_good_ = earliest_bad_ - 1;
    phase_ = Phase::Done;
    return;
  }
  const auto probe = std::lower_bound(axis_.begin(), axis_.end(), trial.resume_from_checkpoint);
  if (!probes_ || trial.steps() != 1 || probe == axis_.end() ||
      *probe != trial.resume_from_checkpoint)
    throw std::logic_error("StepPlan: trial " + describe(trial) + " was never proposed");
  const size_t before = probes_->evaluations();
  probes_->observe(static_cast<size_t>(probe - axis_.begin()), outcome.observation);
  if (probes_->evaluations() > before) count(trial);
  if (phase_ == Phase::Probing && probes_->done()) finish_probing();
}

StepPlanResult StepPlan::result() const {
  StepPlanResult result{std::nullopt, last_good_, earliest_bad_};
  if (earliest_bad_ == last_good_ + 1) result.first_bad_step = earliest_bad_;
  return result;
}

nlohmann::json StepPlan::to_json() const {
  nlohmann::json state = {{"search", "step_plan"},
                          {"version", 1},
                          {"checkpoints", checkpoints_},
                          {"known_good_step", known_good_},
                          {"known_bad_step", known_bad_},
                          {"max_window_attempts", max_window_attempts_},
                          {"probes", probes_ ? probes_->to_json() : nlohmann::json()},
                          {"phase", phase_ == Phase::Probing  ? "probing"
                                    : phase_ == Phase::Window ? "window"
                                                              : "done"},
                          {"last_good_step", last_good_},
                          {"earliest_bad_step", earliest_bad_},
                          {"window_start", window_start_},
                          {"window_stop", window_stop_},
                          {"unusable_window_starts", unusable_window_starts_},
                          {"window_outcome", nullptr},
                          {"evaluations", evaluations_},
                          {"steps_executed", steps_executed_},
                          {"naive_steps_from_zero", naive_steps_}};
  if (window_outcome_) {
    state["window_outcome"] = {{"observation", to_string(window_outcome_->observation)},
                               {"first_bad_step", window_outcome_->first_bad_step.value_or(-1)}};
  }
  return state;
}

StepPlan StepPlan::from_json(const nlohmann::json& state) {
  try {
    if (state.at("search") != "step_plan" || state.at("version") != 1)
      throw std::invalid_argument("StepPlan state: not a version-1 step_plan state");
    StepPlan plan({state.at("checkpoints").get<std::vector<int64_t>>(),
                   state.at("known_bad_step").get<int64_t>(),
                   state.at("known_good_step").get<int64_t>(),
                   state.at("max_window_attempts").get<size_t>()});
    if (plan.probes_.has_value() == state.at("probes").is_null())
      throw std::invalid_argument("StepPlan state: probe search does not match the inputs");
    if (plan.probes_) {
      plan.probes_ = FirstBad::from_json(state.at("probes"));
      if (plan.probes_->candidate_count() != plan.axis_.size())
        throw std::invalid_argument("StepPlan state: probe axis does not match the checkpoints");
    }
    const auto phase = state.at("phase").get<std::string>();
    if (phase != "probing" && phase != "window" && phase != "done")
      throw std::invalid_argument("StepPlan state: unknown phase '" + phase + "'");
    plan.phase_ = phase == "probing"  ? Phase::Probing
                  : phase == "window" ? Phase::Window
                                      : Phase::Done;
    plan.last_good_ = state.at("last_good_step").get<int64_t>();
    plan.earliest_bad_ = state.at("earliest_bad_step").get<int64_t>();
    plan.window_start_ = state.at("window_start").get<int64_t>();
    plan.window_stop_ = state.at("window_stop").get<int64_t>();
    plan.window_outstanding_ = false;  // an outstanding window was lost: propose it again
    plan.unusable_window_starts_ = state.at("unusable_window_starts").get<std::vector<int64_t>>();
    if (const auto& window = state.at("window_outcome"); !window.is_null()) {
      const bool bad = window.at("observation") == "bad";
      plan.window_outcome_ = bad ? WindowOutcome::bad_at(window.at("first_bad_step").get<int64_t>())
                                 : WindowOutcome::clean();
    }
    plan.evaluations_ = state.at("evaluations").get<size_t>();
    plan.steps_executed_ = state.at("steps_executed").get<int64_t>();
    plan.naive_steps_ = state.at("naive_steps_from_zero").get<int64_t>();
    if (plan.last_good_ < plan.known_good_ || plan.earliest_bad_ > plan.known_bad_ ||
        plan.earliest_bad_ <= plan.last_good_)
      throw std::invalid_argument("StepPlan state: step bounds outside the inputs");
    const bool known_start =
        std::binary_search(plan.checkpoints_.begin(), plan.checkpoints_.end(), plan.window_start_);
    if ((plan.phase_ == Phase::Probing && !plan.probes_) ||
        (plan.phase_ == Phase::Window && (!known_start || plan.window_stop_ <= plan.window_start_)))
      throw std::invalid_argument("StepPlan state: phase does not match the plan");
    return plan;
  } catch (const nlohmann::json::exception& error) {
    throw std::invalid_argument(std::string("StepPlan state: malformed JSON: ") + error.what());
  }
}

}  // namespace faultline::bisect
