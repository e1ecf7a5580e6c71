// Benchmark of what localization costs with the pure planners of bisect/ on simulated
// deterministic predicates: trainer steps for the first bad step, trials for first-bad, and
// tests for ddmin against the textbook. Built, never run by ctest. Usage: localization_cost
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "bisect/ddmin.hpp"
#include "bisect/first_bad.hpp"
#include "bisect/step_plan.hpp"
#include "support/ddmin_predicates.hpp"

namespace {
using namespace faultline::bisect;

// ---- (a) first bad step with checkpoints ----------------------------------------------------

WindowOutcome simulate(const StepTrial& trial, int64_t first_bad) {
  if (first_bad > trial.stop_after) return WindowOutcome::clean();
  return WindowOutcome::bad_at(std::max(first_bad, trial.resume_from_checkpoint + 1));
}

struct Tally {
  double sum = 0;
  double max = 0;
  int count = 0;
  void add(double value) {
    sum += value;
    max = std::max(max, value);
    ++count;
  }
  double mean() const { return count ? sum / count : 0; }
};

void step_plan_table() {
  const int64_t total = 2000, interval = 100;
  std::vector<int64_t> checkpoints;
  for (int64_t step = interval; step <= total; step += interval) checkpoints.push_back(step);
  std::printf(
      "(a) first bad step: %lld-step run, checkpoints every %lld, first bad at every step "
      "1..%lld; detector fires d steps late (capped at the last step)\n",
      static_cast<long long>(total), static_cast<long long>(interval),
      static_cast<long long>(total));
  std::printf("%5s %5s | %11s | %19s | %19s | %19s | %s\n", "d", "slots", "trials m/max",
              "steps executed m/max", "same trials from 0", "one replay from 0", "rounds m/max");
  for (int64_t delay : {0, 50, 300}) {
    for (size_t slots : {1, 4}) {
      Tally trials, steps, naive, replay, rounds;
      int wrong = 0;
      for (int64_t first_bad = 1; first_bad <= total; ++first_bad) {
        const int64_t known_bad = std::min(first_bad + delay, total);
        StepPlan plan({checkpoints, known_bad, 0});
        int round_count = 0;
        while (!plan.done()) {
          const auto batch = plan.next(slots);
          for (const auto& trial : batch) plan.observe(trial, simulate(trial, first_bad));
          ++round_count;
        }
        wrong += plan.result().first_bad_step != first_bad;
        trials.add(static_cast<double>(plan.evaluations()));
        steps.add(100.0 * static_cast<double>(plan.steps_executed()) / total);
        naive.add(100.0 * static_cast<double>(plan.naive_steps_from_zero()) / total);
        replay.add(100.0 * static_cast<double>(known_bad - 1) / total);
        rounds.add(round_count);
      }
      std::printf(
          "%5lld %5zu | %5.2f / %3.0f | %6.2f%% / %6.2f%% | %6.1f%% / %6.1f%% | "
          "%6.1f%% / %6.1f%% | %4.2f / %.0f%s\n",
          static_cast<long long>(delay), slots, trials.mean(), trials.max, steps.mean(), steps.max,
          naive.mean(), naive.max, replay.mean(), replay.max, rounds.mean(), rounds.max,
          wrong ? "  WRONG ANSWERS" : "");
    }
  }
  std::printf("    steps are %% of the %lld-step run; target: search <= 15%%\n\n",
              static_cast<long long>(total));
}

// ---- (b) first bad over an ordered axis ------------------------------------------------------

void first_bad_table() {
  std::printf("(b) first bad over N candidates, first bad at every position, deterministic\n");
  std::printf("%6s | %14s | %13s | %17s | %19s | %s\n", "N", "ceil(log2 N)+1", "trials m/max",
              "N-1 unknown m/max", "3 slots: rounds m/max", "trials m/max");
  for (size_t n : {10, 100, 1000, 2000}) {
    Tally known, unknown, rounds, parallel;
    for (size_t first_bad = 0; first_bad <= n; ++first_bad) {
      for (auto last : {LastCandidate::KnownBad, LastCandidate::Unknown}) {
        if (last == LastCandidate::KnownBad && first_bad == n) continue;
        for (size_t slots : {1, 3}) {
          if (slots == 3 && last == LastCandidate::Unknown) continue;
          FirstBad search(n, {last, BeforeFirst::KnownGood});
          int round_count = 0;
          while (!search.done()) {
            for (size_t point : search.next(slots))
              search.observe(point, point >= first_bad ? Observation::Bad : Observation::Good);
            ++round_count;
          }
          const auto evaluations = static_cast<double>(search.evaluations());
          if (slots == 3) {
            rounds.add(round_count);
            parallel.add(evaluations);
          } else {
            (last == LastCandidate::KnownBad ? known : unknown).add(evaluations);
          }
        }
      }
    }
    const double bound = std::ceil(std::log2(static_cast<double>(n))) + 1;
    std::printf("%6zu | %14.0f | %6.2f / %4.0f | %8.2f / %6.0f | %12.2f / %4.0f | %5.2f / %2.0f\n",
                n, bound, known.mean(), known.max, unknown.mean(), unknown.max, rounds.mean(),
                rounds.max, parallel.mean(), parallel.max);
  }
  std::printf("\n");
}

// ---- (c) ddmin against the textbook ----------------------------------------------------------

using Test = faultline::testing::SubsetTest;
using faultline::testing::fails_by_hash;
using faultline::testing::zeller_example;

Test all_of(Subset culprits) {
  return faultline::testing::fails_with_all_of(std::move(culprits));
}

struct Case {
  std::string name;
  size_t items;
  Test test;
  bool monotone;
};

struct Cost {
  size_t tests = 0;
  size_t rounds = 0;
};

// With slots > 1 a round starts every proposal the planner gives and waits for all of them.
Cost cost(const Case& c, DdminOptions options, size_t slots = 1) {
  Ddmin search(c.items, options);
  Cost cost;
  for (; !search.done(); ++cost.rounds)
    for (const auto& subset : search.next(slots)) search.observe(subset, c.test(subset));
  cost.tests = search.evaluations();
  return cost;
}

void ddmin_table() {
  std::vector<Case> cases = {
      {"zeller 1..8 {5,8}", 8, zeller_example, false},
      {"single of 16", 16, all_of({11}), true},
      {"pair far apart, 32", 32, all_of({1, 30}), true},
      {"whole set of 8", 8, all_of({0, 1, 2, 3, 4, 5, 6, 7}), true},
      {"3 of 64", 64, all_of({5, 40, 41}), true},
      {"3 of 128", 128, all_of({3, 77, 120}), true},
      {"5 of 128", 128, all_of({0, 31, 64, 65, 127}), true},
  };
  std::mt19937 random(2024);
  for (int index = 0; index < 200; ++index) {
    const size_t items = 8 + random() % 249;
    Subset culprits;
    for (size_t count = 1 + random() % 4; culprits.size() < count;)
      culprits.push_back(random() % items);
    std::sort(culprits.begin(), culprits.end());
    culprits.erase(std::unique(culprits.begin(), culprits.end()), culprits.end());
    cases.push_back({"random", items, all_of(culprits), true});
  }
  for (uint64_t seed = 1; seed <= 50; ++seed) {  // not monotone: a hashed fraction fails
    const size_t items = 8 + random() % 249;
    const uint64_t one_in = 3 + seed % 5;
    cases.push_back({"random", items, fails_by_hash(items, seed, one_in), false});
  }
  std::printf("(c) ddmin tests: textbook (Zeller & Hildebrandt 2002, no cache) vs improved\n");
  std::printf("%-20s %5s | %8s | %8s %6s | %8s %6s | %s\n", "case", "items", "textbook", "improved",
              "ratio", "+monot.", "ratio", "4 slots: rounds tests");
  size_t textbook_sum = 0, improved_sum = 0, monotone_sum = 0, parallel_sum = 0;
  size_t parallel_rounds = 0;
  for (const auto& c : cases) {
    const size_t textbook = cost(c, {DdminVariant::Textbook, Monotonicity::NotAssumed}).tests;
    const size_t improved = cost(c, {DdminVariant::Improved, Monotonicity::NotAssumed}).tests;
    const Cost parallel = cost(c, {DdminVariant::Improved, Monotonicity::NotAssumed}, 4);
    const size_t monotone =
        c.monotone ? cost(c, {DdminVariant::Improved, Monotonicity::Assumed}).tests : improved;
    textbook_sum += textbook;
    improved_sum += improved;
    monotone_sum += monotone;
    parallel_sum += parallel.tests;
    parallel_rounds += parallel.rounds;
    if (c.name == "random") continue;
    char monotone_text[32] = "-", monotone_ratio[32] = "-";
    if (c.monotone) {
      std::snprintf(monotone_text, sizeof monotone_text, "%zu", monotone);
      std::snprintf(monotone_ratio, sizeof monotone_ratio, "%.2f", double(monotone) / textbook);
    }
    std::printf("%-20s %5zu | %8zu | %8zu %6.2f | %8s %6s | %6zu %6zu\n", c.name.c_str(), c.items,
                textbook, improved, double(improved) / textbook, monotone_text, monotone_ratio,
                parallel.rounds, parallel.tests);
  }
  const std::string all = "all " + std::to_string(cases.size()) + " cases";
  std::printf("%-20s %5s | %8zu | %8zu %6.2f | %8zu %6.2f | %6zu %6zu\n", all.c_str(), "",
              textbook_sum, improved_sum, double(improved_sum) / textbook_sum, monotone_sum,
              double(monotone_sum) / textbook_sum, parallel_rounds, parallel_sum);
  std::printf(
      "    random: 200 monotone tests (1..4 culprits) and 50 non-monotone hashed ones, "
      "8..256 items, seed 2024;\n    +monot. = Monotonicity::Assumed on monotone cases "
      "(the same as improved on the others)\n");
}

}  // namespace

int main() {
  step_plan_table();
  first_bad_table();
  ddmin_table();
  return 0;
}
