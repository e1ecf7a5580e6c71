// Tests of FirstBad on synthetic monotone predicates: evaluation bounds for every N and every
// position of the first bad, skips, k-way rounds, misuse, and exact resumption from JSON.
#include "bisect/first_bad.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <stdexcept>
#include <vector>

namespace faultline::bisect {
namespace {

// Smallest r with 2^r >= n: the information-theoretic bisection bound.
size_t ceil_log(size_t n, size_t base = 2) {
  size_t rounds = 0;
  for (size_t reach = 1; reach < n; reach *= base) ++rounds;
  return rounds;
}

// A monotone predicate: candidates >= first_bad are bad; points in `skipped` cannot be judged.
struct Predicate {
  size_t first_bad;
  std::set<size_t> skipped;
  Observation operator()(size_t candidate) const {
    if (skipped.count(candidate)) return Observation::Skip;
    return candidate >= first_bad ? Observation::Bad : Observation::Good;
  }
};

// Runs to completion with `slots` proposals per round, observing each round in reverse order
// (results arrive in any order). Returns the number of rounds.
size_t run(FirstBad& search, const Predicate& predicate, size_t slots = 1) {
  size_t rounds = 0;
  while (!search.done()) {
    const auto batch = search.next(slots);
    EXPECT_FALSE(batch.empty()) << "not done, but nothing proposed";
    if (batch.empty()) break;
    for (auto it = batch.rbegin(); it != batch.rend(); ++it) search.observe(*it, predicate(*it));
    ++rounds;
  }
  EXPECT_TRUE(search.next(slots).empty());
  return rounds;
}

TEST(FirstBad, FindsEveryPositionWithinLog2Bound) {
  std::vector<size_t> sizes;
  for (size_t n = 1; n <= 130; ++n) sizes.push_back(n);
  for (size_t n : {255, 256, 257, 1000, 1023, 1024, 1025, 2000}) sizes.push_back(n);
  for (size_t n : sizes) {
    for (size_t first_bad = 0; first_bad < n; ++first_bad) {
      FirstBad search(n);
      run(search, {first_bad, {}});
      const auto result = search.result();
      ASSERT_EQ(result.outcome, FirstBadOutcome::Exact) << "n=" << n << " f=" << first_bad;
      EXPECT_EQ(result.first_bad, first_bad);
      EXPECT_EQ(result.range_begin, first_bad);
      EXPECT_EQ(result.range_end, first_bad + 1);
      EXPECT_EQ(result.lower_edge, Observation::Good);
      EXPECT_EQ(result.upper_edge, Observation::Bad);
      // The last candidate is known bad, so n answers need only ceil(log2 n) probes.
      ASSERT_LE(search.evaluations(), ceil_log(n)) << "n=" << n << " f=" << first_bad;
    }
  }
}

TEST(FirstBad, UnknownLastCandidateStaysWithinBoundAndReportsNone) {
  for (size_t n : {1, 2, 3, 7, 8, 9, 100, 1000, 2000}) {
    for (size_t first_bad = 0; first_bad <= n; ++first_bad) {  // n: no bad candidate at all
      FirstBad search(n, {LastCandidate::Unknown, BeforeFirst::KnownGood});
      run(search, {first_bad, {}});
      ASSERT_LE(search.evaluations(), ceil_log(n) + 1) << "n=" << n << " f=" << first_bad;
      const auto result = search.result();
      if (first_bad == n) {
        EXPECT_EQ(result.outcome, FirstBadOutcome::None);
        EXPECT_FALSE(result.first_bad);
        EXPECT_EQ(result.range_begin, n);
        EXPECT_EQ(result.range_end, n);
        EXPECT_EQ(result.upper_edge, Observation::Skip);
      } else {
        EXPECT_EQ(result.outcome, FirstBadOutcome::Exact);
        EXPECT_EQ(result.first_bad, first_bad);
      }
    }
  }
}

TEST(FirstBad, SingleKnownBadCandidateNeedsNoTrial) {
  FirstBad search(1, {LastCandidate::KnownBad, BeforeFirst::Unknown});
  EXPECT_TRUE(search.done());
  EXPECT_TRUE(search.next(4).empty());
  const auto result = search.result();
  EXPECT_EQ(result.first_bad, 0u);
  EXPECT_EQ(result.lower_edge, Observation::Skip);  // bad from the start: may predate the axis
  EXPECT_EQ(search.evaluations(), 0u);
}

// With any skip pattern the search ends on the tightest range its non-skipped points allow:
// from just above the last non-skipped good to the first non-skipped bad.
TEST(FirstBad, RandomSkipsGiveTheTightestRange) {
  std::mt19937 random(7);
  for (size_t n : {5, 16, 33, 100, 257}) {
    for (int pattern = 0; pattern < 20; ++pattern) {
      std::set<size_t> skipped;
      for (size_t i = 0; i + 1 < n; ++i)
        if (random() % 4 == 0) skipped.insert(i);
      for (size_t first_bad = 0; first_bad < n; ++first_bad) {
        FirstBad search(n);
        run(search, {first_bad, skipped});
        int64_t low = static_cast<int64_t>(first_bad) - 1;
        while (low >= 0 && skipped.count(static_cast<size_t>(low))) --low;
        size_t high = first_bad;
        while (skipped.count(high)) ++high;
        const auto result = search.result();
        ASSERT_EQ(result.range_begin, static_cast<size_t>(low + 1)) << "n=" << n;
        ASSERT_EQ(result.range_end, high + 1);
        EXPECT_EQ(result.outcome, high == static_cast<size_t>(low + 1)
                                      ? FirstBadOutcome::Exact
                                      : FirstBadOutcome::Ambiguous);
        EXPECT_EQ(result.upper_edge, Observation::Bad);
        EXPECT_LE(search.evaluations(), ceil_log(n) + 1 + skipped.size());
      }
    }
  }
}

// A block of skips around the midpoint: the probes step outward on alternating sides, so the
// search escapes on whichever side the answer lies and still ends exact.
TEST(FirstBad, SkipClusterAtMidpointDoesNotTrapTheSearch) {
  const size_t n = 64;
  std::set<size_t> skipped;
  for (size_t i = 27; i <= 36; ++i) skipped.insert(i);
  for (size_t first_bad : {3, 20, 26, 38, 50, 62}) {
    FirstBad search(n);
    run(search, {first_bad, skipped});
    EXPECT_EQ(search.result().first_bad, first_bad);
    EXPECT_LE(search.evaluations(), ceil_log(n) + skipped.size() + 1);
  }
  FirstBad hidden(n);  // the first bad sits inside the cluster: only a range can be named
  run(hidden, {30, skipped});
  const auto result = hidden.result();
  EXPECT_EQ(result.outcome, FirstBadOutcome::Ambiguous);
  EXPECT_FALSE(result.first_bad);
  EXPECT_EQ(result.range_begin, 27u);
  EXPECT_EQ(result.range_end, 38u);  // 27..36 skipped, 37 the first judged bad
}

TEST(FirstBad, EverythingSkippedWithUnknownEndIsAmbiguousWithoutBadEdge) {
  FirstBad search(4, {LastCandidate::Unknown, BeforeFirst::Unknown});
  run(search, {0, {0, 1, 2, 3}});
  const auto result = search.result();
  EXPECT_EQ(result.outcome, FirstBadOutcome::Ambiguous);
  EXPECT_EQ(result.range_begin, 0u);
  EXPECT_EQ(result.range_end, 4u);
  EXPECT_EQ(result.lower_edge, Observation::Skip);
  EXPECT_EQ(result.upper_edge, Observation::Skip);
}

TEST(FirstBad, KWayNeedsFewerRounds) {
  for (size_t slots : {2, 3, 4, 7}) {
    for (size_t n : {10, 100, 1000, 2000}) {
      size_t worst_rounds = 0;
      for (size_t first_bad = 0; first_bad < n; ++first_bad) {
        FirstBad search(n);
        const size_t rounds = run(search, {first_bad, {}}, slots);
        ASSERT_EQ(search.result().first_bad, first_bad);
        ASSERT_LE(search.evaluations(), rounds * slots);
        worst_rounds = std::max(worst_rounds, rounds);
      }
      // Each round splits the n possible answers into slots+1 near-equal parts.
      EXPECT_LE(worst_rounds, ceil_log(n, slots + 1)) << "slots=" << slots << " n=" << n;
      EXPECT_LT(worst_rounds, ceil_log(n)) << "slots=" << slots << " n=" << n;
    }
  }
}

TEST(FirstBad, WaitsWhileARoundIsInFlightAndAcceptsAnyOrder) {
  FirstBad search(100);
  const auto round = search.next(3);
  ASSERT_EQ(round.size(), 3u);
  EXPECT_EQ(round, (std::vector<size_t>{24, 49, 74}));
  EXPECT_TRUE(search.next(3).empty());         // all three are inside the open range
  search.observe(round[0], Observation::Bad);  // answer is in 0..24: the others are moot
  EXPECT_FALSE(search.next(3).empty());        // a new round starts without waiting for them
  search.observe(round[2], Observation::Bad);  // a late, consistent result is recorded
  search.observe(round[1], Observation::Bad);
  EXPECT_EQ(search.evaluations(), 3u);
}

TEST(FirstBad, RejectsMisuse) {
  EXPECT_THROW(FirstBad(0), std::invalid_argument);
  FirstBad search(10);
  EXPECT_THROW(search.observe(3, Observation::Good), std::logic_error);  // never proposed
  EXPECT_THROW(search.observe(10, Observation::Good), std::invalid_argument);
  const auto first = search.next();
  ASSERT_EQ(first, std::vector<size_t>{4});
  search.observe(4, Observation::Bad);
  search.observe(4, Observation::Bad);  // a consistent repeat is ignored
  EXPECT_EQ(search.evaluations(), 1u);
  EXPECT_THROW(search.observe(4, Observation::Good), std::logic_error);
  const auto second = search.next();
  ASSERT_EQ(second, std::vector<size_t>{1});
  search.observe(1, Observation::Good);
  EXPECT_THROW(search.observe(0, Observation::Bad), std::logic_error);  // never proposed
}

TEST(FirstBad, RejectsNonMonotoneResultsWithoutChangingState) {
  FirstBad search(100);
  const auto round = search.next(3);  // 24, 49, 74
  search.observe(round[0], Observation::Bad);
  EXPECT_THROW(search.observe(round[2], Observation::Good), std::invalid_argument);
  search.observe(round[2], Observation::Bad);  // still pending: the throw changed nothing
  EXPECT_EQ(search.evaluations(), 2u);
}

// Kill the search after every observation, resume from JSON, and continue: no observed point
// is ever proposed again, lost proposals come back, and the answer is unchanged.
TEST(FirstBad, ResumesExactlyFromJson) {
  for (size_t slots : {1, 3}) {
    for (size_t first_bad : {0, 1, 17, 50, 98, 99}) {
      const Predicate predicate{first_bad, {40, 41, 42, 60}};
      FirstBad search(100, {LastCandidate::Unknown, BeforeFirst::Unknown});
      std::set<size_t> observed;
      while (!search.done()) {
        auto batch = search.next(slots);
        ASSERT_FALSE(batch.empty());
        for (size_t point : batch) ASSERT_EQ(observed.count(point), 0u) << point;
        // Observe all but the last of the batch, then "crash": the last one is lost.
        if (batch.size() > 1) batch.pop_back();
        for (size_t point : batch) {
          search.observe(point, predicate(point));
          observed.insert(point);
        }
        const auto text = search.to_json().dump();
        search = FirstBad::from_json(nlohmann::json::parse(text));
        EXPECT_EQ(search.evaluations(), observed.size());
      }
      FirstBad reference(100, {LastCandidate::Unknown, BeforeFirst::Unknown});
      run(reference, predicate);
      EXPECT_EQ(search.result().first_bad, reference.result().first_bad);
      EXPECT_EQ(search.result().range_begin, reference.result().range_begin);
      EXPECT_EQ(search.result().range_end, reference.result().range_end);
    }
  }
}

TEST(FirstBad, LostProposalsAreProposedAgainAfterResume) {
  FirstBad search(100);
  const auto round = search.next(3);
  search.observe(round[1], Observation::Good);  // 49 good; 74 still outstanding when killed
  auto resumed = FirstBad::from_json(search.to_json());
  EXPECT_EQ(resumed.next(1), std::vector<size_t>{74});
  EXPECT_THROW(resumed.observe(24, Observation::Good), std::logic_error);  // lost, not pending
}

TEST(FirstBad, RejectsMalformedState) {
  FirstBad search(10);
  auto state = search.to_json();
  state["bad"] = {9};  // the assumed-bad last candidate is never observed
  EXPECT_THROW(FirstBad::from_json(state), std::invalid_argument);
  state = search.to_json();
  state["good"] = {6};
  state["bad"] = {3};
  EXPECT_THROW(FirstBad::from_json(state), std::invalid_argument);
  EXPECT_THROW(FirstBad::from_json(nlohmann::json{{"search", "first_bad"}}), std::invalid_argument);
  EXPECT_THROW(FirstBad::from_json(nlohmann::json::array()), std::invalid_argument);
}

}  // namespace
}  // namespace faultline::bisect
