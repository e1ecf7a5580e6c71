// Tests of Vote: early stop once decided, disagreement reported as inconsistency, skips,
// parallel runs, option checks, misuse, and resumption from JSON.
#include "bisect/vote.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace faultline::bisect {
namespace {

// Runs the vote one trial at a time; trial i has outcome outcomes[i].
Vote run(VoteOptions options, const std::vector<Observation>& outcomes) {
  Vote vote(options);
  while (!vote.done()) {
    const auto runs = vote.next();
    EXPECT_EQ(runs.size(), 1u);
    if (runs.empty()) break;
    vote.observe(runs[0], outcomes.at(runs[0]));
  }
  return vote;
}

constexpr auto G = Observation::Good;
constexpr auto B = Observation::Bad;
constexpr auto S = Observation::Skip;

TEST(Vote, StopsAsSoonAsTheMajorityIsReached) {
  const auto vote = run({}, {B, B, B, G, G});
  EXPECT_EQ(vote.evaluations(), 3u);
  const auto result = vote.result();
  EXPECT_EQ(result.verdict, Observation::Bad);
  EXPECT_EQ(result.consistency, Consistency::Consistent);
  EXPECT_EQ(result.bad, 3u);
  EXPECT_EQ(result.good, 0u);
}

TEST(Vote, DisagreeingTrialsAreInconsistentWithCounts) {
  const auto vote = run({}, {G, B, G, B, G});
  EXPECT_EQ(vote.evaluations(), 5u);
  const auto result = vote.result();
  EXPECT_EQ(result.verdict, Observation::Good);
  EXPECT_EQ(result.consistency, Consistency::Inconsistent);
  EXPECT_EQ(result.good, 3u);
  EXPECT_EQ(result.bad, 2u);
  EXPECT_STREQ(to_string(result.consistency), "inconsistent");
}

TEST(Vote, AllRunsMeasuresEveryTrial) {
  const auto vote = run({5, 0, StopRule::AllRuns}, {B, B, B, B, G});
  EXPECT_EQ(vote.evaluations(), 5u);
  EXPECT_EQ(vote.result().verdict, Observation::Bad);
  EXPECT_EQ(vote.result().consistency, Consistency::Inconsistent);
}

TEST(Vote, TooManySkipsLeaveItUndecided) {
  const auto vote = run({}, {S, G, S, S, G});
  EXPECT_EQ(vote.evaluations(), 4u);  // after 3 skips and 1 good, 3 goods are out of reach
  const auto result = vote.result();
  EXPECT_EQ(result.verdict, Observation::Skip);
  EXPECT_EQ(result.skipped, 3u);
  EXPECT_EQ(result.consistency, Consistency::Consistent);
}

TEST(Vote, ParallelRunsProposeOnlyWhatCanStillMatter) {
  Vote vote({7, 5, StopRule::WhenDecided});
  EXPECT_EQ(vote.next(10), (std::vector<size_t>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(vote.next(10).empty());  // five agreeing outcomes would decide it
  vote.observe(3, G);
  vote.observe(0, B);
  EXPECT_EQ(vote.next(10), std::vector<size_t>{5});  // the leader is now short by one more
  vote.observe(1, G);
  vote.observe(2, G);
  vote.observe(4, G);
  vote.observe(5, G);
  EXPECT_TRUE(vote.done());
  EXPECT_EQ(vote.result().verdict, Observation::Good);
  EXPECT_EQ(vote.result().consistency, Consistency::Inconsistent);
}

TEST(Vote, RejectsMisuse) {
  EXPECT_THROW(Vote({0, 0, StopRule::WhenDecided}), std::invalid_argument);
  EXPECT_THROW(Vote({5, 2, StopRule::WhenDecided}), std::invalid_argument);  // not a majority
  EXPECT_THROW(Vote({5, 6, StopRule::WhenDecided}), std::invalid_argument);
  Vote vote;
  EXPECT_THROW(vote.observe(0, G), std::logic_error);  // never proposed
  const auto runs = vote.next();
  vote.observe(runs[0], G);
  vote.observe(runs[0], G);  // a consistent repeat is ignored
  EXPECT_EQ(vote.evaluations(), 1u);
  EXPECT_THROW(vote.observe(runs[0], B), std::logic_error);
}

TEST(Vote, ResumesFromJsonAndProposesLostRunsAgain) {
  Vote vote;
  EXPECT_EQ(vote.next(3), (std::vector<size_t>{0, 1, 2}));
  vote.observe(1, B);  // 0 and 2 are lost in the crash
  auto resumed = Vote::from_json(nlohmann::json::parse(vote.to_json().dump()));
  EXPECT_EQ(resumed.evaluations(), 1u);
  EXPECT_EQ(resumed.next(3), (std::vector<size_t>{0, 2}));
  resumed.observe(0, B);
  resumed.observe(2, B);
  EXPECT_TRUE(resumed.done());
  EXPECT_EQ(resumed.result().verdict, Observation::Bad);
  auto state = vote.to_json();
  state["good"] = {1};
  EXPECT_THROW(Vote::from_json(state), std::invalid_argument);  // run 1 twice
  state["good"] = {9};
  EXPECT_THROW(Vote::from_json(state), std::invalid_argument);  // beyond max_runs
  EXPECT_THROW(Vote::from_json(nlohmann::json::object()), std::invalid_argument);
}

}  // namespace
}  // namespace faultline::bisect
