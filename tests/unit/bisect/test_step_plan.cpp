// Tests of StepPlan on a simulated deterministic failing run: the exact first bad step for
// every position, the cost target, skips and unusable windows, k-way probes, misuse, and
// resumption from JSON.
#include "bisect/step_plan.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <vector>

namespace faultline::bisect {
namespace {

std::vector<int64_t> every(int64_t interval, int64_t last) {
  std::vector<int64_t> steps;
  for (int64_t step = interval; step <= last; step += interval) steps.push_back(step);
  return steps;
}

// A deterministic run whose failure starts at `first_bad` and persists: a trial that resumes
// from a checkpoint already past it shows the failure at its first step.
WindowOutcome simulate(const StepTrial& trial, int64_t first_bad) {
  if (first_bad > trial.stop_after) return WindowOutcome::clean();
  return WindowOutcome::bad_at(std::max(first_bad, trial.resume_from_checkpoint + 1));
}

using Unusable = std::function<bool(const StepTrial&)>;

// Runs to completion with `slots` trials per round; returns the number of rounds.
size_t run(StepPlan& plan, int64_t first_bad, size_t slots = 1, const Unusable& unusable = {}) {
  size_t rounds = 0;
  while (!plan.done()) {
    const auto trials = plan.next(slots);
    EXPECT_FALSE(trials.empty());
    if (trials.empty()) break;
    for (auto it = trials.rbegin(); it != trials.rend(); ++it)
      plan.observe(
          *it, unusable && unusable(*it) ? WindowOutcome::unusable() : simulate(*it, first_bad));
    ++rounds;
  }
  return rounds;
}

TEST(StepPlan, FindsEveryFirstBadStepWithinTheCostTarget) {
  const int64_t total = 2000;
  for (int64_t delay : {0, 50, 300}) {
    int64_t worst_steps = 0;
    for (int64_t first_bad = 1; first_bad <= total; ++first_bad) {
      StepPlan plan({every(100, total), std::min(first_bad + delay, total), 0});
      run(plan, first_bad);
      ASSERT_EQ(plan.result().first_bad_step, first_bad) << "delay " << delay;
      // Five one-step probes at most (< 21 checkpoints) plus one window under 100 steps.
      ASSERT_LE(plan.evaluations(), 6u) << first_bad;
      worst_steps = std::max(worst_steps, plan.steps_executed());
      ASSERT_GE(plan.naive_steps_from_zero(), plan.steps_executed());
    }
    EXPECT_LE(worst_steps, total * 15 / 100) << "delay " << delay;
    EXPECT_LE(worst_steps, 105) << "delay " << delay;
  }
}

TEST(StepPlan, TracesTheExpectedTrialsAndBothCosts) {
  StepPlan plan({every(100, 2000), 1300, 0});
  std::vector<StepTrial> trials;
  while (!plan.done()) {
    const auto next = plan.next();
    ASSERT_EQ(next.size(), 1u);
    trials.push_back(next[0]);
    plan.observe(next[0], simulate(next[0], 1234));
  }
  // Probes over checkpoints 100..1200 bisect to "every probed step is good": 601, 901, 1101,
  // 1201. Then the window from checkpoint 1200 up to just before the known bad step 1300.
  ASSERT_EQ(plan.result().first_bad_step, 1234);
  ASSERT_EQ(trials.size(), 5u);
  EXPECT_EQ(trials[0], (StepTrial{600, 601}));
  int64_t steps = 0, naive = 0;
  for (const auto& trial : trials) {
    steps += trial.steps();
    naive += trial.stop_after;
  }
  EXPECT_EQ(plan.steps_executed(), steps);
  EXPECT_EQ(plan.steps_executed(), 4 + 99);
  EXPECT_EQ(plan.naive_steps_from_zero(), naive);
  EXPECT_EQ(plan.naive_steps_from_zero(), 601 + 901 + 1101 + 1201 + 1299);
  EXPECT_EQ(trials.back(), (StepTrial{1200, 1299}));
  for (size_t i = 0; i + 1 < trials.size(); ++i) EXPECT_EQ(trials[i].steps(), 1);
}

TEST(StepPlan, UsesTheKnownGoodStep) {
  for (int64_t first_bad = 751; first_bad <= 1000; ++first_bad) {
    StepPlan plan({every(100, 2000), 1000, 750});
    while (!plan.done()) {
      const auto trial = plan.next().at(0);
      ASSERT_GE(trial.resume_from_checkpoint, 700);  // nothing below the known good step
      plan.observe(trial, simulate(trial, first_bad));
    }
    ASSERT_EQ(plan.result().first_bad_step, first_bad);
    EXPECT_LE(plan.evaluations(), 3u);  // probes at 800 and 900 at most, then the window
  }
  StepPlan window_only({every(100, 2000), 760, 750});  // no checkpoint to probe in (750, 758]
  const auto trials = window_only.next();
  ASSERT_EQ(trials.size(), 1u);
  EXPECT_EQ(trials[0], (StepTrial{700, 759}));
}

TEST(StepPlan, WithoutCheckpointsRunsOneWindowFromZero) {
  StepPlan plan({{}, 500, 0});
  const auto trials = plan.next(4);
  ASSERT_EQ(trials, (std::vector<StepTrial>{{0, 499}}));
  plan.observe(trials[0], simulate(trials[0], 321));
  EXPECT_TRUE(plan.done());
  EXPECT_EQ(plan.result().first_bad_step, 321);
  EXPECT_EQ(plan.steps_executed(), 499);
  StepPlan adjacent({{}, 10, 9});  // nothing left to run
  EXPECT_TRUE(adjacent.done());
  EXPECT_EQ(adjacent.result().first_bad_step, 10);
  EXPECT_EQ(adjacent.evaluations(), 0u);
}

TEST(StepPlan, DenseCheckpointsNeedOnlyProbes) {
  for (int64_t first_bad = 1; first_bad <= 64; ++first_bad) {
    StepPlan plan({every(1, 64), 64, 0});
    run(plan, first_bad);
    ASSERT_EQ(plan.result().first_bad_step, first_bad);
    EXPECT_LE(plan.steps_executed(), 8);
  }
}

TEST(StepPlan, RoutesAroundUnusableProbesAndWindows) {
  // Probes from checkpoints 500..900 fail for infrastructure reasons: still exact.
  const Unusable broken_probes = [](const StepTrial& t) {
    return t.steps() == 1 && t.resume_from_checkpoint >= 500 && t.resume_from_checkpoint <= 900;
  };
  for (int64_t first_bad : {3, 450, 777, 1001, 1999}) {
    StepPlan plan({every(100, 2000), 2000, 0});
    run(plan, first_bad, 1, broken_probes);
    ASSERT_EQ(plan.result().first_bad_step, first_bad);
  }
  // Dense checkpoints, probes from 30..40 unusable: the window avoids their checkpoints.
  StepPlan dense({every(1, 64), 64, 0});
  run(dense, 35, 1, [](const StepTrial& t) {
    return t.steps() == 1 && t.resume_from_checkpoint >= 30 && t.resume_from_checkpoint <= 40;
  });
  EXPECT_EQ(dense.result().first_bad_step, 35);
  EXPECT_EQ(dense.steps_executed() - static_cast<int64_t>(dense.evaluations() - 1), 41 - 29);
  // The window's checkpoint is unreadable: it retries from the checkpoint before.
  StepPlan retry({every(100, 2000), 2000, 0});
  run(retry, 777, 1,
      [](const StepTrial& t) { return t.steps() > 1 && t.resume_from_checkpoint == 700; });
  EXPECT_EQ(retry.result().first_bad_step, 777);
  // Every window is unusable: after two attempts (from 700, then 600) only bounds are given.
  StepPlan hopeless({every(100, 2000), 2000, 0});
  run(hopeless, 777, 1, [](const StepTrial& t) { return t.steps() > 1; });
  EXPECT_EQ(hopeless.steps_executed(), 4 + 100 + 200);  // 4 probes, windows (700,800], (600,800]
  const auto result = hopeless.result();
  EXPECT_FALSE(result.first_bad_step);
  EXPECT_EQ(result.last_good_step, 701);
  EXPECT_EQ(result.earliest_bad_step, 801);
}

TEST(StepPlan, KWayProbesNeedFewerRounds) {
  for (int64_t first_bad : {1, 99, 100, 101, 777, 1500, 2000}) {
    StepPlan sequential({every(100, 2000), 2000, 0}), parallel({every(100, 2000), 2000, 0});
    const size_t sequential_rounds = run(sequential, first_bad);
    const size_t parallel_rounds = run(parallel, first_bad, 4);
    ASSERT_EQ(parallel.result().first_bad_step, first_bad);
    EXPECT_LE(parallel_rounds, 3u);  // 20 probe checkpoints split 5 ways twice, then the window
    EXPECT_LE(parallel_rounds, sequential_rounds);
  }
}

TEST(StepPlan, RejectsMisuseAndInconsistentResults) {
  EXPECT_THROW(StepPlan({{100}, 0, 0}), std::invalid_argument);
  EXPECT_THROW(StepPlan({{-100}, 10, 0}), std::invalid_argument);
  StepPlan plan({every(100, 1000), 1000, 0});
  EXPECT_THROW(plan.observe({300, 301}, WindowOutcome::clean()), std::logic_error);
  const auto probe = plan.next().at(0);  // (400, 401]
  EXPECT_THROW(plan.observe(probe, WindowOutcome::bad_at(probe.stop_after + 1)),
               std::invalid_argument);
  EXPECT_THROW(plan.observe(probe, {Observation::Bad, std::nullopt}), std::invalid_argument);
  plan.observe(probe, WindowOutcome::clean());
  plan.observe(probe, WindowOutcome::clean());  // a consistent repeat is ignored
  EXPECT_EQ(plan.evaluations(), 1u);
  StepPlan window({{}, 500, 100});
  const auto trial = window.next().at(0);  // (0, 499]
  EXPECT_THROW(window.observe(trial, WindowOutcome::bad_at(50)), std::invalid_argument);
}

TEST(StepPlan, ResumesExactlyFromJson) {
  for (size_t slots : {1, 3}) {
    for (int64_t first_bad : {1, 2, 150, 777, 1999, 2000}) {
      StepPlan plan({every(100, 2000), 2000, 0});
      std::vector<StepTrial> seen;
      while (!plan.done()) {
        auto trials = plan.next(slots);
        ASSERT_FALSE(trials.empty());
        for (const auto& trial : trials)
          ASSERT_EQ(std::count(seen.begin(), seen.end(), trial), 0) << first_bad;
        if (trials.size() > 1) trials.pop_back();  // lost in the crash
        for (const auto& trial : trials) {
          plan.observe(trial, simulate(trial, first_bad));
          seen.push_back(trial);
        }
        plan = StepPlan::from_json(nlohmann::json::parse(plan.to_json().dump()));
      }
      EXPECT_EQ(plan.result().first_bad_step, first_bad);
      EXPECT_EQ(plan.evaluations(), seen.size());
    }
  }
  StepPlan plan({every(100, 2000), 2000, 0});
  auto state = plan.to_json();
  state["phase"] = "sideways";
  EXPECT_THROW(StepPlan::from_json(state), std::invalid_argument);
  EXPECT_THROW(StepPlan::from_json(nlohmann::json::object()), std::invalid_argument);
}

}  // namespace
}  // namespace faultline::bisect
