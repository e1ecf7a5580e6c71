// Tests of Ddmin on published and synthetic cases: the expected minimal sets, 1-minimality on
// random monotone and non-monotone tests, evaluation counts (Improved <= Textbook on every case),
// k-way runs identical to sequential ones, misuse, and resumption from JSON.
#include "bisect/ddmin.hpp"

#include <gtest/gtest.h>

#include "support/ddmin_predicates.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace faultline::bisect {
namespace {

using Test = testing::SubsetTest;
using testing::fails_with_all_of;
using testing::has;

struct Case {
  std::string name;
  size_t items;
  Test test;
  Subset expected;  // empty: any 1-minimal answer
  bool monotone;
};

using testing::fails_by_hash;
using testing::zeller_example;

std::vector<Case> cases() {
  std::vector<Case> all = {
      {"zeller_1_to_8", 8, zeller_example, {4, 7}, false},
      {"single_culprit_16", 16, fails_with_all_of({11}), {11}, true},
      {"pair_far_apart_32", 32, fails_with_all_of({1, 30}), {1, 30}, true},
      {"whole_set_8",
       8,
       fails_with_all_of({0, 1, 2, 3, 4, 5, 6, 7}),
       {0, 1, 2, 3, 4, 5, 6, 7},
       true},
      {"three_of_64", 64, fails_with_all_of({5, 40, 41}), {5, 40, 41}, true},
      {"three_of_128", 128, fails_with_all_of({3, 77, 120}), {3, 77, 120}, true},
      {"five_of_128", 128, fails_with_all_of({0, 31, 64, 65, 127}), {0, 31, 64, 65, 127}, true},
  };
  std::mt19937 random(2024);
  for (int index = 0; index < 30; ++index) {  // monotone: fails iff one of a few culprit sets is in
    const size_t items = 4 + random() % 120;
    std::vector<Subset> groups(1 + random() % 3);
    for (auto& group : groups) {
      const size_t size = 1 + random() % 4;
      while (group.size() < size) group.push_back(random() % items);
      std::sort(group.begin(), group.end());
      group.erase(std::unique(group.begin(), group.end()), group.end());
    }
    auto test = [groups](const Subset& subset) {
      for (const auto& group : groups)
        if (fails_with_all_of(group)(subset) == Observation::Bad) return Observation::Bad;
      return Observation::Good;
    };
    all.push_back({"random_monotone_" + std::to_string(index), items, test, {}, true});
  }
  for (uint64_t index = 0; index < 30; ++index) {
    const size_t items = 4 + index * 4;
    all.push_back({"random_hash_" + std::to_string(index),
                   items,
                   fails_by_hash(items, index + 1, 3 + index % 5),
                   {},
                   false});
  }
  return all;
}

struct DdminRun {
  Subset result;
  size_t evaluations;
};

// Keeps `slots` tests in flight and observes them in FIFO order (order_seed 0) or at random.
DdminRun run(const Case& c, DdminOptions options, size_t slots = 1, unsigned order_seed = 0) {
  Ddmin search(c.items, options);
  std::vector<Subset> in_flight;
  std::mt19937 order(order_seed);
  while (!search.done()) {
    for (auto& subset : search.next(slots - in_flight.size())) in_flight.push_back(subset);
    if (in_flight.empty()) {
      ADD_FAILURE() << c.name << ": not done, nothing in flight";
      break;
    }
    const size_t pick = order_seed == 0 ? 0 : order() % in_flight.size();
    const Subset subset = in_flight[pick];
    in_flight.erase(in_flight.begin() + pick);
    search.observe(subset, c.test(subset));
  }
  return {search.failing_subset(), search.evaluations()};
}

void expect_one_minimal(const Case& c, const Subset& result) {
  ASSERT_EQ(c.test(result), Observation::Bad) << c.name;
  for (size_t drop = 0; drop < result.size(); ++drop) {
    Subset smaller = result;
    smaller.erase(smaller.begin() + drop);
    if (smaller.empty()) continue;  // the empty set passes by assumption
    EXPECT_NE(c.test(smaller), Observation::Bad) << c.name << ": not 1-minimal";
  }
}

const DdminOptions kTextbook{DdminVariant::Textbook, Monotonicity::NotAssumed};
const DdminOptions kImproved{DdminVariant::Improved, Monotonicity::NotAssumed};
const DdminOptions kMonotone{DdminVariant::Improved, Monotonicity::Assumed};

TEST(Ddmin, FindsPublishedAnswersWithFewerEvaluationsThanTextbook) {
  size_t textbook_total = 0, improved_total = 0, monotone_total = 0;
  for (const auto& c : cases()) {
    const DdminRun textbook = run(c, kTextbook), improved = run(c, kImproved);
    if (!c.expected.empty()) {
      EXPECT_EQ(improved.result, c.expected) << c.name;
    }
    expect_one_minimal(c, improved.result);
    // Same decisions in the same order: same answer, never more evaluations.
    EXPECT_EQ(improved.result, textbook.result) << c.name;
    EXPECT_LE(improved.evaluations, textbook.evaluations) << c.name;
    textbook_total += textbook.evaluations;
    improved_total += improved.evaluations;
    std::string monotone_evaluations = "-";
    if (c.monotone) {
      const DdminRun monotone = run(c, kMonotone);
      EXPECT_EQ(monotone.result, textbook.result) << c.name;
      EXPECT_LE(monotone.evaluations, improved.evaluations) << c.name;
      monotone_evaluations = std::to_string(monotone.evaluations);
      monotone_total += monotone.evaluations;
    }
    if (c.name.rfind("random", 0) != 0)
      std::printf("[ counts   ] %-20s textbook %3zu  improved %3zu  monotone %3s\n", c.name.c_str(),
                  textbook.evaluations, improved.evaluations, monotone_evaluations.c_str());
  }
  std::printf("[ counts   ] all cases: textbook %zu, improved %zu (monotone cases, assumed: %zu)\n",
              textbook_total, improved_total, monotone_total);
  EXPECT_LT(improved_total, textbook_total);
}

TEST(Ddmin, ZellerExampleMatchesTheHandTrace) {
  const auto c = cases().front();
  const DdminRun improved = run(c, kImproved);
  EXPECT_EQ(improved.result, (Subset{4, 7}));
  // Textbook, by hand: n=2 on {1..8}: 2 parts + 2 complements; n=4: 4 + 2 (fails without 3,4);
  // n=3 on {1,2,5,6,7,8}: 3 + 3; n=6: 6 + 1; n=5 on {2,5,6,7,8}: 5 + 3; n=4 on {2,5,7,8}: 4 + 3;
  // n=3 on {2,5,8}: 3 + 1; n=2 on {5,8}: 2 + 2. Total 46.
  EXPECT_EQ(run(c, kTextbook).evaluations, 46u);
  // Improved drops the n=2 complements and every test it has run before: n=2: 2; n=4: 6; n=3:
  // 2 (its parts were n=4 parts, {5,6,7,8} an n=2 part); n=6: 7; n=5: 2 (singletons and
  // {5,6,7,8} known); n=4: 3; n=3: 1; n=2: 0. Total 23.
  EXPECT_EQ(improved.evaluations, 23u);
}

TEST(Ddmin, KWayIsIdenticalToSequential) {
  for (const auto& c : cases()) {
    for (const auto& options : {kTextbook, kImproved, kMonotone}) {
      if (options.monotonicity == Monotonicity::Assumed && !c.monotone) continue;
      const DdminRun sequential = run(c, options);
      for (size_t slots : {2, 4, 8}) {
        for (unsigned order_seed : {0u, 1u, 2u}) {
          const DdminRun parallel = run(c, options, slots, order_seed);
          EXPECT_EQ(parallel.result, sequential.result) << c.name << " slots " << slots;
        }
      }
    }
  }
}

TEST(Ddmin, TrivialSetsNeedNoEvaluation) {
  Ddmin one(1);
  EXPECT_TRUE(one.done());
  EXPECT_EQ(one.failing_subset(), Subset{0});
  EXPECT_TRUE(one.next(4).empty());
  Ddmin two(2);  // the two halves are the only tests; the complements are the same halves
  EXPECT_EQ(two.next(4), (std::vector<Subset>{{0}, {1}}));
}

TEST(Ddmin, SkipCountsAsNotFailing) {
  const Case c{"skip_half",
               8,
               [](const Subset& s) {
                 if (s.size() == 4 && s.front() == 4) return Observation::Skip;
                 return fails_with_all_of({5})(s);
               },
               {5},
               false};
  EXPECT_EQ(run(c, kImproved).result, Subset{5});
}

TEST(Ddmin, RejectsMisuse) {
  EXPECT_THROW(Ddmin(0), std::invalid_argument);
  const DdminOptions textbook_with_shortcuts{DdminVariant::Textbook, Monotonicity::Assumed};
  EXPECT_THROW(Ddmin(4, textbook_with_shortcuts), std::invalid_argument);
  Ddmin search(8);
  EXPECT_THROW(search.observe({0, 1}, Observation::Good), std::logic_error);  // never proposed
  const auto first = search.next();
  ASSERT_EQ(first, (std::vector<Subset>{{0, 1, 2, 3}}));
  search.observe(first[0], Observation::Good);
  search.observe(first[0], Observation::Good);  // a consistent repeat is ignored
  EXPECT_EQ(search.evaluations(), 1u);
  EXPECT_THROW(search.observe(first[0], Observation::Bad), std::logic_error);
  search.observe({0, 1, 2, 3, 4, 5, 6, 7}, Observation::Bad);  // the given full set: ignored
  EXPECT_EQ(search.evaluations(), 1u);
}

// Kill after every observation and resume from JSON: no subset is evaluated twice (Improved),
// Textbook makes exactly its uninterrupted count, and the answers are the same.
TEST(Ddmin, ResumesExactlyFromJson) {
  for (const auto& c : cases()) {
    for (const auto& options : {kTextbook, kImproved, kMonotone}) {
      if (options.monotonicity == Monotonicity::Assumed && !c.monotone) continue;
      const DdminRun reference = run(c, options);
      Ddmin search(c.items, options);
      std::vector<Subset> seen;
      while (!search.done()) {
        auto batch = search.next(3);
        ASSERT_FALSE(batch.empty());
        if (batch.size() > 1) batch.pop_back();  // lost in the crash
        for (const auto& subset : batch) {
          if (options.variant == DdminVariant::Improved) {
            ASSERT_EQ(std::count(seen.begin(), seen.end(), subset), 0) << c.name;
          }
          seen.push_back(subset);
          search.observe(subset, c.test(subset));
        }
        search = Ddmin::from_json(nlohmann::json::parse(search.to_json().dump()));
      }
      EXPECT_EQ(search.failing_subset(), reference.result) << c.name;
      EXPECT_EQ(search.evaluations(), seen.size());
    }
  }
  Ddmin sequential(16, kTextbook);
  const Case c = cases()[1];
  while (!sequential.done()) {
    const auto subset = sequential.next().at(0);
    sequential.observe(subset, c.test(subset));
    sequential = Ddmin::from_json(sequential.to_json());
  }
  EXPECT_EQ(sequential.evaluations(), run(c, kTextbook).evaluations);
}

TEST(Ddmin, RejectsMalformedState) {
  auto state = Ddmin(8).to_json();
  state["config"] = {3, 1};
  EXPECT_THROW(Ddmin::from_json(state), std::invalid_argument);
  state = Ddmin(8).to_json();
  state["granularity"] = 9;
  EXPECT_THROW(Ddmin::from_json(state), std::invalid_argument);
  EXPECT_THROW(Ddmin::from_json(nlohmann::json{{"search", "ddmin"}}), std::invalid_argument);
}

}  // namespace
}  // namespace faultline::bisect
